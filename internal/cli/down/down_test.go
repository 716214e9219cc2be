package down

import (
	"context"
	"testing"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/iostreams"
)

func TestFlags(t *testing.T) {
	io, _, _, _ := iostreams.Test()
	var got *Options
	cmd := NewCmd(&cmdutil.Factory{IOStreams: io}, func(_ context.Context, o *Options) error { got = o; return nil })
	cmd.SetArgs([]string{"api", "--volumes", "-n", "dev", "-f", "devtool.yml"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.Dev != "api" || !got.Volumes || got.Kube.Namespace != "dev" || len(got.Env.Files) != 1 || got.Env.Files[0] != "devtool.yml" {
		t.Errorf("%+v", got)
	}
	cmd = NewCmd(&cmdutil.Factory{IOStreams: io}, func(context.Context, *Options) error { return nil })
	cmd.SetArgs([]string{"a", "b"})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	if err := cmd.Execute(); err == nil {
		t.Error("two names accepted")
	}
}
