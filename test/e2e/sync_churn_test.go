//go:build integration

package e2e

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/dev"
	"github.com/devtool/devtool/internal/filesync"
)

// The churn test: both sides create, edit, delete and rename files and folders at random
// while the port-forward stream is cut and the dev pod is deleted; then both trees must be
// identical and every content written (and not destroyed by a person's own delete or edit)
// must still exist, as the file or as a conflict copy.
//
// Every content is unique ("<id>\n" repeated to its size), so a file's content says who wrote
// it. Writes are atomic and exclusive (written in an ignored staging folder, then hard-linked
// to the path, which fails when the path exists), and every destruction moves the old file
// or folder into an ignored trash folder: what a side destroyed is exactly what its trash
// holds at the end. The remote side runs through the Kubernetes exec API (a shell reading
// commands from stdin), so it goes on while the port-forward is down.
//
//	DEVTOOL_TEST_KUBECONFIG=/tmp/devtool-cluster/kubeconfig go test -tags integration -run TestSyncChurn -v ./test/e2e/

const (
	churnRemote = "/app"
	// DEVTOOL_SYNC_CHURN overrides the churn duration (a Go duration).
	churnEnv = "DEVTOOL_SYNC_CHURN"
)

// contents is the registry of every content written: id -> size.
type contents struct {
	mu        sync.Mutex
	size      map[string]int
	confirmed map[string]string // id -> where it was written (for the failure message)
	maybe     map[string]bool   // written without a confirmation (the stream broke)
}

func newContents() *contents {
	return &contents{size: map[string]int{}, confirmed: map[string]string{}, maybe: map[string]bool{}}
}

func genContent(id string, size int) []byte {
	line := id + "\n"
	b := bytes.Repeat([]byte(line), size/len(line)+1)
	return b[:size]
}

// add registers content id of the given size; the size is raised to hold
// the id and its newline at least, so the content identifies itself (a
// shorter one, "L2" for L2441, could not be told from any other, and its
// destruction was reported as a loss).
func (c *contents) add(id string, size int) int {
	size = max(size, len(id)+1)
	c.mu.Lock()
	c.size[id] = size
	c.mu.Unlock()
	return size
}

func (c *contents) confirm(id, where string) {
	c.mu.Lock()
	c.confirmed[id] = where
	c.mu.Unlock()
}

func (c *contents) setMaybe(id string) {
	c.mu.Lock()
	c.maybe[id] = true
	c.mu.Unlock()
}

// identify returns the id of a valid content, or "" when the bytes are no content ever written.
func (c *contents) identify(b []byte) string {
	i := bytes.IndexByte(b, '\n')
	if i <= 0 {
		return ""
	}
	id := string(b[:i])
	c.mu.Lock()
	size, ok := c.size[id]
	c.mu.Unlock()
	if !ok || size != len(b) || !bytes.Equal(b, genContent(id, size)) {
		return ""
	}
	return id
}

func randSize(r *rand.Rand) int {
	if r.Intn(20) == 0 {
		return 100<<10 + r.Intn(300<<10)
	}
	return 1 + r.Intn(4000)
}

// --- the local side ---

type localChurn struct {
	root  string
	r     *rand.Rand
	c     *contents
	n     int
	ops   map[string]int
	fails int
}

func (l *localChurn) next() int { l.n++; return l.n }

func (l *localChurn) list() (files, dirs []string) {
	dirs = append(dirs, "")
	_ = filepath.WalkDir(l.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == l.root {
			return nil
		}
		rel, _ := filepath.Rel(l.root, p)
		rel = filepath.ToSlash(rel)
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			dirs = append(dirs, rel)
		} else if d.Type().IsRegular() {
			files = append(files, rel)
		}
		return nil
	})
	return files, dirs
}

func (l *localChurn) abs(rel string) string { return filepath.Join(l.root, filepath.FromSlash(rel)) }

// create writes a new content at rel, exclusively and atomically.
func (l *localChurn) create(rel string) bool {
	id := fmt.Sprintf("L%d", l.next())
	size := l.c.add(id, randSize(l.r))
	stage := filepath.Join(l.root, ".stage-l", id)
	if err := os.WriteFile(stage, genContent(id, size), 0o644); err != nil {
		return false
	}
	defer os.Remove(stage)
	if err := os.Link(stage, l.abs(rel)); err != nil {
		return false
	}
	l.c.confirm(id, fmt.Sprintf("local %s at %s", rel, time.Now().Format("15:04:05.000")))
	return true
}

