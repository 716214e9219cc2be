package environment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/devtool/devtool/internal/build"
	"github.com/devtool/devtool/internal/compose"
	"github.com/devtool/devtool/internal/composeenv"
	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/deploy"
	"github.com/devtool/devtool/internal/manifest"
	"github.com/devtool/devtool/internal/translate"
)

// Deployer deploys and destroys one environment on one target. It never prints: command output
// goes to Out, steps to Progress and warnings to Warn, all supplied by the caller.
type Deployer struct {
	Env    *Environment
	Target *contexts.Target

	Environ map[string]string // the shell environment (commands, interpolation)
	// Secrets are the platform's stored secrets (nil off a platform): the third source of ${NAME}
	// in the Compose files and dependencies this deploy loads, and in the deploy and destroy
	// commands' environment below .env and the shell. Never printed: the caller masks them.
	Secrets map[string]string
	Getenv  func(string) string // for the builder selection
	Logger  *slog.Logger

	Wait    bool
	Timeout time.Duration // 0: no deadline beyond ctx
	Force   bool          // deploy --build: rebuild every image with a build section
	// DryRun changes nothing and runs no command (only a read-only `git rev-parse`): a Compose file is translated (Result.Objects); a
	// devtool.yml's compose and endpoints parts are translated and what its deploy would do is
	// described (Result.Plan). No image is built, pushed or looked up in a registry.
	DryRun       bool
	Vars         map[string]string
	Shell        string // "bash" (default) or "sh"
	Dependencies bool   // deploy dependencies even when already deployed
	Volumes      bool   // destroy: also PVCs
	// ReplayRecorded: DestroyAll runs the destroy commands of the environments deployed from other
	// folders too, from the devtool.yml their state records (namespace delete).
	ReplayRecorded bool
	// AllowOutsideVolumes lets host volumes from outside the project folder be baked into images,
	// and the Compose files and dependencies it loads name env files, build contexts, Dockerfiles
	// and build secrets outside their project folder (--allow-outside-volumes).
	AllowOutsideVolumes bool

	// NewBuilder picks the builder the first time something is built; nil uses build.Select.
	NewBuilder func(context.Context) (build.Builder, error)
	// Out receives the deploy commands' output and build progress, live.
	Out io.Writer
	// Progress receives one line per step; Warn what the user should know.
	Progress func(string)
	Warn     func(string)

	seen map[string]bool // environments deployed in this run (dependency cycles stop)
}

// DeployResult is what a deploy produced.
type DeployResult struct {
	// Objects are the translated objects (a dry run prints them).
	Objects *translate.Result
	// URLs are the public endpoints, in order.
	URLs []string
	// Plan is, for a dry run of a devtool.yml, what the deploy would do besides applying Objects
	// (images, dependencies, variables and commands, secrets masked), one line each.
	Plan []string
}

// DestroyResult says what destroy found.
type DestroyResult struct {
	// Nothing is true when the environment had no state and no objects: nothing was done.
	Nothing bool
}

func (d *Deployer) defaults() {
	if d.Out == nil {
		d.Out = io.Discard
	}
	if d.Progress == nil {
		d.Progress = func(string) {}
	}
	if d.Warn == nil {
		d.Warn = func(string) {}
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Shell == "" {
		d.Shell = "bash"
	}
	if d.seen == nil {
		d.seen = map[string]bool{}
	}
	if d.NewBuilder == nil {
		t := d.Target
		d.NewBuilder = func(ctx context.Context) (build.Builder, error) {
			return build.Select(ctx, build.SelectOptions{Hosted: t.Hosted,
				ContextBuilder: t.Builder, Getenv: d.Getenv, Logger: d.Logger, Warn: d.Warn})
		}
	}
}

// Deploy deploys the environment: a Compose file is translated and applied in depends_on order;
// a devtool.yml deploys its dependencies, builds its build section, runs its commands behind the
// labelling proxy and applies deploy.compose and deploy.endpoints, under the environment's lock.
func (d *Deployer) Deploy(ctx context.Context) (*DeployResult, error) {
	d.defaults()
	// The platform registry's credentials for every image check, push and derived image.
	ctx = build.WithRegistryAuth(ctx, d.Target.RegistryAuth)
	if !d.Env.Found() {
		return nil, fmt.Errorf("no devtool.yml or Compose file in %s", d.Env.Dir)
	}
	for _, w := range d.Env.Warnings {
		d.Warn(w)
	}
	if d.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.Timeout)
		defer cancel()
	}
	if d.Env.IsCompose() {
		return d.deployCompose(ctx)
	}
	if d.DryRun {
		return d.dryRunManifest(ctx)
	}
	return d.deployManifest(ctx)
}

