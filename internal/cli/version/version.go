// Package version implements `devtool version`.
package version

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/buildinfo"
	"github.com/devtool/devtool/internal/cmdutil"
)

// Options are the inputs of `devtool version`.
type Options struct {
	Out    io.Writer
	Output string
}

// NewCmd builds the command. runF replaces run in tests of flag parsing.
func NewCmd(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{Out: f.IOStreams.Out}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of devtool",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Output != "" && opts.Output != "json" {
				return cmdutil.FlagErrorf("--output must be json, not %q", opts.Output)
			}
			if runF != nil {
				return runF(opts)
			}
			return run(opts)
		},
	}
	cmd.Flags().StringVarP(&opts.Output, "output", "o", "", "output format: json")
	return cmd
}

func run(opts *Options) error {
	info := buildinfo.Get()
	if opts.Output == "json" {
		enc := json.NewEncoder(opts.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(info)
	}
	_, err := fmt.Fprintf(opts.Out, "devtool version %s\ncommit: %s\ngo: %s\nplatform: %s\n",
		info.Version, info.Commit, info.GoVersion, info.Platform)
	return err
}
