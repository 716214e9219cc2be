package contextcmd

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
)

// DeleteOptions are the inputs of `devtool context delete`.
type DeleteOptions struct {
	ErrOut io.Writer
	Getenv func(string) string
	Name   string
}

// NewDeleteCmd builds `devtool context delete`.
func NewDeleteCmd(f *cmdutil.Factory, runF func(*DeleteOptions) error) *cobra.Command {
	opts := &DeleteOptions{ErrOut: f.IOStreams.ErrOut, Getenv: f.Getenv}
	return &cobra.Command{
		Use:     "delete <context_name>",
		Aliases: []string{"rm"},
		Short:   "Delete a devtool context (the kubeconfig is not touched)",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return cmdutil.FlagErrorf("give the name of the context to delete ('devtool context list' shows them)")
			}
			return nil
		},
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return completeNames(opts.Getenv, false), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(_ *cobra.Command, args []string) error {
			opts.Name = args[0]
			if runF != nil {
				return runF(opts)
			}
			return runDelete(opts)
		},
	}
}

func runDelete(opts *DeleteOptions) error {
	r := &contexts.Resolver{Getenv: opts.Getenv}
	store, err := r.Store()
	if err != nil {
		return err
	}
	store.Notice = func(s string) { fmt.Fprintf(opts.ErrOut, "Note: %s\n", s) }
	wasCurrent, err := contexts.Delete(store, opts.Name)
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.ErrOut, "Deleted context %s.\n", opts.Name)
	if !wasCurrent {
		return nil
	}
	// Say where commands run now: with no devtool context current, the kubeconfig decides.
	sel, err := r.Select(contexts.Flags{})
	if err != nil {
		fmt.Fprintf(opts.ErrOut, "It was the current context; no context is current now (%v).\n"+
			"Choose one with 'devtool context use <name>'.\n", err)
		return nil
	}
	fmt.Fprintf(opts.ErrOut, "It was the current context; commands now use the kubeconfig's current context %s (namespace %s).\n"+
		"Choose another with 'devtool context use <name>'.\n", sel.Name(), sel.Namespace)
	return nil
}