func (d *Deployer) deployCompose(ctx context.Context) (*DeployResult, error) {
	env, t := d.Env.Compose, d.Target
	err := env.ResolveImages(ctx, composeenv.ImageOptions{
		Registry: t.Registry, Namespace: t.Namespace, Force: d.Force, DryRun: d.DryRun,
		Progress: d.Out, Warn: d.Warn, NewBuilder: d.NewBuilder, AllowOutside: d.AllowOutsideVolumes,
	})
	if err != nil {
		return nil, err
	}
	res, err := translate.TranslateContext(ctx, env.Project, translateOptions(d.Env.Name, t))
	if err != nil {
		return nil, err
	}
	for _, w := range res.Warnings {
		d.Warn(w)
	}
	out := &DeployResult{Objects: res}
	for _, e := range res.Endpoints {
		if e.URL != "" {
			out.URLs = append(out.URLs, e.URL)
		}
	}
	if d.DryRun {
		return out, nil
	}
	cd := &deploy.ComposeDeploy{
		Client: t.Kube, Namespace: t.Namespace, Name: d.Env.Name, Result: res,
		Manifest: string(env.Raw), ManifestFile: env.File, Wait: d.Wait, Progress: d.Progress,
	}
	if err := cd.Run(ctx); err != nil {
		return nil, fmt.Errorf("deploying %s: %w", d.Env.Name, err)
	}
	return out, nil
}

func (d *Deployer) deployManifest(ctx context.Context) (*DeployResult, error) {
	m, t, name := d.Env.Manifest, d.Target, d.Env.Name
	d.seen[name] = true
	lock, err := deploy.AcquireLock(ctx, t.Kube.Clientset, t.Namespace, name, deploy.LockHolder())
	if err != nil {
		return nil, err
	}
	defer func() { _ = lock.Release(ctx) }()

	if err := d.deployDependencies(ctx); err != nil {
		return nil, err
	}
	images := map[string]deploy.BuiltImage{}
	if len(m.Build) > 0 {
		res, err := build.EnsureImages(ctx, build.EnsureOptions{
			NewBuilder: d.NewBuilder, Registry: t.Registry, Namespace: t.Namespace, Name: name,
			Force: d.Force, OnlyMissing: !d.Force, Progress: d.Out, ProgressMode: "auto",
			OnBuild: func(service, ref string, b build.Builder) {
				fmt.Fprintf(d.Out, "Building %s (%s) with %s\n", service, ref, b.Name())
			},
		}, BuildImages(m.Build))
		if err != nil {
			return nil, fmt.Errorf("building images: %w", err)
		}
		for svc, r := range res {
			images[svc] = deploy.BuiltImage{Ref: r.Ref, Digest: r.Digest}
		}
	}
	result, err := d.translateDeploySection(ctx, images)
	if err != nil {
		return nil, err
	}
	branch, commit := deploy.GitInfo(ctx, m.Dir)
	md := &deploy.ManifestDeploy{
		Client: t.Kube, Namespace: t.Namespace, Name: name, Manifest: m, Shell: d.Shell,
		Env: deploy.CommandEnv{
			Environ: d.Environ, DotEnv: m.DotEnv, Secrets: d.Secrets, Vars: d.Vars, Namespace: t.Namespace,
			Context: t.ContextName, Name: name, Registry: t.Registry, GitBranch: branch, GitCommit: commit,
			BuildkitHost: d.Environ["BUILDKIT_HOST"], Images: images,
		},
		Compose: result, Wait: d.Wait, Out: d.Out, Logger: d.Logger, Progress: d.Progress, Warn: d.Warn,
	}
	d.Progress(fmt.Sprintf("Deploying %s to namespace %s", name, t.Namespace))
	if err := md.Run(ctx); err != nil {
		return nil, fmt.Errorf("deploying %s: %w", name, err)
	}
	eps, err := deploy.Endpoints(ctx, t.Kube.Clientset, t.Namespace, name, t.EndpointPort)
	if err != nil {
		return nil, err
	}
	out := &DeployResult{Objects: result}
	for _, e := range eps {
		if e.URL != "" {
			out.URLs = append(out.URLs, e.URL)
		}
	}
	return out, nil
}

