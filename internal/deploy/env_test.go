package deploy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/manifest"
)

func TestParseVar(t *testing.T) {
	for _, ok := range []string{"MODE=test", "a_1=x=y", "EMPTY="} {
		if _, _, err := ParseVar(ok); err != nil {
			t.Errorf("ParseVar(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"MODE", "1X=a", "DEVTOOL_NAME=x", "devtool_foo=x", "KUBECONFIG=x", "BUILDKIT_HOST=x", "A-B=x", "=x"} {
		if _, _, err := ParseVar(bad); err == nil {
			t.Errorf("ParseVar(%q) accepted a bad or reserved name", bad)
		}
	}
}

func TestCommandEnvPrecedence(t *testing.T) {
	env := CommandEnv{
		Environ:   map[string]string{"A": "shell", "PATH": "/bin"},
		DotEnv:    map[string]string{"A": "dotenv", "B": "dotenv"},
		Secrets:   map[string]string{"A": "stored", "B": "stored", "S": "stored", "DEVTOOL_NAMESPACE": "stored"},
		Vars:      map[string]string{"C": "var"},
		Namespace: "ns", Context: "ctx", Name: "shop", Registry: "reg:5000",
		Images:     map[string]BuiltImage{"my-api.v2": {Ref: "reg:5000/ns/shop-api:abc", Digest: "sha256:1"}},
		Kubeconfig: "/k", EnvFile: "/e",
	}.Build()
	want := map[string]string{
		"A": "shell", "B": "dotenv", "C": "var", "S": "stored", "PATH": "/bin",
		"DEVTOOL_NAMESPACE": "ns", "DEVTOOL_CONTEXT": "ctx", "DEVTOOL_NAME": "shop", "DEVTOOL_REGISTRY_URL": "reg:5000",
		"DEVTOOL_GIT_BRANCH": "", "DEVTOOL_GIT_COMMIT": "",
		"DEVTOOL_BUILD_MY_API_V2_IMAGE": "reg:5000/ns/shop-api:abc", "DEVTOOL_BUILD_MY_API_V2_REGISTRY": "reg:5000",
		"DEVTOOL_BUILD_MY_API_V2_REPOSITORY": "ns/shop-api", "DEVTOOL_BUILD_MY_API_V2_TAG": "abc",
		"DEVTOOL_BUILD_MY_API_V2_SHA": "sha256:1", "KUBECONFIG": "/k", "DEVTOOL_ENV": "/e",
	}
	for k, v := range want {
		if got, ok := env[k]; !ok || got != v {
			t.Errorf("%s = %q (set %v), want %q", k, got, ok, v)
		}
	}
	if _, ok := env["BUILDKIT_HOST"]; ok {
		t.Error("BUILDKIT_HOST set though empty")
	}
}

func TestSplitImageRef(t *testing.T) {
	for ref, want := range map[string][3]string{
		"127.0.0.1:25000/ns/app:tag": {"127.0.0.1:25000", "ns/app", "tag"},
		"busybox:local":              {"docker.io", "busybox", "local"},
		"localhost/x":                {"localhost", "x", ""},
		"reg.io/a/b:1@sha256:00":     {"reg.io", "a/b", "1"},
	} {
		r, p, tg := SplitImageRef(ref)
		if [3]string{r, p, tg} != want {
			t.Errorf("SplitImageRef(%q) = %q %q %q, want %v", ref, r, p, tg, want)
		}
	}
}

func TestCommandRunnerHandsVariablesOn(t *testing.T) {
	dir := t.TempDir()
	var out strings.Builder
	r := &CommandRunner{Shell: "sh", Dir: dir, EnvFile: filepath.Join(dir, "env"), Out: &out,
		Env: map[string]string{"PATH": os.Getenv("PATH")}}
	err := r.Run(context.Background(), []manifest.Command{
		{Name: "first", Command: `echo 'TOKEN="a b"' >> "$DEVTOOL_ENV"; echo one`},
		{Name: "second", Command: `echo "token=$TOKEN"; pwd`},
		{Name: "fails", Command: `exit 3`},
		{Name: "never", Command: `echo never`},
	})
	if err == nil || !strings.Contains(err.Error(), `"fails"`) {
		t.Fatalf("err = %v, want the failing command named", err)
	}
	got := r.Output.String()
	for _, want := range []string{"first | one\n", "second | token=a b\n", "second | " + dir + "\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "never |") || out.String() != got {
		t.Errorf("unexpected output (a command after the failure ran, or live output differs):\n%s", got)
	}
}

func TestCommandRunnerCancelKillsGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	ctx, cancel := context.WithCancel(context.Background())
	r := &CommandRunner{Shell: "sh", Dir: dir, Env: map[string]string{"PATH": os.Getenv("PATH")}}
	done := make(chan error, 1)
	go func() {
		done <- r.Run(ctx, []manifest.Command{{Name: "sleep", Command: "sleep 60 & echo $! > child.pid; wait"}})
	}()
	var pid int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(pidFile); err == nil && len(b) > 0 && b[len(b)-1] == '\n' {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			break
		}
	}
	if pid == 0 {
		t.Fatal("the command never started its child")
	}
	start := time.Now()
	cancel()
	err := <-done
	if err == nil || !strings.Contains(err.Error(), "cancelled") || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want cancelled", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("cancel took %s", d)
	}
	// The background child is in the command's process group: it must be gone (or a zombie).
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && !strings.Contains(string(b), ") Z ") {
		time.Sleep(200 * time.Millisecond)
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && !strings.Contains(string(b), ") Z ") {
			t.Errorf("the command's child %d survived the cancel: %s", pid, b)
		}
	}
}

