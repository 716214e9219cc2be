package filesync

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestUnignoredFolderWatchedOnAgent: a folder ignored by the previous
// session's rules and no longer ignored now is watched on the agent once
// the session starts. The agent's first scan uses the rules saved by the
// last session (sent early); the rules that follow the client's own scan
// start the folder again, and that scan's new folders were not watched
// before: a write inside them reached the client only with the periodic
// rescan (minutes).
func TestUnignoredFolderWatchedOnAgent(t *testing.T) {
	p := newPair(t, ClientOptions{})
	write(t, p.local, ".gitignore", "gen/\n")
	write(t, p.local, "a.txt", "a")
	write(t, p.remote, "gen/sub/old.txt", "old")
	p.start(ClientOptions{})
	select {
	case <-p.c.Synced():
	case <-time.After(10 * time.Second):
		t.Fatal("not synced")
	}
	time.Sleep(50 * time.Millisecond)
	p.stop()
	if _, err := os.Stat(filepath.Join(p.local, "gen")); err == nil {
		t.Fatal("ignored folder pulled")
	}

	write(t, p.local, ".gitignore", "*.log\n")
	p.start(ClientOptions{})
	defer p.stop()
	synced(t, p)
	if readFile(t, filepath.Join(p.local, "gen/sub/old.txt")) != "old" {
		t.Fatal("un-ignored folder not pulled")
	}
	write(t, p.remote, "gen/new.txt", "new")
	write(t, p.remote, "gen/sub/new.txt", "new below")
	deadline := time.Now().Add(10 * time.Second)
	for {
		a, errA := os.ReadFile(filepath.Join(p.local, "gen/new.txt"))
		b, errB := os.ReadFile(filepath.Join(p.local, "gen/sub/new.txt"))
		if errA == nil && errB == nil && string(a) == "new" && string(b) == "new below" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a write in an un-ignored folder on the agent did not reach the client (no watch): %v %v", errA, errB)
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.waitEqual(10 * time.Second)
}