func (l *localChurn) trash(rel string) bool {
	return os.Rename(l.abs(rel), filepath.Join(l.root, ".trash-l", fmt.Sprintf("t%d", l.next()))) == nil
}

func (l *localChurn) step() {
	files, dirs := l.list()
	pick := func(s []string) string { return s[l.r.Intn(len(s))] }
	op := l.r.Intn(100)
	if len(files) > 250 && op < 40 {
		op = 70 // too many files: delete
	}
	var name string
	var ok bool
	switch {
	case op < 35 || len(files) == 0:
		name = "create"
		ok = l.create(path.Join(pick(dirs), fmt.Sprintf("l%d.txt", l.next())))
	case op < 60:
		name = "edit"
		f := pick(files)
		ok = l.trash(f) && l.create(f)
	case op < 70:
		name = "mkdir"
		ok = os.Mkdir(l.abs(path.Join(pick(dirs), fmt.Sprintf("ld%d", l.next()))), 0o755) == nil
	case op < 80:
		name = "delete"
		ok = l.trash(pick(files))
	case op < 92:
		name = "rename"
		f := pick(files)
		ok = os.Rename(l.abs(f), l.abs(path.Join(pick(dirs), fmt.Sprintf("l%d-%s", l.next(), path.Base(f))))) == nil
	case op < 97 && len(dirs) > 1:
		name = "renamedir"
		d := pick(dirs[1:])
		ok = os.Rename(l.abs(d), l.abs(path.Join(pick(dirs), fmt.Sprintf("ld%d", l.next())))) == nil
	default:
		if d, small := rmdirCandidate(l.r, dirs, files); small {
			name = "rmdir"
			ok = l.trash(d)
		} else if len(files) > 0 {
			name = "delete"
			ok = l.trash(pick(files))
		} else {
			return
		}
	}
	if ok {
		l.ops[name]++
	} else {
		l.fails++
	}
}

// --- the remote side: a shell in the dev container, fed through the exec API ---

type remoteChurn struct {
	env   *syncEnv
	r     *rand.Rand
	c     *contents
	n     int
	files []string
	dirs  []string
	ops   map[string]int
	fails int
	lost  int // shells lost (pod deleted, exec stream broken)

	sh     *io.PipeWriter
	lines  chan string
	done   chan error
	cancel context.CancelFunc
}

func (r *remoteChurn) next() int { r.n++; return r.n }

// shell starts "sh -s" in the current pod with its stdin and stdout as pipes.
func (r *remoteChurn) shell(ctx context.Context) error {
	pod, _, err := dev.RunningPod(ctx, r.env.c.Clientset, r.env.ns, r.env.up.Dev)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	lines := make(chan string, 1000)
	done := make(chan error, 1)
	go func() {
		err := r.env.c.Exec(ctx, kubeExecOpts(r.env, pod, []string{"sh", "-s"}, inR, outW))
		outW.CloseWithError(fmt.Errorf("shell ended: %v", err))
		inR.CloseWithError(io.ErrClosedPipe)
		done <- err
	}()
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	r.sh, r.cancel, r.lines, r.done = inW, cancel, lines, done
	_, err = r.do(ctx, "mkdir -p /app/.trash-r /app/.stage-r", 30*time.Second)
	return err
}

func (r *remoteChurn) close() {
	if r.cancel != nil {
		r.cancel()
		r.sh.Close()
		<-r.done
		r.cancel = nil
	}
}

// do runs one command line and returns its output lines; an error means the shell is gone
// (the command may or may not have run).
func (r *remoteChurn) do(ctx context.Context, cmd string, timeout time.Duration) ([]string, error) {
	k := r.next()
	end := fmt.Sprintf("END%d", k)
	if _, err := fmt.Fprintf(r.sh, "%s\necho %s\n", cmd, end); err != nil {
		return nil, err
	}
	var out []string
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case l, ok := <-r.lines:
			if !ok {
				return out, fmt.Errorf("shell ended")
			}
			if l == end {
				return out, nil
			}
			out = append(out, l)
		case <-t.C:
			return out, fmt.Errorf("no answer within %s", timeout)
		case <-ctx.Done():
			return out, ctx.Err()
		}
	}
}

