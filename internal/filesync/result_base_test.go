package filesync

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestPushResultAfterLocalEdit: a file edited again while its previous
// version is being stored on the agent is an edit of that version, not a
// conflict. The base must become the pushed version when the push succeeds;
// before, it stayed at the older state, so the result (the agent now holding
// the client's own previous version) looked like a remote change, and the
// client's own version was moved aside as a conflict copy.
func TestPushResultAfterLocalEdit(t *testing.T) {
	p := newPair(t, ClientOptions{})
	local := p.local
	var once sync.Once
	testHookBeforeReplace = func(rel string) {
		if rel != "p.txt" {
			return
		}
		once.Do(func() {
			// The local file changes while "first" is being put in place
			// remotely; the engine sees it before the push's result.
			if err := os.WriteFile(filepath.Join(local, "p.txt"), []byte("second"), 0o644); err != nil {
				t.Error(err)
			}
			time.Sleep(300 * time.Millisecond)
		})
	}
	defer func() { testHookBeforeReplace = nil }()
	p.start(ClientOptions{})
	defer p.stop()
	p.waitEqual(10 * time.Second)
	write(t, p.local, "p.txt", "first")
	p.waitEqual(10 * time.Second)
	snap := snapshotDir(t, p.local)
	for path := range snap {
		if strings.Contains(path, ".conflict-") {
			t.Errorf("false conflict copy %s: %v", path, snap)
		}
	}
	if got := snap["p.txt"]; !strings.HasSuffix(got, "second") {
		t.Errorf("p.txt = %q, want the second version", got)
	}
	if c := p.c.Status().Folders[0].Conflicts; len(c) > 0 {
		t.Errorf("conflicts reported: %+v", c)
	}
}
