package filesync

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// sshLoopback is an x/crypto/ssh server on 127.0.0.1 whose session channels
// serve subsystems: "devtool-sync" (Serve) and "tar-x" (the baseline: a tar
// stream extracted into the folder named by the test).
type sshLoopback struct {
	ln      net.Listener
	client  *ssh.Client
	wg      sync.WaitGroup
	ctx     context.Context
	cancel  context.CancelFunc
	state   string
	tarDest string
}

func newSSHLoopback(tb testing.TB, stateDir string) *sshLoopback {
	tb.Helper()
	_, hostPriv, _ := ed25519.GenerateKey(rand.Reader)
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	must(tb, err)
	_, cliPriv, _ := ed25519.GenerateKey(rand.Reader)
	cliSigner, err := ssh.NewSignerFromKey(cliPriv)
	must(tb, err)
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if bytes.Equal(k.Marshal(), cliSigner.PublicKey().Marshal()) {
			return nil, nil
		}
		return nil, errors.New("unknown key")
	}}
	cfg.AddHostKey(hostSigner)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(tb, err)
	s := &sshLoopback{ln: ln, state: stateDir}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serveConn(conn, cfg)
			}()
		}
	}()
	client, err := ssh.Dial("tcp", ln.Addr().String(), &ssh.ClientConfig{User: "dev", Auth: []ssh.AuthMethod{ssh.PublicKeys(cliSigner)}, HostKeyCallback: ssh.FixedHostKey(hostSigner.PublicKey())})
	must(tb, err)
	s.client = client
	return s
}

func (s *sshLoopback) serveConn(conn net.Conn, cfg *ssh.ServerConfig) {
	sc, chans, reqs, err := ssh.NewServerConn(conn, cfg)
	if err != nil {
		conn.Close()
		return
	}
	defer sc.Close()
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "no")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for req := range creqs {
				var sub struct{ Name string }
				if req.Type != "subsystem" || ssh.Unmarshal(req.Payload, &sub) != nil {
					req.Reply(false, nil)
					continue
				}
				req.Reply(true, nil)
				s.wg.Add(1)
				go func() {
					defer s.wg.Done()
					switch sub.Name {
					case "devtool-sync":
						_ = Serve(s.ctx, ch, ServerOptions{StateDir: s.state})
					case "tar-x":
						_ = untar(ch, s.tarDest)
						ch.SendRequest("exit-status", false, ssh.Marshal(struct{ C uint32 }{0}))
						ch.Close()
					}
				}()
			}
		}()
	}
}

func (s *sshLoopback) open(name string) (io.ReadWriteCloser, error) {
	ch, reqs, err := s.client.OpenChannel("session", nil)
	if err != nil {
		return nil, err
	}
	go ssh.DiscardRequests(reqs)
	ok, err := ch.SendRequest("subsystem", true, ssh.Marshal(struct{ Name string }{name}))
	if err != nil || !ok {
		ch.Close()
		return nil, fmt.Errorf("subsystem %s refused: %v", name, err)
	}
	return ch, nil
}

func (s *sshLoopback) close() {
	s.cancel()
	s.client.Close()
	s.ln.Close()
	s.wg.Wait()
}

func untar(r io.Reader, dest string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dest, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			os.MkdirAll(filepath.Dir(p), 0o755)
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			f.Close()
			if err != nil {
				return err
			}
		}
	}
}

// tarOver sends src as a tar stream through the "tar-x" subsystem and waits
// until the far end extracted it.
func (s *sshLoopback) tarOver(tb testing.TB, src, dest string) time.Duration {
	s.tarDest = dest
	start := time.Now()
	ch, err := s.open("tar-x")
	must(tb, err)
	tw := tar.NewWriter(ch)
	must(tb, filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == src {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		fi, _ := d.Info()
		h, _ := tar.FileInfoHeader(fi, "")
		h.Name = filepath.ToSlash(rel)
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			return err
		}
		return nil
	}))
	must(tb, tw.Close())
	ch.(ssh.Channel).CloseWrite()
	io.Copy(io.Discard, ch)
	ch.Close()
	return time.Since(start)
}

