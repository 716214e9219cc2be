package filesync

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
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

// BenchmarkIdle100kSeparate: a synchronized 100,000-file tree with each end
// in its own process (this test binary run as the agent's end and as the
// local end, connected by pipes), idle for 10 s: each side's CPU and RSS
// measured apart (/proc), nothing of the benchmark's own process counted.
func BenchmarkIdle100kSeparate(b *testing.B) {
	dir := b.TempDir()
	local, remote := filepath.Join(dir, "local"), filepath.Join(dir, "remote")
	makeTree(b, local, 100000, 100)
	// client stdout -> agent stdin, agent stdout -> client stdin
	c2sR, c2sW, err := os.Pipe()
	must(b, err)
	s2cR, s2cW, err := os.Pipe()
	must(b, err)
	agent := exec.Command(os.Args[0])
	agent.Env = append(os.Environ(), "FILESYNC_SERVE_STATE="+filepath.Join(dir, "sstate"))
	agent.Stdin, agent.Stdout = c2sR, s2cW
	client := exec.Command(os.Args[0])
	client.Env = append(os.Environ(), "FILESYNC_CLIENT_STATE="+filepath.Join(dir, "cstate"),
		"FILESYNC_CLIENT_LOCAL="+local, "FILESYNC_CLIENT_REMOTE="+remote)
	client.Stdin, client.Stdout = s2cR, c2sW
	stderr, err := client.StderrPipe()
	must(b, err)
	start := time.Now()
	must(b, agent.Start())
	must(b, client.Start())
	for _, f := range []*os.File{c2sR, c2sW, s2cR, s2cW} {
		f.Close() // the children hold them
	}
	defer func() {
		client.Process.Kill()
		client.Wait()
		agent.Wait() // its stdin closes with the client
	}()
	synced := make(chan struct{})
	go func() {
		buf := make([]byte, 64)
		n, _ := io.ReadAtLeast(stderr, buf, len("synced"))
		if bytes.Contains(buf[:n], []byte("synced")) {
			close(synced)
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case <-synced:
	case <-time.After(10 * time.Minute):
		b.Fatal("not synced")
	}
	initial := time.Since(start)
	time.Sleep(2 * time.Second)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ccpu0, scpu0 := procCPU(client.Process.Pid), procCPU(agent.Process.Pid)
		t0 := time.Now()
		time.Sleep(10 * time.Second)
		wall := float64(time.Since(t0))
		b.ReportMetric(100*float64(procCPU(client.Process.Pid)-ccpu0)/wall, "client-cpu-%")
		b.ReportMetric(100*float64(procCPU(agent.Process.Pid)-scpu0)/wall, "agent-cpu-%")
		b.ReportMetric(float64(procRSS(client.Process.Pid))/(1<<20), "client-rss-MiB")
		b.ReportMetric(float64(procRSS(agent.Process.Pid))/(1<<20), "agent-rss-MiB")
	}
	b.ReportMetric(initial.Seconds(), "initial-s")
}
