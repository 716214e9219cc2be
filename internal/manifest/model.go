// Package manifest loads devtool.yml, the tool manifest: what deploy builds and runs, what
// destroy runs, the repositories an environment depends on, and the development containers
// `up` starts. Like the Compose loader it keeps YAML positions, so every error names
// file:line:column, collects every problem in one pass, and names fields it does not know in
// one grouped warning.
//
// Values are fully resolved: ${NAME} interpolated (A6: shell, then .env beside the manifest,
// then extra lookups), paths absolute, notations unified. Deploy and destroy commands are the
// exception: they are kept as written, because the shell that runs them expands variables with
// the DEVTOOL_* values only known at deploy time.
package manifest

import (
	"time"

	"github.com/devtool/devtool/internal/compose"
	"github.com/devtool/devtool/internal/yamlsrc"
)

// Manifest is a loaded devtool.yml (or a Compose file standing in for one).
type Manifest struct {
	// File is the absolute path of the manifest; when no devtool.yml exists and a Compose file
	// stands in (Inferred), it is that Compose file.
	File string
	// Dir is the manifest's folder (for a manifest under .devtool/, the folder above): every
	// command runs in it and relative paths resolve against it.
	Dir string
	// Inferred is true when the manifest was made from a Compose file (deploy.compose is that file).
	Inferred bool
	// Name is the name key as written ("" when absent); see EnvironmentName.
	Name string

	Build        []*BuildService // in file order
	Deploy       Deploy
	Destroy      []Command
	Dependencies []*Dependency // in file order
	Dev          []*Dev        // in file order

	// DotEnv holds the variables of the .env file beside the manifest (nil when there is none),
	// so deploy can hand them to commands under the shell's values.
	DotEnv map[string]string
	// Warnings: unset variables, ignored fields (grouped, each named), and the like.
	Warnings []string
	// Raw is the file's content as read (nil when Inferred).
	Raw []byte
}

// BuildService is one entry of the build section: the image of a service and how to build it.
type BuildService struct {
	Service string
	// Image is the image name to give the build; "" lets the builder derive one.
	Image string
	Build *compose.Build
	// Secrets maps a secret id to the absolute path of its file (RUN --mount=type=secret,id=…).
	Secrets map[string]string
	Pos     yamlsrc.Position
}

// Deploy is the deploy section. The list notation fills only Commands.
type Deploy struct {
	Commands  []Command
	Compose   []ComposeFile
	Endpoints []*compose.Endpoint
}

// Empty reports whether the deploy section does nothing.
func (d Deploy) Empty() bool {
	return len(d.Commands) == 0 && len(d.Compose) == 0 && len(d.Endpoints) == 0
}

// Command is one deploy or destroy command, run with bash -c (sh -c with --no-bash) in the
// manifest's folder. Name defaults to the command text.
type Command struct {
	Name    string
	Command string
	Pos     yamlsrc.Position
}

// ComposeFile is one entry of deploy.compose.
type ComposeFile struct {
	File     string   // absolute path
	Services []string // the subset to deploy; nil means all
	Pos      yamlsrc.Position
	// Merge are further files merged into File in order (compose.LoadOptions.Files): the
	// override file Docker Compose finds beside a default-named file (compose.override.yaml).
	Merge []string
}

// ComposeFiles lists every Compose file of deploy.compose in order (each entry's File, then
// its Merge): the files that load as one project (compose.LoadOptions.Files), as Docker
// Compose merges repeated -f files.
func (d Deploy) ComposeFiles() []string {
	var out []string
	for _, c := range d.Compose {
		out = append(out, c.Files()...)
	}
	return out
}

// Files is File followed by Merge: what compose.LoadOptions.Files takes.
func (c ComposeFile) Files() []string {
	return append([]string{c.File}, c.Merge...)
}

