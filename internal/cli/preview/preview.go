// Package preview implements `devtool preview deploy|destroy|endpoints|list`: preview environments
// on the platform, each in a namespace of its own, deployed by a pipeline run.
package preview

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/deploy"
	"github.com/devtool/devtool/internal/gitlocal"
	"github.com/devtool/devtool/internal/iostreams"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/client"
	"github.com/devtool/devtool/internal/platform/runspec"
	"github.com/devtool/devtool/internal/platform/store"
)

// NewCmd builds `devtool preview` and its subcommands.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "preview",
		Short: "Preview environments of a branch or pull request (platform only)",
		Long: `A preview environment deploys a branch (usually a pull request's) into a namespace of its own that the
platform owns, with a pipeline run. Personal previews are seen only by their creator; global ones by
every user (read only), and only admins create or destroy them. A preview sees only its own secrets
(the preview-scoped stored secrets and its namespace's), never a developer's. Previews clean
themselves up: a pull request's closing (webhook) and an idle time-to-live destroy them, and an idle
preview is scaled to zero until a request or a command wakes it. Needs a login to a devtool platform.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(NewDeployCmd(f, nil), NewDestroyCmd(f, nil), NewEndpointsCmd(f, nil), NewListCmd(f, nil))
	return cmd
}

// Common are the inputs every preview command has.
type Common struct {
	IO      *iostreams.IOStreams
	Getenv  func(string) string
	WorkDir string
	Context string // --context
}

func (c *Common) platform(command string) (*cmdutil.Platform, error) {
	return cmdutil.RequirePlatform(c.Getenv, cmdutil.KubeFlags{Context: c.Context}, command)
}

// named is platform with the preview's name: name, else the one of the current folder's repository
// and branch.
func (c *Common) named(ctx context.Context, command, name string) (*cmdutil.Platform, string, error) {
	p, err := c.platform(command)
	if err != nil {
		return nil, "", err
	}
	if name == "" {
		if name, err = currentName(ctx, c.WorkDir); err != nil {
			p.Close()
			return nil, "", err
		}
	}
	return p, name, nil
}

func addContextFlag(cmd *cobra.Command, c *Common) {
	cmd.Flags().StringVarP(&c.Context, "context", "c", "", "platform context to use (default: the current context)")
}

// nameArg checks the optional [name] argument.
func nameArg(args []string) (string, error) {
	switch len(args) {
	case 0:
		return "", nil
	case 1:
		if why := store.ValidNamespaceName(args[0]); why != "" {
			return "", cmdutil.FlagErrorf("preview name %q: %s (it names the preview's namespace)", args[0], why)
		}
		return args[0], nil
	}
	return "", cmdutil.FlagErrorf("give at most one preview name")
}

// GenerateName makes a preview's name of a repository and a branch: "<repository>-<branch>" as a
// DNS label, shortened with a hash when longer than 63 characters, and prefixed "preview-" when it
// would start like a reserved namespace (kube-, devtool-).
func GenerateName(repository, branch string) string {
	full := deploy.SanitizeName(gitlocal.RepoName(repository)) + "-" + deploy.SanitizeName(branch) // each at most 63
	name := deploy.SanitizeName(full)
	if strings.HasPrefix(name, "kube-") || strings.HasPrefix(name, "devtool-") || name == "default" || name == "" {
		name = deploy.SanitizeName("preview-" + name)
	}
	if len(name) > 63 || len(full) > 63 {
		h := fnv.New32a()
		h.Write([]byte(repository + "\x00" + branch))
		tag := fmt.Sprintf("-%08x", h.Sum32())
		name = strings.TrimRight(name[:min(len(name), 63-len(tag))], "-") + tag
	}
	return name
}

// currentName is the name of the preview of the current folder's repository and branch.
func currentName(ctx context.Context, workDir string) (string, error) {
	repo, branch, err := current(ctx, workDir)
	if err != nil {
		return "", cmdutil.FlagErrorf("give the preview's name: %v", err)
	}
	return GenerateName(repo, branch), nil
}

// current is the current folder's origin remote (as https) and branch.
func current(ctx context.Context, workDir string) (repo, branch string, err error) {
	remote, err := gitlocal.Origin(ctx, workDir)
	if err != nil {
		return "", "", fmt.Errorf("the current folder has no git origin remote (%v)", err)
	}
	if repo, _, err = gitlocal.HTTPS(remote); err != nil {
		return "", "", err
	}
	if branch, err = gitlocal.Branch(ctx, workDir); err != nil {
		return "", "", fmt.Errorf("no current branch (%v)", err)
	}
	return repo, branch, nil
}

// refusal turns a refusal of the platform into the error the user sees.
func refusal(err error, name string) error {
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Message == "" {
		return err
	}
	switch ae.Status {
	case http.StatusNotFound:
		return cmdutil.WithHint(errors.New(ae.Message), "'devtool preview list' shows the previews you can see")
	case http.StatusConflict, http.StatusForbidden, http.StatusBadRequest:
		return errors.New(ae.Message)
	case http.StatusServiceUnavailable:
		return cmdutil.WithHint(errors.New(ae.Message), "ask the platform's admin to install it with a runner image (docs/pipelines.md)")
	}
	return err
}

// DeployOptions are the inputs of `preview deploy`.
type DeployOptions struct {
	Common
	Name, Branch, Repository, Scope, SourceURL, File string
	Vars                                             []string
	Wait, Public                                     bool
	Timeout                                          time.Duration

	vars []api.Var // Vars checked
}

// NewDeployCmd builds `preview deploy [name]`. runF replaces run in tests.
func NewDeployCmd(f *cmdutil.Factory, runF func(context.Context, *DeployOptions) error) *cobra.Command {
	opts := &DeployOptions{Common: Common{IO: f.IOStreams, Getenv: f.Getenv, WorkDir: f.WorkDir}}
	cmd := &cobra.Command{
		Use:   "deploy [name]",
		Short: "Deploy a preview environment (platform only)",
		Long: `Deploy (or deploy again) a preview: the platform makes its namespace, named after the preview, and
