package deploy

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/devtool/devtool/internal/build"
	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/compose"
	"github.com/devtool/devtool/internal/composeenv"
	"github.com/devtool/devtool/internal/deploy"
	"github.com/devtool/devtool/internal/manifest"
	"github.com/devtool/devtool/internal/translate"
)

// parseVars checks every --var and returns them as a map (a later one wins).
func parseVars(list []string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range list {
		name, value, err := deploy.ParseVar(v)
		if err != nil {
			return nil, err
		}
		out[name] = value
	}
	return out, nil
}

// runManifest deploys a devtool.yml. seen holds the environments deployed in this run, so a
// dependency cycle stops.
func runManifest(ctx context.Context, opts *Options, m *manifest.Manifest, vars map[string]string, seen map[string]bool) error {
	for _, w := range m.Warnings {
		fmt.Fprintf(opts.IO.ErrOut, "Warning: %s\n", w)
	}
	if opts.DryRun {
		return cmdutil.FlagErrorf("--dry-run works only for Compose environments: a devtool.yml runs commands")
	}
	target, err := opts.Target(opts.Kube)
	if err != nil {
		return err
	}
	name := deploy.EnvironmentName(opts.Name, m.Name, m.Dir)
	seen[name] = true
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()

	lock, err := deploy.AcquireLock(ctx, target.Kube.Clientset, target.Namespace, name, deploy.LockHolder())
	if err != nil {
		return err
	}
	defer func() { _ = lock.Release(ctx) }()

	if err := deployDependencies(ctx, opts, target, m, seen); err != nil {
		return err
	}

	newBuilder := func(ctx context.Context) (build.Builder, error) {
		return build.Select(ctx, build.SelectOptions{IsPlatform: target.IsPlatform, PlatformURL: target.ContextName,
			ContextBuilder: target.Builder, Getenv: opts.Getenv, Logger: opts.Logger})
	}
	images := map[string]deploy.BuiltImage{}
	if len(m.Build) > 0 {
		var list []build.Image
		for _, b := range m.Build {
			list = append(list, build.Image{Service: b.Service, Image: b.Image, Build: b.Build})
		}
		res, err := build.EnsureImages(ctx, build.EnsureOptions{
			NewBuilder: newBuilder, Registry: target.Registry, Namespace: target.Namespace, Name: name,
			Force: opts.Build, OnlyMissing: !opts.Build, Progress: opts.IO.ErrOut, ProgressMode: "auto",
		}, list)
		if err != nil {
			return fmt.Errorf("building images: %w", err)
		}
		for svc, r := range res {
			images[svc] = deploy.BuiltImage{Ref: r.Ref, Digest: r.Digest}
		}
	}

	result, err := translateDeploySection(ctx, opts, target, m, name, images, newBuilder)
	if err != nil {
		return err
	}

	branch, commit := deploy.GitInfo(m.Dir)
	shell := "bash"
	if opts.NoBash {
		shell = "sh"
	}
	d := &deploy.ManifestDeploy{
		Client: target.Kube, Namespace: target.Namespace, Name: name, Manifest: m, Shell: shell,
		Env: deploy.CommandEnv{
			Environ: opts.Environ, DotEnv: m.DotEnv, Vars: vars, Namespace: target.Namespace,
			Context: target.ContextName, Name: name, Registry: target.Registry, GitBranch: branch, GitCommit: commit,
			BuildkitHost: opts.Environ["BUILDKIT_HOST"], Images: images,
		},
		Compose: result, Wait: opts.Wait, Out: opts.IO.ErrOut, Logger: opts.Logger,
		Progress: func(s string) { fmt.Fprintf(opts.IO.ErrOut, "%s\n", s) },
	}
	fmt.Fprintf(opts.IO.ErrOut, "Deploying %s to namespace %s\n", name, target.Namespace)
	if err := d.Run(ctx); err != nil {
		return fmt.Errorf("deploying %s: %w", name, err)
	}
	fmt.Fprintf(opts.IO.ErrOut, "Environment %s deployed to namespace %s\n", name, target.Namespace)
	eps, err := deploy.Endpoints(ctx, target.Kube.Clientset, target.Namespace, name)
	if err != nil {
		return err
	}
	for _, e := range eps {
		if e.URL != "" {
			fmt.Fprintln(opts.IO.Out, e.URL)
		}
	}
	return nil
}

