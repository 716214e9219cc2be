// Package pipeline implements `devtool pipeline deploy|destroy|logs`: runs on the platform that clone
// a repository and deploy or destroy it as a Job in the cluster, with the user's own rights; and the
// hidden `pipeline runner` and `pipeline git` the runner image runs inside that Job.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/deploy"
	"github.com/devtool/devtool/internal/gitlocal"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/client"
	"github.com/devtool/devtool/internal/platform/runspec"
)

// NewCmd builds `devtool pipeline` and its subcommands.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pipeline",
		Short: "Deploy or destroy a repository with a job in the cluster (platform only)",
		Long: `A pipeline clones a git repository in the cluster and runs 'devtool deploy' (or 'destroy') there,
as a Kubernetes Job in the namespace, with your own rights: the platform hands the Job a short-lived
token of your account, revoked when the run ends. One run at a time per pipeline. Needs a login to a
devtool platform.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(NewDeployCmd(f, api.ActionDeploy, nil))
	cmd.AddCommand(NewDeployCmd(f, api.ActionDestroy, nil))
	cmd.AddCommand(NewLogsCmd(f, nil))
	cmd.AddCommand(newRunnerCmd(f))
	cmd.AddCommand(newGitCmd(f))
	return cmd
}

// defaultName is the pipeline's name when --name is not given: the repository's name (from
// --repository, else the current folder's origin remote), made a valid name.
func defaultName(ctx context.Context, repository, workDir string) (string, error) {
	if repository == "" {
		remote, err := gitlocal.Origin(ctx, workDir)
		if err != nil {
			return "", cmdutil.FlagErrorf("give --name: the current folder has no git origin remote to take the name from (%v)", err)
		}
		repository = remote
	}
	name := deploy.SanitizeName(gitlocal.RepoName(repository))
	if name == "" {
		return "", cmdutil.FlagErrorf("give --name: no name can be made from the repository %q", repository)
	}
	return name, nil
}

// apiMessage is the platform's own message inside err (for refusals whose text says it all).
func apiMessage(err error) (string, int) {
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Message != "" {
		return ae.Message, ae.Status
	}
	return "", 0
}

// refusal turns a refusal of the platform into the error the user sees.
func refusal(err error, ns string) error {
	msg, status := apiMessage(err)
	switch status {
	case http.StatusNotFound:
		return cmdutil.WithHint(errors.New(msg), fmt.Sprintf("'devtool namespace list' shows the namespaces you are a member of (namespace %s?)", ns))
	case http.StatusConflict, http.StatusForbidden, http.StatusBadRequest:
		return errors.New(msg)
	case http.StatusServiceUnavailable:
		return cmdutil.WithHint(errors.New(msg), "ask the platform's admin to install it with a runner image (docs/pipelines.md)")
	}
	return err
}

// checkNamespace validates --namespace when given: a Kubernetes namespace's name (a DNS label).
func checkNamespace(ns string) error {
	if ns == "" {
		return nil
	}
	if why := runspec.ValidName(ns); why != "" {
		return cmdutil.FlagErrorf("--namespace %q: %s", ns, why)
	}
	return nil
}

// checkRepository validates --repository: https, or http with a warning on w.
func checkRepository(repo string, w io.Writer) error {
	u, err := runspec.CheckRepository(repo)
	if err != nil {
		return cmdutil.FlagErrorf("--repository %q: %v", repo, err)
	}
	if u.Scheme == "http" {
		fmt.Fprintf(w, "Warning: %s is plain HTTP: the clone is neither encrypted nor authenticated, and no credentials are sent to it.\n", repo)
	}
	return nil
}