runs a pipeline there that clones the repository's branch and deploys it with your rights. The name
defaults to one made of the repository's and the branch's names. A global preview needs an admin.`,
		Example: `  devtool preview deploy                       # the current branch of the current folder's repository
  devtool preview deploy pr-42 --branch feature/login --sourceUrl https://github.com/acme/shop/pull/42 --wait
  devtool preview deploy staging --scope global --repository https://github.com/acme/shop --branch main`,
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if opts.Name, err = nameArg(args); err != nil {
				return err
			}
			switch opts.Scope {
			case api.PreviewPersonal, api.PreviewGlobal:
			default:
				return cmdutil.FlagErrorf("--scope must be personal or global, got %q", opts.Scope)
			}
			if opts.vars, err = cmdutil.CheckRunFlags(opts.Timeout, opts.Vars, opts.Branch, opts.File); err != nil {
				return err
			}
			if opts.Repository != "" {
				if _, err := runspec.CheckRepository(opts.Repository); err != nil {
					return cmdutil.FlagErrorf("--repository %q: %v", opts.Repository, err)
				}
			}
			if opts.SourceURL != "" {
				if err := runspec.CheckSourceURL(opts.SourceURL); err != nil {
					return cmdutil.FlagErrorf("--sourceUrl %q: %v", opts.SourceURL, err)
				}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runDeploy(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	addContextFlag(cmd, &opts.Common)
	fl.StringVar(&opts.Branch, "branch", "", "the branch to deploy (default: the current branch)")
	fl.StringVar(&opts.Repository, "repository", "", "the repository's https URL (default: the current folder's origin remote)")
	fl.StringVar(&opts.Scope, "scope", api.PreviewPersonal, "personal (only you) or global (every user; admins only)")
	fl.StringVar(&opts.SourceURL, "sourceUrl", "", "the https URL of the pull or merge request (its closing destroys the preview)")
	fl.StringVarP(&opts.File, "file", "f", "", "the devtool.yml or Compose file, relative to the repository")
	fl.StringArrayVar(&opts.Vars, "var", nil, "a variable NAME=value for the deploy (repeatable)")
	fl.BoolVar(&opts.Wait, "wait", false, "stream the deploy's log and exit with its result")
	fl.DurationVar(&opts.Timeout, "timeout", 5*time.Minute, "how long the deploy may take (the cluster stops it then)")
	fl.BoolVar(&opts.Public, "public", false, "make its endpoints public (by default only users who may see the preview reach them, signed in)")
	return cmd
}

func runDeploy(ctx context.Context, opts *DeployOptions) error {
	p, err := opts.platform("preview deploy")
	if err != nil {
		return err
	}
	defer p.Close()
	repo, branch := opts.Repository, opts.Branch
	if repo == "" || branch == "" {
		cr, cb, err := current(ctx, opts.WorkDir)
		switch {
		case err != nil && repo == "":
			return cmdutil.FlagErrorf("give --repository: %v", err)
		case err != nil:
			return cmdutil.FlagErrorf("give --branch: %v", err)
		}
		if repo == "" {
			repo = cr
		}
		if branch == "" {
			branch = cb
		}
	}
	if _, err := runspec.CheckRepository(repo); err != nil {
		return cmdutil.FlagErrorf("--repository %q: %v", repo, err)
	}
	if strings.HasPrefix(repo, "http://") {
		fmt.Fprintf(opts.IO.ErrOut, "Warning: %s is plain HTTP: the clone is neither encrypted nor authenticated, and no credentials are sent to it.\n", repo)
	}
	name := opts.Name
	if name == "" {
		name = GenerateName(repo, branch)
	}
	req := api.PreviewRequest{Name: name, Repository: repo, Branch: branch, Scope: opts.Scope, SourceURL: opts.SourceURL,
		File: opts.File, Public: opts.Public, TimeoutSeconds: int64(opts.Timeout.Round(time.Second) / time.Second), Vars: opts.vars}
	pv, created, err := p.Client.CreatePreview(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(opts.IO.ErrOut, "Interrupted while the platform was starting preview %s: its deploy may have started; 'devtool preview list' shows it, 'devtool pipeline logs --name %s --namespace %s -f' follows its run.\n", name, name, name)
			return ctx.Err()
		}
		return refusal(err, name)
	}
	verb := "Deploying preview"
	if !created {
		verb = "Deploying preview again:"
	}
	fmt.Fprintf(opts.IO.ErrOut, "%s %s (%s) of %s, branch %s, in namespace %s.\n", verb, name, pv.Scope, repo, branch, pv.Namespace)
	if pv.Run == nil {
		return fmt.Errorf("the platform started no run for preview %s", name)
	}
	if !opts.Wait {
		fmt.Fprintf(opts.IO.ErrOut, "Follow it with: devtool pipeline logs --name %s --namespace %s -f\n", name, pv.Namespace)
		return nil
	}
	done, err := cmdutil.FollowRun(ctx, opts.IO, p.Client, pv.Run, opts.Timeout)
	if err != nil {
		return err
	}
	if err := cmdutil.RunResult(done); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "Preview %s deployed.\n", name)
	eps, err := p.Client.PreviewEndpoints(ctx, name)
	if err != nil {
		return refusal(err, name)
	}
	return writeEndpoints(opts.IO.Out, "", name, eps)
}

