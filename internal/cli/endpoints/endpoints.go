// Package endpoints implements `devtool endpoints`.
package endpoints

import (
	"context"
	"fmt"

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
			if err := cmdutil.CheckEndpointFormat(opts.Output); err != nil {
				return err
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
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(cmdutil.EndpointFormats, cobra.ShellCompDirectiveNoFileComp))
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
	list := cmdutil.EndpointList{Of: name, None: "There are no public endpoints for " + name, Table: true}
	noHost := 0
	for _, e := range eps {
		if e.URL == "" {
			noHost++
			continue
		}
		list.Items = append(list.Items, cmdutil.Endpoint{URL: e.URL, Service: e.Service, Port: e.Port})
	}
	if noHost > 0 {
		fmt.Fprintf(opts.IO.ErrOut, "Note: %d route(s) of %s have no public URL: no cluster domain is configured (set one in the context or DEVTOOL_CLUSTER_DOMAIN, then deploy again)\n", noHost, name)
	}
	return list.Write(opts.IO.Out, opts.Output)
}
