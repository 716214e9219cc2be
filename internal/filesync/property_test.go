package filesync

import (
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// model tracks every version written and which of them a user replaced or
// deleted on purpose; every other one must survive somewhere.
type model struct {
	t       *testing.T
	rng     *rand.Rand
	n       int
	written map[string]bool // content -> superseded
	// taken, when set, reports whether root holds a name its filesystem
	// would take for p (a folding side played on Linux): p is not free.
	taken func(root, p string) bool
}

var (
	propDirs  = []string{"", "a", "b", "a/c"}
	propNames = []string{"x", "y", "z", "w.txt"}
)

func (m *model) version() string {
	m.n++
	v := fmt.Sprintf("v%d-%d", m.n, m.rng.Int63())
	m.written[v] = false
	return v
}

// files lists the regular files (and their content) and folders of a side.
func sideFiles(root string) (files map[string]string, dirs []string) {
	files = map[string]string{}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if strings.HasPrefix(d.Name(), tmpPrefix) {
			return nil
		}
		if d.IsDir() {
			dirs = append(dirs, rel)
		} else if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err == nil {
				files[rel] = string(b)
			}
		}
		return nil
	})
	return files, dirs
}

func pick[T any](rng *rand.Rand, s []T) T { return s[rng.Intn(len(s))] }

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// step does one random user action on a side.
func (m *model) step(root string) string {
	files, dirs := sideFiles(root)
	fl := keys(files)
	newPath := filepath.Join(pick(m.rng, propDirs), pick(m.rng, propNames))
	abs := func(p string) string { return filepath.Join(root, p) }
	free := func(p string) bool {
		if _, err := os.Lstat(abs(p)); err == nil {
			return false
		}
		if m.taken != nil && m.taken(root, p) {
			return false
		}
		// no file in the way of its folder
		for d := filepath.Dir(p); d != "."; d = filepath.Dir(d) {
			if fi, err := os.Lstat(abs(d)); err == nil && !fi.IsDir() {
				return false
			}
		}
		return true
	}
	switch k := m.rng.Intn(10); {
	case k < 3 || len(fl) == 0: // create
		if !free(newPath) {
			return "skip"
		}
		os.MkdirAll(filepath.Dir(abs(newPath)), 0o755)
		os.WriteFile(abs(newPath), []byte(m.version()), 0o644)
		return "create " + newPath
	case k < 5: // edit
		p := pick(m.rng, fl)
		m.written[files[p]] = true
		os.WriteFile(abs(p), []byte(m.version()), 0o644)
		return "edit " + p
	case k < 6: // delete a file
		p := pick(m.rng, fl)
		m.written[files[p]] = true
		os.Remove(abs(p))
		return "delete " + p
	case k < 7: // delete an empty folder
		if len(dirs) == 0 {
			return "skip"
		}
		d := pick(m.rng, dirs)
		if os.Remove(abs(d)) != nil {
			return "skip"
		}
		return "rmdir " + d
	case k < 9: // rename (case-only sometimes)
		p := pick(m.rng, fl)
		to := newPath
		if m.rng.Intn(3) == 0 {
			to = filepath.Join(filepath.Dir(p), strings.ToUpper(filepath.Base(p)))
		}
		if !free(to) {
			return "skip"
		}
		os.MkdirAll(filepath.Dir(abs(to)), 0o755)
		os.Rename(abs(p), abs(to))
		return "rename " + p + " " + to
	default: // type change: file -> folder holding a file, or -> symlink
		p := pick(m.rng, fl)
		m.written[files[p]] = true
		os.Remove(abs(p))
		if m.rng.Intn(2) == 0 {
			os.Symlink("target-"+p, abs(p))
			return "file->symlink " + p
		}
		os.MkdirAll(abs(p), 0o755)
		os.WriteFile(filepath.Join(abs(p), "inner"), []byte(m.version()), 0o644)
		return "file->dir " + p
	}
}

// check verifies that every version not replaced on purpose exists on a side.
func (m *model) check(local, remote string, log []string) {
	lf, _ := sideFiles(local)
	rf, _ := sideFiles(remote)
	have := map[string]bool{}
	for _, v := range lf {
		have[v] = true
	}
	for _, v := range rf {
		have[v] = true
	}
	for v, gone := range m.written {
		if !gone && !have[v] {
			m.t.Fatalf("version %s lost\nsteps:\n%s\nlocal %v\nremote %v", v, strings.Join(log, "\n"), lf, rf)
		}
	}
}

func copyDir(t *testing.T, from, to string) {
	os.RemoveAll(to)
	os.MkdirAll(to, 0o700)
	ents, _ := os.ReadDir(from)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err == nil {
			must(t, os.WriteFile(filepath.Join(to, e.Name()), b, 0o600))
		}
	}
}

// TestPropertyRandomTwoSided runs random two-sided sequences of creates,
// edits, deletes, renames and type changes, offline and while connected,
// with crashes that bring back stale persisted indexes, and checks that the
// sides end equal and no version written was lost.
func TestPropertyRandomTwoSided(t *testing.T) {
	first, seeds := int64(1), int64(4)
	if testing.Short() {
		seeds = 1
	}
	if v := os.Getenv("FILESYNC_SEEDS"); v != "" { // e.g. FILESYNC_SEEDS=5-40 for a longer run
		fmt.Sscanf(v, "%d-%d", &first, &seeds)
		seeds -= first - 1
	}
	for seed := first; seed < first+seeds; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			m := &model{t: t, rng: rand.New(rand.NewSource(seed)), written: map[string]bool{}}
			p := newPair(t, ClientOptions{})
			var log []string
			old := filepath.Join(t.TempDir(), "old")
			p.start(ClientOptions{})
			p.waitEqual(10 * time.Second)
			for round := 0; round < 12; round++ {
				connected := m.rng.Intn(2) == 0
				if !connected {
					p.stop()
				}
				for i := 0; i < 1+m.rng.Intn(6); i++ {
					side, root := "local", p.local
					if m.rng.Intn(2) == 0 {
						side, root = "remote", p.remote
					}
					log = append(log, fmt.Sprintf("r%d %s %s (connected %v)", round, side, m.step(root), connected))
					if connected && m.rng.Intn(3) == 0 {
						time.Sleep(time.Duration(m.rng.Intn(20)) * time.Millisecond)
					}
				}
				if connected && m.rng.Intn(3) == 0 {
					// the connection drops in the middle of the transfers
					time.Sleep(time.Duration(m.rng.Intn(8)) * time.Millisecond)
					p.stop()
					log = append(log, "connection cut")
					connected = false
				}
				if !connected {
					switch m.rng.Intn(4) {
					case 0: // crash: the persisted indexes are the ones of an earlier save
						copyDir(t, filepath.Join(old, "c"), p.clientDir)
						copyDir(t, filepath.Join(old, "s"), p.serverDir)
						log = append(log, "crash: stale indexes")
						p.start(ClientOptions{})
					case 1: // a new process
						p.start(ClientOptions{})
					default:
						p.connect()
					}
				}
				p.waitEqual(15 * time.Second)
				m.check(p.local, p.remote, log)
				if m.rng.Intn(3) == 0 {
					copyDir(t, p.clientDir, filepath.Join(old, "c"))
					copyDir(t, p.serverDir, filepath.Join(old, "s"))
				}
			}
			p.stop()
			m.check(p.local, p.remote, log)
		})
	}
}
