// Package compose loads Compose files (with devtool's extensions) into a typed model.
// YAML nodes keep their positions, so every error names file:line:column.
package compose

import "time"

// This file is the contract between the loader (this package) and translation (internal/translate).
// Values here are fully resolved: interpolated, defaults applied, paths absolute, notations unified.

// Project is a loaded Compose file.
type Project struct {
	// File is the absolute path of the compose file; WorkingDir is its folder (relative paths resolve there).
	File       string
	WorkingDir string
	// Files are every Compose file loaded (absolute), File first: merged files, extended and
	// included ones.
	Files []string
	// Name is the top-level name key (the Compose project name); empty when not written.
	Name string
	// Services in file order.
	Services []*Service
	// Volumes are the top-level named volumes, in file order.
	Volumes []*Volume
	// Endpoints from the top-level endpoints key, in all three notations unified.
	Endpoints []*Endpoint
	// Secrets and Configs are the top-level secrets and configs, in file order, with their
	// content read by the loader (translation is pure). Secret content never goes in messages.
	Secrets, Configs []*FileObject
	// Warnings: fields outside the spec (named), and other things that did not stop loading.
	Warnings []string
	// Renamed maps each service and volume name converted for Kubernetes ("db_data") to its
	// new name ("db-data"), keyed "service:<name>" or "volume:<name>", so callers holding names
	// as written (deploy.compose services of a devtool.yml) can find them. nil when none.
	Renamed map[string]string

	index *projectIndex // name lookups (index.go)
}

// ServiceNamed looks a service up by its name as written in the file, before any conversion
// for Kubernetes (see Renamed), falling back to Service.
func (p *Project) ServiceNamed(written string) *Service {
	if to, ok := p.Renamed["service:"+written]; ok {
		return p.Service(to)
	}
	return p.Service(written)
}

// Service looks a service up by name (O(1): see index.go).
func (p *Project) Service(name string) *Service {
	indexMu.Lock()
	defer indexMu.Unlock()
	return lookup(&p.indexes().services, p.Services, func(s *Service) string { return s.Name }, name)
}

// Volume looks a top-level volume up by name (O(1): see index.go).
func (p *Project) Volume(name string) *Volume {
	indexMu.Lock()
	defer indexMu.Unlock()
	return lookup(&p.indexes().volumes, p.Volumes, func(v *Volume) string { return v.Name }, name)
}

// Service is one Compose service.
type Service struct {
	Name string
	Pos  Position

	Build *Build // nil when the service has no build section
	Image string // may be empty when Build is set

	CapAdd, CapDrop []string
	// Command and Entrypoint are argument lists; a string in the file is split like a shell would
	// (quotes respected). nil means "not set" (keep the image's).
	Command, Entrypoint []string
	WorkingDir          string

	DependsOn []Dependency // in file order

	// Environment is env_file values overridden by environment values. A variable listed in
	// environment without a value ("NAME" or "NAME:") takes its value from the shell/.env lookup
	// and is dropped when undefined there, even if env_file set it.
	Environment map[string]string

	Healthcheck *Healthcheck // nil when absent or disabled (test: NONE / disable: true)
	Labels      map[string]string
	Ports       []Port // ranges expanded
	Scale       int    // default 1

	Resources Resources // from resources or deploy.resources (identical result)
	Restart   Restart   // from restart or deploy.restart_policy

	StopGracePeriod *time.Duration // nil when unset
	Volumes         []VolumeMount
	NodeSelector    map[string]string // x-node-selector

	// Annotations are the service's annotations field (with deploy.labels in Labels); both
	// become annotations of the workload and its pods.
	Annotations map[string]string
	// RunAsUser and RunAsGroup come from user ("1000" or "1000:1000", or Okteto's mapping
	// {runAsUser, runAsGroup}); nil when unset or when
	// user names an account (a warning says so: Kubernetes needs numeric ids).
	RunAsUser, RunAsGroup *int64
	// Headless is deploy.endpoint_mode: dnsrr: the Service has no cluster IP and its name
	// resolves to the pods' addresses.
	Headless bool
	// Secrets and Configs are the top-level secrets and configs the service mounts.
	Secrets, Configs []FileMount
}

// FileMount is one entry of a service's secrets or configs: the top-level object named Source
// mounted as a file at Target (absolute).
type FileMount struct {
	Source string
	Target string
	Mode   *int32 // file mode; nil: Kubernetes' default (0644)
	Pos    Position
}

// Build is the build section of a service.
type Build struct {
	Context     string            // absolute path
	Dockerfile  string            // relative to Context (default "Dockerfile"), or absolute if written so
	Target      string            // stage to build
	Args        map[string]string // values with $ resolved from the environment
	ExportCache string
	CacheFrom   []string
}

// Dependency is one depends_on entry.
type Dependency struct {
	Service   string
	Condition string // service_started (default), service_healthy, service_completed_successfully
	Pos       Position
}

