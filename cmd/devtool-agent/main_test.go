package main

import (
	"bytes"
	"context"
	"debug/elf"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/devssh"
	"github.com/devtool/devtool/internal/filesync"
	"golang.org/x/crypto/ssh"
)

// build cross-compiles the agent as `make agent` does.
func build(t *testing.T, goarch string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "devtool-agent-"+goarch)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build for linux/%s: %v\n%s", goarch, err, b)
	}
	return out
}

func TestBuildStaticSmallNoClientGo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the agent twice")
	}
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "k8s.io/") || strings.HasPrefix(dep, "github.com/docker/") {
			t.Errorf("the agent imports %s", dep)
		}
	}
	for _, arch := range []string{"amd64", "arm64"} {
		bin := build(t, arch)
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("linux/%s: dynamically linked", arch)
			}
		}
		f.Close()
		fi, _ := os.Stat(bin)
		t.Logf("linux/%s: %.1f MB", arch, float64(fi.Size())/1e6)
	}
}

// TestBuiltBinaryServes runs the built agent: SSH exec through it, then SIGTERM ends
// it cleanly, killing the running command.
func TestBuiltBinaryServes(t *testing.T) {
	if runtime.GOOS != "linux" || testing.Short() {
		t.Skip("linux only; builds the agent")
	}
	bin := build(t, runtime.GOARCH)
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	signer, err := devssh.LoadOrCreateKey(filepath.Join(dir, "state", "id_ed25519"))
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(home, "ssh"), 0o700)
	os.WriteFile(filepath.Join(home, "ssh", "authorized_keys"), ssh.MarshalAuthorizedKey(signer.PublicKey()), 0o600)

	if out, err := exec.Command(bin, "version").Output(); err != nil || !strings.HasPrefix(string(out), "devtool-agent ") {
		t.Fatalf("version: %v %q", err, out)
	}
	if err := exec.Command(bin, "serve", "--home", home, "--addr", "0.0.0.0:0").Run(); err == nil {
		t.Fatal("a non-loopback --addr was accepted")
	}

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "serve", "--home", home, "--addr", addr)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var conn net.Conn
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err = net.Dial("tcp", addr)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	c, err := devssh.Dial(context.Background(), conn, devssh.ClientConfig{Signer: signer, KnownHostsFile: filepath.Join(dir, "state", "known_hosts")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out bytes.Buffer
	code, err := c.Exec(context.Background(), devssh.ExecOptions{Command: []string{"sh", "-c", "echo hi; exit 4"}, Stdout: &out})
	if err != nil || code != 4 || out.String() != "hi\n" {
		t.Fatalf("exec: %d %v %q", code, err, out.String())
	}
	// The devtool-sync subsystem is the sync engine's remote end: a local folder
	// reaches the agent's side over this SSH connection.
	localDir, remoteDir := filepath.Join(dir, "local"), filepath.Join(dir, "remote")
	os.MkdirAll(localDir, 0o755)
	os.WriteFile(filepath.Join(localDir, "hello.txt"), []byte("synced over ssh"), 0o644)
	sc, err := filesync.NewClient(filesync.ClientOptions{Folders: []filesync.Folder{{Local: localDir, Remote: remoteDir}}, StateDir: filepath.Join(dir, "state", "sync")})
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithCancel(context.Background())
	syncDone := make(chan error, 1)
	go func() {
		syncDone <- sc.Run(sctx, func() (io.ReadWriteCloser, error) { return c.OpenSubsystem(devssh.SyncSubsystem) })
	}()
	select {
	case <-sc.Synced():
	case err := <-syncDone:
		t.Fatalf("sync ended: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatalf("no initial sync: %+v", sc.Status())
	}
	if b, err := os.ReadFile(filepath.Join(remoteDir, "hello.txt")); err != nil || string(b) != "synced over ssh" {
		t.Fatalf("remote file: %q %v", b, err)
	}
	scancel()
	<-syncDone

	pidFile := filepath.Join(dir, "pid")
	go c.Exec(context.Background(), devssh.ExecOptions{Command: []string{"sh", "-c", "sleep 300 & echo $! > " + pidFile + "; wait"}})
	var pid int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(pidFile)
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			pid = n
			break
		}
	}
	if pid == 0 {
		t.Fatal("no pid")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("agent exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("agent did not stop on SIGTERM")
	}
	// The agent signals the command's process group before it exits; the kernel delivers the kill
	// a moment later (the child is gone, or a zombie of its new parent, within a second or two).
	gone := func() bool {
		if err := syscall.Kill(pid, 0); err != nil {
			return true
		}
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		return strings.Contains(string(b), ") Z")
	}
	for deadline := time.Now().Add(5 * time.Second); !gone(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatal("the command's child outlived the agent by 5 s")
		}
	}
	log, err := os.ReadFile(filepath.Join(home, "agent.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "agent stopped") {
		t.Fatalf("log: %s", log)
	}
	key, _ := os.ReadFile(filepath.Join(home, "ssh", "host_ed25519"))
	if len(key) == 0 || bytes.Contains(log, key[40:80]) || strings.Contains(string(log), "PRIVATE") {
		t.Fatal("key material in the log")
	}
	for _, p := range []string{filepath.Join(home, "ssh", "host_ed25519"), filepath.Join(home, "agent.log")} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", p, fi.Mode(), err)
		}
	}
}
