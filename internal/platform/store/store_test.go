package store

import (
	"strings"
	"testing"
)

func TestTokenFormat(t *testing.T) {
	id, secret, tok, err := newToken()
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