// Depends_on conditions.
const (
	ConditionStarted   = "service_started"
	ConditionHealthy   = "service_healthy"
	ConditionCompleted = "service_completed_successfully"
)

// Healthcheck is A2. Exactly one of Exec and HTTP is set.
type Healthcheck struct {
	// Exec is the probe command: CMD args as written; CMD-SHELL (and a plain string) as ["sh", "-c", cmd].
	Exec        []string
	HTTP        *HTTPCheck
	Interval    time.Duration // zero: unset
	Timeout     time.Duration
	StartPeriod time.Duration
	Retries     int  // zero: unset
	Readiness   bool // x-devtool-readiness, default true
	Liveness    bool // x-devtool-liveness, default false
}

// HTTPCheck is healthcheck.http, or a test that only curls the container itself (Okteto's
// reading of such a test: see curlCheck).
type HTTPCheck struct {
	Path   string // with the query, if any
	Port   int32
	Scheme string // "http" or "https"; empty means http
}

// Port is one published or internal container port.
type Port struct {
	ContainerPort int32
	HostPort      int32  // 0 for a bare port (internal only); set for host:container (public unless never-public)
	Protocol      string // "TCP" (default) or "UDP"
}

// Resources are requests and limits; empty strings mean unset. Values are Kubernetes quantities
// ("500m", "0.5", "512Mi"); Compose notations like "512M" are converted by the loader.
type Resources struct {
	Requests, Limits ResourceList
}

// ResourceList is cpu and memory, and for requests the storage of the service's anonymous
// volumes (resources.storage, resources.requests.storage).
type ResourceList struct {
	CPU, Memory string
	Storage     string // size of each anonymous volume's claim; "" for the default
	// StorageClass is the class of each anonymous volume's claim (resources.storage.class,
	// Okteto's form); "" for the cluster's default.
	StorageClass string
}

// Restart is the normalised restart policy.
type Restart struct {
	Policy      string // RestartAlways, RestartNever or RestartOnFailure
	MaxAttempts *int   // on-failure only; nil when unset
	// Explicit is true when the file set the policy (restart or deploy.restart_policy with a
	// non-empty value); false for the default. A service others wait on with
	// service_completed_successfully runs as a Job unless its policy is explicit.
	Explicit bool
}

// Restart policies, normalised from the spec's restart table.
const (
	RestartAlways    = "always"     // always, unless-stopped, any (default)
	RestartNever     = "never"      // none, never, no
	RestartOnFailure = "on-failure" // on-failure
)

// VolumeMount is one entry of a service's volumes.
type VolumeMount struct {
	Kind     string // VolumeNamed, VolumeAnonymous, VolumeHost or VolumeTmpfs
	Source   string // the volume name (named), "" (anonymous, tmpfs), or the absolute host path (host)
	Target   string // absolute path in the container
	ReadOnly bool
	Size     string // tmpfs only: the size limit as a Kubernetes quantity; "" when unset
	Pos      Position
}

// Volume mount kinds.
const (
	VolumeNamed     = "named"
	VolumeAnonymous = "anonymous"
	VolumeHost      = "host"
	VolumeTmpfs     = "tmpfs" // memory-backed, lives as long as the pod (long syntax type: tmpfs, or tmpfs:)
)

// Volume is a top-level volume (A3).
type Volume struct {
	Name   string
	Labels map[string]string
	// Annotations is the volume's annotations field; with Labels, the claim's annotations.
	Annotations map[string]string
	Class       string // driver_opts.class; empty: the cluster's default
	Size        string // driver_opts.size; default "1Gi"
	Pos         Position
}

// Endpoint is one public URL with its routes. The list notation gives one Endpoint with an
// empty Name (its host uses the environment name); the map notation one per key; the object
// notation one with Labels.
type Endpoint struct {
	Name   string
	Labels map[string]string
	Rules  []Route
	Pos    Position
}

// Route sends a path to a service port.
type Route struct {
	Path    string
	Service string
	Port    int32
	Pos     Position
}

// FileObject is a top-level secret or config: its content comes from a file (file:), a
// variable (environment:) or, for a config, the file itself (content:).
type FileObject struct {
	Name string
	// File is the absolute path of a file: source; "" otherwise.
	File string
	// Environment names the variable of an environment: source; "" otherwise.
	Environment string
	// Data is the content.
	Data []byte
	Pos  Position
}

// Secret looks a top-level secret up by name (O(1): see index.go).
func (p *Project) Secret(name string) *FileObject {
	indexMu.Lock()
	defer indexMu.Unlock()
	return lookup(&p.indexes().secrets, p.Secrets, objectName, name)
}

// Config looks a top-level config up by name (O(1): see index.go).
func (p *Project) Config(name string) *FileObject {
	indexMu.Lock()
	defer indexMu.Unlock()
	return lookup(&p.indexes().configs, p.Configs, objectName, name)
}

func objectName(o *FileObject) string { return o.Name }
