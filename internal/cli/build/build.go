// Package build implements `devtool build`.
package build

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/build"
	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/environment"
	"github.com/devtool/devtool/internal/iostreams"
	"github.com/devtool/devtool/internal/manifest"
)

// Options are the inputs of `devtool build`.
type Options struct {
	IO      *iostreams.IOStreams
	Logger  *slog.Logger
	Getenv  func(string) string
	Environ map[string]string
	WorkDir string
	Target  func(cmdutil.KubeFlags) (*cmdutil.Target, error)
	// StoredSecrets reads the platform's stored secrets (nil: none): the third source of ${NAME}.
	StoredSecrets func(context.Context, cmdutil.KubeFlags) (map[string]string, error)
	// SelectBuilder picks the builder (build.Select; tests replace it).
	SelectBuilder func(context.Context, build.SelectOptions) (build.Builder, error)

	Kube        cmdutil.KubeFlags
	Env         cmdutil.EnvFlags
	NoCache     bool
	Secrets     []build.Secret
	ExportCache string
	CacheFrom   []string
	Tag         string
	Services    []string
}

// NewCmd builds the command. runF replaces run in tests of flag parsing.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Logger: f.Logger, Getenv: f.Getenv, WorkDir: f.WorkDir, Target: f.Target, StoredSecrets: f.StoredSecrets,
		Environ: cmdutil.EnvironMap(f.Environ), SelectBuilder: build.Select}
	var secrets []string
	cmd := &cobra.Command{
		Use:   "build [service...]",
		Short: "Build and push the images of the build section",
		Long: `Build and push the images of the Compose services that have a build section (all of them, or the
services named). A service without an image gets <registry>/<namespace>/<name>-<service>:<content hash>;
when the registry already has that tag, nothing is built.

With --file pointing to a Dockerfile, that file is built directly (its folder is the build context)
and pushed as --tag.

Builds run on the BuildKit daemon of BUILDKIT_HOST (HOST:PORT) when it is set, else on the platform's
build service when the context is a platform that has one (its registry gets the images), else on the
context's builder, else on the local Docker daemon (DOCKER_HOST or the default socket).`,
		Example: `  devtool build
  devtool build api worker
  devtool build -f Dockerfile --tag 127.0.0.1:25000/me/app:dev --secret id=npm,src=$HOME/.npmrc`,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Services = args
			for _, s := range secrets {
				sec, err := build.ParseSecret(s)
				if err != nil {
					return cmdutil.FlagErrorf("--secret: %v", err)
				}
				if !filepath.IsAbs(sec.Src) {
					sec.Src = filepath.Join(opts.WorkDir, sec.Src)
				}
				opts.Secrets = append(opts.Secrets, sec)
			}
			if len(opts.Env.Files) > 1 && isDockerfile(opts.dockerfile()) {
				return cmdutil.FlagErrorf("--file: one Dockerfile at a time")
			}
			if opts.Tag != "" && !isDockerfile(opts.dockerfile()) {
				return cmdutil.FlagErrorf("--tag needs --file pointing to a Dockerfile")
			}
			if isDockerfile(opts.dockerfile()) && (len(args) > 0 || opts.Env.Name != "") {
				return cmdutil.FlagErrorf("no service names or --name with --file pointing to a Dockerfile (use --tag)")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	opts.Kube.AddFlags(cmd)
	fl := cmd.Flags()
	opts.Env.AddFlags(cmd, "the devtool.yml or Compose file, or a Dockerfile to build directly")
	fl.BoolVar(&opts.NoCache, "no-cache", false, "build without using the build cache (and rebuild unchanged images)")
	fl.StringArrayVar(&secrets, "secret", nil, "a secret for RUN --mount=type=secret: id=<id>,src=<path> (repeatable)")
	fl.StringVar(&opts.ExportCache, "export-cache", "", "image reference to export the build cache to")
	fl.StringArrayVar(&opts.CacheFrom, "cache-from", nil, "image reference to import build cache from (repeatable)")
	fl.StringVarP(&opts.Tag, "tag", "t", "", "image name for --file Dockerfile builds")
	return cmd
}

// dockerfile is the --file value when there is exactly one.
func (o *Options) dockerfile() string {
	if len(o.Env.Files) == 1 {
		return o.Env.Files[0]
	}
	return ""
}

// isDockerfile tells a Dockerfile from a manifest or Compose file by its name.
func isDockerfile(file string) bool {
	if file == "" {
		return false
	}
	base := strings.ToLower(filepath.Base(file))
	if strings.HasSuffix(base, ".yml") || strings.HasSuffix(base, ".yaml") {
		return false
	}
	return strings.Contains(base, "dockerfile") || strings.HasSuffix(base, ".containerfile") || base == "containerfile"
}

func run(ctx context.Context, opts *Options) error {
	target, targetErr := opts.Target(opts.Kube)
	if targetErr != nil && opts.Kube.Context != "" {
		return targetErr // an explicit --context must resolve
	}
	sel := build.SelectOptions{Getenv: opts.Getenv, Logger: opts.Logger}
	if target != nil {
		sel.Hosted, sel.ContextBuilder = target.Hosted, target.Builder
		ctx = build.WithRegistryAuth(ctx, target.RegistryAuth)
	}
	mode := "plain"
	if opts.IO.IsStderrTTY() {
		mode = "auto"
	}
	if isDockerfile(opts.dockerfile()) {
		return runDockerfile(ctx, opts, sel, target, mode)
	}

	secrets, err := cmdutil.LoadStoredSecrets(ctx, opts.StoredSecrets, opts.Kube)
	if err != nil {
		return err
	}
	eo := opts.Env.Options(opts.WorkDir, opts.Environ)
	eo.Secrets = secrets
	env, err := cmdutil.Interruptible(ctx, func() (*environment.Environment, error) { return environment.Load(eo) })
	if err != nil {
		return err
	}
	for _, w := range env.Warnings {
		fmt.Fprintf(opts.IO.ErrOut, "Warning: %s\n", w)
	}
	images, err := imagesToBuild(env, opts.Services)
	if err != nil {
		return err
	}
	if len(images) == 0 {
		fmt.Fprintf(opts.IO.ErrOut, "%s has no build section: nothing to build.\n", env.File)
		return nil
	}
	registry := opts.Getenv(build.EnvRegistry)
	namespace := ""
	if target != nil {
		if target.Registry != "" {
			registry = target.Registry
		}
		namespace = target.Namespace
	}
	if namespace == "" && needsDerivedName(images) {
		if targetErr != nil {
			return fmt.Errorf("image names need the namespace of the current context: %w", targetErr)
		}
		return errors.New("image names need a namespace: pass --namespace")
	}
	res, err := build.EnsureImages(ctx, build.EnsureOptions{
		NewBuilder: func(ctx context.Context) (build.Builder, error) { return opts.SelectBuilder(ctx, sel) },
		Registry:   registry, Namespace: namespace, Name: env.Name,
		NoCache: opts.NoCache, Secrets: opts.Secrets, ExportCache: opts.ExportCache, CacheFrom: opts.CacheFrom,
		Progress: opts.IO.ErrOut, ProgressMode: mode,
		OnBuild: func(service, ref string, b build.Builder) {
			fmt.Fprintf(opts.IO.ErrOut, "Building %s (%s) with %s\n", service, ref, b.Name())
		},
	}, images)
	if err != nil {
		return err
	}
	for _, img := range images {
		r := res[img.Service]
		if r.Skipped {
			fmt.Fprintf(opts.IO.ErrOut, "%s: %s is in the registry already, unchanged: not built\n", img.Service, r.Ref)
		}
		fmt.Fprintln(opts.IO.Out, r.Ref)
	}
	return nil
}

func needsDerivedName(images []build.Image) bool {
	for _, img := range images {
		if img.Image == "" {
			return true
		}
	}
	return false
}

// imagesToBuild lists the build section (the devtool.yml's, or the Compose services with a
// build section): those named, in file order, when names are given.
func imagesToBuild(env *environment.Environment, names []string) ([]build.Image, error) {
	byName := map[string]*manifest.BuildService{}
	for _, b := range env.Manifest.Build {
		byName[b.Service] = b
	}
	want := map[string]bool{}
	for _, n := range names {
		if byName[n] == nil {
			return nil, cmdutil.FlagErrorf("no image %q in the build section of %s", n, env.File)
		}
		want[n] = true
	}
	var list []*manifest.BuildService
	for _, b := range env.Manifest.Build {
		if len(want) == 0 || want[b.Service] {
			list = append(list, b)
		}
	}
	return environment.BuildImages(list), nil
}

func runDockerfile(ctx context.Context, opts *Options, sel build.SelectOptions, target *cmdutil.Target, mode string) error {
	df := opts.dockerfile()
	if !filepath.IsAbs(df) {
		df = filepath.Join(opts.WorkDir, df)
	}
	if _, err := os.Stat(df); err != nil {
		return cmdutil.FlagErrorf("--file: %v", err)
	}
	req := build.Request{
		Context: filepath.Dir(df), Dockerfile: filepath.Base(df), Push: true,
		NoCache: opts.NoCache, Secrets: opts.Secrets, ExportCache: opts.ExportCache, CacheFrom: opts.CacheFrom,
		Progress: opts.IO.ErrOut, ProgressMode: mode,
	}
	tag := opts.Tag
	if tag == "" {
		registry := opts.Getenv(build.EnvRegistry)
		if target != nil && target.Registry != "" {
			registry = target.Registry
		}
		if target == nil || registry == "" || registry == "-" {
			return cmdutil.FlagErrorf("--tag is required to build a Dockerfile when there is no registry and namespace to name the image")
		}
		hash, err := build.ContentTagContext(ctx, req)
		if err != nil {
			return err
		}
		if tag, err = build.ImageName(registry, target.Namespace, filepath.Base(req.Context), "", hash); err != nil {
			return err
		}
	}
	req.Tags = []string{tag}
	b, err := opts.SelectBuilder(ctx, sel)
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "Building %s with %s\n", tag, b.Name())
	res, err := b.Build(ctx, req)
	if err != nil {
		return err
	}
	_, err = io.WriteString(opts.IO.Out, res.Ref+"\n")
	return err
}
