package filesync

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRescanEntriesNeverOvertakeAResult: the agent's rescan found x (v1) and
// is about to queue it when an op removes x; the entry must reach the client
// before the op's result. Before the agent ordered them, the result (x gone)
// could arrive first and the older entry after it, so the client's mirror of
// the agent's index held x again, and the client acted on a file that was not
// there (a wasted pull, or worse, a decision on a stale state).
func TestRescanEntriesNeverOvertakeAResult(t *testing.T) {
	remote := t.TempDir()
	a, b := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	sdone := make(chan error, 1)
	go func() { sdone <- Serve(ctx, b, ServerOptions{StateDir: t.TempDir(), Logger: testLogger(t)}) }()
	defer func() {
		cancel()
		a.Close()
		<-sdone
	}()
	must(t, writeHello(a))
	must(t, readHello(a, "agent"))
	fr := newFrameReader(a)
	defer fr.close()
	var wmu sync.Mutex
	out := newSender(a, newQueue[any](), nil, nil)
	defer out.fw.close()
	send := func(m any) {
		wmu.Lock()
		defer wmu.Unlock()
		must(t, out.send(m))
		must(t, out.fw.flush())
	}
	next := func() any {
		t.Helper()
		// a missing message fails the test instead of hanging it
		must(t, a.SetReadDeadline(time.Now().Add(10*time.Second)))
		typ, body, err := fr.next()
		if err != nil {
			t.Fatalf("reading the agent's next message: %v", err)
		}
		m, err := decodeMsg(typ, body)
		must(t, err)
		return m
	}
	send(&helloMsg{Roots: []string{remote}})
	next() // hello ok
	send(&rulesMsg{Folder: 0})
	for {
		if m, ok := next().(*entriesMsg); ok && m.Full && m.Done {
			break
		}
	}

	v1 := Entry{Kind: KindFile, Size: 2, Hash: newHasherSum([]byte("v1"))}
	found := make(chan struct{})
	var once sync.Once
	testHookRescanned = func(changed []item) {
		for _, it := range changed {
			if it.Path == "x" && it.E.Kind == KindFile {
				once.Do(func() {
					close(found)
					time.Sleep(300 * time.Millisecond) // the op arrives meanwhile
				})
			}
		}
	}
	defer func() { testHookRescanned = nil }()
	must(t, os.WriteFile(filepath.Join(remote, "x"), []byte("v1"), 0o644))
	select {
	case <-found:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent's watcher never rescanned x")
	}
	send(&opMsg{ID: 7, Folder: 0, Code: opRemove, Path: "x", Expect: v1})

	sawEntry := false
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		switch m := next().(type) {
		case *entriesMsg:
			for _, it := range m.Items {
				if it.Path == "x" && it.E.Kind == KindFile {
					sawEntry = true
				}
			}
		case *resultMsg:
			if m.ID != 7 {
				continue
			}
			if !sawEntry {
				t.Fatalf("the result of the remove (ok=%v) arrived before the rescan's entry for x", m.OK)
			}
			if !m.OK || m.State.Kind != KindNone {
				t.Fatalf("remove: %+v", m)
			}
			return
		}
	}
	t.Fatal("no result")
}