// translateOptions are the target's settings translation needs: the namespace, and for endpoints
// the domain, the ingress class and the port (from the platform, or DEVTOOL_CLUSTER_DOMAIN,
// DEVTOOL_INGRESS_CLASS and DEVTOOL_ENDPOINT_PORT).
func translateOptions(name string, t *contexts.Target) translate.Options {
	return translate.Options{Name: name, Namespace: t.Namespace, ClusterDomain: t.ClusterDomain, IngressClass: t.IngressClass, EndpointPort: t.EndpointPort}
}

// BuildImages turns build sections into the builder's list.
func BuildImages(list []*manifest.BuildService) []build.Image {
	out := make([]build.Image, 0, len(list))
	for _, b := range list {
		out = append(out, build.Image{Service: b.Service, Image: b.Image, Build: b.Build})
	}
	return out
}

// translateDeploySection loads deploy.compose (each file, or its subset of services), resolves
// their images and translates them with deploy.endpoints into one result, applied (and pruned)
// as one set. nil when the section has neither.
func (d *Deployer) translateDeploySection(ctx context.Context, images map[string]deploy.BuiltImage) (*translate.Result, error) {
	m, t, name := d.Env.Manifest, d.Target, d.Env.Name
	if len(m.Deploy.Compose) == 0 && len(m.Deploy.Endpoints) == 0 {
		return nil, nil
	}
	merged := &translate.Result{}
	topts := translateOptions(name, t)
	add := func(r *translate.Result) {
		merged.Objects = append(merged.Objects, r.Objects...)
		merged.Services = append(merged.Services, r.Services...)
		merged.Endpoints = append(merged.Endpoints, r.Endpoints...)
		for _, w := range r.Warnings {
			d.Warn(w)
		}
	}
	for _, f := range m.Deploy.Compose {
		env, err := composeenv.Load(composeenv.Options{WorkDir: m.Dir, Files: f.Files(), Name: name, Environ: d.Environ, Secrets: d.Secrets,
			AllowOutside: d.AllowOutsideVolumes, ProjectDir: m.Dir})
		if err != nil {
			return nil, err
		}
		for _, w := range env.Project.Warnings {
			d.Warn(w)
		}
		if len(f.Services) > 0 {
			if err := keepServices(env.Project, f.Services); err != nil {
				return nil, fmt.Errorf("%s: %w", f.File, err)
			}
		}
		for _, s := range env.Project.Services {
			if img, ok := builtImage(env.Project, images, s); ok { // built from the manifest's build section
				s.Image, s.Build = img.Ref, nil
			}
		}
		err = env.ResolveImages(ctx, composeenv.ImageOptions{Registry: t.Registry, Namespace: t.Namespace,
			Force: d.Force, DryRun: d.DryRun, Progress: d.Out, Warn: d.Warn, NewBuilder: d.NewBuilder, AllowOutside: d.AllowOutsideVolumes})
		if err != nil {
			return nil, err
		}
		r, err := translate.TranslateContext(ctx, env.Project, topts)
		if err != nil {
			return nil, err
		}
		add(r)
	}
	if len(m.Deploy.Endpoints) > 0 {
		if t.ClusterDomain == "" {
			d.Warn("endpoints have no URL because no cluster domain is configured (set it in the context or in DEVTOOL_CLUSTER_DOMAIN): their Ingresses answer on any host")
		}
		objs, eps, err := deploy.EndpointIngresses(name, topts, m.Deploy.Endpoints)
		if err != nil {
			return nil, err
		}
		add(&translate.Result{Objects: objs, Endpoints: eps})
	}
	return merged, nil
}

