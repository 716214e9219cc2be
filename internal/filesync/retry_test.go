package filesync

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRetryDelay(t *testing.T) {
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second,
		16 * time.Second, 32 * time.Second, time.Minute, time.Minute}
	for i, w := range want {
		if got := retryDelay(i + 1); got != w {
			t.Errorf("retryDelay(%d) = %v, want %v", i+1, got, w)
		}
	}
}

// readOnly makes dir read-only with a read-only bind mount of it onto
// itself (tests run as root, which permission bits do not stop); the
// returned function makes it writable again. Unmounted in cleanup.
func readOnly(t *testing.T, dir string) (writable func()) {
	t.Helper()
	run := func(args ...string) error {
		out, err := exec.Command("mount", args...).CombinedOutput()
		if err != nil {
			return &os.PathError{Op: "mount " + strings.Join(args, " "), Path: dir, Err: errString(strings.TrimSpace(string(out)))}
		}
		return nil
	}
	if err := run("--bind", dir, dir); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skipf("no bind mounts here: %v", err)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	must(t, run("-o", "remount,bind,ro", dir))
	return func() { must(t, run("-o", "remount,bind,rw", dir)) }
}

type errString string

func (e errString) Error() string { return string(e) }

// A path that cannot be written on either side (a read-only filesystem
// here, one there) is retried with backoff, listed in the status with how
// often it failed and when it is tried next, and heals by itself once the
// cause is fixed, without an edit. With retries off
// (FILESYNC_RETRY_OFF=1) it waits for an edit and this test fails.
func TestFailedPathRetriedUntilItHeals(t *testing.T) {
	testRetryOff = os.Getenv("FILESYNC_RETRY_OFF") != ""
	defer func() { testRetryOff = false }()
	p := newPair(t, ClientOptions{})
	write(t, p.local, "up/keep", "x")
	write(t, p.local, "down/keep", "y")
	p.start(ClientOptions{})
	defer p.stop()
	p.waitEqual(10 * time.Second)
	remoteRW := readOnly(t, filepath.Join(p.remote, "up"))
	localRW := readOnly(t, filepath.Join(p.local, "down"))

	write(t, p.local, "up/new", "to the container")
	write(t, p.remote, "down/new", "to this machine")
	deadline := time.Now().Add(15 * time.Second)
	for {
		st := p.c.Status().Folders[0]
		seen := map[string]PathError{}
		for _, e := range st.Errors {
			seen[e.Path] = e
		}
		up, down := seen["up/new"], seen["down/new"]
		if testRetryOff && up.Path != "" && down.Path != "" {
			break // to see that it does not heal
		}
		if up.Failures >= 2 && down.Failures >= 2 {
			for _, e := range []PathError{up, down} {
				if !strings.Contains(e.Err, "read-only") || e.NextTry == nil || e.NextTry.Before(e.Time) {
					t.Errorf("status of a failing path: %+v", e)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("failing paths not retried: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	remoteRW()
	localRW()
	p.waitEqual(15 * time.Second)
	if st := p.c.Status().Folders[0]; len(st.Errors) != 0 {
		t.Fatalf("errors left after healing: %+v", st.Errors)
	}
}

// A failure recorded with states that agree holds nothing: the path is
// decided again (and agreed). The engine recorded a folder on both sides when
// the removal of a folder there failed as not empty after a rename here,
// mirrored from there, had remade it: the folder stayed pending until
// something below it changed (TestSyncChurn did not converge).
func TestFailureWithAgreeingStatesDoesNotHold(t *testing.T) {
	tr, err := openTree(t.TempDir(), false, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	dir, file := Entry{Kind: KindDir}, Entry{Kind: KindFile, Size: 1, Hash: 7}
	tr.idx = map[string]Entry{"d": dir, "f": file}
	f := &cfolder{t: tr, log: testLogger(t),
		base:   map[string]Entry{"d": dir},
		remote: map[string]Entry{"d": dir, "f": file},
		failed: map[string][2]Entry{"d": {dir, dir}, "f": {file, file}, "gone": {{}, {}}, "kept": {{}, file}},
		diff:   map[string]struct{}{"d": {}, "f": {}, "gone": {}, "kept": {}},
		dirty:  map[string]struct{}{}, inflight: map[string]uint64{}}
	f.remote["kept"] = file
	c := &Client{}
	for _, p := range []string{"d", "f", "gone", "kept"} {
		if plan := c.reconcile(f, p, time.Now(), nil); len(plan) != 0 {
			t.Errorf("%s: plan %+v", p, plan)
		}
	}
	for _, p := range []string{"d", "f", "gone"} {
		if _, ok := f.diff[p]; ok {
			t.Errorf("%s still pending", p)
		}
		if _, ok := f.failed[p]; ok {
			t.Errorf("%s still failed", p)
		}
	}
	if _, ok := f.diff["kept"]; !ok {
		t.Error("a failure whose states differ (a removal refused there) no longer waits")
	}
	if f.base["f"] != file {
		t.Errorf("base of f %+v, want the agreed file", f.base["f"])
	}
}