func (r *remoteChurn) refresh(ctx context.Context) error {
	out, err := r.do(ctx, `find /app -name '.*' -prune -o -type f -print | sed 's/^/f /'; find /app -name '.*' -prune -o -type d -print | sed 's/^/d /'`, 30*time.Second)
	if err != nil {
		return err
	}
	r.files, r.dirs = nil, nil
	for _, l := range out {
		if p, ok := strings.CutPrefix(l, "f "); ok {
			r.files = append(r.files, p)
		} else if p, ok := strings.CutPrefix(l, "d "); ok {
			r.dirs = append(r.dirs, p)
		}
	}
	if len(r.dirs) == 0 {
		r.dirs = []string{"/app"}
	}
	return nil
}

// rmdirCandidate picks a folder other than the root (dirs[0]) whose subtree holds at most a
// tenth of the files, trying a few at random. The churn deletes folders, but never a share of
// the tree that the sync's mass-deletion halt rightly stops (half of a side's files within
// 10 s; a seed that trashed a folder holding most of the tree failed the run on a correct halt):
// a halt during the churn now means one fired where it should not.
func rmdirCandidate(r *rand.Rand, dirs, files []string) (string, bool) {
	for i := 0; i < 5 && len(dirs) > 1; i++ {
		d := dirs[1+r.Intn(len(dirs)-1)]
		n := 0
		for _, f := range files {
			if strings.HasPrefix(f, d+"/") {
				n++
			}
		}
		if n*10 <= len(files) {
			return d, true
		}
	}
	return "", false
}

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// createCmd writes a new content at p (absolute) exclusively; prints OK when it was linked.
func (r *remoteChurn) createCmd(p string) (string, string) {
	id := fmt.Sprintf("R%d", r.next())
	size := r.c.add(id, randSize(r.r))
	stage := "/app/.stage-r/" + id
	return id, fmt.Sprintf(`yes %s | head -c %d > %s && ln %s %s 2>/dev/null && echo OK; rm -f %s`, id, size, stage, stage, shq(p), stage)
}

func (r *remoteChurn) trashCmd(p string) string {
	return fmt.Sprintf("mv %s /app/.trash-r/t%d 2>/dev/null", shq(p), r.next())
}

// step runs one random operation; an error means the shell is gone.
func (r *remoteChurn) step(ctx context.Context) error {
	if len(r.dirs) == 0 || r.r.Intn(8) == 0 {
		if err := r.refresh(ctx); err != nil {
			return err
		}
	}
	pick := func(s []string) string { return s[r.r.Intn(len(s))] }
	op := r.r.Intn(100)
	if len(r.files) > 250 && op < 40 {
		op = 70
	}
	var name, cmd, id, target string
	switch {
	case op < 35 || len(r.files) == 0:
		name = "create"
		target = path.Join(pick(r.dirs), fmt.Sprintf("r%d.txt", r.next()))
		id, cmd = r.createCmd(target)
	case op < 60:
		name = "edit"
		f := pick(r.files)
		target = f
		var c string
		id, c = r.createCmd(f)
		cmd = r.trashCmd(f) + " && { " + c + "; }"
	case op < 70:
		name = "mkdir"
		cmd = fmt.Sprintf("mkdir %s 2>/dev/null && echo OK", shq(path.Join(pick(r.dirs), fmt.Sprintf("rd%d", r.next()))))
	case op < 80:
		name = "delete"
		cmd = r.trashCmd(pick(r.files)) + " && echo OK"
	case op < 92:
		name = "rename"
		f := pick(r.files)
		cmd = fmt.Sprintf("mv %s %s 2>/dev/null && echo OK", shq(f), shq(path.Join(pick(r.dirs), fmt.Sprintf("r%d-%s", r.next(), path.Base(f)))))
	case op < 97 && len(r.dirs) > 1:
		name = "renamedir"
		d := pick(r.dirs[1:])
		cmd = fmt.Sprintf("mv %s %s 2>/dev/null && echo OK", shq(d), shq(path.Join(pick(r.dirs), fmt.Sprintf("rd%d", r.next()))))
	default:
		if d, small := rmdirCandidate(r.r, r.dirs, r.files); small {
			name = "rmdir"
			cmd = r.trashCmd(d) + " && echo OK"
		} else if len(r.files) > 0 {
			name = "delete"
			cmd = r.trashCmd(pick(r.files)) + " && echo OK"
		} else {
			return nil
		}
	}
	out, err := r.do(ctx, cmd, 30*time.Second)
	ok := len(out) > 0 && out[len(out)-1] == "OK"
	if id != "" {
		switch {
		case ok:
			r.c.confirm(id, fmt.Sprintf("remote %s %s at %s", name, target, time.Now().Format("15:04:05.000")))
		case err != nil:
			r.c.setMaybe(id)
		}
	}
	if ok {
		r.ops[name]++
	} else if err == nil {
		r.fails++
	}
	return err
}

