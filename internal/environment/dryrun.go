package environment

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/devtool/devtool/internal/build"
	"github.com/devtool/devtool/internal/deploy"
	"github.com/devtool/devtool/internal/manifest"
)

// dryRunManifest shows what deployManifest would do: the build section's image names, the
// dependencies, the commands with their variables (secrets masked; stored secrets never shown) and the objects of the
// compose and endpoints parts. It takes no lock, builds nothing, runs no deploy command and writes
// nothing; the only program it starts is git rev-parse (read-only, for DEVTOOL_GIT_*), and it
// reads the cluster only to tell dependencies already deployed, when it has one. Values from the
// shell's environment are never shown (see manifest.DryRunPlan.Expand).
func (d *Deployer) dryRunManifest(ctx context.Context) (*DeployResult, error) {
	m, t, name := d.Env.Manifest, d.Target, d.Env.Name
	images, problems := PlannedImages(ctx, m, t.Registry, t.Namespace, name)
	for _, p := range problems {
		d.Warn(p)
	}
	result, err := d.translateDeploySection(ctx, images)
	if err != nil {
		return nil, err
	}
	branch, commit := deploy.GitInfo(ctx, m.Dir)
	env := deploy.CommandEnv{DotEnv: m.DotEnv, Vars: d.Vars, Namespace: t.Namespace, Context: t.ContextName,
		Name: name, Registry: t.Registry, GitBranch: branch, GitCommit: commit,
		BuildkitHost: d.Environ["BUILDKIT_HOST"], Images: images}
	shown := env.Build()                            // without the shell's environment: its values are never shown
	env.Environ, env.Secrets = d.Environ, d.Secrets // stored secrets, like the shell's values, are never shown
	full := env.Build()                             // what the commands would get: stored secrets < .env < shell < --var < deploy's own
	for k, v := range shown {
		if full[k] != v { // a .env value the shell overrides: left as $NAME, like the shell's
			delete(shown, k)
		}
	}
	for svc, img := range images {
		if img.Digest == "" { // a deploy sets it once the image is built and pushed
			shown["DEVTOOL_BUILD_"+deploy.EnvKey(svc)+"_SHA"] = "<digest after the build>"
		}
	}
	plan := m.Plan(false, shown, nil)
	for _, b := range m.Build {
		if img, ok := images[b.Service]; ok {
			pi := manifest.PlannedImage{Service: b.Service, Ref: img.Ref}
			if d.Force {
				pi.Note = "always built: --build"
			}
			plan.Images = append(plan.Images, pi)
		}
	}
	plan.DependencyNotes = d.dependencyNotes(ctx)
	var secrets []string
	for k, v := range full {
		if (manifest.IsSecretName(k) || d.Secrets[k] == v) && v != "" {
			secrets = append(secrets, v)
		}
	}
	out := &DeployResult{Objects: result, Plan: plan.Lines(secrets...)}
	if result != nil {
		for _, e := range result.Endpoints {
			if e.URL != "" {
				out.URLs = append(out.URLs, e.URL)
			}
		}
	}
	return out, nil
}

// dependencyNotes says which dependencies a deploy would skip because they are deployed already
// (read from the cluster's state records; without a cluster, or with --dependencies, none).
func (d *Deployer) dependencyNotes(ctx context.Context) map[string]string {
	notes := map[string]string{}
	t := d.Target
	for _, dep := range d.Env.Manifest.Dependencies {
		name := deploy.SanitizeName(dep.Name)
		var varErr error
		for _, v := range sortedKeys(dep.Variables) {
			if _, _, err := deploy.ParseVar(v + "=" + dep.Variables[v]); err != nil && varErr == nil {
				varErr = err
			}
		}
		switch {
		case name == "":
			notes[dep.Name] = "no valid environment name: the deploy would fail"
		case varErr != nil:
			notes[dep.Name] = "the deploy would fail: " + strings.Replace(varErr.Error(), "--var", "variable", 1)
		case d.Dependencies:
			notes[dep.Name] = "would be deployed (--dependencies)"
		case t.Kube == nil || t.Kube.Clientset == nil:
			notes[dep.Name] = "would be deployed unless it is already (no cluster to ask)"
		default:
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			st, err := (&deploy.StateStore{Clientset: t.Kube.Clientset, Namespace: t.Namespace}).Get(sctx, name)
			cancel()
			switch {
			case err != nil:
				notes[dep.Name] = fmt.Sprintf("would be deployed unless it is already (the cluster did not answer: %v)", err)
			case st != nil:
				notes[dep.Name] = fmt.Sprintf("already deployed (status %s): skipped", st.Status)
			}
		}
	}
	return notes
}

// PlannedImages names the images of a manifest's build section as a deploy names them (the image
// given, else <registry>/<namespace>/<name>-<service>:<content hash>), building nothing and
// asking no registry: what destroy commands and dry runs see as DEVTOOL_BUILD_<SERVICE>_*
// (without a digest). A service whose name cannot be computed (no registry, unreadable build
// context) is left out and described in problems.
func PlannedImages(ctx context.Context, m *manifest.Manifest, registry, namespace, name string) (map[string]deploy.BuiltImage, []string) {
	out := map[string]deploy.BuiltImage{}
	var problems []string
	for _, img := range BuildImages(m.Build) {
		if img.Build == nil {
			continue
		}
		ref := img.Image
		if ref == "" {
			tag, err := build.ContentTagContext(ctx, build.Request{Context: img.Build.Context, Dockerfile: img.Build.Dockerfile,
				Target: img.Build.Target, Args: img.Build.Args})
			if err == nil {
				ref, err = build.ImageName(registry, namespace, name, img.Service, tag)
			}
			if err != nil {
				problems = append(problems, fmt.Sprintf("DEVTOOL_BUILD_%s_* are not set (service %s): %v", deploy.EnvKey(img.Service), img.Service, err))
				continue
			}
		}
		out[img.Service] = deploy.BuiltImage{Ref: ref}
	}
	return out, problems
}