// Dependency is a repository deployed before this environment.
type Dependency struct {
	// Name is the map key (a valid Kubernetes name), or for the list notation RepositoryName of
	// the repository, as written: deploy makes it valid with deploy.SanitizeName.
	Name       string
	Repository string
	Manifest   string // path of the manifest inside the repository; "" for discovery
	Branch     string // "" for the default branch
	Variables  map[string]string
	Wait       bool
	Timeout    time.Duration // 0: the deploy's own timeout
	Pos        yamlsrc.Position
}

// Dev is one development container of the dev section.
type Dev struct {
	Name string
	Pos  yamlsrc.Position

	Image string
	// Command is the argument list; a string is split like a shell would. nil: keep the image's.
	Command     []string
	Workdir     string
	Sync        []Sync
	Forward     []Forward
	Reverse     []Reverse
	Environment map[string]string
	Resources   compose.Resources
	// SecurityContext is nil when not written.
	SecurityContext  *SecurityContext
	PersistentVolume *PersistentVolume
	// Selector picks the workload to replace by its labels; nil: the workload named Name.
	Selector map[string]string
	// Container names the container to replace when the pod has several.
	Container string
	// Autocreate creates a deployment when none matches, instead of failing.
	Autocreate bool
	// Services are the services `devtool restart` restarts (a rollout restart of their pods).
	Services []string

	// Sources says where values were written, by their path inside the entry ("image",
	// "sync[0]", "environment.NAME", "resources.limits.cpu"), so a check made later (`up`
	// validates the entry before touching the cluster) names the file, line and field.
	Sources map[string]Source
}

// Source is where a value of a dev entry was written: its position and its field path as the
// file spells it ("dev.web.sync[0]", or for an entry made from Compose "services.web.volumes[1]").
type Source struct {
	Pos   yamlsrc.Position
	Field string
}

// Source returns where the value at path rel inside the entry was written; a value without a
// recorded source is placed at the entry's name with the field dev.<name>.<rel>.
func (d *Dev) Source(rel string) Source {
	if s, ok := d.Sources[rel]; ok {
		return s
	}
	return Source{Pos: d.Pos, Field: yamlsrc.Join(yamlsrc.Join("dev", d.Name), rel)}
}

// SetSource records where the value at path rel inside the entry was written.
func (d *Dev) SetSource(rel string, pos yamlsrc.Position, field string) {
	if d.Sources == nil {
		d.Sources = map[string]Source{}
	}
	d.Sources[rel] = Source{Pos: pos, Field: field}
}

// Sync is one local:remote folder pair; Local is absolute.
type Sync struct {
	Local, Remote string
	// ReadOnly is set for a Compose host volume mounted :ro (an entry made from Compose).
	ReadOnly bool
}

// Forward is local:remote (Service "") or local:service:remote.
type Forward struct {
	Local   int32
	Service string
	Remote  int32
}

// Reverse is remote:local: a port of the container forwarded back to the developer's machine.
type Reverse struct {
	Remote, Local int32
}

// SecurityContext is the container-level security settings of a dev container.
type SecurityContext struct {
	RunAsUser, RunAsGroup, FSGroup *int64
	RunAsNonRoot                   *bool
	CapAdd, CapDrop                []string
}

// PersistentVolume keeps the synced folder (and caches) across restarts of the dev container.
type PersistentVolume struct {
	Enabled      bool
	Size         string // Kubernetes quantity; default DefaultVolumeSize
	StorageClass string
}

// DefaultVolumeSize is the persistent volume size when enabled without a size.
const DefaultVolumeSize = "5Gi"

// DevByName looks a development container up.
func (m *Manifest) DevByName(name string) *Dev {
	for _, d := range m.Dev {
		if d.Name == name {
			return d
		}
	}
	return nil
}

// BuildByService looks a build entry up.
func (m *Manifest) BuildByService(name string) *BuildService {
	for _, b := range m.Build {
		if b.Service == name {
			return b
		}
	}
	return nil
}
