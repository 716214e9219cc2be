package contextcmd

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
)

// NewUseCmd builds `devtool context use`.
func NewUseCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Getenv: f.Getenv}
	cmd := &cobra.Command{
		Use:   "use [<platform_url> | <kubernetes_context_name>]",
		Short: "Set the default context",
		Long: `Set the default context of devtool commands. A Kubernetes context from your kubeconfig
(KUBECONFIG, several files allowed, or ~/.kube/config) becomes a devtool context the first time it
is used, with the kubeconfig's namespace for it. The kubeconfig itself is never modified.

With no argument it asks which context to use (on a terminal only).
A platform URL (https://...) logs in (in a browser on a terminal; --user with a password; --device
with a code; --token with an API token) and saves the context; see 'devtool context --help'.`,
		Example: `  devtool context use kind-dev
  devtool context use https://platform.example
  devtool context use https://platform.example --user alice --password-stdin < password-file
  devtool context use https://platform.example --device
  devtool context use https://platform.example --token dvt_... --ca-cert platform-ca.crt`,
		Args: cobra.MaximumNArgs(1),
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return completeNames(opts.Getenv, true), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Name = args[0]
			}
			opts.ArgHint = "devtool context use <kubernetes_context_name>"
			if opts.Namespace != "" {
				if err := contexts.ValidateNamespace(opts.Namespace); err != nil {
					return cmdutil.FlagErrorf("--namespace: %v", err)
				}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.Namespace, "namespace", "n", "", "namespace of the context (default: the saved one, a platform user's personal namespace, or the kubeconfig's)")
	addPlatformFlags(cmd, opts)
	return cmd
}

// completeNames lists devtool contexts and, with kube, the kubeconfig's contexts, for shell completion.
func completeNames(getenv func(string) string, kube bool) []string {
	seen := map[string]bool{}
	var names []string
	if store, err := contexts.StoreFromEnv(getenv); err == nil {
		if cfg, err := store.Load(); err == nil {
			for _, n := range cfg.Names() {
				seen[n], names = true, append(names, n)
			}
		}
	}
	if kube {
		if kc, err := contexts.LoadKubeconfig(getenv); err == nil {
			for _, n := range kc.ContextNames() {
				if !seen[n] {
					names = append(names, n)
				}
			}
		}
	}
	return names
}