// TestHandoffRefusesReservedNames: DEVTOOL_ENV cannot set what --var cannot.
func TestHandoffRefusesReservedNames(t *testing.T) {
	for _, name := range []string{"KUBECONFIG", "PATH", "DEVTOOL_NAMESPACE", "devtool_x"} {
		dir := t.TempDir()
		r := &CommandRunner{Shell: "sh", Dir: dir, EnvFile: filepath.Join(dir, "env"),
			Env: map[string]string{"PATH": os.Getenv("PATH")}}
		err := r.Run(context.Background(), []manifest.Command{
			{Name: "first", Command: `echo '` + name + `=/tmp/evil' >> "$DEVTOOL_ENV"`},
			{Name: "second", Command: `echo never`},
		})
		if err == nil || !strings.Contains(err.Error(), "reserved") || strings.Contains(r.Output.String(), "never") {
			t.Errorf("%s: err %v, output %q", name, err, r.Output.String())
		}
		if _, _, err := ParseVar(name + "=x"); err == nil {
			t.Errorf("--var %s accepted", name)
		}
	}
}

// TestOutputKeptIsBounded: a command printing far more than the state keeps costs bounded memory,
// and the tail is what is kept.
func TestOutputKeptIsBounded(t *testing.T) {
	b := NewTailBuffer(1000)
	chunk := []byte(strings.Repeat("x", 333) + "\n")
	for i := 0; i < 10000; i++ {
		_, _ = b.Write(chunk)
		if cap(b.buf) > 4000 {
			t.Fatalf("buffer grew to %d bytes", cap(b.buf))
		}
	}
	_, _ = b.WriteString("the end\n")
	got := b.String()
	if !strings.HasPrefix(got, "[…output truncated…]\n") || !strings.HasSuffix(got, "the end\n") || len(got) > 1100 {
		t.Fatalf("kept %d bytes: %q…", len(got), got[:40])
	}
	// A single line without end is passed on in pieces.
	var out strings.Builder
	w := &prefixWriter{prefix: "c | ", out: &out, keep: NewTailBuffer(1000)}
	big := strings.Repeat("y", 3*maxLineBytes)
	_, _ = w.Write([]byte(big))
	if len(w.buf) > maxLineBytes {
		t.Fatalf("pending line holds %d bytes", len(w.buf))
	}
}
