package deploy

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSanitizeName(t *testing.T) {
	cases := map[string]string{
		"My_App":      "my-app",
		"  web.api  ": "web-api",
		"--x--":       "x",
		"ÄÖÜ":         "",
	}
	long := ""
	for i := 0; i < 70; i++ {
		long += "b"
	}
	cases[long] = long[:63]
	for in, want := range cases {
		if got := SanitizeName(in); got != want {
			t.Errorf("SanitizeName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEnvironmentNamePrecedence(t *testing.T) {
	root := t.TempDir()
	repo := filepath.Join(root, "My_Repo")
	sub := filepath.Join(repo, "svc")
	if err := os.MkdirAll(filepath.Join(repo, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(root, "Plain.Dir")
	if err := os.MkdirAll(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ flag, manifest, dir, want string }{
		{"Flag", "manifest", sub, "flag"},
		{"", "From_Manifest", sub, "from-manifest"},
		{"", "", sub, "my-repo"},
		{"", "", plain, "plain-dir"},
	} {
		if got := EnvironmentName(c.flag, c.manifest, c.dir); got != c.want {
			t.Errorf("EnvironmentName(%q, %q, %q) = %q, want %q", c.flag, c.manifest, c.dir, got, c.want)
		}
	}
}
