package contextcmd

import (
	"encoding/json"
	"io"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
)

// Redacted replaces the token in everything devtool prints.
const Redacted = "redacted"

// Record is the context record `context show` prints (the spec's fields, in its order).
type Record struct {
	Name      string `json:"name"`
	Token     string `json:"token"`
	Namespace string `json:"namespace"`
	Builder   string `json:"builder"`
	Registry  string `json:"registry"`
	IsDevtool bool   `json:"isDevtool"`
}

// ShowOptions are the inputs of `devtool context show`.
type ShowOptions struct {
	Out    io.Writer
	Getenv func(string) string
	Flags  cmdutil.KubeFlags
}

// NewShowCmd builds `devtool context show`.
func NewShowCmd(f *cmdutil.Factory, runF func(*ShowOptions) error) *cobra.Command {
	opts := &ShowOptions{Out: f.IOStreams.Out, Getenv: f.Getenv}
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Print the context in use as JSON (the token is never printed)",
		Long: `Print the context devtool commands use, as JSON: the current devtool context, or, when none
is selected, the kubeconfig's current context. --context and --namespace apply as on every command.
The token is replaced by the word "` + Redacted + `".`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runShow(opts)
		},
	}
	opts.Flags.AddFlags(cmd)
	return cmd
}

func runShow(opts *ShowOptions) error {
	sel, err := (&contexts.Resolver{Getenv: opts.Getenv}).Select(opts.Flags.Flags())
	if err != nil {
		return err
	}
	rec := Record{Name: sel.Name(), Namespace: sel.Namespace}
	if c := sel.Context; c != nil {
		rec.Builder, rec.Registry, rec.IsDevtool = c.Builder, c.Registry, c.IsDevtool
		if c.Token != "" {
			rec.Token = Redacted
		}
	}
	if rec.Registry == "" {
		rec.Registry = opts.Getenv("DEVTOOL_REGISTRY")
	}
	if rec.Builder == "" {
		rec.Builder = opts.Getenv("DEVTOOL_BUILDER")
	}
	rec.Registry = dash(rec.Registry)
	enc := json.NewEncoder(opts.Out)
	enc.SetIndent("", "  ")
	return enc.Encode(rec)
}
