package deploy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/labelproxy"
	"github.com/devtool/devtool/internal/manifest"
	"github.com/devtool/devtool/internal/translate"
)

// ManifestDeploy is one deploy of a devtool.yml: the deploy commands (through the labelling
// proxy), then the Compose files and endpoints of the deploy section, recorded in the state.
type ManifestDeploy struct {
	Client    *kube.Client
	Namespace string
	Name      string
	Manifest  *manifest.Manifest
	// Env is the commands' environment; Kubeconfig, KubeCacheDir and EnvFile are set by Run.
	Env   CommandEnv
	Shell string // "bash" or "sh"
	// Compose is deploy.compose and deploy.endpoints translated (nil when there are none).
	Compose *translate.Result
	Wait    bool
	// Out receives the commands' output, live (stderr); Progress the steps.
	Out      io.Writer
	Progress func(string)
	Warn     func(string)
	Logger   *slog.Logger
}

// Run deploys. ctx carries the --timeout deadline and Ctrl-C.
func (d *ManifestDeploy) Run(ctx context.Context) (err error) {
	if d.Progress == nil {
		d.Progress = func(string) {}
	}
	if d.Out == nil {
		d.Out = io.Discard
	}
	cs := d.Client.Clientset
	if _, err := cs.CoreV1().Namespaces().Get(ctx, d.Namespace, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace %q does not exist", d.Namespace)
		}
		if !apierrors.IsForbidden(err) {
			return fmt.Errorf("checking namespace %q: %w", d.Namespace, err)
		}
	}
	states := &StateStore{Clientset: cs, Namespace: d.Namespace}
	prev, err := states.Get(ctx, d.Name)
	if err != nil {
		return err
	}
	prune := PruneAfterManifest(prev, hasObjects(d.Compose))
	// Until this deploy ends well, the record keeps saying there may be Compose objects to prune.
	st := &State{Name: d.Name, Status: StatusProgressing, Manifest: string(d.Manifest.Raw), ManifestFile: d.Manifest.File,
		Branch: d.Env.GitBranch, ComposeObjects: hasObjects(d.Compose) || prune}
	if err := states.Save(ctx, st); err != nil {
		return err
	}
	output := NewTailBuffer(maxOutputBytes)
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		st.Status, st.Output = StatusDeployed, output.String()
		if err != nil {
			st.Status, st.Error = StatusError, err.Error()
		}
		if serr := states.Save(sctx, st); serr != nil && err == nil {
			err = serr
		}
	}()

	if len(d.Manifest.Deploy.Commands) > 0 {
		err := RunManifestCommands(ctx, CommandsRun{Client: d.Client, Namespace: d.Namespace, Name: d.Name,
			Env: d.Env, Shell: d.Shell, Dir: d.Manifest.Dir, Out: d.Out, Output: output, Logger: d.Logger, Warn: d.Warn},
			d.Manifest.Deploy.Commands)
		if err != nil {
			return err
		}
	}
	cd := &ComposeDeploy{Client: d.Client, Namespace: d.Namespace, Name: d.Name, Result: d.Compose,
		Wait: d.Wait, Progress: d.Progress, NoState: true}
	if hasObjects(d.Compose) {
		return cd.Run(ctx)
	}
	if !prune {
		// Objects labelled with this environment's name now are the commands' own (a command may
		// itself run devtool deploy -f compose.yml): not ours to remove.
		return nil
	}
	// The previous deploy applied a compose or endpoints part this one no longer has: what it
	// made goes.
	if err := cd.PruneAll(ctx); err != nil {
		return err
	}
	st.ComposeObjects = false
	return nil
}

// PruneAfterManifest decides whether a deploy of a devtool.yml removes the Compose and endpoints
// objects of earlier deploys (PruneAll): only when it has no such part itself (hasObjects false)
// and the previous deploy recorded in prev applied some. Objects labelled with the environment's
// name are otherwise left alone: the deploy commands may have made them (a nested devtool deploy
// of a Compose file labels its objects the same way).
func PruneAfterManifest(prev *State, hasObjects bool) bool {
	return !hasObjects && prev != nil && prev.ComposeObjects
}

// hasObjects tells whether a deploy section's translation has anything to apply.
func hasObjects(r *translate.Result) bool { return r != nil && len(r.Objects) > 0 }

// CommandsRun says how to run a manifest's commands.
type CommandsRun struct {
	Client          *kube.Client
	Namespace, Name string
	Env             CommandEnv
	Shell, Dir      string
	Out             io.Writer
	Output          *TailBuffer
	Logger          *slog.Logger
	// Warn receives what the user must know (a write the labelling proxy could not label).
	Warn func(string)
	// Phase names the run in its errors: "deploy" (the default) or "destroy".
	Phase string
}

// RunManifestCommands runs commands in order behind a labelling proxy started for this run
// (objects they create get dev.devtool/deployed-by=<Name>, cluster-scoped ones also
// dev.devtool/deployed-namespace=<Namespace>), with the DEVTOOL_ENV handoff.
func RunManifestCommands(ctx context.Context, o CommandsRun, cmds []manifest.Command) error {
	tmp, err := os.MkdirTemp("", "devtool-run-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	pctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	p, err := labelproxy.Start(pctx, labelproxy.Options{Upstream: o.Client.Config,
		Labels:        map[string]string{kube.LabelDeployedBy: o.Name},
		ClusterLabels: map[string]string{kube.LabelDeployedNamespace: o.Namespace},
		Logger:        o.Logger, Warn: o.Warn})
	if err != nil {
		stop()
		return fmt.Errorf("starting the labelling proxy: %w", err)
	}
	defer func() {
		stop()
		_ = p.Wait()
	}()
	kc := filepath.Join(tmp, "kubeconfig")
	if err := p.WriteKubeconfig(kc, o.Namespace); err != nil {
		return err
	}
	cache := filepath.Join(tmp, "kube-cache")
	envFile := filepath.Join(tmp, "devtool.env")
	env := o.Env
	env.Kubeconfig, env.KubeCacheDir, env.EnvFile = kc, cache, envFile
	r := &CommandRunner{Shell: o.Shell, Dir: o.Dir, Env: env.Build(), EnvFile: envFile, Out: o.Out, Output: o.Output, Phase: o.Phase}
	err = r.Run(ctx, cmds)
	var ce *CommandError
	if errors.As(err, &ce) && o.Output != nil {
		fmt.Fprintf(o.Output, "%s\n", ce.Error())
	}
	return err
}
