package dev

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/devtool/devtool/internal/agent"
	"github.com/devtool/devtool/internal/devssh"
	"github.com/devtool/devtool/internal/kube"
)

// podShell runs Install's exec with the local sh, the pod's /devtool moved to a folder.
type podShell struct{ home string }

func (p podShell) Exec(ctx context.Context, o kube.ExecOptions) error {
	cmd := exec.CommandContext(ctx, o.Command[0], o.Command[1], strings.ReplaceAll(o.Command[2], Home+"/", p.home+"/"))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = o.Stdin, o.Stdout, o.Stderr
	return cmd.Run()
}

// startAgent runs the agent library on loopback with home's keys, as devtool-agent does.
func startAgent(t *testing.T, home string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = agent.Serve(ctx, ln, agent.Config{HostKeyFile: filepath.Join(home, "ssh", "host_ed25519"),
			AuthorizedKeysFile: filepath.Join(home, "ssh", "authorized_keys")})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String()
}

func dialAgent(t *testing.T, addr string, signer ssh.Signer, knownHosts string) error {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := devssh.Dial(context.Background(), conn, devssh.ClientConfig{Signer: signer, KnownHostsFile: knownHosts, HandshakeTimeout: 5 * time.Second})
	if err != nil {
		conn.Close()
		return err
	}
	return c.Close()
}

// TestHostKeyAcrossPodsWithoutVolume: with persistentVolume disabled every pod starts with an
// empty home. The CLI's host key is installed in each new pod before the agent starts, so the
// pin made for the first pod holds for the next one (a reconnect), while an agent with any
// other key is still refused.
func TestHostKeyAcrossPodsWithoutVolume(t *testing.T) {
	state, _ := OpenStateDir(t.TempDir(), "/work/app", "web")
	signer, err := devssh.LoadOrCreateKey(state.KeyFile())
	if err != nil {
		t.Fatal(err)
	}
	hostKey, err := devssh.MarshalKey(state.HostKeyFile())
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(state.HostKeyFile()); fi == nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("host key file mode: %v", fi)
	}
	agentBin := func(string) ([]byte, string, error) { return []byte("#!/bin/sh\n"), "abc", nil }
	install := func(home string) InstallResult {
		t.Helper()
		res, err := Install(context.Background(), InstallOptions{Exec: podShell{home}, Pod: "p", Container: "c", Agent: agentBin,
			AuthorizedKey: ssh.MarshalAuthorizedKey(signer.PublicKey()), HostKey: hostKey})
		if err != nil {
			t.Fatal(err)
		}
		if res.HostKeyInstalled {
			if err := PinHostKey(state.KnownHostsFile(), hostKey); err != nil {
				t.Fatal(err)
			}
		}
		return res
	}
	for i := range 2 { // two pods, each with an empty home
		home := t.TempDir()
		if res := install(home); !res.HostKeyInstalled || !res.Uploaded {
			t.Fatalf("pod %d: %+v", i, res)
		}
		if got, _ := os.ReadFile(filepath.Join(home, "ssh", "host_ed25519")); string(got) != string(hostKey) {
			t.Fatalf("pod %d: host key not installed", i)
		}
		if fi, _ := os.Stat(filepath.Join(home, "ssh", "host_ed25519")); fi.Mode().Perm() != 0o600 {
			t.Errorf("pod %d: remote host key mode %v", i, fi.Mode())
		}
		if err := dialAgent(t, startAgent(t, home), signer, state.KnownHostsFile()); err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
		// Installing again into the same (running) pod keeps its key.
		if res := install(home); res.HostKeyInstalled {
			t.Errorf("pod %d: reinstall replaced the host key", i)
		}
	}
	// A pod whose agent made its own key (not the one we installed) is refused by the pin.
	other := t.TempDir()
	if _, err := agent.LoadOrCreateHostKey(filepath.Join(other, "ssh", "host_ed25519")); err != nil {
		t.Fatal(err)
	}
	if res := install(other); res.HostKeyInstalled {
		t.Fatal("an existing host key was overwritten")
	}
	var changed *devssh.HostKeyChangedError
	if err := dialAgent(t, startAgent(t, other), signer, state.KnownHostsFile()); !errors.As(err, &changed) {
		t.Fatalf("a foreign host key: err = %v, want HostKeyChangedError", err)
	}
}