// translateDeploySection loads deploy.compose (each file, or its subset of services), resolves
// their images and translates them with deploy.endpoints into one result, applied (and pruned)
// as one set. nil when the section has neither.
func translateDeploySection(ctx context.Context, opts *Options, target *cmdutil.Target, m *manifest.Manifest, name string,
	images map[string]deploy.BuiltImage, newBuilder func(context.Context) (build.Builder, error)) (*translate.Result, error) {
	if len(m.Deploy.Compose) == 0 && len(m.Deploy.Endpoints) == 0 {
		return nil, nil
	}
	merged := &translate.Result{}
	topts := translate.Options{Name: name, Namespace: target.Namespace, ClusterDomain: target.ClusterDomain}
	warn := func(msg string) { fmt.Fprintf(opts.IO.ErrOut, "Warning: %s\n", msg) }
	add := func(r *translate.Result) {
		merged.Objects = append(merged.Objects, r.Objects...)
		merged.Services = append(merged.Services, r.Services...)
		merged.Endpoints = append(merged.Endpoints, r.Endpoints...)
		for _, w := range r.Warnings {
			warn(w)
		}
	}
	for _, f := range m.Deploy.Compose {
		env, err := composeenv.Load(composeenv.Options{WorkDir: m.Dir, File: f.File, Name: name, Environ: opts.Environ})
		if err != nil {
			return nil, err
		}
		for _, w := range env.Project.Warnings {
			warn(w)
		}
		if len(f.Services) > 0 {
			if err := keepServices(env.Project, f.Services); err != nil {
				return nil, fmt.Errorf("%s: %w", f.File, err)
			}
		}
		for _, s := range env.Project.Services {
			if img, ok := images[s.Name]; ok { // built from the manifest's build section
				s.Image, s.Build = img.Ref, nil
			}
		}
		err = env.ResolveImages(ctx, composeenv.ImageOptions{Registry: target.Registry, Namespace: target.Namespace,
			Force: opts.Build, Progress: opts.IO.ErrOut, Warn: warn, NewBuilder: newBuilder})
		if err != nil {
			return nil, err
		}
		r, err := translate.Translate(env.Project, topts)
		if err != nil {
			return nil, err
		}
		add(r)
	}
	if len(m.Deploy.Endpoints) > 0 {
		if target.ClusterDomain == "" {
			warn("endpoints have no URL because no cluster domain is configured (set it in the context or in DEVTOOL_CLUSTER_DOMAIN): their Ingresses answer on any host")
		}
		objs, eps, err := deploy.EndpointIngresses(name, target.Namespace, target.ClusterDomain, m.Deploy.Endpoints)
		if err != nil {
			return nil, err
		}
		add(&translate.Result{Objects: objs, Endpoints: eps})
	}
	return merged, nil
}

// keepServices keeps the named services and what they depend on.
func keepServices(p *compose.Project, names []string) error {
	keep := map[string]bool{}
	var visit func(string) error
	visit = func(n string) error {
		if keep[n] {
			return nil
		}
		s := p.Service(n)
		if s == nil {
			return fmt.Errorf("no service %q", n)
		}
		keep[n] = true
		for _, d := range s.DependsOn {
			if err := visit(d.Service); err != nil {
				return err
			}
		}
		return nil
	}
	for _, n := range names {
		if err := visit(n); err != nil {
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

// deployDependencies deploys each dependency not yet deployed in the namespace (all of them with
// --dependencies): cloned at its branch into a temporary folder and deployed in-process.
func deployDependencies(ctx context.Context, opts *Options, target *cmdutil.Target, m *manifest.Manifest, seen map[string]bool) error {
	states := &deploy.StateStore{Clientset: target.Kube.Clientset, Namespace: target.Namespace}
	for _, dep := range m.Dependencies {
		name := deploy.SanitizeName(dep.Name)
		if name == "" {
			return fmt.Errorf("dependency %q: no valid environment name", dep.Name)
		}
		if seen[name] {
			continue
		}
		if !opts.Dependencies {
			st, err := states.Get(ctx, name)
			if err != nil {
				return err
			}
			if st != nil {
				fmt.Fprintf(opts.IO.ErrOut, "Dependency %s is already deployed (status %s)\n", name, st.Status)
				continue
			}
		}
		if err := deployDependency(ctx, opts, dep, name, seen); err != nil {
			return fmt.Errorf("dependency %s: %w", name, err)
		}
	}
	return nil
}

func deployDependency(ctx context.Context, opts *Options, dep *manifest.Dependency, name string, seen map[string]bool) error {
	tmp, err := os.MkdirTemp("", "devtool-dep-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, name)
	args := []string{"clone", "--depth", "1"}
	if dep.Branch != "" {
		args = append(args, "--branch", dep.Branch)
	}
	repo := dep.Repository
	if !strings.Contains(repo, "://") && !strings.Contains(repo, "@") && !filepath.IsAbs(repo) {
		repo = filepath.Join(opts.WorkDir, repo)
	}
	if filepath.IsAbs(repo) {
		repo = "file://" + repo // --depth is honoured for file:// URLs only
	}
	args = append(args, repo, dir)
	fmt.Fprintf(opts.IO.ErrOut, "Cloning dependency %s from %s\n", name, dep.Repository)
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Env = deploy.EnvList(opts.Environ)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git clone %s: %v\n%s", dep.Repository, err, strings.TrimSpace(string(out)))
	}
	sub := *opts
	sub.WorkDir, sub.File, sub.Name, sub.Wait, sub.Vars = dir, dep.Manifest, name, dep.Wait, nil
	if dep.Timeout > 0 {
		sub.Timeout = dep.Timeout
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < sub.Timeout {
		sub.Timeout = time.Until(dl)
	}
	for _, v := range sortedKeys(dep.Variables) {
		if _, _, err := deploy.ParseVar(v + "=" + dep.Variables[v]); err != nil {
			return err
		}
	}
	dm, err := deploy.LoadManifest(dir, dep.Manifest, opts.Environ)
	if err != nil {
		return err
	}
	if dm == nil {
		return runCompose(ctx, &sub)
	}
	return runManifest(ctx, &sub, dm, dep.Variables, seen)
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
