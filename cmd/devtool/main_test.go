package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/devtool/devtool/internal/cli/root"
	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/iostreams"
	"github.com/devtool/devtool/internal/secretmask"
)

// TestCommandLineExitCodes: whatever cobra refuses before a command runs is a usage error.
func TestCommandLineExitCodes(t *testing.T) {
	cases := []struct {
		args []string
		code int
	}{
		{[]string{"version"}, cmdutil.ExitOK},
		{[]string{"bogus"}, cmdutil.ExitUsage},
		{[]string{"version", "extra"}, cmdutil.ExitUsage},
		{[]string{"deploy", "--nope"}, cmdutil.ExitUsage},
		{[]string{"deploy", "arg"}, cmdutil.ExitUsage},
		{[]string{"--loglevel", "loud", "version"}, cmdutil.ExitUsage},
		{[]string{"deploy", "--timeout", "0s"}, cmdutil.ExitUsage},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			ios, _, _, errOut := iostreams.Test()
			f := &cmdutil.Factory{IOStreams: ios, Logger: slog.New(slog.DiscardHandler), Getenv: func(string) string { return "" }, WorkDir: t.TempDir()}
			f.Target = func(cmdutil.KubeFlags) (*cmdutil.Target, error) {
				t.Fatal("no command should reach the cluster")
				return nil, nil
			}
			cmd := root.NewCmd(f, new(slog.LevelVar))
			cmd.SetArgs(c.args)
			code := report(errOut, cmd, root.Execute(context.Background(), cmd), false)
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, c.code, errOut)
			}
		})
	}
}

func TestPanicReport(t *testing.T) {
	var buf bytes.Buffer
	t.Setenv("TMPDIR", t.TempDir())
	code := reportPanic(&buf, &secretmask.Set{}, "boom", []byte("goroutine 1 [running]:\nmain.x()"))
	if code == 0 {
		t.Fatal("a panic exits 0")
	}
	out := buf.String()
	i := strings.Index(out, os.TempDir())
	if i < 0 || !strings.Contains(out, "boom") {
		t.Fatalf("message %q names no trace file", out)
	}
	path := strings.Fields(out[i:])[0]
	path = strings.TrimSuffix(path, ";")
	data, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(data), "goroutine 1") {
		t.Fatalf("trace file %s: %v %q", path, err, data)
	}
	if strings.Contains(out, "goroutine 1") {
		t.Fatal("the stack is printed instead of saved")
	}
}
