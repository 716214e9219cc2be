package exec

import (
	"context"
	"strings"
	"testing"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/iostreams"
)

func TestArgs(t *testing.T) {
	io, _, _, _ := iostreams.Test()
	for _, tc := range []struct {
		args    []string
		dev     string
		command string
		err     string
	}{
		{args: []string{"--", "sh", "-c", "exit 3"}, command: "sh -c exit 3"},
		{args: []string{"api", "--", "ls", "-l"}, dev: "api", command: "ls -l"},
		{args: []string{"api"}, err: "after --"},
		{args: []string{"a", "b", "--", "ls"}, err: "at most one"},
	} {
		var got *Options
		cmd := NewCmd(&cmdutil.Factory{IOStreams: io}, func(_ context.Context, o *Options) error { got = o; return nil })
		cmd.SetArgs(tc.args)
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		err := cmd.Execute()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: error %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || got.Dev != tc.dev || strings.Join(got.Command, " ") != tc.command {
			t.Errorf("%v: %v %+v", tc.args, err, got)
		}
	}
}

func TestExitStatus(t *testing.T) {
	if cmdutil.ExitCode(&cmdutil.ExitStatus{Code: 7}) != 7 {
		t.Error("exit status not mapped")
	}
}
