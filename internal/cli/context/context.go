// Package contextcmd implements `devtool context` and its subcommands use, list, show and delete.
// The store and the precedence live in internal/contexts; these commands only adapt flags to it and
// its results to output.
package contextcmd

import (
	"context"
	"fmt"
	"sort"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/build"
	"github.com/devtool/devtool/internal/cli/context/prompt"
	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/iostreams"
	"github.com/devtool/devtool/internal/platform/api"
)

// Options are the inputs of `devtool context` and `devtool context use`.
type Options struct {
	IO     *iostreams.IOStreams
	Getenv func(string) string

	Name      string // platform URL or Kubernetes context name; empty: prompt
	Namespace string
	Builder   string
	Token     string
	CACert    string // --ca-cert: the platform's CA (PEM file)
	// Login without a token: --user (password asked on a terminal, or --password-stdin), --device.
	User          string
	PasswordStdin bool
	Device        bool
	// ArgHint is how the error for a missing name (no terminal) tells the user to give it.
	ArgHint string
}

// NewCmd builds `devtool context` with its subcommands. runF replaces run in tests of flag parsing.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Getenv: f.Getenv}
	cmd := &cobra.Command{
		Use:   "context [<platform_url> | <kubernetes_context_name>]",
		Short: "Select or create the context devtool commands run in",
		Long: `Select the context devtool commands run in: an existing devtool context, or a Kubernetes
context from your kubeconfig (KUBECONFIG, or ~/.kube/config), which becomes a devtool context.
--namespace and --builder set the chosen context's namespace and build service.

On a terminal, with no argument, it asks which context to use. Without a terminal the
context name is required.

A platform URL (https://...) logs in and saves the context with an API token, the user name, the
platform's registry, builder and domain, and its CA (--ca-cert FILE or DEVTOOL_CA_CERT; on a
terminal, devtool can show the CA's SHA-256 fingerprint and ask). Ways to log in:
  - in a browser (the default on a terminal): the platform's sign-in page (password or single
    sign-on) hands a token back to devtool on 127.0.0.1; the address is printed too;
  - --user NAME: the password is asked without echo, or read with --password-stdin;
  - --device: a code to enter on any device with a browser;
  - --token (or DEVTOOL_TOKEN): an API token, for scripts; no browser is ever opened.
With CI set or without a terminal nothing is asked and no browser opened: give a token or a
password on stdin. For CI, DEVTOOL_URL and DEVTOOL_TOKEN (and DEVTOOL_NAMESPACE, DEVTOOL_CA_CERT)
work with no saved context at all.

Contexts are stored in ~/.devtool/context/config.json (DEVTOOL_HOME replaces ~).
The kubeconfig is never modified.`,
		Example: `  devtool context                      # choose interactively
  devtool context https://platform.example             # log in in a browser
  devtool context https://platform.example --user alice
  printf %s "$PASSWORD" | devtool context https://platform.example --user alice --password-stdin
  devtool context https://platform.example --token dvt_... --ca-cert platform-ca.crt
  devtool context kind-dev --namespace web --builder tcp://127.0.0.1:1234
  devtool context use kind-dev`,
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
			opts.ArgHint = "devtool context <kubernetes_context_name>"
			if opts.Builder != "" {
				if err := validateBuilder(opts.Builder); err != nil {
					return err
				}
			}
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
	cmd.Flags().StringVarP(&opts.Namespace, "namespace", "n", "", "namespace of the context (default: the kubeconfig context's namespace)")
	cmd.Flags().StringVarP(&opts.Builder, "builder", "b", "", "build service of the context: tcp://<host>:<port>, or docker for the local daemon")
	addPlatformFlags(cmd, opts)
	cmd.AddCommand(NewUseCmd(f, nil), NewListCmd(f, nil), NewShowCmd(f, nil), NewDeleteCmd(f, nil), NewPasswordCmd(f, nil))
	return cmd
}

// addPlatformFlags registers --token, --ca-cert and the login flags. There is no password flag: a
// command line is seen by every process of the machine and kept in shell histories.
func addPlatformFlags(cmd *cobra.Command, opts *Options) {
	cmd.Flags().StringVarP(&opts.Token, "token", "t", "", "API token for a platform URL (default: $"+api.EnvToken+")")
	cmd.Flags().StringVar(&opts.CACert, "ca-cert", "", "the platform's CA certificate, a PEM file (default: $"+api.EnvCACert+", else the saved one, else ask on a terminal)")
	cmd.Flags().StringVarP(&opts.User, "user", "u", "", "log in to a platform URL with this user's password (asked without echo, or --password-stdin)")
	cmd.Flags().BoolVar(&opts.PasswordStdin, "password-stdin", false, "read the password of --user from standard input (for scripts)")
	cmd.Flags().BoolVar(&opts.Device, "device", false, "log in with a code entered on another device (RFC 8628), for shells without a browser")
}

