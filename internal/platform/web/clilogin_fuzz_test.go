package web

import (
	"net/url"
	"strings"
	"testing"

	"github.com/devtool/devtool/internal/platform/store"
)

// FuzzAuthRequest: any authorization request either is refused on a page (never redirected), is
// sent back to a loopback address with an error, or is a valid request for a loopback address.
func FuzzAuthRequest(f *testing.F) {
	f.Add("response_type=code&client_id=devtool-cli&redirect_uri=http%3A%2F%2F127.0.0.1%3A5%2Fcb&state=s&code_challenge=" +
		strings.Repeat("a", 43) + "&code_challenge_method=S256")
	f.Add("client_id=devtool-cli&redirect_uri=http://evil.example:1/")
	f.Add("client_id=devtool-cli&redirect_uri=http://[::1]:1/x")
	f.Fuzz(func(t *testing.T, q string) {
		v, err := url.ParseQuery(q)
		if err != nil {
			return
		}
		a := parseAuthRequest(v)
		if a.clientErr != "" {
			return
		}
		if a.redirect == nil || a.redirect.Scheme != "http" || a.redirect.Hostname() != "127.0.0.1" && a.redirect.Hostname() != "::1" {
			t.Fatalf("redirect to %v accepted", a.redirect)
		}
		if a.redirectErr == "" && (a.state == "" || !store.ValidPKCE(a.challenge)) {
			t.Fatalf("invalid request accepted: %+v", a)
		}
	})
}
