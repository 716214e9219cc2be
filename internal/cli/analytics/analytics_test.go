package analytics

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/iostreams"
)

func TestAnalytics(t *testing.T) {
	home := t.TempDir()
	ios, _, out, errOut := iostreams.Test()
	f := &cmdutil.Factory{IOStreams: ios, Getenv: func(k string) string {
		if k == "DEVTOOL_HOME" {
			return home
		}
		return ""
	}}
	runCmd := func(args ...string) error {
		out.Reset()
		errOut.Reset()
		cmd := NewCmd(f, nil)
		cmd.SetArgs(args)
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		return cmd.ExecuteContext(context.Background())
	}
	steps := []struct {
		args []string
		want string
	}{
		{nil, "Analytics are enabled.\n"},
		{[]string{"--disable"}, ""},
		{nil, "Analytics are disabled.\n"},
		{[]string{"--enable"}, ""},
		{nil, "Analytics are enabled.\n"},
	}
	for _, s := range steps {
		if err := runCmd(s.args...); err != nil {
			t.Fatalf("%v: %v", s.args, err)
		}
		if out.String() != s.want {
			t.Errorf("%v: stdout %q, want %q", s.args, out.String(), s.want)
		}
	}
	if fi, err := os.Stat(filepath.Join(home, ".devtool", "analytics.json")); err != nil || fi.Mode() != 0o600 {
		t.Errorf("setting file: %v", err)
	}
	if err := runCmd("--enable", "--disable"); err == nil || !strings.Contains(err.Error(), "cannot be used together") {
		t.Errorf("both flags: %v", err)
	}
}
