package contextcmd

import (
	"context"
	"strings"
	"testing"

	"github.com/devtool/devtool/internal/errs"
	"github.com/devtool/devtool/internal/iostreams"
)

// TestReadPasswordsFromStdin: --password-stdin takes two lines (the last may lack its line end);
// fewer, an empty new one or one over the limit is a usage error; without it and without a
// terminal nothing is asked.
func TestReadPasswordsFromStdin(t *testing.T) {
	long := strings.Repeat("x", maxPasswordBytes+1)
	cases := []struct {
		in, current, next string
		exit              int
	}{
		{"old\nnew\n", "old", "new", 0},
		{"old\r\nnew", "old", "new", 0},
		{"\nfirst\n", "", "first", 0}, // an account without a password sets its first
		{"old\n", "", "", errs.ExitUsage},
		{"", "", "", errs.ExitUsage},
		{"old\n\n", "", "", errs.ExitUsage},
		{"old\n" + long + "\n", "", "", errs.ExitUsage},
	}
	for _, tc := range cases {
		ios, in, _, _ := iostreams.Test()
		in.WriteString(tc.in)
		cur, next, err := readPasswords(context.Background(), &PasswordOptions{IO: ios, Getenv: func(string) string { return "" }, PasswordStdin: true}, "p")
		if errs.ExitCode(err) != tc.exit || cur != tc.current || next != tc.next {
			t.Errorf("%q: %q %q, exit %d (%v); want %q %q, exit %d", tc.in, cur, next, errs.ExitCode(err), err, tc.current, tc.next, tc.exit)
		}
	}
	ios, _, _, _ := iostreams.Test()
	if _, _, err := readPasswords(context.Background(), &PasswordOptions{IO: ios, Getenv: func(string) string { return "" }}, "p"); errs.ExitCode(err) != errs.ExitUsage ||
		!strings.Contains(err.Error(), "--password-stdin") {
		t.Errorf("no terminal: %v", err)
	}
}

// TestPasswordNeedsAPlatformContext: on a plain Kubernetes context the command says it works on a
// platform context only.
func TestPasswordNeedsAPlatformContext(t *testing.T) {
	h := newHarness(t)
	if err := h.run(t, "password", "--password-stdin"); err == nil || !strings.Contains(err.Error(), "platform context only") {
		t.Fatalf("on a Kubernetes context: %v", err)
	}
}
