package dev

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/devtool/devtool/internal/kube"
)

// fakeExec answers Install's first exec with the given uname output and swallows the upload.
type fakeExec struct {
	machine string
	calls   int
}

func (f *fakeExec) Exec(_ context.Context, o kube.ExecOptions) error {
	f.calls++
	if o.Stdin != nil {
		_, _ = io.Copy(io.Discard, o.Stdin)
	}
	if f.calls == 1 && o.Stdout != nil {
		fmt.Fprintf(o.Stdout, "sha=\narch=%s\n", f.machine)
	}
	return nil
}

func TestInstallLooksUpTheNodeOnlyWithoutUname(t *testing.T) {
	for _, tc := range []struct {
		machine, want string
		lookups       int
	}{{"x86_64", "amd64", 0}, {"aarch64", "arm64", 0}, {"", "arm64", 1}} {
		lookups := 0
		var asked string
		res, err := Install(context.Background(), InstallOptions{Exec: &fakeExec{machine: tc.machine}, Pod: "p", Container: "c",
			AuthorizedKey:  []byte("ssh-ed25519 AAAA x\n"),
			Agent:          func(arch string) ([]byte, string, error) { asked = arch; return []byte("bin"), "sum", nil },
			LookupNodeArch: func(context.Context) string { lookups++; return "arm64" }})
		if err != nil || res.Arch != tc.want || asked != tc.want || lookups != tc.lookups || !res.Uploaded {
			t.Errorf("uname %q: arch %q (agent for %q), %d node lookups, uploaded %v, err %v; want %q and %d lookups",
				tc.machine, res.Arch, asked, lookups, res.Uploaded, err, tc.want, tc.lookups)
		}
	}
}

// localExec runs Install's scripts with this machine's sh, the pod's home (Home) moved to dir.
type localExec struct{ dir string }

func (l localExec) Exec(ctx context.Context, o kube.ExecOptions) error {
	args := append([]string(nil), o.Command...)
	args[len(args)-1] = strings.ReplaceAll(args[len(args)-1], Home+"/", l.dir+"/")
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = o.Stdin, o.Stdout, o.Stderr
	return cmd.Run()
}

// A second machine's install adds its key beside the first's (it replaced the file before, which
// locked the first machine out); the same key again adds nothing; a file without a final
// newline keeps its last line whole.
func TestInstallAddsKeysPerMachine(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	keyA, keyB := "ssh-ed25519 AAAAkeyA", "ssh-ed25519 AAAAkeyB/+= laptop"
	install := func(key string) {
		t.Helper()
		_, err := Install(context.Background(), InstallOptions{Exec: localExec{dir}, Pod: "p", Container: "c", AuthorizedKey: []byte(key + "\n"),
			Agent: func(string) ([]byte, string, error) { return []byte("bin"), "sum", nil }})
		if err != nil {
			t.Fatal(err)
		}
	}
	read := func() string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, "ssh", "authorized_keys"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	install(keyA)
	install(keyB)
	if got, want := read(), keyA+"\n"+keyB+"\n"; got != want {
		t.Fatalf("after two machines: %q, want %q", got, want)
	}
	install(keyA)
	install("ssh-ed25519 AAAAkeyB/+= other-comment")
	if got, want := read(), keyA+"\n"+keyB+"\n"; got != want {
		t.Fatalf("after the same keys again: %q, want %q", got, want)
	}
	if err := os.WriteFile(filepath.Join(dir, "ssh", "authorized_keys"), []byte(keyA), 0o600); err != nil {
		t.Fatal(err)
	}
	install(keyB)
	if got, want := read(), keyA+"\n"+keyB+"\n"; got != want {
		t.Fatalf("after a file without a final newline: %q, want %q", got, want)
	}
}

// droppingExec loses the stdin of its first `drop` runs, as the exec API does now and then
// (kubernetes/kubernetes#112834).
type droppingExec struct {
	localExec
	drop int
}

func (d *droppingExec) Exec(ctx context.Context, o kube.ExecOptions) error {
	if d.drop > 0 {
		d.drop--
		o.Stdin = strings.NewReader("")
	}
	return d.localExec.Exec(ctx, o)
}

// A dropped stdin is noticed and the script run again: the key is installed, and the agent
// binary is never left short under the right hash (it was: an empty binary the launcher ran,
// and that no later up replaced).
func TestInstallRetriesDroppedStdin(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	agent := []byte(strings.Repeat("agent binary ", 1000))
	for drops := 0; drops <= 2; drops++ {
		dir := t.TempDir()
		// The first `drops` runs (all of the key's script) lose their stdin.
		ex := &droppingExec{localExec: localExec{dir}, drop: drops}
		opts := InstallOptions{Exec: ex, Pod: "p", Container: "c", AuthorizedKey: []byte("ssh-ed25519 AAAAkeyA\n"),
			Agent: func(string) ([]byte, string, error) { return agent, "sum", nil }}
		res, err := Install(context.Background(), opts)
		if err != nil {
			t.Fatalf("%d drops of the key: %v", drops, err)
		}
		if got, _ := os.ReadFile(filepath.Join(dir, "ssh", "authorized_keys")); string(got) != "ssh-ed25519 AAAAkeyA\n" {
			t.Fatalf("%d drops: authorized_keys %q", drops, got)
		}
		if !res.Uploaded {
			t.Fatalf("%d drops: not uploaded", drops)
		}
		if got, _ := os.ReadFile(filepath.Join(dir, "bin", "devtool-agent")); string(got) != string(agent) {
			t.Fatalf("%d drops of the key: the agent has %d of %d bytes", drops, len(got), len(agent))
		}
	}
	// The upload itself loses its stdin: it is retried, and never renamed into place short.
	dir := t.TempDir()
	ex := &uploadDropper{localExec: localExec{dir}, drop: 2}
	_, err := Install(context.Background(), InstallOptions{Exec: ex, Pod: "p", Container: "c", AuthorizedKey: []byte("ssh-ed25519 AAAAkeyA\n"),
		Agent: func(string) ([]byte, string, error) { return agent, "sum", nil }})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "bin", "devtool-agent")); string(got) != string(agent) {
		t.Fatalf("after two dropped uploads: the agent has %d of %d bytes", len(got), len(agent))
	}
	// Three drops in a row: an error that says what happened, and nothing in place.
	dir = t.TempDir()
	ex = &uploadDropper{localExec: localExec{dir}, drop: 3}
	_, err = Install(context.Background(), InstallOptions{Exec: ex, Pod: "p", Container: "c", AuthorizedKey: []byte("ssh-ed25519 AAAAkeyA\n"),
		Agent: func(string) ([]byte, string, error) { return agent, "sum", nil }})
	if err == nil || !strings.Contains(err.Error(), "arrived with 0 of 13000 bytes") {
		t.Fatalf("three dropped uploads: want an error naming the sizes, got %v", err)
	}
	for _, name := range []string{"devtool-agent", "devtool-agent.sha256", "devtool-agent.tmp"} {
		if _, err := os.Stat(filepath.Join(dir, "bin", name)); err == nil {
			t.Errorf("three dropped uploads left bin/%s", name)
		}
	}
}

// uploadDropper loses the stdin of the first `drop` agent uploads only.
type uploadDropper struct {
	localExec
	drop int
}

func (d *uploadDropper) Exec(ctx context.Context, o kube.ExecOptions) error {
	if d.drop > 0 && strings.Contains(o.Command[len(o.Command)-1], "arrived with") {
		d.drop--
		o.Stdin = strings.NewReader("")
	}
	return d.localExec.Exec(ctx, o)
}