// keepServices keeps the named services and what they depend on. names are as written in the
// devtool.yml, which may differ from the converted Kubernetes names (db_data → db-data); the
// depends_on entries are already converted.
func keepServices(p *compose.Project, names []string) error {
	keep := map[string]bool{}
	var visit func(*compose.Service) error
	visit = func(s *compose.Service) error {
		if keep[s.Name] {
			return nil
		}
		keep[s.Name] = true
		for _, dep := range s.DependsOn {
			ds := p.Service(dep.Service)
			if ds == nil {
				return fmt.Errorf("service %s depends on unknown service %q", s.Name, dep.Service)
			}
			if err := visit(ds); err != nil {
				return err
			}
		}
		return nil
	}
	for _, n := range names {
		s := p.ServiceNamed(n)
		if s == nil {
			return fmt.Errorf("no service %q", n)
		}
		if err := visit(s); err != nil {
			return err
		}
	}
	var out []*compose.Service
	for _, s := range p.Services {
		if keep[s.Name] {
			out = append(out, s)
		}
	}
	p.Services = out
	return nil
}

// builtImage finds the image the manifest's build section made for a Compose service, by its
// converted name or by its name as written (the build section uses the names as written).
func builtImage(p *compose.Project, images map[string]deploy.BuiltImage, s *compose.Service) (deploy.BuiltImage, bool) {
	if img, ok := images[s.Name]; ok {
		return img, true
	}
	for key, to := range p.Renamed {
		if written, ok := strings.CutPrefix(key, "service:"); ok && to == s.Name {
			if img, ok := images[written]; ok {
				return img, true
			}
		}
	}
	return deploy.BuiltImage{}, false
}

// deployDependencies deploys each dependency not yet deployed in the namespace (all of them with
// Dependencies): cloned at its branch into a temporary folder and deployed in-process.
func (d *Deployer) deployDependencies(ctx context.Context) error {
	t := d.Target
	states := &deploy.StateStore{Clientset: t.Kube.Clientset, Namespace: t.Namespace}
	for _, dep := range d.Env.Manifest.Dependencies {
		name := deploy.SanitizeName(dep.Name)
		if name == "" {
			return fmt.Errorf("dependency %q: no valid environment name", dep.Name)
		}
		if d.seen[name] {
			continue
		}
		if !d.Dependencies {
			st, err := states.Get(ctx, name)
			if err != nil {
				return err
			}
			if st != nil {
				d.Progress(fmt.Sprintf("Dependency %s is already deployed (status %s)", name, st.Status))
				continue
			}
		}
		if err := d.deployDependency(ctx, dep, name); err != nil {
			return fmt.Errorf("dependency %s: %w", name, err)
		}
	}
	return nil
}

func (d *Deployer) deployDependency(ctx context.Context, dep *manifest.Dependency, name string) error {
	for _, v := range sortedKeys(dep.Variables) {
		if _, _, err := deploy.ParseVar(v + "=" + dep.Variables[v]); err != nil {
			return err
		}
	}
	repo, err := CloneURL(dep.Repository, d.Env.Dir)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "devtool-dep-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, name)
	args := []string{"clone", "--progress", "--depth", "1"}
	if dep.Branch != "" {
		args = append(args, "--branch", dep.Branch)
	}
	args = append(args, "--", repo, dir)
	d.Progress(fmt.Sprintf("Cloning dependency %s from %s", name, dep.Repository))
	if err := runClone(ctx, deploy.EnvList(d.Environ), args...); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("git clone %s: %w", dep.Repository, err)
	}
	manifestFile := dep.Manifest
	var files []string
	if manifestFile != "" {
		p, err := InsideDir(dir, manifestFile)
		if err != nil {
			return fmt.Errorf("manifest %q: %w", dep.Manifest, err)
		}
		files = []string{p}
	}
	env, err := Load(Options{Dir: dir, Files: files, Name: name, Environ: d.Environ, Secrets: d.Secrets, AllowOutside: d.AllowOutsideVolumes})
	if err != nil {
		return err
	}
	sub := *d
	sub.Env, sub.Wait, sub.Vars, sub.DryRun = env, dep.Wait, dep.Variables, false
	sub.Timeout = 0
	if dep.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, dep.Timeout)
		defer cancel()
	}
	_, err = sub.Deploy(ctx)
	return err
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Destroy runs the manifest's destroy commands under the environment's lock, then deletes what
// is labelled for it and its state. An environment with no state and no objects is left alone
// (DestroyResult.Nothing).
func (d *Deployer) Destroy(ctx context.Context) (*DestroyResult, error) {
	d.defaults()
	if d.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.Timeout)
		defer cancel()
	}
	res, err := d.destroyNamed(ctx, d.Env.Name, true)
	return res, d.destroyTimedOut(err)
}

