package dev

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/devtool/devtool/internal/atomicfile"
	"github.com/devtool/devtool/internal/errs"
	"github.com/devtool/devtool/internal/logfile"
	"github.com/devtool/devtool/internal/safefile"
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

// OpenStateDir creates (0700) and returns the state folder after checking it (Check). The
// folders devtool makes under home/.devtool (dev, the folder's hash, the dev name) must be real
// folders: a symbolic link among them is refused, never followed (nor chmodded through).
func OpenStateDir(home, manifestDir, devName string) (*StateDir, error) {
	p := StateDirPath(home, manifestDir, devName)
	base := filepath.Join(home, ".devtool")
	// Before MkdirAll, which would follow a link and create folders at its target.
	for _, d := range []string{filepath.Join(base, "dev"), filepath.Dir(p), p} {
		if err := ownFolder(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	if err := os.MkdirAll(p, 0o700); err != nil {
		return nil, fmt.Errorf("creating the dev state folder: %w", err)
	}
	if err := restrict(p); err != nil {
		return nil, err
	}
	s := &StateDir{Path: p}
	if err := s.Check(); err != nil {
		return nil, err
	}
	return s, nil
}

// ownFolder checks that dir is a folder and no symbolic link.
func ownFolder(dir string) error {
	fi, err := os.Lstat(dir)
	switch {
	case err != nil:
		return err
	case fi.Mode()&fs.ModeSymlink != 0:
		return errs.WithHint(fmt.Errorf("%s is a symbolic link: devtool keeps the dev containers' state (keys, credentials) only in folders it makes itself", dir),
			"remove the link; the next 'devtool up' makes the folder")
	case !fi.IsDir():
		return errs.WithHint(fmt.Errorf("%s is not a folder", dir), "remove it; the next 'devtool up' makes the folder")
	}
	return nil
}

// restrict gives the state folder mode 0700 through a handle on the folder checked to be no
// link, so a link swapped in meanwhile is never followed into a chmod of its target.
func restrict(dir string) error {
	if runtime.GOOS == "windows" {
		return nil // no modes; the folder is in the user's profile
	}
	before, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if before.Mode().Perm() == 0o700 {
		return nil
	}
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	now, err := f.Stat()
	if err != nil {
		return err
	}
	if !before.IsDir() || !os.SameFile(before, now) {
		return ownFolder(dir)
	}
	if err := f.Chmod(0o700); err != nil {
		return fmt.Errorf("restricting %s to its owner: %w", dir, err)
	}
	return nil
}

// Check refuses a state folder whose files are not what devtool writes there: each of the state,
// status, pid, log, key and known_hosts files, when present, must be a regular file (not a FIFO, a
// device, a folder or a symbolic link), and so must the sync state's files. The error names the
// file; nothing is opened, so a FIFO or a device never blocks.
func (s *StateDir) Check() error {
	for _, p := range []string{s.StateFile(), s.StatusFile(), s.PIDFile(), s.LogFile(), s.LogFile() + ".1",
		s.KeyFile(), s.HostKeyFile(), s.KnownHostsFile()} {
		if err := ownFile(p); err != nil {
			return err
		}
	}
	if err := ownFolder(s.SyncDir()); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	ents, err := os.ReadDir(s.SyncDir())
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := ownFile(filepath.Join(s.SyncDir(), e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// ownFile checks that p, when it exists, is a regular file and no symbolic link.
func ownFile(p string) error {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var what string
	switch m := fi.Mode(); {
	case m.IsRegular():
		return nil
	case m&fs.ModeSymlink != 0:
		what = "a symbolic link"
	case m.IsDir():
		what = "a folder"
	case m&fs.ModeNamedPipe != 0:
		what = "a named pipe"
	case m&fs.ModeSocket != 0:
		what = "a socket"
	case m&fs.ModeDevice != 0:
		what = "a device"
	default:
		what = "not a regular file"
	}
	return stateFileError(fmt.Errorf("%s is %s, not a file devtool wrote", p, what), p)
}

func stateFileError(err error, p string) error {
	return errs.WithHint(err, "remove "+p+": devtool writes its own files in its state folder and makes them again")
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
	// Never through a symbolic link (its target would be truncated), never blocking.
	f, err := safefile.OpenFileNoFollow(s.PIDFile(), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return stateFileError(fmt.Errorf("opening the pid file: %w", err), s.PIDFile())
	}
	if err := tryLock(f); err != nil {
		pid := readPID(f)
		f.Close()
		if errors.Is(err, errLocked) {
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
	f, err := safefile.OpenNoFollow(s.PIDFile())
	if err != nil {
		return 0
	}
	defer f.Close()
	if !isLocked(f) {
		return 0
	}
	return readPID(f)
}

// readPID reads the pid in the open pid file (a few bytes at most).
func readPID(f *os.File) int {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b[:n])))
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
	// Keep names the dev command kept by the agent across connections (devssh.Terminal), and
	// KeepCommand the command it is for.
	Keep        string `json:"keep,omitempty"`
	KeepCommand string `json:"keepCommand,omitempty"`
}

// WriteState replaces the state file atomically.
func (s *StateDir) WriteState(r StateRecord) error {
	r.Updated = time.Now().UTC()
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(s.StateFile(), append(b, '\n'), 0o600)
}

// ReadState reads the state file.
func (s *StateDir) ReadState() (StateRecord, error) {
	var r StateRecord
	return r, readJSON(s.StateFile(), &r)
}

// maxStateFile caps the state and status files: a few hundred bytes each.
const maxStateFile = 1 << 20

// readJSON reads one of the state folder's JSON files (no link followed, never blocking, capped).
// Errors name the file; a broken one says how to recover.
func readJSON(p string, v any) error {
	b, err := safefile.ReadNoFollow(p, maxStateFile)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return stateFileError(err, p)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return stateFileError(fmt.Errorf("%s is broken (%v)", p, err), p)
	}
	return nil
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
	return atomicfile.Write(s.StatusFile(), append(b, '\n'), 0o600)
}

// ReadStatusService reads what WriteStatusService saved.
func (s *StateDir) ReadStatusService() (StatusService, error) {
	var st StatusService
	return st, readJSON(s.StatusFile(), &st)
}

// OpenLog opens up's log (devtool.log) for appending, rotated at logfile.DefaultMax.
func (s *StateDir) OpenLog() (*logfile.File, error) {
	l, err := logfile.Open(s.LogFile(), logfile.DefaultMax)
	if err != nil {
		return nil, stateFileError(err, s.LogFile())
	}
	return l, nil
}
