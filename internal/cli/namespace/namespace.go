// Package namespace implements `devtool namespace` and its subcommands. `use` and the interactive
// selection work on any cluster (through the platform's API on a platform context); create, delete,
// list, share and unshare manage namespaces through the platform and only exist on platform contexts.
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
	"github.com/devtool/devtool/internal/platform/client"
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
otherwise use 'devtool namespace use <name>'). Creating, deleting, listing and sharing namespaces
needs a platform context.`,
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
	for _, verb := range []string{"create", "delete", "list", "share", "unshare"} {
		cmd.AddCommand(newPlatformCmd(f, verb, nil))
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
	if sel, err := r.Select(contexts.Flags{Context: opts.Context}); err == nil && sel.Context != nil && sel.Context.IsDevtool {
		return usePlatform(ctx, opts, sel)
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

// usePlatform selects a namespace of a platform context: the choices and the check come from the
// platform's API (RBAC cannot limit listing namespaces to a user's own).
func usePlatform(ctx context.Context, opts *Options, sel *contexts.Selection) error {
	pc, err := contexts.PlatformClient(sel.Context)
	if err != nil {
		return err
	}
	defer pc.Close()
	if opts.Name == "" {
		list, err := pc.Namespaces(ctx)
		if err != nil {
			return err
		}
		if len(list) == 0 {
			return cmdutil.WithHint(errors.New("you are a member of no namespace"), "create one with 'devtool namespace create <name>'")
		}
		labels, def := make([]string, len(list)), -1
		for i, n := range list {
			labels[i] = n.Name
			if n.Name == sel.Namespace {
				labels[i], def = n.Name+" (current)", i
			}
		}
		i, err := prompt.Select(ctx, opts.IO.In, opts.IO.ErrOut, fmt.Sprintf("Select a namespace of context %s:", sel.Context.Name), labels, def)
		if err != nil {
			return err
		}
		opts.Name = list[i].Name
	} else if _, err := pc.Namespace(ctx, opts.Name); err != nil {
		if client.IsNotFound(err) {
			return cmdutil.WithHint(fmt.Errorf("namespace %s does not exist or you are not a member: %w", opts.Name, err),
				"'devtool namespace list' shows yours; 'devtool namespace create <name>' makes one")
		}
		return err
	}
	popts := &PlatformOptions{IO: opts.IO, Getenv: opts.Getenv}
	if err := selectNamespace(popts, sel, opts.Name); err != nil {
		return err
	}
	if !sel.Context.FromEnv() {
		fmt.Fprintf(opts.IO.ErrOut, "Using namespace %s in context %s.\n", opts.Name, sel.Context.Name)
	}
	return nil
}
