package store

import (
	"strings"
	"testing"

	"github.com/devtool/devtool/internal/platform/api"
)

func TestTokenFormat(t *testing.T) {
	id, secret, tok, err := newSecret(api.TokenPrefix)
	if err != nil {
		t.Fatal(err)
	}
	gid, gs, ok := ParseToken(tok)
	if !ok || gid != id || gs != secret || len(id) != 16 || len(secret) != 43 {
		t.Fatalf("ParseToken(%q) = %q %q %v", tok, gid, gs, ok)
	}
	for _, bad := range []string{"", "dvt_", tok[:len(tok)-1], "xvt" + tok[3:], strings.ToUpper(tok[:20]) + tok[20:],
		"dvt_0123456789abcdeg_" + secret, "dvt_0123456789abcdef-" + secret, tok + "A"} {
		if _, _, ok := ParseToken(bad); ok {
			t.Errorf("ParseToken(%q) accepted", bad)
		}
	}
	if HashSecret(secret) == HashSecret(secret+"x") || len(HashSecret(secret)) != 64 {
		t.Fatal("HashSecret")
	}
	if !secretMatches(HashSecret(secret), secret) || secretMatches(HashSecret(secret), secret+"x") || secretMatches("not hex", secret) {
		t.Fatal("secretMatches")
	}
	// session cookies have the same shape with their own prefix; neither is taken for the other
	sid, ssecret, cookie, err := newSecret(SessionPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if gid, gs, ok := splitSecret(cookie, SessionPrefix); !ok || gid != sid || gs != ssecret {
		t.Fatalf("splitSecret(%q) = %q %q %v", cookie, gid, gs, ok)
	}
	if _, _, ok := ParseToken(cookie); ok {
		t.Errorf("ParseToken(%q) accepted a session cookie", cookie)
	}
	if _, _, ok := splitSecret(tok, SessionPrefix); ok {
		t.Errorf("a token %q accepted as a session cookie", tok)
	}
}

func TestNames(t *testing.T) {
	for name, ok := range map[string]bool{"alice": true, "a-1": true, "": false, "Alice": false, "-a": false,
		"default": false, "kube-x": false, "devtool-system": false, strings.Repeat("a", 41): false, strings.Repeat("a", 40): true} {
		if got := ValidUserName(name) == ""; got != ok {
			t.Errorf("ValidUserName(%q) ok=%v, want %v", name, got, ok)
		}
	}
	if ValidNamespaceName(strings.Repeat("a", 63)) != "" || ValidNamespaceName(strings.Repeat("a", 64)) == "" {
		t.Error("namespace name length")
	}
}
