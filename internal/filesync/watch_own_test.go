package filesync

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
)

func TestWatcherDropsOnlyItsOwnEvent(t *testing.T) {
	w := &watcher{watched: map[string]struct{}{"": {}, "d": {}}}
	w.expectOwn("d/a", fsnotify.Create)
	w.expectOwn("x/b", fsnotify.Create) // an unwatched folder: no event comes
	if w.takeOwn("d/a", fsnotify.Write) {
		t.Error("another operation dropped")
	}
	w.expectOwn("d/a", fsnotify.Create)
	if !w.takeOwn("d/a", fsnotify.Create) {
		t.Error("the own event not dropped")
	}
	if w.takeOwn("d/a", fsnotify.Create) {
		t.Error("a second event dropped")
	}
	if w.takeOwn("x/b", fsnotify.Create) {
		t.Error("an event of an unwatched folder dropped")
	}
	w.own = map[string]ownEvent{"c": {op: fsnotify.Create, at: time.Now().Add(-2 * ownTTL)}}
	if w.takeOwn("c", fsnotify.Create) {
		t.Error("an expired expectation dropped an event")
	}
}

// A file received here and edited at once (same size, within the same
// moment) is carried back: the engine's own write does not hide the edit.
func TestEditRightAfterAReceivedFileIsSeen(t *testing.T) {
	p := newPair(t, ClientOptions{})
	write(t, p.local, "d/keep", "x")
	p.start(ClientOptions{})
	defer p.stop()
	p.waitEqual(10 * time.Second)
	for i := 0; i < 20; i++ {
		for _, dir := range [][2]string{{p.remote, p.local}, {p.local, p.remote}} {
			from, to := dir[0], dir[1]
			rel := fmt.Sprintf("d/f%d", i)
			first, second := fmt.Sprintf("a%03d", i), fmt.Sprintf("b%03d", i)
			write(t, from, rel, first)
			deadline := time.Now().Add(10 * time.Second)
			for {
				if b, _ := os.ReadFile(filepath.Join(to, rel)); string(b) == first {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s never arrived", rel)
				}
				time.Sleep(100 * time.Microsecond)
			}
			write(t, to, rel, second) // edited on the receiving side at once
			for {
				if b, _ := os.ReadFile(filepath.Join(from, rel)); string(b) == second {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: the edit right after receiving it never went back: %+v", rel, p.c.Status())
				}
				time.Sleep(time.Millisecond)
			}
		}
	}
}
