package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestUsageErrors: bad flags exit 2 and say what is wrong, before anything connects.
func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ingress", "--ticket-public-key", "/x"}, "go together"},
		{[]string{"ingress", "--cookie-key", "/x"}, "go together"},
		{[]string{"ingress", "--ticket-public-key", "/x", "--cookie-key", "/y"}, "go together"},
		{[]string{"ingress", "--shutdown-delay", "-1s"}, "not negative"},
		{[]string{"ingress", "--nope"}, "flag provided but not defined"},
		{[]string{"serve", "--endpoint-port", "70000", "--tls-cert", "a", "--tls-key", "b"}, "--endpoint-port"},
		{[]string{"install", "--api-server", "https://a", "--endpoint-port", "443"}, "only with --ingress=false"},
		{[]string{"install", "--api-server", "https://a", "--ingress-replicas", "0"}, "--ingress-replicas"},
		{[]string{"nope"}, "unknown command"},
	} {
		var stderr bytes.Buffer
		if code := run(context.Background(), c.args, &stderr); code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, %q (want 2 and %q)", c.args, code, stderr.String(), c.want)
		}
	}
}