// DestroyOptions are the inputs of `preview destroy`.
type DestroyOptions struct {
	Common
	Name string
}

// NewDestroyCmd builds `preview destroy [name]`. runF replaces run in tests.
func NewDestroyCmd(f *cmdutil.Factory, runF func(context.Context, *DestroyOptions) error) *cobra.Command {
	opts := &DestroyOptions{Common: Common{IO: f.IOStreams, Getenv: f.Getenv, WorkDir: f.WorkDir}}
	cmd := &cobra.Command{
		Use:   "destroy [name]",
		Short: "Destroy a preview environment (platform only)",
		Long: `Destroy a preview: a pipeline run destroys it (the manifest's destroy commands run, its log is shown
here), then the platform deletes its namespace. A global preview needs an admin. The name defaults to
the one made of the current folder's repository and branch.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if opts.Name, err = nameArg(args); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runDestroy(cmd.Context(), opts)
		},
	}
	addContextFlag(cmd, &opts.Common)
	return cmd
}

func runDestroy(ctx context.Context, opts *DestroyOptions) error {
	p, name, err := opts.named(ctx, "preview destroy", opts.Name)
	if err != nil {
		return err
	}
	defer p.Close()
	pv, err := p.Client.DestroyPreview(ctx, name)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(opts.IO.ErrOut, "Interrupted while asking the platform to destroy preview %s: its destroy may have started; 'devtool preview list' shows its state.\n", name)
			return ctx.Err()
		}
		return refusal(err, name)
	}
	var runErr error
	if pv.Run != nil && pv.Run.Action == api.ActionDestroy {
		fmt.Fprintf(opts.IO.ErrOut, "Destroying preview %s: run #%d.\n", name, pv.Run.Number)
		done, err := cmdutil.FollowRun(ctx, opts.IO, p.Client, pv.Run, time.Duration(pv.Run.TimeoutSeconds)*time.Second)
		if err != nil {
			return err
		}
		runErr = cmdutil.RunResult(done)
	}
	// the platform deletes the namespace once the run ended: wait until the preview is gone
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		_, err := p.Client.Preview(wctx, name)
		if client.IsNotFound(err) {
			break
		}
		if wctx.Err() != nil {
			if ctx.Err() != nil {
				fmt.Fprintf(opts.IO.ErrOut, "Stopped waiting: the platform goes on removing preview %s; 'devtool preview list' shows when it is gone.\n", name)
				return ctx.Err()
			}
			return fmt.Errorf("preview %s is still being removed after 2m: 'devtool preview list' shows when it is gone", name)
		}
		select {
		case <-wctx.Done():
		case <-time.After(time.Second):
		}
	}
	if runErr != nil {
		return fmt.Errorf("preview %s is gone (its namespace deleted), but its destroy failed: %w", name, runErr)
	}
	fmt.Fprintf(opts.IO.ErrOut, "Preview %s destroyed.\n", name)
	return nil
}

// EndpointsOptions are the inputs of `preview endpoints`.
type EndpointsOptions struct {
	Common
	Name   string
	Output string
}

// NewEndpointsCmd builds `preview endpoints [name]`. runF replaces run in tests.
func NewEndpointsCmd(f *cmdutil.Factory, runF func(context.Context, *EndpointsOptions) error) *cobra.Command {
	opts := &EndpointsOptions{Common: Common{IO: f.IOStreams, Getenv: f.Getenv, WorkDir: f.WorkDir}}
	cmd := &cobra.Command{
		Use:   "endpoints [name]",
		Short: "List the endpoints of a preview environment (platform only)",
		Long: `List the URLs of a preview's endpoints; -o json prints a JSON list of them (for a CI step that posts
them on the pull request). A sleeping preview is woken.`,
		Example: `  devtool preview endpoints pr-42
  devtool preview endpoints pr-42 -o json | jq -r '.[0]'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if opts.Name, err = nameArg(args); err != nil {
				return err
			}
			if err := cmdutil.CheckEndpointFormat(opts.Output); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runEndpoints(cmd.Context(), opts)
		},
	}
	addContextFlag(cmd, &opts.Common)
	cmd.Flags().StringVarP(&opts.Output, "output", "o", "", "output format: json or md (default: a list)")
	return cmd
}

