package ui

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/errs"
	"github.com/devtool/devtool/internal/iostreams"
)

func parse(t *testing.T, args ...string) (*Options, error) {
	t.Helper()
	ios, _, _, _ := iostreams.Test()
	f := &cmdutil.Factory{IOStreams: ios, WorkDir: t.TempDir()}
	var got *Options
	cmd := NewCmd(f, func(_ context.Context, o *Options) error { got = o; return nil })
	cmd.SetArgs(args)
	cmd.SetOut(&strings.Builder{})
	cmd.SetErr(&strings.Builder{})
	return got, cmd.Execute()
}

func TestFlags(t *testing.T) {
	o, err := parse(t, "--port", "8765", "-n", "ns", "--file", "compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	if o.Port != 8765 || o.Kube.Namespace != "ns" || len(o.Env.Files) != 1 || o.Listen == nil {
		t.Errorf("options: %+v", o)
	}
	if o, _ := parse(t); o.Port != 0 {
		t.Errorf("default port %d, want 0 (any free port)", o.Port)
	}
	for _, args := range [][]string{{"--port", "-1"}, {"--port", "70000"}, {"extra"}} {
		_, err := parse(t, args...)
		var fe *errs.FlagError
		if err == nil || (!errors.As(err, &fe) && !strings.Contains(err.Error(), "unknown command")) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}
