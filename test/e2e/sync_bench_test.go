//go:build integration

package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/dev"
	"github.com/devtool/devtool/internal/devssh"
	"github.com/devtool/devtool/internal/filesync"
)

// BenchmarkSyncPortForward measures the sync engine through the real Kubernetes port-forward
// to a dev container on the local cluster, each figure against a baseline measured in the same
// run over the same SSH connection:
//
//   - initial-10000x1KiB, initial-200x5MiB: a first sync into an empty remote folder, against
//     `tar c -C dir . | (SSH exec channel) tar x -C remote` (ratio = sync / tar; target ≤ 2);
//   - warm-10000: a new client (indexes persisted on both sides) on the unchanged 10,000-file
//     tree, until it reports synced (target ≤ 1 s); ratio against the tar of the same tree;
//   - edit-local-to-remote, edit-remote-to-local: 200 edits one after the other, each timed
//     until it is seen on the other side (p50 ≤ 50 ms, p99 ≤ 200 ms); the baseline is the
//     round trip of a line through a shell on the same connection;
//   - idle-100000: agent CPU and RSS in the pod (from /proc) over 10 s of idleness with a
//     100,000-file tree synced, and this process's (the local end's) CPU and RSS.
//
// Run (one iteration each; the 5 MiB case moves 2 GiB through the port-forward):
//
//	DEVTOOL_TEST_KUBECONFIG=/tmp/devtool-cluster/kubeconfig nice go test -tags integration -run '^$' \
//	    -bench SyncPortForward -benchtime 1x -timeout 30m ./test/e2e/
//
// Each initial sync also logs the agent's CPU time during it; DEVTOOL_BENCH_LOG=1 adds the
// client's log (local scan, remote index, done) and the agent's session summary (blocks sent,
// time spent reading from the client and applying what it sent).
func BenchmarkSyncPortForward(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	root := b.TempDir()
	env := newSyncEnv(b, ctx, filepath.Join(root, "unused"))
	cl := env.sshClient(ctx)
	if _, err := sshRun(ctx, cl, "true", nil); err != nil {
		b.Fatal(err)
	}
	f := &benchFixture{env: env, cl: cl, root: root}

	b.Run("initial-10000x1KiB", func(b *testing.B) { f.initial(ctx, b, "small", 10000, 1<<10) })
	b.Run("warm-10000", func(b *testing.B) { f.warm(ctx, b) })
	b.Run("initial-200x5MiB", func(b *testing.B) { f.initial(ctx, b, "big", 200, 5<<20) })
	b.Run("edit-local-to-remote", func(b *testing.B) { f.latency(ctx, b, true) })
	b.Run("edit-remote-to-local", func(b *testing.B) { f.latency(ctx, b, false) })
	b.Run("idle-100000", func(b *testing.B) { f.idle(ctx, b) })
	if f.lat != nil {
		f.lat.stop()
	}
}

type benchFixture struct {
	env  *syncEnv
	cl   *devssh.Client
	root string
	n    int

	// the last initial sync of the small tree, for warm
	warmLocal, warmRemote, warmState string
	warmTar                          time.Duration

	lat *latencySetup
}