func runEndpoints(ctx context.Context, opts *EndpointsOptions) error {
	p, name, err := opts.named(ctx, "preview endpoints", opts.Name)
	if err != nil {
		return err
	}
	defer p.Close()
	eps, err := p.Client.PreviewEndpoints(ctx, name)
	if err != nil {
		return refusal(err, name)
	}
	return writeEndpoints(opts.IO.Out, opts.Output, name, eps)
}

func writeEndpoints(w io.Writer, format, name string, eps []api.Endpoint) error {
	list := cmdutil.EndpointList{Of: "preview " + name, None: "There are no endpoints for preview " + name}
	for _, e := range eps {
		list.Items = append(list.Items, cmdutil.Endpoint{URL: e.URL})
	}
	return list.Write(w, format)
}

// ListOptions are the inputs of `preview list`.
type ListOptions struct {
	Common
	Now func() time.Time
}

// NewListCmd builds `preview list`. runF replaces run in tests.
func NewListCmd(f *cmdutil.Factory, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{Common: Common{IO: f.IOStreams, Getenv: f.Getenv, WorkDir: f.WorkDir}, Now: time.Now}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List your preview environments and the global ones (platform only)",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return cmdutil.FlagErrorf("preview list takes no arguments")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runList(cmd.Context(), opts)
		},
	}
	addContextFlag(cmd, &opts.Common)
	return cmd
}

func runList(ctx context.Context, opts *ListOptions) error {
	p, err := opts.platform("preview list")
	if err != nil {
		return err
	}
	defer p.Close()
	list, err := p.Client.Previews(ctx)
	if err != nil {
		return refusal(err, "")
	}
	if len(list) == 0 {
		fmt.Fprintln(opts.IO.ErrOut, "There are no preview environments you can see: deploy one with 'devtool preview deploy'.")
		return nil
	}
	tw := tabwriter.NewWriter(opts.IO.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "Name\tScope\tStatus\tBranch\tAge")
	for _, pv := range list {
		branch := pv.Branch
		if branch == "" {
			branch = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", pv.Name, pv.Scope, pv.Status, branch, age(opts.Now().Sub(pv.Created)))
	}
	return tw.Flush()
}

// age is a duration as kubectl shows ages: 45s, 12m, 3h, 5d.
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int(d/time.Second), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}