func makeTree(tb testing.TB, root string, n, size int) {
	buf := make([]byte, size)
	for i := 0; i < n; i++ {
		rand.Read(buf[:min(size, 64)]) // distinct files, the rest compressible like source code
		for j := 64; j < size; j++ {
			buf[j] = byte('a' + (i+j)%26)
		}
		if size > 1<<20 {
			rand.Read(buf) // large files: incompressible, like media or binaries
		}
		p := filepath.Join(root, fmt.Sprintf("d%02d/s%02d/f%05d", i%50, (i/50)%20, i))
		must(tb, os.MkdirAll(filepath.Dir(p), 0o755))
		must(tb, os.WriteFile(p, buf, 0o644))
	}
}

type syncRun struct {
	c      *Client
	cancel context.CancelFunc
	done   chan error
}

func startSync(tb testing.TB, s *sshLoopback, local, remote, state string) *syncRun {
	c, err := NewClient(ClientOptions{Folders: []Folder{{Local: local, Remote: remote}}, StateDir: state})
	must(tb, err)
	ctx, cancel := context.WithCancel(context.Background())
	r := &syncRun{c: c, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- c.Run(ctx, func() (io.ReadWriteCloser, error) { return s.open("devtool-sync") }) }()
	return r
}

func (r *syncRun) wait(tb testing.TB) {
	select {
	case <-r.c.Synced():
	case <-time.After(5 * time.Minute):
		tb.Fatalf("not synced: %+v", r.c.Status())
	}
}

func (r *syncRun) stop() {
	r.cancel()
	<-r.done
}

func benchInitial(b *testing.B, n, size int) {
	dir := b.TempDir()
	src := filepath.Join(dir, "src")
	makeTree(b, src, n, size)
	s := newSSHLoopback(b, filepath.Join(dir, "sstate"))
	defer s.close()
	var tarT, syncT time.Duration
	for i := 0; i < b.N; i++ {
		tarT += s.tarOver(b, src, filepath.Join(dir, fmt.Sprint("tar", i)))
		start := time.Now()
		r := startSync(b, s, src, filepath.Join(dir, fmt.Sprint("sync", i)), filepath.Join(dir, fmt.Sprint("cstate", i)))
		r.wait(b)
		syncT += time.Since(start)
		r.stop()
		os.RemoveAll(filepath.Join(dir, fmt.Sprint("tar", i)))
		os.RemoveAll(filepath.Join(dir, fmt.Sprint("sync", i)))
	}
	b.ReportMetric(syncT.Seconds()/float64(b.N), "sync-s")
	b.ReportMetric(tarT.Seconds()/float64(b.N), "tar-s")
	b.ReportMetric(float64(syncT)/float64(tarT), "sync/tar")
}

// BenchmarkInitialSmall: 10,000 x 1 KiB through an SSH channel on loopback,
// against tar c | channel | tar x in the same run.
func BenchmarkInitialSmall(b *testing.B) { benchInitial(b, 10000, 1024) }

// BenchmarkInitialLarge: 200 x 5 MiB (incompressible).
func BenchmarkInitialLarge(b *testing.B) { benchInitial(b, 200, 5<<20) }

// BenchmarkWarm: a new client process and session over an unchanged,
// already synchronized 10,000-file tree (indexes persisted on both sides).
func BenchmarkWarm(b *testing.B) {
	dir := b.TempDir()
	src, dst, cst := filepath.Join(dir, "src"), filepath.Join(dir, "dst"), filepath.Join(dir, "cstate")
	makeTree(b, src, 10000, 1024)
	s := newSSHLoopback(b, filepath.Join(dir, "sstate"))
	defer s.close()
	r := startSync(b, s, src, dst, cst)
	r.wait(b)
	r.stop()
	b.ResetTimer()
	var total time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		r := startSync(b, s, src, dst, cst)
		r.wait(b)
		total += time.Since(start)
		r.stop()
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "warm-s")
}

