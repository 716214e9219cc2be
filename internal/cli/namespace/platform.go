package namespace

import (
	"context"
	"fmt"
	"log/slog"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/environment"
	"github.com/devtool/devtool/internal/iostreams"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/client"
)

// PlatformOptions are the inputs of namespace create, list, delete, share and unshare.
type PlatformOptions struct {
	IO      *iostreams.IOStreams
	Getenv  func(string) string
	Target  func(cmdutil.KubeFlags) (*cmdutil.Target, error)
	WorkDir string
	Environ map[string]string
	Logger  *slog.Logger

	Verb    string
	Context string // --context
	Name    string // the namespace
	User    string // share, unshare
	Role    string // share
}

// newPlatformCmd builds create, delete, list, share or unshare: they manage namespaces through the
// platform's API and exist only on platform contexts.
func newPlatformCmd(f *cmdutil.Factory, verb string, runF func(context.Context, *PlatformOptions) error) *cobra.Command {
	opts := &PlatformOptions{IO: f.IOStreams, Getenv: f.Getenv, Target: f.Target, WorkDir: f.WorkDir,
		Environ: cmdutil.EnvironMap(f.Environ), Logger: f.Logger, Verb: verb}
	use, short, long, nargs := verb+" <name>", "", "", 1
	switch verb {
	case "create":
		short = "Create a namespace and select it (platform only)"
		long = `Create a namespace on the platform and make it the context's namespace. You become its owner;
it gets the platform's default quota and limits. Creating a namespace you already own succeeds (for CI).`
	case "delete":
		short = "Delete a namespace, destroying its environments first (platform only)"
		long = `Delete a namespace you own. First every environment deployed in it is destroyed with your own
credentials: the destroy commands of its devtool.yml run, their output shown — for the environment
of the current folder from its files, for every other one from the devtool.yml recorded at its
last deploy (in an empty temporary folder, since its project is not here) — and then what it
deployed is removed. Then the platform deletes the namespace. When it was the context's namespace,
the context falls back to your personal one.`
	case "list":
		use, nargs = "list", 0
		short = "List your namespaces; the current one is marked with * (platform only)"
		long = `List the namespaces you are a member of on the platform, with their status; the context's
namespace is marked with *.`
	case "share":
		use, nargs = "share <name> <user>", 2
		short = "Give a user a role in a namespace you own (platform only)"
		long = `Give a platform user a role in a namespace you own: viewer (read), editor (deploy and develop) or owner
(also delete, share and unshare). Kubernetes itself enforces it.`
	case "unshare":
		use, nargs = "unshare <name> <user>", 2
		short = "Remove a user from a namespace you own (platform only)"
		long = `Remove a user's role in a namespace you own; the user loses access at once.`
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != nargs {
				switch nargs {
				case 0:
					return cmdutil.FlagErrorf("namespace list takes no arguments")
				case 2:
					return cmdutil.FlagErrorf("give the namespace and the user: devtool namespace %s <name> <user>", verb)
				}
				return cmdutil.FlagErrorf("give the namespace: devtool namespace %s <name>", verb)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if nargs > 0 {
				opts.Name = args[0]
				if err := contexts.ValidateNamespace(opts.Name); err != nil {
					return cmdutil.FlagErrorf("%v", err)
				}
			}
			if nargs > 1 {
				opts.User = args[1]
			}
			if verb == "share" {
				switch opts.Role {
				case api.RoleViewer, api.RoleEditor, api.RoleOwner:
				default:
					return cmdutil.FlagErrorf("--role must be viewer, editor or owner (got %q)", opts.Role)
				}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runPlatform(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.Context, "context", "c", "", "context to use (default: the current context)")
	if verb == "share" {
		cmd.Flags().StringVar(&opts.Role, "role", api.RoleViewer, "role to give: viewer, editor or owner")
	}
	return cmd
}

// platformSelection returns the platform context in use, or the spec's "only available on
// clusters with the platform installed" for any other context. Only the store and the environment
// are read: a cluster without the platform needs no connection to say so.
func platformSelection(getenv func(string) string, verb, ctxFlag string) (*contexts.Selection, error) {
	sel, err := (&contexts.Resolver{Getenv: getenv}).Select(contexts.Flags{Context: ctxFlag})
	if err != nil {
		return nil, err
	}
	if c := sel.Context; c != nil && c.IsDevtool {
		return sel, nil
	}
	which := "no platform context is selected"
	if n := sel.Name(); n != "" {
		which = fmt.Sprintf("the context %s is a plain Kubernetes context", n)
	}
	return nil, cmdutil.WithHint(fmt.Errorf("namespace %s is %w; %s", verb, ErrPlatformOnly, which),
		"on this cluster, select an existing namespace with 'devtool namespace use <name>' and manage namespaces with kubectl; for a platform run 'devtool context use https://<platform> --token <token>'")
}

func runPlatform(ctx context.Context, opts *PlatformOptions) error {
	sel, err := platformSelection(opts.Getenv, opts.Verb, opts.Context)
	if err != nil {
		return err
	}
	c := sel.Context
	pc, err := contexts.PlatformClient(c)
	if err != nil {
		return err
	}
	defer pc.Close()
	switch opts.Verb {
	case "create":
		return runCreate(ctx, opts, sel, pc)
	case "list":
		return runList(ctx, opts, sel, pc)
	case "delete":
		return runDelete(ctx, opts, sel, pc)
	case "share":
		if err := pc.Share(ctx, opts.Name, opts.User, opts.Role); err != nil {
			return err
		}
		fmt.Fprintf(opts.IO.ErrOut, "%s is now %s of namespace %s.\n", opts.User, opts.Role, opts.Name)
		return nil
	case "unshare":
		if err := pc.Unshare(ctx, opts.Name, opts.User); err != nil {
			return err
		}
		fmt.Fprintf(opts.IO.ErrOut, "%s no longer has access to namespace %s.\n", opts.User, opts.Name)
		return nil
	}
	return fmt.Errorf("unknown namespace command %q", opts.Verb)
}

// selectNamespace makes ns the namespace of the selection's context when it is saved; a context from
// DEVTOOL_URL alone is not saved, so the user is told how to use it instead.
func selectNamespace(opts *PlatformOptions, sel *contexts.Selection, ns string) error {
	if sel.Context.FromEnv() {
		fmt.Fprintf(opts.IO.ErrOut, "Set %s=%s to use it (the context comes from %s and is not saved).\n", api.EnvNamespace, ns, api.EnvURL)
		return nil
	}
	store, err := (&contexts.Resolver{Getenv: opts.Getenv}).Store()
	if err != nil {
		return err
	}
	return contexts.SetNamespace(store, sel.Context.Name, ns)
}

func runCreate(ctx context.Context, opts *PlatformOptions, sel *contexts.Selection, pc *client.Client) error {
	_, created, err := pc.CreateNamespace(ctx, opts.Name)
	if err != nil {
		return err
	}
	if created {
		fmt.Fprintf(opts.IO.ErrOut, "Namespace %s created.\n", opts.Name)
	} else {
		fmt.Fprintf(opts.IO.ErrOut, "Namespace %s already exists and is yours.\n", opts.Name)
	}
	if err := selectNamespace(opts, sel, opts.Name); err != nil {
		return fmt.Errorf("namespace %s was created, but selecting it failed: %w", opts.Name, err)
	}
	if !sel.Context.FromEnv() {
		fmt.Fprintf(opts.IO.ErrOut, "Using namespace %s in context %s.\n", opts.Name, sel.Context.Name)
	}
	return nil
}

func runList(ctx context.Context, opts *PlatformOptions, sel *contexts.Selection, pc *client.Client) error {
	list, err := pc.Namespaces(ctx)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		fmt.Fprintln(opts.IO.ErrOut, "You are a member of no namespace: create one with 'devtool namespace create <name>'.")
		return nil
	}
	tw := tabwriter.NewWriter(opts.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "Namespace\tStatus")
	for _, ns := range list {
		name := ns.Name
		if name == sel.Namespace {
			name += " *"
		}
		status := ns.Status
		if status == "" {
			status = "Active"
		}
		fmt.Fprintf(tw, "%s\t%s\n", name, status)
	}
	return tw.Flush()
}

func runDelete(ctx context.Context, opts *PlatformOptions, sel *contexts.Selection, pc *client.Client) error {
	ns, err := pc.Namespace(ctx, opts.Name)
	if err != nil {
		if client.IsNotFound(err) {
			return cmdutil.WithHint(fmt.Errorf("namespace %s does not exist or you are not a member: %w", opts.Name, err),
				"'devtool namespace list' shows your namespaces")
		}
		return err
	}
	if ns.Role != api.RoleOwner {
		return cmdutil.WithHint(fmt.Errorf("namespace %s: only an owner may delete it; your role is %s", opts.Name, ns.Role),
			"ask one of its owners")
	}
	// Destroy its environments with the user's own credentials, then delete it.
	target, err := opts.Target(cmdutil.KubeFlags{Context: opts.Context, Namespace: opts.Name})
	if err != nil {
		return err
	}
	eo := cmdutil.EnvFlags{}.Options(opts.WorkDir, opts.Environ)
	eo.AllowMissing = true
	env, err := cmdutil.Interruptible(ctx, func() (*environment.Environment, error) { return environment.Load(eo) })
	if err != nil {
		return fmt.Errorf("reading the environment of the current folder (its destroy commands run for its environment): %w", err)
	}
	d := &environment.Deployer{
		Env: env, Target: target, Environ: opts.Environ, Logger: opts.Logger, Getenv: opts.Getenv,
		ReplayRecorded: true,
		Out:            opts.IO.ErrOut,
		Progress:       func(s string) { fmt.Fprintln(opts.IO.ErrOut, s) },
		Warn:           func(s string) { fmt.Fprintf(opts.IO.ErrOut, "Warning: %s\n", s) },
	}
	names, err := d.DestroyAll(ctx)
	for _, n := range names {
		fmt.Fprintf(opts.IO.ErrOut, "Environment %s destroyed in namespace %s\n", n, opts.Name)
	}
	if err != nil {
		return fmt.Errorf("namespace %s was not deleted: destroying its environments failed: %w", opts.Name, err)
	}
	if err := pc.DeleteNamespace(ctx, opts.Name); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "Namespace %s is being deleted.\n", opts.Name)
	if sel.Namespace == opts.Name {
		personal := firstNonEmpty(sel.Context.Username, "default")
		if personal != opts.Name {
			if err := selectNamespace(opts, sel, personal); err != nil {
				return err
			}
			if !sel.Context.FromEnv() {
				fmt.Fprintf(opts.IO.ErrOut, "Using namespace %s in context %s.\n", personal, sel.Context.Name)
			}
		}
	}
	return nil
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
