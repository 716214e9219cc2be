// Package contexts stores devtool contexts (<home>/.devtool/context/config.json) and resolves where a
// command runs: flags first, then the current devtool context, then the kubeconfig.
//
// The store is plain JSON, readable by the user only (folder 0700, file 0600). Writes are atomic
// (temporary file, fsync, rename, fsync of the folder) and every read-modify-write holds an exclusive
// flock on a lock file beside the store, so two devtool processes never lose each other's changes.
// A store that cannot be read or parsed is an error naming the file; it is never replaced silently.
package contexts

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/devtool/devtool/internal/atomicfile"
	"github.com/devtool/devtool/internal/safefile"
)

// maxStoreBytes caps the context store and the analytics setting: a few contexts take a few KiB.
const maxStoreBytes = 4 << 20

// Context is one devtool context: a Kubernetes context or a platform installation, with the
// namespace, builder and registry commands use there.
type Context struct {
	// Name is the context's name: the Kubernetes context name, or the platform URL.
	Name string `json:"name"`
	// Token is the platform API token. Never printed.
	Token string `json:"token,omitempty"`
	// Namespace is the default namespace; empty follows the kubeconfig context's namespace.
	Namespace string `json:"namespace,omitempty"`
	// Builder is the build service address (tcp://host:port) or "docker"; empty lets the build
	// package decide (BUILDKIT_HOST, else the local daemon).
	Builder string `json:"builder,omitempty"`
	// Registry is the image registry host[:port]; empty when none.
	Registry string `json:"registry,omitempty"`
	// BuildService is the platform's hosted BuildKit (tcp://host:port) as /api/v1/info gave it; the
	// context uses it (with a client certificate from the platform, BuilderCerts) while Builder is
	// empty or the same address.
	BuildService string `json:"buildService,omitempty"`
	// IsDevtool is true when the context points to a platform installation.
	IsDevtool bool `json:"isDevtool"`
	// Certificate is the platform's CA certificate (PEM), when it has its own.
	Certificate string `json:"certificate,omitempty"`
	// Username is the platform account name.
	Username string `json:"username,omitempty"`
	// ClusterDomain is the public domain endpoints are served under.
	ClusterDomain string `json:"clusterDomain,omitempty"`
	// IngressClass is the ingressClassName of the endpoints' Ingresses ("" = the cluster's default).
	IngressClass string `json:"ingressClass,omitempty"`
	// EndpointPort is the HTTPS port endpoints answer on (0 = 443).
	EndpointPort int `json:"endpointPort,omitempty"`
	// KubeContext is the kubeconfig context holding the credentials; empty means Name, except for
	// a platform context, whose credentials come from the platform (see PlatformRESTConfig).
	KubeContext string `json:"kubeContext,omitempty"`

	// fromEnv marks a context made from DEVTOOL_URL alone (not saved).
	fromEnv bool
}

// FromEnv reports whether the context comes from DEVTOOL_URL with no saved context of that URL.
func (c *Context) FromEnv() bool { return c.fromEnv }

// KubeContextName is the kubeconfig context this devtool context uses.
func (c *Context) KubeContextName() string {
	if c.KubeContext != "" {
		return c.KubeContext
	}
	return c.Name
}

// Config is the whole store.
type Config struct {
	CurrentContext string              `json:"currentContext,omitempty"`
	Contexts       map[string]*Context `json:"contexts"`
}

// Current returns the current context, or nil when none is set.
func (c *Config) Current() *Context {
	if c.CurrentContext == "" {
		return nil
	}
	return c.Contexts[c.CurrentContext]
}

