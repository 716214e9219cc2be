// Package namespace implements `devtool namespace` and its subcommands. `use` and the interactive
// selection work on any cluster; create, delete and list manage namespaces through the platform and
// only exist on clusters with the platform installed.
package namespace

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/devtool/devtool/internal/cli/context/prompt"
	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/iostreams"
)

// Options are the inputs of `devtool namespace` and `devtool namespace use`.
type Options struct {
	IO     *iostreams.IOStreams
	Getenv func(string) string
	// Context is the --context flag: whose namespace to set (default: the current context).
	Context string
	Name    string // the namespace; empty: prompt
}

// NewCmd builds `devtool namespace` with its subcommands. runF replaces run in tests of flag parsing.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Getenv: f.Getenv}
	cmd := &cobra.Command{
		Use:     "namespace",
		Aliases: []string{"ns"},
		Short:   "Select the namespace devtool commands use",
		Long: `Select, from a list, the default namespace of the current context (on a terminal only;
otherwise use 'devtool namespace use <name>'). Creating namespaces needs the platform.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.Context, "context", "c", "", "context whose namespace to set (default: the current context)")
	cmd.AddCommand(NewUseCmd(f, nil))
	for _, verb := range []string{"create", "delete", "list"} {
		cmd.AddCommand(newPlatformCmd(f, verb))
	}
	return cmd
}

// NewUseCmd builds `devtool namespace use`.
func NewUseCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Getenv: f.Getenv}
	cmd := &cobra.Command{
		Use:   "use <name>",
		Short: "Set the default namespace of the current context",
		Long: `Set the default namespace of the current context (or of --context). The namespace must exist
and be reachable with the context's credentials: devtool reads the namespace, and when reading
namespaces is forbidden (common for users bound to a few namespaces) it accepts the namespace if
it may list pods in it. The choice is stored in the devtool context; the kubeconfig is not modified.`,
		Example: `  devtool namespace use web`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return cmdutil.FlagErrorf("give the namespace: devtool namespace use <name>")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			if err := contexts.ValidateNamespace(opts.Name); err != nil {
				return cmdutil.FlagErrorf("%v", err)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.Context, "context", "c", "", "context whose namespace to set (default: the current context)")
	return cmd
}

func run(ctx context.Context, opts *Options) error {
	r := &contexts.Resolver{Getenv: opts.Getenv}
	if opts.Name == "" && !opts.IO.CanPrompt() {
		return cmdutil.FlagErrorf("no terminal to choose a namespace on: give it, as in 'devtool namespace use <name>'")
	}
	// The namespace flag is left empty: the check below is about opts.Name, not the current one.
	t, err := r.Resolve(contexts.Flags{Context: opts.Context})
	if err != nil {
		return err
	}
	if opts.Name == "" {
		if opts.Name, err = choose(ctx, opts.IO, t); err != nil {
			return err
		}
	}
	if err := CheckReachable(ctx, t.Kube.Clientset, opts.Name); err != nil {
		return fmt.Errorf("context %s: %w", t.ContextName, err)
	}
	store, err := r.Store()
	if err != nil {
		return err
	}
	store.Notice = func(s string) { fmt.Fprintf(opts.IO.ErrOut, "Note: %s\n", s) }
	if err := contexts.SetNamespace(store, t.ContextName, opts.Name); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "Using namespace %s in context %s.\n", opts.Name, t.ContextName)
	return nil
}

// CheckReachable checks that namespace ns exists and the credentials can work in it: a Get of the
// namespace, or, when that is forbidden, a List of pods in it (a user bound by a RoleBinding to a
// namespace usually cannot read the Namespace object itself).
func CheckReachable(ctx context.Context, cs kubernetes.Interface, ns string) error {
	_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return fmt.Errorf("namespace %q does not exist", ns)
	case !apierrors.IsForbidden(err):
		return fmt.Errorf("checking namespace %q: %w", ns, err)
	}
	_, lerr := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
	switch {
	case lerr == nil:
		return nil
	case apierrors.IsForbidden(lerr):
		return fmt.Errorf("namespace %q is not reachable: its credentials may neither read the namespace nor list pods in it", ns)
	default:
		return fmt.Errorf("checking namespace %q: %w", ns, lerr)
	}
}

func choose(ctx context.Context, io *iostreams.IOStreams, t *cmdutil.Target) (string, error) {
	list, err := t.Kube.Clientset.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if apierrors.IsForbidden(err) {
		return "", cmdutil.WithHint(fmt.Errorf("context %s may not list namespaces, so there is nothing to choose from", t.ContextName),
			"give the namespace: devtool namespace use <name>")
	}
	if err != nil {
		return "", fmt.Errorf("listing namespaces in context %s: %w", t.ContextName, err)
	}
	var names []string
	for _, n := range list.Items {
		if n.Status.Phase != corev1.NamespaceTerminating {
			names = append(names, n.Name)
		}
	}
	if len(names) == 0 {
		return "", errors.New("the cluster has no namespaces to choose from")
	}
	sort.Strings(names)
	labels, def := make([]string, len(names)), -1
	for i, n := range names {
		labels[i] = n
		if n == t.Namespace {
			labels[i], def = n+" (current)", i
		}
	}
	i, err := prompt.Select(ctx, io.In, io.ErrOut, fmt.Sprintf("Select a namespace of context %s:", t.ContextName), labels, def)
	if err != nil {
		return "", err
	}
	return names[i], nil
}

// ErrPlatformOnly is the spec's error for namespace create, delete and list off the platform.
var ErrPlatformOnly = errors.New("only available on clusters with the platform installed")

// newPlatformCmd builds create, delete or list: they manage namespaces through the platform.
func newPlatformCmd(f *cmdutil.Factory, verb string) *cobra.Command {
	var ctxFlag string
	use, short, nargs := verb+" <name>", "", 1
	switch verb {
	case "create":
		short = "Create a namespace and select it (platform only)"
	case "delete":
		short = "Delete a namespace, running the manifest's destroy commands (platform only)"
	case "list":
		use, short, nargs = "list", "List your namespaces; the current one is marked with * (platform only)", 0
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != nargs {
				if nargs == 0 {
					return cmdutil.FlagErrorf("namespace list takes no arguments")
				}
				return cmdutil.FlagErrorf("give the namespace: devtool namespace %s <name>", verb)
			}
			return nil
		},
		RunE: func(*cobra.Command, []string) error {
			return platformOnly(f.Getenv, verb, ctxFlag)
		},
	}
	cmd.Flags().StringVarP(&ctxFlag, "context", "c", "", "context to use (default: the current context)")
	return cmd
}

// platformOnly fails with the spec's message unless the context (--context, else the current devtool
// context) is a platform context; on a platform context it says the platform client is not in this
// build. Only the context store is read: a cluster without the platform needs no connection to say so.
func platformOnly(getenv func(string) string, verb, ctxFlag string) error {
	store, err := (&contexts.Resolver{Getenv: getenv}).Store()
	if err != nil {
		return err
	}
	cfg, err := store.Load()
	if err != nil {
		return err
	}
	name := ctxFlag
	if name == "" {
		name = cfg.CurrentContext
	}
	if c := cfg.Contexts[name]; c != nil && c.IsDevtool {
		return fmt.Errorf("namespace %s on platform context %s: %w", verb, name, contexts.ErrPlatformUnavailable)
	}
	which := "no platform context is selected"
	if name != "" {
		which = fmt.Sprintf("the context %s is a plain Kubernetes context", name)
	}
	return cmdutil.WithHint(fmt.Errorf("namespace %s is %w; %s", verb, ErrPlatformOnly, which),
		"on this cluster, select an existing namespace with 'devtool namespace use <name>' and manage namespaces with kubectl")
}