// BenchmarkEditLatency: 200 edits on each side, time until the other side
// holds the new content.
func BenchmarkEditLatency(b *testing.B) {
	dir := b.TempDir()
	local, remote := filepath.Join(dir, "local"), filepath.Join(dir, "remote")
	makeTree(b, local, 1000, 1024)
	s := newSSHLoopback(b, filepath.Join(dir, "sstate"))
	defer s.close()
	r := startSync(b, s, local, remote, filepath.Join(dir, "cstate"))
	r.wait(b)
	defer r.stop()
	b.ResetTimer()
	measure := func(from, to string) []time.Duration {
		var lat []time.Duration
		for i := 0; i < 200; i++ {
			rel := fmt.Sprintf("d%02d/s00/edit%d.txt", i%50, i%7)
			content := []byte(fmt.Sprintf("edit %d %d", i, time.Now().UnixNano()))
			start := time.Now()
			must(b, os.WriteFile(filepath.Join(from, rel), content, 0o644))
			for {
				if got, err := os.ReadFile(filepath.Join(to, rel)); err == nil && bytes.Equal(got, content) {
					break
				}
				if time.Since(start) > 10*time.Second {
					b.Fatalf("edit %s never arrived", rel)
				}
				time.Sleep(200 * time.Microsecond)
			}
			lat = append(lat, time.Since(start))
			time.Sleep(5 * time.Millisecond)
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		return lat
	}
	for i := 0; i < b.N; i++ {
		up := measure(local, remote)
		down := measure(remote, local)
		b.ReportMetric(float64(up[len(up)/2].Microseconds())/1000, "up-p50-ms")
		b.ReportMetric(float64(up[len(up)*99/100].Microseconds())/1000, "up-p99-ms")
		b.ReportMetric(float64(down[len(down)/2].Microseconds())/1000, "down-p50-ms")
		b.ReportMetric(float64(down[len(down)*99/100].Microseconds())/1000, "down-p99-ms")
	}
}

// TestSSHLoopbackSync runs a sync through a real SSH channel (x/crypto/ssh
// on 127.0.0.1) both ways and checks everything stops.
func TestSSHLoopbackSync(t *testing.T) {
	dir := t.TempDir()
	local, remote := filepath.Join(dir, "local"), filepath.Join(dir, "remote")
	makeTree(t, local, 100, 300)
	write(t, remote, "from/remote.txt", "hello")
	s := newSSHLoopback(t, filepath.Join(dir, "sstate"))
	r := startSync(t, s, local, remote, filepath.Join(dir, "cstate"))
	r.wait(t)
	p := &pair{t: t, local: local, remote: remote, c: r.c}
	p.waitEqual(10 * time.Second)
	write(t, local, "x/new", "new")
	p.waitEqual(10 * time.Second)
	r.stop()
	s.close()
}

// BenchmarkIdle100k: a synchronized 100,000-file tree, both ends running and
// idle for 10 s: CPU and RSS of the process holding both (the sum of the
// two sides).
func BenchmarkIdle100k(b *testing.B) {
	dir := b.TempDir()
	local, remote := filepath.Join(dir, "local"), filepath.Join(dir, "remote")
	makeTree(b, local, 100000, 100)
	s := newSSHLoopback(b, filepath.Join(dir, "sstate"))
	defer s.close()
	start := time.Now()
	r := startSync(b, s, local, remote, filepath.Join(dir, "cstate"))
	r.wait(b)
	initial := time.Since(start)
	defer r.stop()
	time.Sleep(2 * time.Second)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cpu0 := cpuTime()
		t0 := time.Now()
		time.Sleep(10 * time.Second)
		b.ReportMetric(100*float64(cpuTime()-cpu0)/float64(time.Since(t0)), "cpu-%")
		b.ReportMetric(float64(rssBytes())/(1<<20), "rss-MiB")
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-live-MiB")
	}
	b.ReportMetric(initial.Seconds(), "initial-s")
}

