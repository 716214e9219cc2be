package logs

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/cmdutil"
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
	err := cmd.Execute()
	return got, err
}

func TestDefaults(t *testing.T) {
	o, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	if o.Since != 48*time.Hour || o.Tail != 100 || o.Timestamps || o.All || o.filter.Include != nil || o.filter.Exclude != nil {
		t.Errorf("defaults: %+v", o)
	}
}

func TestFlags(t *testing.T) {
	o, err := parse(t, "ap", "--all", "--exclude", "db|cache", "--since", "10m", "--tail", "-1", "--timestamps", "-n", "ns", "-c", "ctx")
	if err != nil {
		t.Fatal(err)
	}
	if o.Service != "ap" || !o.All || o.Since != 10*time.Minute || o.Tail != -1 || !o.Timestamps || o.Kube.Namespace != "ns" || o.Kube.Context != "ctx" {
		t.Errorf("options: %+v", o)
	}
	if !o.filter.Match("api") || o.filter.Match("db-1") || o.filter.Match("cache") || o.filter.Match("web") {
		t.Errorf("filter %s selects the wrong services", o.filter)
	}
}

func TestFlagErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"a("}, "serviceName"},
		{[]string{"--exclude", "[x"}, "--exclude"},
		{[]string{"--tail", "-2"}, "--tail"},
		{[]string{"--since", "-1s"}, "--since"},
		{[]string{"--all", "--name", "x"}, "--all"},
		{[]string{"a", "b"}, "accepts at most 1 arg"},
	} {
		_, err := parse(t, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: err = %v, want one naming %s", tt.args, err, tt.want)
			continue
		}
		var fe *cmdutil.FlagError
		if tt.want != "accepts at most 1 arg" && !errors.As(err, &fe) {
			t.Errorf("%q: %v is not a FlagError", tt.args, err)
		}
	}
}

func TestNoColorWithoutTerminal(t *testing.T) {
	ios, _, _, _ := iostreams.Test() // not a terminal
	if ios.ColorEnabled() {
		t.Fatal("test streams have colour")
	}
	// run builds its formatter from ColorEnabled; check the formatter it would build writes no escapes.
	o := &Options{IO: ios}
	if f := formatter(o); f.Color {
		t.Error("colour on without a terminal")
	}
}