func validateBuilder(b string) error {
	if err := build.ValidateBuilderAddress(b); err != nil {
		return cmdutil.FlagErrorf("--builder: %v", err)
	}
	return nil
}

// run selects (or prompts for) a context and makes it current.
func run(ctx context.Context, opts *Options) error {
	if opts.PasswordStdin && opts.User == "" {
		return cmdutil.FlagErrorf("--password-stdin needs --user <name>")
	}
	logins := 0
	for _, on := range []bool{opts.Token != "", opts.User != "", opts.Device} {
		if on {
			logins++
		}
	}
	if logins > 1 {
		return cmdutil.FlagErrorf("give one way to log in: --token, --user or --device")
	}
	if opts.Token != "" || opts.CACert != "" || opts.User != "" || opts.Device {
		flag := "--token"
		switch {
		case opts.User != "":
			flag = "--user"
		case opts.Device:
			flag = "--device"
		case opts.Token == "":
			flag = "--ca-cert"
		}
		if opts.Name == "" {
			return cmdutil.FlagErrorf("%s needs the platform URL: devtool context use https://<platform> %s ...", flag, flag)
		}
		if !contexts.IsPlatformURL(opts.Name) {
			return cmdutil.FlagErrorf("%s is for platform URLs; %q is a Kubernetes context, whose credentials come from the kubeconfig", flag, opts.Name)
		}
	}
	if contexts.IsPlatformURL(opts.Name) {
		return loginPlatform(ctx, opts)
	}
	store, err := contexts.StoreFromEnv(opts.Getenv)
	if err != nil {
		return err
	}
	store.Notice = func(s string) { fmt.Fprintf(opts.IO.ErrOut, "Note: %s\n", s) }
	kc, err := contexts.LoadKubeconfig(opts.Getenv)
	if err != nil {
		return err
	}
	if opts.Name == "" {
		if !opts.IO.CanPrompt() {
			return cmdutil.FlagErrorf("no terminal to choose a context on: give the context name, as in '%s'", opts.ArgHint)
		}
		name, err := choose(ctx, opts.IO, store, kc)
		if err != nil {
			return err
		}
		opts.Name = name
		if contexts.IsPlatformURL(opts.Name) {
			return loginPlatform(ctx, opts)
		}
	}
	res, err := contexts.Use(store, kc, contexts.UseOptions{Name: opts.Name, Namespace: opts.Namespace, Builder: opts.Builder})
	if err != nil {
		return err
	}
	verb := "Using"
	if res.Created {
		verb = "Created and using"
	}
	fmt.Fprintf(opts.IO.ErrOut, "%s context %s (namespace %s).\n", verb, res.Context.Name, res.Context.Namespace)
	return nil
}

// choose asks which context to use: the devtool contexts first, then Kubernetes contexts that are
// not devtool contexts yet.
func choose(ctx context.Context, io *iostreams.IOStreams, store *contexts.Store, kc *contexts.Kubeconfig) (string, error) {
	cfg, err := store.Load()
	if err != nil {
		return "", err
	}
	var names, labels []string
	def := -1
	for _, n := range cfg.Names() {
		label := n
		if n == cfg.CurrentContext {
			label += " (current)"
			def = len(names)
		}
		names, labels = append(names, n), append(labels, label)
	}
	var fresh []string
	for _, n := range kc.ContextNames() {
		if _, ok := cfg.Contexts[n]; !ok {
			fresh = append(fresh, n)
		}
	}
	sort.Strings(fresh)
	for _, n := range fresh {
		if def < 0 && cfg.CurrentContext == "" && n == kc.Config.CurrentContext {
			def = len(names)
		}
		names, labels = append(names, n), append(labels, n+" (Kubernetes context)")
	}
	if len(names) == 0 {
		return "", cmdutil.WithHint(fmt.Errorf("no contexts to choose from: no devtool contexts and no contexts in the kubeconfig (%s)", kc.Describe()),
			"set KUBECONFIG to a kubeconfig file (for the local cluster run 'make cluster-up')")
	}
	i, err := prompt.Select(ctx, io.In, io.ErrOut, "Select a context:", labels, def)
	if err != nil {
		return "", err
	}
	return names[i], nil
}