// destroyTimedOut says so when --timeout stopped a destroy (a destroy command's error already does).
func (d *Deployer) destroyTimedOut(err error) error {
	var ce *deploy.CommandError
	if err == nil || d.Timeout <= 0 || !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ce) {
		return err
	}
	return fmt.Errorf("the destroy timed out after %s (--timeout): %w", d.Timeout, err)
}

// DestroyAll destroys every environment with a state record in the target's namespace; the
// names destroyed are returned.
func (d *Deployer) DestroyAll(ctx context.Context) ([]string, error) {
	d.defaults()
	if d.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.Timeout)
		defer cancel()
	}
	states, err := (&deploy.StateStore{Clientset: d.Target.Kube.Clientset, Namespace: d.Target.Namespace}).List(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range states {
		own := d.Env != nil && d.Env.Name == s.Name
		if _, err := d.destroyNamed(ctx, s.Name, own); err != nil {
			return names, d.destroyTimedOut(err)
		}
		names = append(names, s.Name)
	}
	return names, nil
}

func (d *Deployer) destroyNamed(ctx context.Context, n string, own bool) (*DestroyResult, error) {
	t := d.Target
	exists, err := deploy.Exists(ctx, t.Kube, t.Namespace, n)
	if err != nil {
		return nil, err
	}
	if !exists {
		return &DestroyResult{Nothing: true}, nil
	}
	lock, err := deploy.AcquireLock(ctx, t.Kube.Clientset, t.Namespace, n, deploy.LockHolder())
	if err != nil {
		return nil, err
	}
	defer func() { _ = lock.Release(ctx) }()
	var m *manifest.Manifest
	if own && d.Env != nil && d.Env.Manifest != nil {
		m = d.Env.Manifest
	} else if d.ReplayRecorded {
		rm, cleanup, err := recordedManifest(ctx, d, n)
		if err != nil {
			return nil, err
		}
		defer cleanup()
		if rm != nil {
			d.Progress(fmt.Sprintf("Environment %s: running the destroy commands of the devtool.yml it was deployed with (%s), in an empty folder", n, rm.File))
			m = rm
		}
	}
	if m != nil && !m.Inferred && len(m.Destroy) > 0 {
		branch, commit := deploy.GitInfo(ctx, m.Dir)
		images, problems := PlannedImages(ctx, m, t.Registry, t.Namespace, n)
		for _, p := range problems {
			d.Warn(p)
		}
		d.Progress(fmt.Sprintf("Running the destroy commands of %s", n))
		err := deploy.RunManifestCommands(ctx, deploy.CommandsRun{
			Client: t.Kube, Namespace: t.Namespace, Name: n, Shell: d.Shell, Dir: m.Dir,
			Out: d.Out, Logger: d.Logger, Warn: d.Warn, Phase: "destroy",
			Env: deploy.CommandEnv{Environ: d.Environ, DotEnv: m.DotEnv, Secrets: d.Secrets, Namespace: t.Namespace,
				Context: t.ContextName, Name: n, Registry: t.Registry, GitBranch: branch, GitCommit: commit,
				BuildkitHost: d.Environ["BUILDKIT_HOST"], Images: images},
		}, m.Destroy)
		if err != nil {
			return nil, fmt.Errorf("destroying %s: %w", n, err)
		}
	}
	ds := &deploy.Destroy{Client: t.Kube, Namespace: t.Namespace, Name: n, Volumes: d.Volumes, Wait: d.Wait, Progress: d.Progress, Logger: d.Logger}
	if err := ds.Run(ctx); err != nil {
		return nil, fmt.Errorf("destroying %s: %w", n, err)
	}
	return &DestroyResult{}, nil
}
