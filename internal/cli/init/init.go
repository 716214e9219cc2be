// Package initcmd implements `devtool init`: interactive creation of devtool.yml with guessed
// defaults (a Compose file, Dockerfiles, folders of Kubernetes manifests, Helm charts), and with
// -v1 the first flow: a dev section for one workload already running in the namespace.
package initcmd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/devtool/devtool/internal/atomicfile"
	"github.com/devtool/devtool/internal/cli/context/prompt"
	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/deploy"
	"github.com/devtool/devtool/internal/iostreams"
	"github.com/devtool/devtool/internal/manifest"
)

// Options are the inputs of `devtool init`.
type Options struct {
	IO      *iostreams.IOStreams
	Target  func(cmdutil.KubeFlags) (*cmdutil.Target, error)
	WorkDir string

	Kube     cmdutil.KubeFlags
	File     string
	Replace  bool
	V1       bool
	Workload string // -v1: the Deployment or StatefulSet to develop (prompted for on a terminal)
}

// NewCmd builds the command. runF replaces run in tests of flag parsing.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Target: f.Target, WorkDir: f.WorkDir}
	var version string
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Create a devtool.yml manifest with guessed defaults",
		Long: `Init writes a devtool.yml for the current folder. It guesses the deploy section from what it
finds: a Compose file (deploy.compose), Dockerfiles (a build section), folders of Kubernetes
manifests (kubectl apply -f <folder>) and Helm charts (helm upgrade --install <name> <chart>).
On a terminal it asks which of them to use; otherwise it uses them all.

With -v1 (the first version of the flow; also --v1) it writes a dev section for one Deployment or
StatefulSet already running in the namespace: its image, workdir /app, sync .:/app and a forward
for each container port. Without a terminal, name it with --workload.`,
		Example: `  devtool init
  devtool init --file .devtool/devtool.yml --replace
  devtool init -v1 --namespace dev --workload api`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch version {
			case "":
			case "1":
				opts.V1 = true
			default:
				return cmdutil.FlagErrorf("-v%s: the only init flow version is 1 (-v1)", version)
			}
			if opts.File == "" {
				return cmdutil.FlagErrorf("--file must not be empty")
			}
			if opts.Workload != "" && !opts.V1 {
				return cmdutil.FlagErrorf("--workload needs -v1")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	opts.Kube.AddFlags(cmd)
	fl := cmd.Flags()
	fl.StringVarP(&opts.File, "file", "f", "devtool.yml", "path of the manifest to write")
	fl.BoolVar(&opts.Replace, "replace", false, "overwrite the manifest when it exists")
	fl.BoolVar(&opts.V1, "v1", false, "the first init flow: a dev section for a workload running in the namespace (also -v1)")
	fl.StringVar(&opts.Workload, "workload", "", "with -v1: the Deployment or StatefulSet to develop")
	// The spec writes the flag as -v1. pflag shorthands are one letter, so -v is a hidden flag
	// taking the flow version: -v1 is -v 1.
	fl.StringVarP(&version, "init-version", "v", "", "init flow version (-v1)")
	_ = fl.MarkHidden("init-version")
	return cmd
}