// makeTree writes files of size bytes (random, incompressible) into n/100 folders.
func makeTree(b *testing.B, dir string, n, size int) {
	if _, err := os.Stat(filepath.Join(dir, ".done")); err == nil {
		return
	}
	buf := make([]byte, size)
	for i := 0; i < n; i++ {
		d := filepath.Join(dir, fmt.Sprintf("d%03d", i/100))
		if i%100 == 0 {
			if err := os.MkdirAll(d, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		_, _ = rand.Read(buf)
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%05d.bin", i)), buf, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ".done"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
}

func (f *benchFixture) remoteDir(kind string) string {
	f.n++
	return fmt.Sprintf("/app/%s-%d", kind, f.n)
}

// syncOnce runs a new client (state in stateDir) until it reports synced, returning the time
// from Run to synced; the client is stopped before it returns.
func (f *benchFixture) syncOnce(ctx context.Context, b *testing.B, local, remote, stateDir string) time.Duration {
	var logger *slog.Logger
	if os.Getenv("DEVTOOL_BENCH_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	sc, err := filesync.NewClient(filesync.ClientOptions{Folders: []filesync.Folder{{Local: local, Remote: remote}},
		Excludes: []string{".done"}, StateDir: stateDir, Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		done <- sc.Run(rctx, func() (io.ReadWriteCloser, error) { return f.cl.OpenSubsystem(dev.SyncSubsystem) })
	}()
	select {
	case <-sc.Synced():
	case err := <-done:
		cancel()
		b.Fatalf("sync ended before it was done: %v", err)
	case <-time.After(10 * time.Minute):
		cancel()
		b.Fatalf("sync not done after 10 minutes: %+v", sc.Status())
	}
	d := time.Since(start)
	cancel()
	<-done
	return d
}

// tarOnce streams dir with tar into remote over an SSH exec channel of the same connection.
func (f *benchFixture) tarOnce(ctx context.Context, b *testing.B, dir, remote string) time.Duration {
	start := time.Now()
	cmd := exec.CommandContext(ctx, "tar", "cf", "-", "--exclude", "./.done", "-C", dir, ".")
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	_, rerr := sshRun(ctx, f.cl, "mkdir -p "+remote+" && tar xf - -C "+remote, out)
	if err := cmd.Wait(); err != nil || rerr != nil {
		b.Fatalf("tar: %v %v", err, rerr)
	}
	return time.Since(start)
}

func (f *benchFixture) count(ctx context.Context, b *testing.B, remote string) int {
	out, err := sshRun(ctx, f.cl, "find "+remote+" -type f | wc -l", nil)
	if err != nil {
		b.Fatal(err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(out))
	return n
}

func (f *benchFixture) rm(ctx context.Context, b *testing.B, remote string) {
	if _, err := sshRun(ctx, f.cl, "rm -rf "+remote, nil); err != nil {
		b.Fatal(err)
	}
}

func (f *benchFixture) initial(ctx context.Context, b *testing.B, kind string, n, size int) {
	dir := filepath.Join(f.root, kind)
	makeTree(b, dir, n, size)
	var syncT, tarT time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if f.warmRemote != "" && kind == "small" {
			f.rm(ctx, b, f.warmRemote)
		}
		remote, state := f.remoteDir("sync-"+kind), b.TempDir()
		t0, _ := f.agentStat(ctx, b)
		b.StartTimer()
		syncT += f.syncOnce(ctx, b, dir, remote, state)
		b.StopTimer()
		t1, _ := f.agentStat(ctx, b)
		b.Logf("%s: agent CPU during the sync: %.2f s", kind, float64(t1-t0)/100)
		if os.Getenv("DEVTOOL_BENCH_LOG") != "" {
			time.Sleep(500 * time.Millisecond)
			lg, _ := sshRun(ctx, f.cl, "grep 'sync session ended' /devtool/agent.log | tail -1", nil)
			b.Log(lg)
		}
		if got := f.count(ctx, b, remote); got != n {
			b.Fatalf("synced %d files of %d", got, n)
		}
		tremote := f.remoteDir("tar-" + kind)
		tarT += f.tarOnce(ctx, b, dir, tremote)
		if got := f.count(ctx, b, tremote); got != n {
			b.Fatalf("tar moved %d files of %d", got, n)
		}
		f.rm(ctx, b, tremote)
		if kind == "small" {
			f.warmLocal, f.warmRemote, f.warmState, f.warmTar = dir, remote, state, tarT/time.Duration(i+1)
		} else {
			f.rm(ctx, b, remote)
		}
		b.StartTimer()
	}
	b.ReportMetric(syncT.Seconds()/float64(b.N), "sync-s/op")
	b.ReportMetric(tarT.Seconds()/float64(b.N), "tar-s/op")
	b.ReportMetric(float64(syncT)/float64(tarT), "ratio")
}

func (f *benchFixture) warm(ctx context.Context, b *testing.B) {
	if f.warmRemote == "" {
		b.Skip("needs initial-10000x1KiB first")
	}
	var warmT time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		warmT += f.syncOnce(ctx, b, f.warmLocal, f.warmRemote, f.warmState)
	}
	b.StopTimer()
	b.ReportMetric(warmT.Seconds()/float64(b.N), "warm-s/op")
	b.ReportMetric(f.warmTar.Seconds(), "tar-s/op")
	b.ReportMetric(float64(warmT)/float64(b.N)/float64(f.warmTar), "ratio")
}

// latencySetup is a running sync of a small folder, a watcher of /app/lat/f in the pod and a
// shell in the pod, both over the benchmark's SSH connection.
type latencySetup struct {
	local  string
	sc     *filesync.Client
	stop   func()
	seen   chan string // lines printed by the remote watcher
	sh     io.WriteCloser
	shOut  chan string
	remote string
}

func (f *benchFixture) latencyRig(ctx context.Context, b *testing.B) *latencySetup {
	if f.lat != nil {
		return f.lat
	}
	l := &latencySetup{local: filepath.Join(f.root, "lat"), remote: f.remoteDir("lat"), seen: make(chan string, 1000), shOut: make(chan string, 1000)}
	if err := os.MkdirAll(l.local, 0o755); err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"f", "g"} {
		if err := os.WriteFile(filepath.Join(l.local, name), []byte("start\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	sc, err := filesync.NewClient(filesync.ClientOptions{Folders: []filesync.Folder{{Local: l.local, Remote: l.remote}}, StateDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		_ = sc.Run(rctx, func() (io.ReadWriteCloser, error) { return f.cl.OpenSubsystem(dev.SyncSubsystem) })
	}()
	<-sc.Synced()
	// The watcher: prints the first line of f each time it changes (polls every millisecond;
	// read is a shell builtin, so only usleep forks).
	wr, ww := io.Pipe()
	go func() {
		defer wg.Done()
		script := fmt.Sprintf(`last=; while :; do read -r v < %s/f 2>/dev/null; if [ "$v" != "$last" ]; then echo "$v"; last=$v; fi; usleep 1000; done`, l.remote)
		_, _ = f.cl.Exec(rctx, devssh.ExecOptions{Command: []string{"sh", "-c", script}, Stdout: ww})
		ww.Close()
	}()
	go func() {
		sc := bufio.NewScanner(wr)
		for sc.Scan() {
			l.seen <- sc.Text()
		}
	}()
	// The shell for remote edits (and the round-trip baseline).
	sr, sw := io.Pipe()
	or, ow := io.Pipe()
	go func() {
		defer wg.Done()
		_, _ = f.cl.Exec(rctx, devssh.ExecOptions{Command: []string{"sh", "-s"}, Stdin: sr, Stdout: ow})
		ow.Close()
	}()
	go func() {
		sc := bufio.NewScanner(or)
		for sc.Scan() {
			l.shOut <- sc.Text()
		}
	}()
	l.sh = sw
	l.sc = sc
	// Stopped by the parent benchmark (it serves both directions' sub-benchmarks).
	l.stop = func() { cancel(); sw.Close(); wg.Wait() }
	// Wait for the watcher's first line.
	select {
	case <-l.seen:
	case <-time.After(time.Minute):
		b.Fatal("the remote watcher printed nothing")
	}
	f.lat = l
	return l
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p*float64(len(s))+0.5) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(s) {
		i = len(s) - 1
	}
	return s[i]
}

func (f *benchFixture) latency(ctx context.Context, b *testing.B, toRemote bool) {
	l := f.latencyRig(ctx, b)
	const edits = 200
	// Baseline: a line through the remote shell and back.
	var rtt []time.Duration
	for i := 0; i < 50; i++ {
		start := time.Now()
		fmt.Fprintf(l.sh, "echo rtt%d\n", i)
		for line := range l.shOut {
			if line == fmt.Sprintf("rtt%d", i) {
				break
			}
		}
		rtt = append(rtt, time.Since(start))
	}
	var lat []time.Duration
	before := countConflicts(l.local)
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		for i := 0; i < edits; i++ {
			v := fmt.Sprintf("v%d-%d-%d", f.n, n, i)
			start := time.Now()
			if toRemote {
				if err := os.WriteFile(filepath.Join(l.local, "f"), []byte(v+"\n"), 0o644); err != nil {
					b.Fatal(err)
				}
				deadline := time.After(30 * time.Second)
			wait:
				for {
					select {
					case got := <-l.seen:
						if got == v {
							break wait
						}
					case <-deadline:
						b.Fatalf("edit %s not seen in the pod after 30s: %+v", v, l.sc.Status())
					}
				}
			} else {
				fmt.Fprintf(l.sh, "echo %s > %s/g\n", v, l.remote)
				p := filepath.Join(l.local, "g")
				deadline := time.Now().Add(30 * time.Second)
				for {
					got, _ := os.ReadFile(p)
					if strings.TrimSpace(string(got)) == v {
						break
					}
					if time.Now().After(deadline) {
						b.Fatalf("edit %s not seen locally after 30s: %+v", v, l.sc.Status())
					}
					time.Sleep(200 * time.Microsecond)
				}
			}
			lat = append(lat, time.Since(start))
			b.StopTimer()
			time.Sleep(20 * time.Millisecond)
			b.StartTimer()
		}
	}
	b.StopTimer()
	f.n++
	b.ReportMetric(float64(percentile(lat, 0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(percentile(lat, 1).Microseconds())/1000, "max-ms")
	b.ReportMetric(float64(percentile(rtt, 0.5).Microseconds())/1000, "rtt-p50-ms")
	b.ReportMetric(float64(percentile(lat, 0.5))/float64(percentile(rtt, 0.5)), "p50/rtt")
	// Only one side edits, so a conflict copy here is a false conflict of the engine.
	b.ReportMetric(float64(countConflicts(l.local)-before), "conflict-copies")
}

// agentStat reads the agent's CPU ticks (utime+stime) and VmRSS (kB) from /proc in the pod.
func (f *benchFixture) agentStat(ctx context.Context, b *testing.B) (ticks, rssKB int64) {
	out, err := sshRun(ctx, f.cl, `for p in /proc/[0-9]*; do if grep -q 'devtool-agen[t]' $p/cmdline 2>/dev/null; then `+
		`echo "stat $(cut -d' ' -f14,15 $p/stat)"; grep VmRSS $p/status; fi; done`, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		fs := strings.Fields(line)
		if len(fs) == 3 && fs[0] == "stat" {
			u, _ := strconv.ParseInt(fs[1], 10, 64)
			s, _ := strconv.ParseInt(fs[2], 10, 64)
			ticks += u + s
		}
		if len(fs) >= 2 && fs[0] == "VmRSS:" {
			v, _ := strconv.ParseInt(fs[1], 10, 64)
			rssKB += v
		}
	}
	return ticks, rssKB
}

func selfRSSKB() int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (f *benchFixture) idle(ctx context.Context, b *testing.B) {
	if f.lat != nil {
		f.lat.stop()
		f.lat = nil
	}
	dir := filepath.Join(f.root, "idle")
	makeTree(b, dir, 100000, 64)
	remote := f.remoteDir("idle")
	sc, err := filesync.NewClient(filesync.ClientOptions{Folders: []filesync.Folder{{Local: dir, Remote: remote}},
		Excludes: []string{".done"}, StateDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		done <- sc.Run(rctx, func() (io.ReadWriteCloser, error) { return f.cl.OpenSubsystem(dev.SyncSubsystem) })
	}()
	defer func() { cancel(); <-done }()
	select {
	case <-sc.Synced():
	case err := <-done:
		b.Fatalf("sync ended: %v", err)
	case <-time.After(15 * time.Minute):
		b.Fatalf("100,000 files not synced after 15 minutes: %+v", sc.Status())
	}
	initial := time.Since(start)
	time.Sleep(5 * time.Second) // settle (not an assertion)
	const window = 10 * time.Second
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0, _ := f.agentStat(ctx, b)
		c0 := cpuTime()
		time.Sleep(window)
		t1, rss := f.agentStat(ctx, b)
		c1 := cpuTime()
		// /proc ticks are 1/100 s (USER_HZ)
		b.ReportMetric(float64(t1-t0)/100/window.Seconds()*100, "agent-cpu-%")
		b.ReportMetric(float64(rss)/1024, "agent-rss-MB")
		b.ReportMetric(float64(c1-c0)/float64(window)*100, "local-cpu-%")
		b.ReportMetric(float64(selfRSSKB())/1024, "local-rss-MB")
	}
	b.StopTimer()
	b.ReportMetric(initial.Seconds(), "initial-s")
}

func countConflicts(dir string) int {
	ents, _ := os.ReadDir(dir)
	n := 0
	for _, e := range ents {
		if strings.Contains(e.Name(), ".conflict-") {
			n++
		}
	}
	return n
}
