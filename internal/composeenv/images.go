package composeenv

import (
	"context"
	"fmt"
	"github.com/devtool/devtool/internal/build"
	"github.com/devtool/devtool/internal/compose"
	"github.com/devtool/devtool/internal/projectpath"
	"io"
)

// ImageOptions say how deploy gets the images of a Compose environment.
type ImageOptions struct {
	Registry  string // the context's registry, else DEVTOOL_REGISTRY; "" when none
	Namespace string
	Force     bool // deploy --build: rebuild every image that has a build section
	DryRun    bool // compute names only: nothing is built, pushed or read from a registry
	// NewBuilder is called the first time something must be built (see build.Select).
	NewBuilder func(context.Context) (build.Builder, error)
	Progress   io.Writer // build progress (stderr)
	// Warn receives what the user should know (never nil after ResolveImages starts).
	Warn func(string)
	// AllowOutside lets host volumes whose source is outside the project folder be copied into
	// an image (deploy --allow-outside-volumes); without it they are refused.
	AllowOutside bool
}

// OutsideVolumeFlag is the flag that allows host volumes (and every other path a project file
// names) from outside the project folder.
const OutsideVolumeFlag = projectpath.AllowFlag

// ResolveImages fills in every service's image before translation:
//   - services with a build section get their image built and pushed when the registry does not
//     have it yet (always with Force); a service without an image gets the content-hash name
//     <registry>/<namespace>/<env>-<service>:<hash>;
//   - services with host volumes run a derived image: their image plus the host folders at their
//     container paths (the spec's "added at deployment time").
func (e *Env) ResolveImages(ctx context.Context, o ImageOptions) error {
	if o.Warn == nil {
		o.Warn = func(string) {}
	}
	var images []build.Image
	for _, s := range e.Project.Services {
		if s.Build != nil {
			images = append(images, build.Image{Service: s.Name, Image: s.Image, Build: s.Build})
		}
	}
	if err := e.checkHostVolumes(o); err != nil {
		return err
	}
	if o.DryRun {
		if err := e.nameImages(ctx, images, o); err != nil {
			return err
		}
		e.describeHostVolumes(o)
		return nil
	}
	if len(images) > 0 {
		res, err := build.EnsureImages(ctx, build.EnsureOptions{
			NewBuilder: o.NewBuilder, Registry: o.Registry, Namespace: o.Namespace, Name: e.Name,
			Force: o.Force, OnlyMissing: !o.Force, Progress: o.Progress, ProgressMode: "auto",
			OnBuild: func(service, ref string, b build.Builder) {
				if o.Progress != nil {
					fmt.Fprintf(o.Progress, "Building %s (%s) with %s\n", service, ref, b.Name())
				}
			},
		}, images)
		if err != nil {
			return fmt.Errorf("building images: %w", err)
		}
		for _, s := range e.Project.Services {
			if r, ok := res[s.Name]; ok {
				s.Image = r.Ref
			}
		}
	}
	return e.addHostVolumes(ctx, o)
}

// nameImages computes the names a real deploy would use, reading only local files.
func (e *Env) nameImages(ctx context.Context, images []build.Image, o ImageOptions) error {
	byName := make(map[string]*compose.Service, len(e.Project.Services)) // Project.Service is a linear search
	for _, s := range e.Project.Services {
		if s != nil && byName[s.Name] == nil {
			byName[s.Name] = s
		}
	}
	for _, img := range images {
		if img.Image != "" {
			continue
		}
		tag, err := build.ContentTagContext(ctx, build.Request{Context: img.Build.Context, Dockerfile: img.Build.Dockerfile, Target: img.Build.Target, Args: img.Build.Args})
		if err != nil {
			return fmt.Errorf("service %s: %w", img.Service, err)
		}
		ref, err := build.ImageName(o.Registry, o.Namespace, e.Name, img.Service, tag)
		if err != nil {
			o.Warn(err.Error())
			continue
		}
		byName[img.Service].Image = ref
	}
	return nil
}

func (e *Env) addHostVolumes(ctx context.Context, o ImageOptions) error {
	for _, s := range e.Project.Services {
		var folders []build.HostFolder
		for _, v := range s.Volumes {
			if v.Kind == compose.VolumeHost {
				folders = append(folders, build.HostFolder{Source: v.Source, Target: v.Target})
			}
		}
		if len(folders) == 0 {
			continue
		}
		repo, err := build.ImageName(o.Registry, o.Namespace, e.Name, s.Name, "")
		if err != nil {
			o.Warn(fmt.Sprintf("service %s: its host volumes are not added to the deployed image: no registry is configured (set DEVTOOL_REGISTRY or the context's registry)", s.Name))
			continue
		}
		if s.Image == "" {
			return fmt.Errorf("service %s has host volumes but no image", s.Name)
		}
		ref, err := build.DerivedImage(ctx, s.Image, repo, folders)
		if err != nil {
			return fmt.Errorf("service %s: adding its host volumes to the image: %w", s.Name, err)
		}
		s.Image = ref
	}
	return nil
}

// checkHostVolumes refuses host volume sources outside the project folder (absolute paths, '..'
// that climbs out, links that lead out: projectpath.Check) unless AllowOutside: a deploy copies
// them into an image pushed to a registry.
func (e *Env) checkHostVolumes(o ImageOptions) error {
	if o.AllowOutside {
		return nil
	}
	for _, s := range e.Project.Services {
		for _, v := range s.Volumes {
			if v.Kind != compose.VolumeHost {
				continue
			}
			if err := projectpath.Check(e.ProjectDir, v.Source); err != nil {
				return fmt.Errorf("%s: service %s: host volume %w: a deploy copies it into an image pushed to the registry; %s",
					v.Pos, s.Name, err, projectpath.Hint)
			}
		}
	}
	return nil
}

// describeHostVolumes says, in a dry run, which host folders a deploy would copy into an image.
func (e *Env) describeHostVolumes(o ImageOptions) {
	for _, s := range e.Project.Services {
		for _, v := range s.Volumes {
			if v.Kind != compose.VolumeHost {
				continue
			}
			repo, err := build.ImageName(o.Registry, o.Namespace, e.Name, s.Name, "")
			if err != nil {
				repo = "(no registry configured: the deploy would not add it)"
			}
			o.Warn(fmt.Sprintf("dry run: service %s: a deploy copies host folder %s to %s into an image pushed as %s:<content hash>", s.Name, v.Source, v.Target, repo))
		}
	}
}