// Names returns the context names, sorted.
func (c *Config) Names() []string {
	names := make([]string, 0, len(c.Contexts))
	for n := range c.Contexts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Store is the devtool folder of one home directory.
type Store struct {
	// Dir is the devtool folder, <home>/.devtool.
	Dir string

	// Notice receives what the store did that the user did not ask for: a folder or file whose
	// permissions it changed (say, 0755 to 0700, since it holds tokens). nil drops them; commands
	// print them.
	Notice func(string)

	// beforeRename, when set (tests only), runs after the temporary file is written and before it
	// replaces the store; an error aborts the write.
	beforeRename func(tmp string) error
}

func (s *Store) notice(format string, args ...any) {
	if s.Notice != nil {
		s.Notice(fmt.Sprintf(format, args...))
	}
}

// NewStore returns the store of home (the folder holding .devtool).
func NewStore(home string) *Store { return &Store{Dir: filepath.Join(home, ".devtool")} }

// HomeDir is DEVTOOL_HOME when set, else the user's home directory.
func HomeDir(getenv func(string) string) (string, error) {
	if getenv != nil {
		if h := getenv("DEVTOOL_HOME"); h != "" {
			return h, nil
		}
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("finding the home directory for the devtool folder (set DEVTOOL_HOME): %w", err)
	}
	return h, nil
}

// StoreFromEnv returns the store under HomeDir(getenv).
func StoreFromEnv(getenv func(string) string) (*Store, error) {
	h, err := HomeDir(getenv)
	if err != nil {
		return nil, err
	}
	return NewStore(h), nil
}

// Path is the store file.
func (s *Store) Path() string { return filepath.Join(s.Dir, "context", "config.json") }

func (s *Store) lockPath() string { return s.Path() + ".lock" }

// Load reads the store. A missing store is an empty one.
func (s *Store) Load() (*Config, error) {
	return readConfig(s.Path())
}

// Update runs fn on the store under an exclusive lock and writes the result atomically.
// When fn returns an error nothing is written.
func (s *Store) Update(fn func(*Config) error) error {
	dir := filepath.Dir(s.Path())
	if err := s.ensureDir(s.Dir); err != nil {
		return err
	}
	if err := s.ensureDir(dir); err != nil {
		return err
	}
	unlock, err := lockFile(s.lockPath())
	if err != nil {
		return err
	}
	defer unlock()
	cfg, err := readConfig(s.Path())
	if err != nil {
		return err
	}
	if err := fn(cfg); err != nil {
		return err
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the context store: %w", err)
	}
	return s.writeAtomic(s.Path(), append(data, '\n'))
}

func readConfig(path string) (*Config, error) {
	data, err := safefile.Read(path, maxStoreBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return &Config{Contexts: map[string]*Context{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read the context store: %w", err) // err names the file
	}
	cfg := &Config{}
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil, corrupt(path, "the file is empty")
	}
	if err := json.Unmarshal(data, cfg); err != nil {
		return nil, corrupt(path, describeJSONError(data, err))
	}
	if cfg.Contexts == nil {
		cfg.Contexts = map[string]*Context{}
	}
	for key, c := range cfg.Contexts {
		if c == nil {
			return nil, corrupt(path, fmt.Sprintf("context %q is null", key))
		}
		if key == "" {
			return nil, corrupt(path, "a context has an empty name")
		}
		if c.Name == "" {
			c.Name = key
		}
		if c.Name != key {
			return nil, corrupt(path, fmt.Sprintf("context stored under %q is named %q", key, c.Name))
		}
	}
	return cfg, nil
}

// CorruptError is a store file that exists but cannot be understood.
type CorruptError struct {
	Path   string
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("the context store %s is corrupt: %s (fix the file, or move it away to start with no contexts)", e.Path, e.Reason)
}

func corrupt(path, reason string) error { return &CorruptError{Path: path, Reason: reason} }

func describeJSONError(data []byte, err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		line, col := position(data, se.Offset)
		return fmt.Sprintf("invalid JSON at line %d, column %d: %v", line, col, se)
	case errors.As(err, &te):
		line, col := position(data, te.Offset)
		return fmt.Sprintf("at line %d, column %d: field %q must be %s, not %s", line, col, te.Field, te.Type, te.Value)
	default:
		return fmt.Sprintf("invalid JSON: %v", err)
	}
}

func position(data []byte, offset int64) (line, col int) {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	line, col = 1, 1
	for _, b := range data[:offset] {
		if b == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

// ensureDir creates dir (0700) when missing. An existing folder is tightened to 0700 (it holds
// tokens), and Notice says so.
func (s *Store) ensureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("reading %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a folder", dir)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := outsideHome(dir); err != nil {
			return err
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("restricting %s to its owner: %w", dir, err)
		}
		s.notice("restricted %s to its owner (mode %04o, was %04o): it holds the contexts' tokens", dir, 0o700, fi.Mode().Perm())
	}
	return nil
}

// outsideHome refuses a folder reached through a symbolic link that leads out of the folder
// holding .devtool (the user's home or DEVTOOL_HOME): devtool never changes the mode of a folder
// it does not own by construction.
func outsideHome(dir string) error {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("reading %s: %w", dir, err)
	}
	// dir is <home>/.devtool or <home>/.devtool/<sub>: home is the folder above .devtool.
	home := dir
	for filepath.Base(home) != ".devtool" && filepath.Dir(home) != home {
		home = filepath.Dir(home)
	}
	home = filepath.Dir(home)
	realHome, err := filepath.EvalSymlinks(home)
	if err != nil {
		return fmt.Errorf("reading %s: %w", home, err)
	}
	if rel, err := filepath.Rel(realHome, real); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("%s leads to %s through a symbolic link, outside %s: devtool does not change the permissions of a folder outside it; replace the link by a folder (mode 0700) or set DEVTOOL_HOME", dir, real, home)
	}
	return nil
}

// WriteFileAtomic replaces path with data (mode 0600) atomically, creating its folder (0700) when missing.
func WriteFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	return atomicfile.WriteChecked(path, data, 0o600, nil)
}

// writeAtomic replaces path with data (0600) through atomicfile (temporary file synced, renamed
// over path, folder synced). On any failure path is left as it was. When the file it replaces had
// another mode, Notice says so.
func (s *Store) writeAtomic(path string, data []byte) (err error) {
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm() != 0o600 {
		defer func() {
			if err == nil {
				s.notice("%s is now readable by its owner only (mode 0600, was %04o), as devtool writes every file of its folder", path, fi.Mode().Perm())
			}
		}()
	}
	return atomicfile.WriteChecked(path, data, 0o600, s.beforeRename)
}
