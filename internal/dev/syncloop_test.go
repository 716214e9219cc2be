package dev

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/filesync"
)

// TestSyncLoopReconnects runs the real sync engine over in-memory connections: the initial
// sync reports ready, a broken connection is followed by a new one, and an edit made while
// disconnected arrives after the reconnect.
func TestSyncLoopReconnects(t *testing.T) {
	before := runtime.NumGoroutine()
	local, remote, state, rstate := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(local, "a.txt"), []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := filesync.NewClient(filesync.ClientOptions{Folders: []filesync.Folder{{Local: local, Remote: remote}}, StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var servers sync.WaitGroup
	var mu sync.Mutex
	var serverSide []net.Conn
	opener := func() Opener {
		return func() (io.ReadWriteCloser, error) {
			a, b := net.Pipe()
			mu.Lock()
			serverSide = append(serverSide, b)
			mu.Unlock()
			servers.Add(1)
			go func() {
				defer servers.Done()
				_ = filesync.Serve(ctx, b, filesync.ServerOptions{StateDir: rstate})
			}()
			return a, nil
		}
	}
	var emu sync.Mutex
	var states []State
	ready := make(chan struct{})
	loop := &SyncLoop{Client: sc, Report: func(e Event) {
		emu.Lock()
		states = append(states, e.State)
		emu.Unlock()
		if e.State == StateReady {
			close(ready)
		}
	}}
	conns := make(chan Opener, 1)
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx, conns) }()
	conns <- opener()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("no ready")
	}
	waitFile(t, filepath.Join(remote, "a.txt"), "one")

	// Break the connection, edit while disconnected, reconnect.
	mu.Lock()
	serverSide[0].Close()
	mu.Unlock()
	if err := os.WriteFile(filepath.Join(local, "a.txt"), []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	conns <- opener()
	waitFile(t, filepath.Join(remote, "a.txt"), "two")

	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("Run: %v", err)
	}
	servers.Wait()
	emu.Lock()
	if len(states) != 3 || states[0] != StateStartingSync || states[1] != StateSynchronizing || states[2] != StateReady {
		t.Errorf("states %v", states)
	}
	emu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+1 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+1 {
		t.Errorf("goroutines %d before, %d after", before, n)
	}
}

func waitFile(t *testing.T, path, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && string(b) == want {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, err := os.ReadFile(path)
	t.Fatalf("%s: %q %v, want %q", path, b, err, want)
}

// A sync the agent side refuses on a live connection reports the failed state with the reason
// (before, it stayed "synchronizing" for ever), is tried again, and once it runs the state says
// so and the initial sync ends in ready.
func TestSyncLoopReportsASyncThatCannotStart(t *testing.T) {
	defer func(d time.Duration) { SyncRetryMin = d }(SyncRetryMin)
	SyncRetryMin = 10 * time.Millisecond
	local, remote, state, rstate := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(local, "a.txt"), []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	sc, err := filesync.NewClient(filesync.ClientOptions{Folders: []filesync.Folder{{Local: local, Remote: remote}}, StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var servers sync.WaitGroup
	var mu sync.Mutex
	refuse := true
	open := func() (io.ReadWriteCloser, error) {
		a, b := net.Pipe()
		mu.Lock()
		r := refuse
		mu.Unlock()
		if r {
			b.Close() // the agent's side ends the stream at once
			return a, nil
		}
		servers.Add(1)
		go func() {
			defer servers.Done()
			_ = filesync.Serve(ctx, b, filesync.ServerOptions{StateDir: rstate})
		}()
		return a, nil
	}
	events := make(chan Event, 100)
	loop := &SyncLoop{Client: sc, Report: func(e Event) { events <- e }}
	conns := make(chan Opener, 1)
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx, conns) }()
	conns <- open
	var failed Event
	for failed.State != StateFailed {
		select {
		case failed = <-events:
		case <-time.After(30 * time.Second):
			t.Fatal("no failed state for a sync that cannot start")
		}
	}
	if !strings.Contains(failed.Message, "cannot start") {
		t.Errorf("failed state %q does not say the sync cannot start", failed.Message)
	}
	mu.Lock()
	refuse = false
	mu.Unlock()
	for e := failed; e.State != StateReady; {
		select {
		case e = <-events:
		case <-time.After(30 * time.Second):
			t.Fatal("no ready after the sync could start")
		}
	}
	waitFile(t, filepath.Join(remote, "a.txt"), "one")
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("Run: %v", err)
	}
	servers.Wait()
}

// A folder emptied during the session halts: the state is halted (not ready) and names the
// folder, nothing is deleted in the dev container; the dev command still starts on it (Run's
// onReport takes halted for ready). Files put back and a new connection: ready again.
func TestSyncLoopReportsAHalt(t *testing.T) {
	defer func(d time.Duration) { haltCheckEvery = d }(haltCheckEvery)
	haltCheckEvery = 20 * time.Millisecond
	local, remote, state, rstate := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	for i := 0; i < 30; i++ {
		if err := os.WriteFile(filepath.Join(local, "f"+strconv.Itoa(i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sc, err := filesync.NewClient(filesync.ClientOptions{Folders: []filesync.Folder{{Local: local, Remote: remote}}, StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var servers sync.WaitGroup
	var mu sync.Mutex
	var serverSide []net.Conn
	open := func() (io.ReadWriteCloser, error) {
		a, b := net.Pipe()
		mu.Lock()
		serverSide = append(serverSide, b)
		mu.Unlock()
		servers.Add(1)
		go func() {
			defer servers.Done()
			_ = filesync.Serve(ctx, b, filesync.ServerOptions{StateDir: rstate})
		}()
		return a, nil
	}
	events := make(chan Event, 100)
	loop := &SyncLoop{Client: sc, Report: func(e Event) { events <- e }}
	conns := make(chan Opener, 1)
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx, conns) }()
	conns <- open
	waitState := func(want State) Event {
		t.Helper()
		for {
			select {
			case e := <-events:
				if e.State == want {
					return e
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("no %s state", want)
			}
		}
	}
	waitState(StateReady)
	waitFile(t, filepath.Join(remote, "f29"), "x")
	ents, _ := os.ReadDir(local)
	for _, e := range ents {
		if err := os.Remove(filepath.Join(local, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	h := waitState(StateHalted)
	if !strings.Contains(h.Message, local) {
		t.Errorf("the halt does not name the folder %s: %q", local, h.Message)
	}
	if n, _ := os.ReadDir(remote); len(n) != 30 {
		t.Errorf("%d files left in the dev container's folder, want 30: the halt deleted", len(n))
	}
	if hint := HaltHint("web"); !strings.Contains(hint, "devtool up web --reset") || !strings.Contains(hint, "devtool up web --accept-deletions") {
		t.Errorf("hint %q", hint)
	}
	// The files come back (a disk mounted again) and the next connection looks again.
	for i := 0; i < 30; i++ {
		if err := os.WriteFile(filepath.Join(local, "f"+strconv.Itoa(i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	serverSide[0].Close()
	mu.Unlock()
	conns <- open
	waitState(StateReady)
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("Run: %v", err)
	}
	servers.Wait()
}