// children is a local end and an agent's end, each in its own process (this
// test binary in TestMain's child modes), connected by pipes.
type children struct {
	client, agent *exec.Cmd
	status        string // the client's status service address
	synced        chan struct{}
	done          chan struct{} // closed when the client's stderr ends
}

// startChildren starts both ends on local and remote (state under dir);
// profiles go to FILESYNC_PROFILE_DIR when set. Stopped in cleanup: the
// client gets SIGTERM (its stream ends, so does the agent's).
func startChildren(b *testing.B, dir, local, remote string) *children {
	b.Helper()
	c2sR, c2sW, err := os.Pipe() // client stdout -> agent stdin
	must(b, err)
	s2cR, s2cW, err := os.Pipe() // agent stdout -> client stdin
	must(b, err)
	profiles := func(side string) []string {
		pd := os.Getenv("FILESYNC_PROFILE_DIR")
		if pd == "" {
			return nil
		}
		return []string{"FILESYNC_CPUPROFILE=" + filepath.Join(pd, side+".cpu"), "FILESYNC_MEMPROFILE=" + filepath.Join(pd, side+".heap")}
	}
	ch := &children{synced: make(chan struct{}), done: make(chan struct{})}
	ch.agent = exec.Command(os.Args[0])
	ch.agent.Env = append(append(os.Environ(), "FILESYNC_SERVE_STATE="+filepath.Join(dir, "sstate")), profiles("agent")...)
	ch.agent.Stdin, ch.agent.Stdout, ch.agent.Stderr = c2sR, s2cW, os.Stderr
	ch.client = exec.Command(os.Args[0])
	ch.client.Env = append(append(os.Environ(), "FILESYNC_CLIENT_STATE="+filepath.Join(dir, "cstate"),
		"FILESYNC_CLIENT_LOCAL="+local, "FILESYNC_CLIENT_REMOTE="+remote, "FILESYNC_CLIENT_STATUS=1"), profiles("client")...)
	ch.client.Stdin, ch.client.Stdout = s2cR, c2sW
	stderr, err := ch.client.StderrPipe()
	must(b, err)
	must(b, ch.agent.Start())
	must(b, ch.client.Start())
	for _, f := range []*os.File{c2sR, c2sW, s2cR, s2cW} {
		f.Close() // the children hold them
	}
	b.Cleanup(func() {
		_ = ch.client.Process.Signal(syscall.SIGTERM)
		select {
		case <-ch.done:
		case <-time.After(30 * time.Second):
			_ = ch.client.Process.Kill()
		}
		_ = ch.client.Wait()
		_ = ch.agent.Wait() // its stdin closes with the client
	})
	addr := make(chan string, 1)
	go func() {
		defer close(ch.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			switch l := sc.Text(); {
			case strings.HasPrefix(l, "status "):
				addr <- strings.TrimPrefix(l, "status ")
			case l == "synced":
				close(ch.synced)
			default:
				fmt.Fprintln(os.Stderr, "client:", l)
			}
		}
	}()
	select {
	case ch.status = <-addr:
	case <-time.After(time.Minute):
		b.Fatal("the client's status service did not start")
	}
	return ch
}

func (ch *children) waitSynced(b *testing.B) {
	select {
	case <-ch.synced:
	case <-time.After(10 * time.Minute):
		b.Fatal("not synced")
	}
}