// --- snapshots ---

// tree maps a slash path to "d" (folder), "f:<content>" or "l:<target>".
type tree map[string]string

func localTree(t *testing.T, root string) tree {
	out := tree{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			out[rel] = "d"
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "l:" + target
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				if os.IsNotExist(err) {
					return nil
				}
				return err
			}
			out[rel] = "f:" + string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func remoteTree(ctx context.Context, e *syncEnv, dir string) (tree, error) {
	pod, _, err := dev.RunningPod(ctx, e.c.Clientset, e.ns, e.up.Dev)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	var errb bytes.Buffer
	err = e.c.Exec(ctx, kubeExecOpts(e, pod, []string{"sh", "-c", "cd " + dir + " && tar cf - ."}, nil, &buf, &errb))
	if err != nil {
		return nil, fmt.Errorf("tar in the pod: %w: %s", err, errb.String())
	}
	out := tree{}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		name := strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
		if name == "" || name == "." {
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir:
			out[name] = "d"
		case tar.TypeSymlink:
			out[name] = "l:" + h.Linkname
		case tar.TypeLink:
			// a hard link to a file already in the archive (a staging file being linked)
			out[name] = out[strings.TrimPrefix(h.Linkname, "./")]
		default:
			b, err := io.ReadAll(tr)
			if err != nil {
				return nil, err
			}
			out[name] = "f:" + string(b)
		}
	}
}

// synced drops the paths the engine never syncs (trash, staging, temporary files).
func (t tree) synced() tree {
	out := tree{}
	for p, v := range t {
		skip := false
		for _, part := range strings.Split(p, "/") {
			if strings.HasPrefix(part, ".trash-") || strings.HasPrefix(part, ".stage-") || strings.HasPrefix(part, ".devtool-tmp-") {
				skip = true
			}
		}
		if !skip {
			out[p] = v
		}
	}
	return out
}

// under returns the files below prefix/.
func (t tree) under(prefix string) tree {
	out := tree{}
	for p, v := range t {
		if strings.HasPrefix(p, prefix+"/") {
			out[p] = v
		}
	}
	return out
}

func diffTrees(a, b tree) []string {
	var d []string
	for p, v := range a {
		if w, ok := b[p]; !ok {
			d = append(d, "only local: "+p)
		} else if v != w {
			d = append(d, fmt.Sprintf("differs: %s (local %.40q, remote %.40q)", p, v, w))
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			d = append(d, "only remote: "+p)
		}
	}
	sort.Strings(d)
	return d
}

