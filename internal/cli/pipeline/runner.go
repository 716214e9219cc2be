package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/errs"
	"github.com/devtool/devtool/internal/platform/runner"
	"github.com/devtool/devtool/internal/platform/runspec"
	"github.com/devtool/devtool/internal/safefile"
)

// newRunnerCmd builds the hidden `pipeline runner`: what the run's Job executes in the runner image.
func newRunnerCmd(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:    "runner",
		Short:  "Run a pipeline inside its Job (the platform's runner image runs this)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRunner(cmd.Context(), f, runspec.MountDir, runspec.TerminationLog)
		},
	}
}

func runRunner(ctx context.Context, f *cmdutil.Factory, mount, termLog string) error {
	data, err := safefile.Read(filepath.Join(mount, runspec.SpecFile), 2<<20)
	if err != nil {
		return fmt.Errorf("reading the run: %w", err)
	}
	var spec runspec.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		return fmt.Errorf("reading the run: %w", err)
	}
	host, port := f.Getenv("KUBERNETES_SERVICE_HOST"), f.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return fmt.Errorf("not in a pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	caFile := filepath.Join(mount, runspec.CAFile)
	ca, _ := safefile.Read(caFile, 1<<20)
	res, runErr := runner.Run(ctx, runner.Options{
		Spec: spec, CA: ca, CAFile: caFile,
		APIServer:   "https://" + net.JoinHostPort(host, port),
		KubeCAFile:  filepath.Join(runspec.KubeCADir, runspec.KubeCAFile),
		TokenFile:   filepath.Join(mount, runspec.TokenFile),
		BuilderCert: filepath.Join(mount, runspec.BuilderCertFile), BuilderKey: filepath.Join(mount, runspec.BuilderKeyFile),
		BuilderCA: filepath.Join(mount, runspec.BuilderCAFile),
		WorkDir:   runspec.WorkDir, Devtool: self, Environ: f.Environ, Out: f.IOStreams.Out,
	})
	if err := writeResult(termLog, res); err != nil {
		fmt.Fprintf(f.IOStreams.ErrOut, "warning: the run's result was not written to %s: %v\n", termLog, err)
	}
	if runErr != nil {
		fmt.Fprintf(f.IOStreams.Out, "==> failed: %v\n", runErr)
		return &errs.ExitStatus{Code: 1}
	}
	return nil
}

// writeResult writes res as JSON within the kubelet's 4096 bytes, shortening the tail (from its
// start, whole lines kept) until it fits.
func writeResult(path string, res runspec.Result) error {
	for {
		b, err := json.Marshal(res)
		if err != nil {
			return err
		}
		if len(b) <= runspec.MaxResultBytes || res.Tail == "" {
			return os.WriteFile(path, b, 0o644)
		}
		cut := len(b) - runspec.MaxResultBytes + 16
		if cut >= len(res.Tail) {
			res.Tail = ""
			continue
		}
		t := res.Tail[cut:]
		if i := strings.IndexByte(t, '\n'); i >= 0 && i < len(t)-1 {
			t = t[i+1:]
		}
		res.Tail = t
	}
}

// newGitCmd builds the hidden `pipeline git`: the runner image's git (clone and rev-parse, by go-git).
func newGitCmd(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:                "git",
		Short:              "The runner image's git: clone and rev-parse only",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := runner.Git(cmd.Context(), args, f.WorkDir, f.Getenv, f.IOStreams.Out, f.IOStreams.ErrOut); code != 0 {
				return &errs.ExitStatus{Code: code}
			}
			return nil
		},
	}
}
