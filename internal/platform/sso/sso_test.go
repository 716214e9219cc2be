package sso

import (
	"slices"
	"strings"
	"testing"
)

func TestParseConfig(t *testing.T) {
	if c, err := ParseConfig(map[string][]byte{}); c != nil || err != nil {
		t.Fatalf("no issuer: %+v %v", c, err)
	}
	c, err := ParseConfig(map[string][]byte{"issuer": []byte(" https://idp.example "), "clientID": []byte("devtool"),
		"scopes": []byte("profile groups"), "adminGroups": []byte("ops, admins ,"), "signUp": []byte("false")})
	if err != nil {
		t.Fatal(err)
	}
	if c.Issuer != "https://idp.example" || c.Name != "single sign-on" || !slices.Equal(c.Scopes, []string{"openid", "profile", "groups"}) ||
		!slices.Equal(c.AdminGroups, []string{"ops", "admins"}) || c.SignUp || c.UsernameClaim != "preferred_username" || c.GroupsClaim != "groups" {
		t.Fatalf("config: %+v", c)
	}
	for what, data := range map[string]map[string]string{
		"not a URL":   {"issuer": "idp.example", "clientID": "x"},
		"ftp":         {"issuer": "ftp://idp.example", "clientID": "x"},
		"no clientID": {"issuer": "https://idp.example"},
	} {
		d := map[string][]byte{}
		for k, v := range data {
			d[k] = []byte(v)
		}
		if _, err := ParseConfig(d); err == nil {
			t.Errorf("%s: accepted", what)
		}
	}
}

func TestUserName(t *testing.T) {
	for in, want := range map[string]string{
		"Alice.Smith@example.com": "alice-smith",
		"bob":                     "bob",
		"--x--":                   "x",
		"Zoë Ünïcode":             "zo-n-code",
		strings.Repeat("a", 60):   strings.Repeat("a", 40),
		"@example.com":            "",
	} {
		if got := UserName(in); got != want {
			t.Errorf("UserName(%q) = %q, want %q", in, got, want)
		}
	}
	if got := Printable("a\x00b\nc"+strings.Repeat("d", 300), 10); got != "abc"+strings.Repeat("d", 7) {
		t.Errorf("Printable: %q", got)
	}
}