// TestVanishedFolderIsNotAnError: a pull landing in a folder removed locally
// meanwhile, and a push landing in a folder removed on the agent meanwhile,
// are changes like others: reconciled again, never reported as errors, and
// the new file (seen by one side only) is kept on both.
func TestVanishedFolderIsNotAnError(t *testing.T) {
	p := newPair(t, ClientOptions{})
	write(t, p.local, "d/a", "a")
	write(t, p.local, "e/b", "b")
	p.start(ClientOptions{})
	defer p.stop()
	p.waitEqual(10 * time.Second)

	var mu sync.Mutex
	fired := map[string]bool{}
	testHookBeforeReplace = func(rel string) {
		mu.Lock()
		defer mu.Unlock()
		var dir string
		switch rel {
		case "d/n": // pulled: the local folder goes away
			dir = filepath.Join(p.local, "d")
		case "e/m": // pushed: the agent's folder goes away
			dir = filepath.Join(p.remote, "e")
		default:
			return
		}
		if !fired[rel] {
			fired[rel] = true
			must(t, os.RemoveAll(dir))
		}
	}
	defer func() { testHookBeforeReplace = nil }()

	write(t, p.remote, "d/n", "new on the agent")
	write(t, p.local, "e/m", "new here")
	p.waitEqual(10 * time.Second)
	mu.Lock()
	if !fired["d/n"] || !fired["e/m"] {
		t.Fatalf("the race was not provoked: %v", fired)
	}
	mu.Unlock()
	for _, side := range []string{p.local, p.remote} {
		if got := readFile(t, filepath.Join(side, "d/n")); got != "new on the agent" {
			t.Errorf("%s: d/n = %q", side, got)
		}
		if got := readFile(t, filepath.Join(side, "e/m")); got != "new here" {
			t.Errorf("%s: e/m = %q", side, got)
		}
	}
	if errs := p.c.Status().Folders[0].Errors; len(errs) > 0 {
		t.Errorf("a vanished folder was reported as an error: %+v", errs)
	}
}

// TestSenderFlushesEverything: however messages arrive (bursts, stragglers
// just after a block), the coalescing sender sends every one within its
// delay bound; a queue token left by messages already taken must not leave
// the last ones waiting for the next message.
func TestSenderFlushesEverything(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	q := newQueue[any]()
	s := newSender(a, q, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.run(ctx) }()
	defer func() { cancel(); a.Close(); <-done }()
	got := make(chan string, 1000)
	go func() {
		fr := newFrameReader(b)
		defer fr.close()
		for {
			typ, body, err := fr.next()
			if err != nil {
				return
			}
			m, err := decodeMsg(typ, body)
			if err == nil {
				got <- m.(*noticeMsg).Text
			}
		}
	}()
	for round := 0; round < 20; round++ {
		n := 1 + round%5
		for i := 0; i < n; i++ {
			q.push(&noticeMsg{Text: strings.Repeat("x", i+1)})
			if i%2 == 1 {
				time.Sleep(100 * time.Microsecond)
			}
		}
		for i := 0; i < n; i++ {
			select {
			case <-got:
			case <-time.After(2 * time.Second):
				t.Fatalf("round %d: message %d of %d never sent", round, i+1, n)
			}
		}
	}
}

// TestRulesChangedBetweenSessions: the rules sent before the scan are the
// last session's; when the scan finds others, the agent's index answering
// the old ones is not taken, so a path the new rules no longer ignore is
// synced (both ways) and nothing is refused or reported.
func TestRulesChangedBetweenSessions(t *testing.T) {
	p := newPair(t, ClientOptions{})
	write(t, p.local, ".gitignore", "*.log\n")
	write(t, p.local, "keep.txt", "k")
	p.start(ClientOptions{})
	p.waitEqual(10 * time.Second)
	p.stop()
	// Meanwhile .log files stop being ignored, on both sides.
	write(t, p.local, ".gitignore", "*.tmp\n")
	write(t, p.local, "a.log", "local log")
	write(t, p.remote, "b.log", "remote log")
	p.start(ClientOptions{})
	defer p.stop()
	p.waitEqual(10 * time.Second)
	for _, side := range []string{p.local, p.remote} {
		if readFile(t, filepath.Join(side, "a.log")) != "local log" || readFile(t, filepath.Join(side, "b.log")) != "remote log" {
			t.Fatalf("%s: the logs were not synced", side)
		}
	}
	if errs := p.c.Status().Folders[0].Errors; len(errs) > 0 {
		t.Errorf("errors reported: %+v", errs)
	}
}
