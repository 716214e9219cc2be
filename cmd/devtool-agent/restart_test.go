package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/devtool/devtool/internal/agentversion"
	"github.com/devtool/devtool/internal/devssh"
	"github.com/devtool/devtool/internal/filesync"
)

// The built agent says its release, protocol and binary in its banner, and restarts in
// place on request: a new binary put on the dev volume takes the same process (same
// PID), the running command is ended, and a binary that does not run is refused.
func TestBuiltBinaryRestartsInPlace(t *testing.T) {
	if runtime.GOOS != "linux" || testing.Short() {
		t.Skip("linux only; builds the agent")
	}
	built := build(t, runtime.GOARCH)
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	exe := filepath.Join(home, "bin", "devtool-agent")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Dir(exe), 0o755))
	data, err := os.ReadFile(built)
	must(err)
	// put writes a binary at exe as Install does: a temporary file renamed over it.
	put := func(b []byte) {
		must(os.WriteFile(exe+".tmp", b, 0o755))
		must(os.Rename(exe+".tmp", exe))
	}
	put(data)
	signer, err := devssh.LoadOrCreateKey(filepath.Join(dir, "state", "id_ed25519"))
	must(err)
	must(os.MkdirAll(filepath.Join(home, "ssh"), 0o700))
	must(os.WriteFile(filepath.Join(home, "ssh", "authorized_keys"), ssh.MarshalAuthorizedKey(signer.PublicKey()), 0o600))

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	var stderr bytes.Buffer
	cmd := exec.Command(exe, "serve", "--home", home, "--addr", addr)
	cmd.Stderr = &stderr
	must(cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()
	dial := func() *devssh.Client {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			conn, err := net.Dial("tcp", addr)
			if err == nil {
				c, err := devssh.Dial(context.Background(), conn, devssh.ClientConfig{Signer: signer, KnownHostsFile: filepath.Join(dir, "state", "known_hosts")})
				if err == nil {
					return c
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no agent at %s: %v\n%s", addr, err, stderr.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	banner := func(c *devssh.Client) agentversion.Info {
		t.Helper()
		i, err := agentversion.Parse(string(c.SSH().ServerVersion()))
		must(err)
		return i
	}
	ppid := func(c *devssh.Client) int {
		t.Helper()
		var out bytes.Buffer
		if code, err := c.Exec(context.Background(), devssh.ExecOptions{Command: []string{"sh", "-c", "echo $PPID"}, Stdout: &out}); err != nil || code != 0 {
			t.Fatalf("exec: %d %v", code, err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(out.String()))
		must(err)
		return n
	}

	c := dial()
	sum1, _ := agentversion.FileSum(exe)
	if i := banner(c); !i.Banner || i.Protocol != filesync.ProtocolVersion || !strings.HasPrefix(sum1, i.Sum) || i.Sum == "" {
		t.Fatalf("banner %+v, binary sum %s", i, sum1)
	}
	if ppid(c) != cmd.Process.Pid {
		t.Fatal("commands are not the agent's children")
	}

	// A binary that does not run is refused; the agent goes on.
	put([]byte("#!/bin/sh\nexit 3\n"))
	ok, reply, err := c.SSH().SendRequest(agentversion.RestartRequest, true, nil)
	if err != nil || ok || !strings.Contains(string(reply), "does not run") {
		t.Fatalf("restart onto a broken binary: ok=%v %q %v", ok, reply, err)
	}
	if ppid(c) != cmd.Process.Pid {
		t.Fatal("the agent changed after a refused restart")
	}

	// A new binary (the same code with bytes appended: another sum) takes its place.
	put(append(append([]byte(nil), data...), []byte("another release")...))
	sum2, _ := agentversion.FileSum(exe)
	sleeper := make(chan error, 1)
	go func() {
		_, err := c.Exec(context.Background(), devssh.ExecOptions{Command: []string{"sleep", "600"}})
		sleeper <- err
	}()
	time.Sleep(200 * time.Millisecond)
	ok, reply, err = c.SSH().SendRequest(agentversion.RestartRequest, true, nil)
	if err != nil || !ok {
		t.Fatalf("restart: ok=%v %q %v", ok, reply, err)
	}
	select {
	case <-c.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the connection stayed open after the restart was accepted")
	}
	select {
	case <-sleeper:
	case <-time.After(20 * time.Second):
		t.Fatal("the running command was not ended by the restart")
	}
	c2 := dial()
	defer c2.Close()
	if i := banner(c2); !strings.HasPrefix(sum2, i.Sum) {
		t.Fatalf("after the restart the banner says %+v, the new binary's sum is %s", i, sum2)
	}
	if pid := ppid(c2); pid != cmd.Process.Pid {
		t.Fatalf("the restarted agent is process %d, not %d: not in place", pid, cmd.Process.Pid)
	}
	select {
	case err := <-exited:
		t.Fatalf("the agent process exited: %v\n%s", err, stderr.String())
	default:
	}
	// SIGTERM still ends the restarted agent cleanly.
	must(cmd.Process.Signal(os.Interrupt))
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("exit after SIGINT: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the restarted agent did not end on SIGINT")
	}
	if !strings.Contains(stderr.String(), "restarting with the binary on the dev volume") {
		t.Errorf("the log does not say the restart:\n%s", stderr.String())
	}
}
