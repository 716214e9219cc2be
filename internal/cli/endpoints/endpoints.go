// Package endpoints implements `devtool endpoints`.
package endpoints

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/deploy"
	"github.com/devtool/devtool/internal/environment"
	"github.com/devtool/devtool/internal/iostreams"
)

// Options are the inputs of `devtool endpoints`.
type Options struct {
	IO      *iostreams.IOStreams
	Target  func(cmdutil.KubeFlags) (*cmdutil.Target, error)
	WorkDir string
	Environ map[string]string

	Kube   cmdutil.KubeFlags
	Env    cmdutil.EnvFlags
	Output string
}

// NewCmd builds the command. runF replaces run in tests of flag parsing.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Target: f.Target, WorkDir: f.WorkDir, Environ: cmdutil.EnvironMap(f.Environ)}
	cmd := &cobra.Command{
		Use:   "endpoints",
		Short: "List the public endpoints of the environment",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch opts.Output {
			case "", "json", "md":
			default:
				return cmdutil.FlagErrorf("--output must be json or md, not %q", opts.Output)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	opts.Kube.AddFlags(cmd)
	opts.Env.AddFlags(cmd, "path to the devtool.yml or Compose file, used to find the environment name")
	cmd.Flags().StringVarP(&opts.Output, "output", "o", "", "output format: json or md (default: a table)")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"json", "md"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func run(ctx context.Context, opts *Options) error {
	name, err := cmdutil.Interruptible(ctx, func() (string, error) {
		return environment.Identify(opts.Env.Options(opts.WorkDir, opts.Environ))
	})
	if err != nil {
		return err
	}
	target, err := opts.Target(opts.Kube)
	if err != nil {
		return err
	}
	eps, err := deploy.Endpoints(ctx, target.Kube.Clientset, target.Namespace, name, target.EndpointPort)
	if err != nil {
		return err
	}
	var withURL []deploy.PublicEndpoint
	noHost := 0
	for _, e := range eps {
		if e.URL == "" {
			noHost++
			continue
		}
		withURL = append(withURL, e)
	}
	if noHost > 0 {
		fmt.Fprintf(opts.IO.ErrOut, "Note: %d route(s) of %s have no public URL: no cluster domain is configured (set one in the context or DEVTOOL_CLUSTER_DOMAIN, then deploy again)\n", noHost, name)
	}
	return write(opts.IO.Out, opts.Output, name, withURL)
}

func write(w io.Writer, format, env string, eps []deploy.PublicEndpoint) error {
	switch format {
	case "json":
		urls := make([]string, 0, len(eps))
		for _, e := range eps {
			urls = append(urls, e.URL)
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(urls)
	case "md":
		if len(eps) == 0 {
			_, err := fmt.Fprintf(w, "There are no public endpoints for %s.\n", env)
			return err
		}
		fmt.Fprintf(w, "Available endpoints for %s:\n\n", env)
		for _, e := range eps {
			fmt.Fprintf(w, " - %s\n", e.URL)
		}
		return nil
	default:
		if len(eps) == 0 {
			_, err := fmt.Fprintf(w, "There are no public endpoints for %s\n", env)
			return err
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "URL\tSERVICE\tPORT")
		for _, e := range eps {
			fmt.Fprintf(tw, "%s\t%s\t%d\n", e.URL, e.Service, e.Port)
		}
		return tw.Flush()
	}
}
