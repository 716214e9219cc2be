// Package analytics implements `devtool analytics`: turning analytics collection on or off.
// internal/analytics sends the events; docs/analytics.md lists what they hold.
package analytics

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
)

// Options are the inputs of `devtool analytics`.
type Options struct {
	Out, ErrOut io.Writer
	Getenv      func(string) string
	Disable     bool
	Enable      bool
}

// NewCmd builds the command. runF replaces run in tests of flag parsing.
func NewCmd(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{Out: f.IOStreams.Out, ErrOut: f.IOStreams.ErrOut, Getenv: f.Getenv}
	cmd := &cobra.Command{
		Use:   "analytics",
		Short: "Turn analytics collection on or off",
		Long: `Turn analytics collection on (the default) or off. The choice is stored in
~/.devtool/analytics.json (DEVTOOL_HOME replaces ~). With no flag, prints whether it is on.
DO_NOT_TRACK=1 also turns it off.

Analytics go only to the devtool platform of the context a command uses, and only when its admin
allows them: one event per command with its name (never its arguments), duration, success, the
CLI's version, OS and architecture, and a random install id. Nothing is sent on a plain Kubernetes
context. docs/analytics.md lists every field and what the platform keeps (daily counts only).`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if opts.Disable && opts.Enable {
				return cmdutil.FlagErrorf("--disable and --enable cannot be used together")
			}
			if runF != nil {
				return runF(opts)
			}
			return run(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Disable, "disable", false, "disable analytics collection")
	cmd.Flags().BoolVar(&opts.Enable, "enable", false, "enable analytics collection")
	return cmd
}

func run(opts *Options) error {
	store, err := contexts.StoreFromEnv(opts.Getenv)
	if err != nil {
		return err
	}
	store.Notice = func(s string) { fmt.Fprintf(opts.ErrOut, "Note: %s\n", s) }
	if opts.Disable || opts.Enable {
		if err := store.SetAnalytics(opts.Enable); err != nil {
			return err
		}
		fmt.Fprintf(opts.ErrOut, "Analytics %s.\n", word(opts.Enable))
		return nil
	}
	on, err := store.AnalyticsEnabled()
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(opts.Out, "Analytics are %s.\n", word(on))
	return err
}

func word(on bool) string {
	if on {
		return "enabled"
	}
	return "disabled"
}
