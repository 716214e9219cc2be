package dev

import (
	"context"
	"fmt"
	"io"
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