func run(ctx context.Context, opts *Options) error {
	if (opts.Kube.Context != "" || opts.Kube.Namespace != "") && !opts.V1 {
		// Only --v1 reads the cluster, but explicit flags are never ignored: they must resolve.
		if _, err := opts.Target(opts.Kube); err != nil {
			return err
		}
	}
	path := opts.File
	if !filepath.IsAbs(path) {
		path = filepath.Join(opts.WorkDir, path)
	}
	if _, err := os.Lstat(path); err == nil && !opts.Replace {
		return cmdutil.WithHint(fmt.Errorf("%s already exists", path), "use --replace to overwrite it")
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	// The manifest's folder is where its commands run and its paths are relative to.
	dir := manifest.ProjectDir(path)
	name := deploy.EnvironmentName("", "", dir)

	var m *out
	var err error
	if opts.V1 {
		m, err = devFlow(ctx, opts)
	} else {
		m, err = guessFlow(ctx, opts, dir, name)
	}
	if err != nil {
		return err
	}
	data, err := m.marshal()
	if err != nil {
		return err
	}
	// What init writes must load; a failure here is a bug in init, said plainly.
	if _, err := manifest.LoadBytes(manifest.LoadOptions{File: path, Environ: map[string]string{}}, data); err != nil {
		return fmt.Errorf("the manifest init made does not load (please report this): %w", err)
	}
	if err := writeFile(path, data); err != nil {
		return err
	}
	rel, relErr := filepath.Rel(opts.WorkDir, path)
	if relErr != nil || strings.HasPrefix(rel, "..") {
		rel = path
	}
	fmt.Fprintf(opts.IO.ErrOut, "Wrote %s\n", rel)
	return nil
}

// guessFlow builds the manifest from what Detect finds, asking which guesses to use on a terminal.
func guessFlow(ctx context.Context, opts *Options, dir, name string) (*out, error) {
	g, err := Detect(ctx, dir, name)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("looking at %s: %w", dir, err)
	}
	if g.Empty() {
		return nil, cmdutil.WithHint(fmt.Errorf("found nothing to deploy in %s: no Compose file, Dockerfile, Kubernetes manifests or Helm chart", dir),
			"write devtool.yml by hand (see docs/manifest.md), or use init -v1 to develop a workload already running in the cluster")
	}
	m := &out{}
	if len(g.Builds) > 0 {
		m.Build = map[string]outBuild{}
		for _, b := range g.Builds {
			m.Build[b.Service] = outBuild{Context: b.Context, Dockerfile: b.Dockerfile}
		}
	}
	type choice struct {
		label   string
		compose string
		cmds    []string
	}
	var choices []choice
	if g.Compose != "" {
		choices = append(choices, choice{label: "deploy the Compose file " + g.Compose, compose: g.Compose})
	}
	for _, c := range g.Commands() {
		choices = append(choices, choice{label: "run " + c, cmds: []string{c}})
	}
	picked := choices
	if len(choices) > 1 && opts.IO.CanPrompt() {
		labels := []string{"all of them, in this order"}
		for _, c := range choices {
			labels = append(labels, c.label)
		}
		i, err := prompt.Select(ctx, opts.IO.In, opts.IO.ErrOut, "How should deploy deploy this folder?", labels, 0)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			picked = choices[i-1 : i]
		}
	}
	d := &outDeploy{}
	for _, c := range picked {
		if c.compose != "" {
			d.Compose = c.compose
		}
		d.Commands = append(d.Commands, c.cmds...)
	}
	if d.Compose != "" || len(d.Commands) > 0 {
		m.Deploy = d
	}
	return m, nil
}

// out is the manifest init writes; field order is the file's order.
type out struct {
	Build  map[string]outBuild `yaml:"build,omitempty"`
	Deploy *outDeploy          `yaml:"deploy,omitempty"`
	Dev    map[string]outDev   `yaml:"dev,omitempty"`
}

type outBuild struct {
	Context    string `yaml:"context"`
	Dockerfile string `yaml:"dockerfile,omitempty"`
}

type outDeploy struct {
	Commands []string `yaml:"commands,omitempty"`
	Compose  string   `yaml:"compose,omitempty"`
}

type outDev struct {
	Image     string            `yaml:"image,omitempty"`
	Container string            `yaml:"container,omitempty"`
	Selector  map[string]string `yaml:"selector,omitempty"`
	Workdir   string            `yaml:"workdir"`
	Sync      []string          `yaml:"sync"`
	Forward   []string          `yaml:"forward,omitempty"`
}

const header = `# devtool manifest, written by devtool init. Reference: docs/manifest.md.
# Editors check and complete it with the JSON schema (docs/schema/devtool.schema.json), for
# example with a first line "# yaml-language-server: $schema=<path or URL of the schema>".
`

func (m *out) marshal() ([]byte, error) {
	var b strings.Builder
	b.WriteString(header)
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

// writeFile writes atomically (atomicfile.Write).
func writeFile(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, data, 0o644)
}