// statusOf asks the client process for its status.
// waitFiles waits until the client's first folder holds at least files paths with nothing
// pending (at most 10 minutes after start).
func (ch *children) waitFiles(b *testing.B, start time.Time, files int) {
	for {
		st := ch.statusOf(b).Folders[0]
		if st.Files >= files && st.Pending == 0 {
			return
		}
		if time.Since(start) > 10*time.Minute {
			b.Fatalf("not synced: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (ch *children) statusOf(b *testing.B) Status {
	req, _ := http.NewRequest("GET", "http://"+ch.status+"/", nil)
	req.SetBasicAuth("u", "p")
	resp, err := http.DefaultClient.Do(req)
	must(b, err)
	defer resp.Body.Close()
	var st Status
	must(b, json.NewDecoder(resp.Body).Decode(&st))
	return st
}

// idle measures each process over 10 s of idleness: CPU % and RSS.
func (ch *children) idle(b *testing.B) {
	ccpu0, scpu0 := procCPU(ch.client.Process.Pid), procCPU(ch.agent.Process.Pid)
	t0 := time.Now()
	time.Sleep(10 * time.Second)
	wall := float64(time.Since(t0))
	b.ReportMetric(100*float64(procCPU(ch.client.Process.Pid)-ccpu0)/wall, "client-cpu-%")
	b.ReportMetric(100*float64(procCPU(ch.agent.Process.Pid)-scpu0)/wall, "agent-cpu-%")
	b.ReportMetric(float64(procRSS(ch.client.Process.Pid))/(1<<20), "client-rss-MiB")
	b.ReportMetric(float64(procRSS(ch.agent.Process.Pid))/(1<<20), "agent-rss-MiB")
}

// BenchmarkIdle100kSeparate: a synchronized 100,000-file tree with each end
// in its own process, idle for 10 s: each side's CPU and RSS measured apart
// (/proc), nothing of the benchmark's own process counted.
func BenchmarkIdle100kSeparate(b *testing.B) {
	dir := b.TempDir()
	local, remote := filepath.Join(dir, "local"), filepath.Join(dir, "remote")
	makeTree(b, local, 100000, 100)
	start := time.Now()
	ch := startChildren(b, dir, local, remote)
	ch.waitSynced(b)
	initial := time.Since(start)
	time.Sleep(2 * time.Second)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ch.idle(b)
	}
	b.ReportMetric(initial.Seconds(), "initial-s")
}

// BenchmarkAppear100k: 100,000 files of 1 KiB appear at once (a folder moved
// in) in the local folder of a running, synchronized sync, each end in its
// own process connected by pipes; the time until the client reports them
// all in sync, against tar c | pipe | tar x of the same tree in the same
// run (ratio sync/tar; target <= 1.5). Then the client's and the agent's
// CPU and RSS over 10 s of idleness (target: client < 100 MB, < 1 % CPU).
// FILESYNC_PROFILE_DIR=<dir> writes each process's CPU and heap profile.
func BenchmarkAppear100k(b *testing.B) {
	const n = 100000
	dir := b.TempDir()
	local, remote := filepath.Join(dir, "local"), filepath.Join(dir, "remote")
	write(b, local, "README", "hello")
	stage := filepath.Join(dir, "stage")
	makeTree(b, stage, n, 1024)
	ch := startChildren(b, dir, local, remote)
	ch.waitSynced(b)
	if b.N != 1 {
		b.Fatal("run with -benchtime=1x: the tree appears once")
	}
	b.ResetTimer()
	// The baseline: the same tree through tar and a pipe, before and after
	// the sync (the mean of both: the machine's load drifts).
	tarRun := func(src, name string) (time.Duration, time.Duration) {
		dest := filepath.Join(dir, name)
		must(b, os.MkdirAll(dest, 0o755))
		t0 := time.Now()
		tar := exec.Command("sh", "-c", "tar -C \""+src+"\" -cf - . | tar -C \""+dest+"\" -xf -")
		if out, err := tar.CombinedOutput(); err != nil {
			b.Fatalf("tar: %v %s", err, out)
		}
		// the CPU time of both tars (waited for by sh)
		return time.Since(t0), tar.ProcessState.UserTime() + tar.ProcessState.SystemTime()
	}
	tarT, tarCPU := tarRun(stage, "tar1")
	ccpu0, scpu0 := procCPU(ch.client.Process.Pid), procCPU(ch.agent.Process.Pid)
	t0 := time.Now()
	must(b, os.Rename(stage, filepath.Join(local, "new")))
	ch.waitFiles(b, t0, n+1)
	syncT := time.Since(t0)
	ccpu, scpu := procCPU(ch.client.Process.Pid)-ccpu0, procCPU(ch.agent.Process.Pid)-scpu0
	tarT2, tarCPU2 := tarRun(filepath.Join(local, "new"), "tar2")
	tarT, tarCPU = (tarT+tarT2)/2, (tarCPU+tarCPU2)/2
	b.StopTimer()
	if got := countFiles(snapshotEntries(b, filepath.Join(remote, "new"))); got != n {
		b.Fatalf("%d files arrived, want %d", got, n)
	}
	b.ReportMetric(syncT.Seconds(), "sync-s")
	b.ReportMetric(tarT.Seconds(), "tar-s")
	b.ReportMetric(float64(syncT)/float64(tarT), "sync/tar")
	// CPU time is steadier than wall time on a loaded machine
	b.ReportMetric(ccpu.Seconds(), "client-cpu-s")
	b.ReportMetric(scpu.Seconds(), "agent-cpu-s")
	b.ReportMetric(tarCPU.Seconds(), "tar-cpu-s")
	b.ReportMetric(float64(ccpu+scpu)/float64(tarCPU), "sync/tar-cpu")
	time.Sleep(2 * time.Second)
	ch.idle(b)
	if os.Getenv("FILESYNC_PROFILE_DIR") != "" {
		_ = ch.client.Process.Signal(syscall.SIGUSR1)
		time.Sleep(time.Second)
	}
}

// snapshotEntries lists the files and folders under root as entries (kind
// only), for counting.
func snapshotEntries(b *testing.B, root string) map[string]Entry {
	m := map[string]Entry{}
	must(b, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		if d.IsDir() {
			m[p] = Entry{Kind: KindDir}
		} else {
			m[p] = Entry{Kind: KindFile}
		}
		return nil
	}))
	return m
}

