package dev

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestStateDirLock(t *testing.T) {
	home := t.TempDir()
	a, err := OpenStateDir(home, "/work/app", "web")
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(a.Path); fi.Mode().Perm() != 0o700 {
		t.Errorf("mode %v", fi.Mode())
	}
	if !strings.HasPrefix(a.Path, filepath.Join(home, ".devtool", "dev")) || filepath.Base(a.Path) != "web" {
		t.Errorf("path %s", a.Path)
	}
	if other := StateDirPath(home, "/work/other", "web"); other == a.Path {
		t.Error("two folders share a state dir")
	}
	if err := a.Lock(); err != nil {
		t.Fatal(err)
	}
	if a.Holder() != os.Getpid() {
		t.Errorf("holder %d", a.Holder())
	}
	b, _ := OpenStateDir(home, "/work/app", "web")
	var held *HeldError
	if err := b.Lock(); !errors.As(err, &held) || held.PID != os.Getpid() || !strings.Contains(err.Error(), "pid") {
		t.Fatalf("second lock: %v", err)
	}
	a.Unlock()
	if b.Holder() != 0 {
		t.Error("holder after unlock")
	}
	if err := b.Lock(); err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	b.Unlock()
}

// A pid file left by a dead process (SIGKILL: no cleanup) is taken over.
func TestStateDirStalePID(t *testing.T) {
	home := t.TempDir()
	s, _ := OpenStateDir(home, "/work/app", "web")
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if err := os.WriteFile(s.PIDFile(), []byte(strings.TrimSpace(string(rune('0'+pid%10)))), 0o600); err != nil {
		t.Fatal(err)
	}
	if s.Holder() != 0 {
		t.Error("a dead pid is reported as holder")
	}
	if err := s.Lock(); err != nil {
		t.Fatalf("stale pid not taken over: %v", err)
	}
	defer s.Unlock()
}

func TestStateFiles(t *testing.T) {
	s, _ := OpenStateDir(t.TempDir(), "/x", "web")
	if err := s.WriteState(StateRecord{State: StateReady, Pod: "p"}); err != nil {
		t.Fatal(err)
	}
	r, err := s.ReadState()
	if err != nil || r.State != StateReady || r.Pod != "p" {
		t.Fatalf("%+v %v", r, err)
	}
	if err := s.WriteStatusService(StatusService{Addr: "127.0.0.1:1", User: "u", Password: "p"}); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(s.StatusFile()); fi.Mode().Perm() != 0o600 {
		t.Errorf("status file mode %v", fi.Mode())
	}
}

// TestStateDirLockAcrossProcesses: a second process sees the first's pid; after the first is
// killed with SIGKILL the lock is free.
func TestStateDirLockAcrossProcesses(t *testing.T) {
	if os.Getenv("DEVTOOL_TEST_LOCK_HOLDER") != "" {
		s, _ := OpenStateDir(os.Getenv("DEVTOOL_TEST_LOCK_HOLDER"), "/work/app", "web")
		if err := s.Lock(); err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString("locked\n")
		select {}
	}
	home := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestStateDirLockAcrossProcesses$")
	cmd.Env = append(os.Environ(), "DEVTOOL_TEST_LOCK_HOLDER="+home)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 7)
	if _, err := out.Read(buf); err != nil || string(buf) != "locked\n" {
		t.Fatalf("holder: %q %v", buf, err)
	}
	s, _ := OpenStateDir(home, "/work/app", "web")
	var held *HeldError
	if err := s.Lock(); !errors.As(err, &held) || held.PID != cmd.Process.Pid {
		t.Fatalf("want held by %d, got %v", cmd.Process.Pid, err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if err := s.Lock(); err != nil {
		t.Fatalf("after SIGKILL: %v", err)
	}
	s.Unlock()
}