func TestSyncChurn(t *testing.T) {
	churn := 60 * time.Second
	if s := os.Getenv(churnEnv); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("%s: %v", churnEnv, err)
		}
		churn = d
	}
	ctx, cancel := context.WithTimeout(context.Background(), churn+4*time.Minute)
	defer cancel()
	local := t.TempDir()
	env := newSyncEnv(t, ctx, local)
	seed := time.Now().UnixNano()
	t.Logf("seed %d (namespace %s)", seed, env.ns)
	reg := newContents()

	// A starting tree on the local side.
	lc := &localChurn{root: local, r: rand.New(rand.NewSource(seed)), c: reg, ops: map[string]int{}}
	for _, d := range []string{".trash-l", ".stage-l", "src", "src/pkg", "docs", "assets"} {
		if err := os.MkdirAll(filepath.Join(local, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 60; i++ {
		dirs := []string{"", "src", "src/pkg", "docs", "assets"}
		lc.create(path.Join(dirs[i%len(dirs)], fmt.Sprintf("seed%d.txt", i)))
	}

	clog := &syncBuffer{}
	sc, err := filesync.NewClient(filesync.ClientOptions{Folders: []filesync.Folder{{Local: local, Remote: churnRemote}},
		Excludes: []string{".trash-*", ".stage-*"}, StateDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(clog, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	runner := env.startSync(ctx, sc)
	defer runner.stop()
	select {
	case <-sc.Synced():
	case <-time.After(2 * time.Minute):
		t.Fatalf("initial sync not done: %+v", sc.Status())
	}

	rc := &remoteChurn{env: env, r: rand.New(rand.NewSource(seed + 1)), c: reg, ops: map[string]int{}}
	if err := rc.shell(ctx); err != nil {
		t.Fatalf("remote shell: %v", err)
	}
	defer rc.close()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { // local side
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			lc.step()
			if lc.r.Intn(10) != 0 { // bursts now and then
				time.Sleep(time.Duration(5+lc.r.Intn(60)) * time.Millisecond)
			}
		}
	}()
	go func() { // remote side
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := rc.step(ctx); err != nil {
				rc.lost++
				rc.close()
				for {
					select {
					case <-stop:
						return
					case <-time.After(500 * time.Millisecond):
					}
					if err := rc.shell(ctx); err == nil {
						rc.files, rc.dirs = nil, nil
						break
					}
					rc.close()
				}
				continue
			}
			if rc.r.Intn(10) != 0 {
				time.Sleep(time.Duration(5+rc.r.Intn(60)) * time.Millisecond)
			}
		}
	}()
	var chaos []string
	go func() { // the connection cut twice, the pod deleted in the middle
		defer wg.Done()
		start := time.Now()
		steps := []struct {
			at float64
			do string
		}{{0.2, "cut"}, {0.4, "cut"}, {0.55, "delete pod"}, {0.8, "cut"}}
		for _, s := range steps {
			select {
			case <-stop:
				return
			case <-time.After(time.Until(start.Add(time.Duration(s.at * float64(churn))))):
			}
			switch s.do {
			case "cut":
				env.cut()
			case "delete pod":
				pod, _, err := dev.RunningPod(ctx, env.c.Clientset, env.ns, env.up.Dev)
				if err == nil {
					err = env.c.Clientset.CoreV1().Pods(env.ns).Delete(ctx, pod, metav1.DeleteOptions{})
				}
				if err != nil {
					t.Errorf("deleting the dev pod: %v", err)
				}
				s.do += " " + pod
			}
			chaos = append(chaos, fmt.Sprintf("%s at %s", s.do, time.Since(start).Round(time.Millisecond)))
		}
	}()
	time.Sleep(churn)
	close(stop)
	wg.Wait()
	rc.close()
	t.Logf("chaos: %v", chaos)
	t.Logf("local ops %v (%d failed: target gone)", lc.ops, lc.fails)
	t.Logf("remote ops %v (%d failed: target gone, %d shells lost)", rc.ops, rc.fails, rc.lost)

	// Quiesce: both trees equal (and the client idle) twice in a row.
	quiesceStart := time.Now()
	var lt, rt tree
	var diff []string
	equalOnce := false
	for {
		lt = localTree(t, local)
		rt, err = remoteTree(ctx, env, churnRemote)
		if err == nil {
			diff = diffTrees(lt.synced(), rt.synced())
			st := sc.Status()
			pending := 0
			for _, f := range st.Folders {
				pending += f.Pending
			}
			if len(diff) == 0 && pending == 0 && st.Connected {
				if equalOnce {
					break
				}
				equalOnce = true
			} else {
				equalOnce = false
			}
		}
		if time.Since(quiesceStart) > 90*time.Second {
			st := sc.Status()
			// What the client did with the paths it still waits on, for the diagnosis.
			for _, f := range st.Folders {
				for _, w := range head(f.Waiting, 3) {
					t.Logf("waiting on %s: local %q, remote %q; the client's last log lines about it:\n%s",
						w, lt[w], rt[w], tailLines(clog.String(), w, 80))
				}
			}
			t.Fatalf("the trees did not converge within 90s (err %v): %d differences:\n%s\nstatus %+v",
				err, len(diff), strings.Join(head(diff, 40), "\n"), st)
		}
		time.Sleep(time.Second)
	}
	t.Logf("converged %s after the churn ended; %d paths", time.Since(quiesceStart).Round(time.Millisecond), len(lt.synced()))

	// What each side destroyed is in its trash.
	destroyed := map[string]bool{}
	for _, tr := range []tree{lt.under(".trash-l"), rt.under(".trash-r")} {
		for _, v := range tr {
			if c, ok := strings.CutPrefix(v, "f:"); ok {
				if id := reg.identify([]byte(c)); id != "" {
					destroyed[id] = true
				}
			}
		}
	}
	present := map[string]bool{}
	conflicts := 0
	for p, v := range lt.synced() {
		if strings.Contains(p, ".conflict-") {
			conflicts++
		}
		c, ok := strings.CutPrefix(v, "f:")
		if !ok {
			continue
		}
		id := reg.identify([]byte(c))
		if id == "" {
			t.Errorf("%s holds a content nobody wrote (torn or corrupt): %.60q", p, c)
			continue
		}
		present[id] = true
	}
	reg.mu.Lock()
	var lost []string
	for id, where := range reg.confirmed {
		if !destroyed[id] && !present[id] {
			lost = append(lost, id+" ("+where+")")
		}
	}
	written, maybe := len(reg.confirmed), len(reg.maybe)
	reg.mu.Unlock()
	sort.Strings(lost)
	t.Logf("%d contents written (%d more unconfirmed), %d destroyed by their owners, %d present, %d conflict copies; status %+v",
		written, maybe, len(destroyed), len(present), conflicts, sc.Status())
	if len(lost) > 0 {
		t.Errorf("%d contents lost: %s", len(lost), strings.Join(head(lost, 40), ", "))
		// What both ends logged about the lost files' names, for the diagnosis.
		agentLog, _ := env.kexec(ctx, mustPod(ctx, env), "cat /devtool/agent.log", nil)
		for _, l := range head(lost, 5) {
			name := strings.TrimSuffix(l, ")")
			if i := strings.Index(name, " at "); i >= 0 {
				name = name[:i]
			}
			if i := strings.LastIndexAny(name, "/ "); i >= 0 {
				name = name[i+1:]
			}
			t.Logf("client log about %s:\n%s", name, grepLines(clog.String(), name))
			for _, f := range sc.Status().Folders {
				for _, e := range f.Errors {
					if strings.Contains(e.Path, name) || strings.Contains(e.Err, name) {
						t.Logf("sync error: %+v", e)
					}
				}
				for _, c := range f.Conflicts {
					if strings.Contains(c.Path, name) || strings.Contains(c.Copy, name) {
						t.Logf("conflict: %+v", c)
					}
				}
			}
			t.Logf("agent log about %s:\n%s", name, grepLines(agentLog, name))
		}
	}
	if evs := runner.eventLog(); len(evs) < 4 {
		t.Errorf("expected the connection to be lost and regained several times, events %v", evs)
	}
}

func head(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func grepLines(text, sub string) string {
	out := matchLines(text, func(l string) bool { return strings.Contains(l, sub) })
	return strings.Join(head(out, 60), "\n")
}

// tailLines is the last n lines of a log that name path p (as a value: path=p, to=p).
func tailLines(text, p string, n int) string {
	out := matchLines(text, func(l string) bool { return strings.Contains(l, "="+p+" ") || strings.HasSuffix(l, "="+p) })
	return strings.Join(out[max(0, len(out)-n):], "\n")
}

// matchLines is the lines of text that match.
func matchLines(text string, match func(string) bool) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if match(l) {
			out = append(out, l)
		}
	}
	return out
}

func mustPod(ctx context.Context, e *syncEnv) string {
	pod, _, err := dev.RunningPod(ctx, e.c.Clientset, e.ns, e.up.Dev)
	if err != nil {
		return e.pod()
	}
	return pod
}