// BenchmarkAppearRelease: what an idle client holds after 100,000 files of
// 1 KiB appeared at once in its folder (as BenchmarkAppear100k, each end in
// its own process), for each level of memRelease in the same run: nothing
// given back (the baseline), the maps remade and the memory returned to the
// system (releaseMaps), and that plus the stream's buffers and a one-block
// compression window (releaseAll, the default). The client's RSS
// (/proc/<pid>/status VmRSS) and CPU over 10 s of idleness, 2 s after all
// files are in sync; ratios against the baseline.
//
//	go test -run '^$' -bench AppearRelease -benchtime 1x ./internal/filesync/
func BenchmarkAppearRelease(b *testing.B) {
	const n = 100000
	if b.N != 1 {
		b.Fatal("run with -benchtime=1x: the tree appears once")
	}
	rss := map[int]float64{}
	for _, level := range []int{releaseNone, releaseMaps, releaseAll} {
		dir := b.TempDir()
		local, remote := filepath.Join(dir, "local"), filepath.Join(dir, "remote")
		write(b, local, "README", "hello")
		stage := filepath.Join(dir, "stage")
		makeTree(b, stage, n, 1024)
		b.Setenv("FILESYNC_RELEASE", fmt.Sprint(level))
		ch := startChildren(b, dir, local, remote)
		ch.waitSynced(b)
		t0 := time.Now()
		must(b, os.Rename(stage, filepath.Join(local, "new")))
		ch.waitFiles(b, t0, n+1)
		time.Sleep(2 * time.Second)
		cpu0 := procCPU(ch.client.Process.Pid)
		t1 := time.Now()
		time.Sleep(10 * time.Second)
		cpu := 100 * float64(procCPU(ch.client.Process.Pid)-cpu0) / float64(time.Since(t1))
		rss[level] = float64(procRSS(ch.client.Process.Pid)) / (1 << 20)
		name := []string{"none", "maps", "all"}[level]
		b.ReportMetric(rss[level], "rss-MiB-"+name)
		b.ReportMetric(cpu, "cpu-%-"+name)
		b.Logf("release %s: synced in %v, idle client RSS %.1f MiB, CPU %.2f %%", name, time.Since(t0), rss[level], cpu)
	}
	b.ReportMetric(rss[releaseAll]/rss[releaseNone], "all/none")
	b.ReportMetric(rss[releaseAll]/rss[releaseMaps], "all/maps")
}
