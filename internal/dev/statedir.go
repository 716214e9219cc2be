package dev

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// StateDir is the local state of one dev container of one folder:
// ~/.devtool/dev/<hash of the manifest folder>/<devName>/ (0700) holding the state file, the
// pid file (locked while `up` runs), the log, the SSH key pair and known_hosts, the sync state
// and the local sync service's credentials.
type StateDir struct {
	Path string
	lock *os.File
}

// StateDirPath is the state folder of a dev container; home holds .devtool.
func StateDirPath(home, manifestDir, devName string) string {
	abs, err := filepath.Abs(manifestDir)
	if err != nil {
		abs = manifestDir
	}
	sum := sha256.Sum256([]byte(filepath.Clean(abs)))
	return filepath.Join(home, ".devtool", "dev", hex.EncodeToString(sum[:])[:16], devName)
}

// OpenStateDir creates (0700) and returns the state folder.
func OpenStateDir(home, manifestDir, devName string) (*StateDir, error) {
	p := StateDirPath(home, manifestDir, devName)
	if err := os.MkdirAll(p, 0o700); err != nil {
		return nil, fmt.Errorf("creating the dev state folder: %w", err)
	}
	if err := os.Chmod(p, 0o700); err != nil {
		return nil, err
	}
	return &StateDir{Path: p}, nil
}

// Files of the state folder.
func (s *StateDir) KeyFile() string        { return filepath.Join(s.Path, "id_ed25519") }
func (s *StateDir) KnownHostsFile() string { return filepath.Join(s.Path, "known_hosts") }
func (s *StateDir) HostKeyFile() string    { return filepath.Join(s.Path, "ssh_host_ed25519") }
func (s *StateDir) LogFile() string        { return filepath.Join(s.Path, "devtool.log") }
func (s *StateDir) SyncDir() string        { return filepath.Join(s.Path, "sync") }
func (s *StateDir) PIDFile() string        { return filepath.Join(s.Path, "pid") }
func (s *StateDir) StateFile() string      { return filepath.Join(s.Path, "state.json") }
func (s *StateDir) StatusFile() string     { return filepath.Join(s.Path, "status.json") }

// HeldError says another process runs `up` for this dev container.
type HeldError struct {
	PID int
	Dir string
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("another 'devtool up' (pid %d) holds this dev container (state in %s); stop it first", e.PID, e.Dir)
}

// Lock takes the dev container for this process: an exclusive lock on the pid file, which
// then holds our pid. The kernel drops the lock when a process dies, even by SIGKILL, so a
// stale pid file is taken over. A held lock returns a *HeldError naming the holder.
func (s *StateDir) Lock() error {
	f, err := os.OpenFile(s.PIDFile(), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("opening the pid file: %w", err)
	}
	if err := tryLock(f); err != nil {
		b, _ := os.ReadFile(s.PIDFile())
		f.Close()
		if errors.Is(err, errLocked) {
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			return &HeldError{PID: pid, Dir: s.Path}
		}
		return fmt.Errorf("locking the pid file: %w", err)
	}
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		if err != nil {
			f.Close()
			return err
		}
	}
	s.lock = f
	return nil
}

// Unlock releases the lock and removes the pid file.
func (s *StateDir) Unlock() {
	if s.lock == nil {
		return
	}
	_ = os.Remove(s.PIDFile())
	_ = s.lock.Close()
	s.lock = nil
}

// Holder returns the pid of the `up` holding the dev container, 0 when none.
func (s *StateDir) Holder() int {
	f, err := os.Open(s.PIDFile())
	if err != nil {
		return 0
	}
	defer f.Close()
	if !isLocked(f) {
		return 0
	}
	b, _ := os.ReadFile(s.PIDFile())
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// StateRecord is the content of the state file.
type StateRecord struct {
	State     State     `json:"state"`
	Message   string    `json:"message,omitempty"`
	Namespace string    `json:"namespace,omitempty"`
	Workload  string    `json:"workload,omitempty"`
	Pod       string    `json:"pod,omitempty"`
	PID       int       `json:"pid,omitempty"`
	Updated   time.Time `json:"updated"`
}

// WriteState replaces the state file atomically.
func (s *StateDir) WriteState(r StateRecord) error {
	r.Updated = time.Now().UTC()
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(s.StateFile(), append(b, '\n'), 0o600)
}

// ReadState reads the state file.
func (s *StateDir) ReadState() (StateRecord, error) {
	var r StateRecord
	b, err := os.ReadFile(s.StateFile())
	if err != nil {
		return r, err
	}
	return r, json.Unmarshal(b, &r)
}

// StatusService is where the local sync status service listens and its credentials.
type StatusService struct {
	Addr     string `json:"addr"`
	User     string `json:"user"`
	Password string `json:"password"`
}

// WriteStatusService saves the status service's address and credentials (0600).
func (s *StateDir) WriteStatusService(st StatusService) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(s.StatusFile(), append(b, '\n'), 0o600)
}

// ReadStatusService reads what WriteStatusService saved.
func (s *StateDir) ReadStatusService() (StatusService, error) {
	var st StatusService
	b, err := os.ReadFile(s.StatusFile())
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(b, &st)
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
