package contextcmd

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
)

// ListOptions are the inputs of `devtool context list`.
type ListOptions struct {
	Out, ErrOut io.Writer
	Getenv      func(string) string
}

// NewListCmd builds `devtool context list`.
func NewListCmd(f *cmdutil.Factory, runF func(*ListOptions) error) *cobra.Command {
	opts := &ListOptions{Out: f.IOStreams.Out, ErrOut: f.IOStreams.ErrOut, Getenv: f.Getenv}
	return &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the devtool contexts; the current one is marked with *",
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runList(opts)
		},
	}
}

func runList(opts *ListOptions) error {
	store, err := contexts.StoreFromEnv(opts.Getenv)
	if err != nil {
		return err
	}
	cfg, err := store.Load()
	if err != nil {
		return err
	}
	if len(cfg.Contexts) == 0 {
		fmt.Fprintln(opts.ErrOut, "No devtool contexts yet: add one with 'devtool context use <kubernetes_context_name>'.")
		return nil
	}
	tw := tabwriter.NewWriter(opts.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "Name\tNamespace\tBuilder\tRegistry")
	for _, name := range cfg.Names() {
		c := cfg.Contexts[name]
		if name == cfg.CurrentContext {
			name += " *"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", name, dash(c.Namespace), dash(c.Builder), dash(c.Registry))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
