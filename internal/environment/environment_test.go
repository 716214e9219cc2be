package environment

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/devtool/devtool/internal/composeenv"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/manifest"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestEndpointsOfTheDeploySection(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "devtool.yml"), `name: shop
deploy:
  commands: [kubectl apply -f k8s]
  endpoints:
    shop:
      - {path: /, service: web, port: 8080}
`)
	env, err := Load(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	d := &Deployer{Env: env, Target: &contexts.Target{Namespace: "dev", ClusterDomain: "example.test"}}
	d.defaults()
	res, err := d.translateDeploySection(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Objects) != 1 || len(res.Endpoints) != 1 || res.Endpoints[0].URL != "https://shop-dev.example.test/" {
		t.Errorf("objects %d, endpoints %+v", len(res.Objects), res.Endpoints)
	}
}

// TestOneNameInARepositorySubfolder: a Compose file or devtool.yml in a subfolder of a git
// repository is named after the repository (its origin), whichever command asks.
func TestOneNameInARepositorySubfolder(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "checkout")
	write(t, filepath.Join(repo, ".git", "config"), "[remote \"origin\"]\n\turl = https://example.test/team/shop.git\n")
	sub := filepath.Join(repo, "app")
	write(t, filepath.Join(sub, "compose.yml"), "services:\n  web:\n    build: .\n")
	write(t, filepath.Join(sub, "Dockerfile"), "FROM scratch\n")
	env, err := Load(Options{Dir: sub})
	if err != nil {
		t.Fatal(err)
	}
	if env.Name != "shop" || !env.IsCompose() {
		t.Fatalf("name %q (compose %v), want shop", env.Name, env.IsCompose())
	}
	if len(env.Manifest.Build) != 1 || env.Manifest.Build[0].Service != "web" {
		t.Fatalf("build sections %+v", env.Manifest.Build)
	}
	// --file from the repository root names it the same.
	env2, err := Load(Options{Dir: repo, Files: []string{"app/compose.yml"}})
	if err != nil || env2.Name != "shop" {
		t.Fatalf("--file from the root: %v %v", env2, err)
	}
	if env3, err := Load(Options{Dir: sub, Name: "Other_Name"}); err != nil || env3.Name != "other-name" {
		t.Fatalf("--name: %v %v", env3, err)
	}
}

func TestLoadErrorsAreNotHidden(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "devtool.yml"), "deploy:\n  commands: 12\n")
	write(t, filepath.Join(dir, "compose.yml"), "services:\n  web:\n    image: x\n")
	for _, o := range []Options{{Dir: dir}, {Dir: dir, AllowMissing: true}, {Dir: dir, Name: "x", AllowMissing: true}} {
		if _, err := Load(o); err == nil || !strings.Contains(err.Error(), "devtool.yml") {
			t.Errorf("%+v: err %v, want the devtool.yml error", o, err)
		}
	}
}

func TestMissing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "Empty_Dir")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var nf *manifest.NotFoundError
	if _, err := Load(Options{Dir: dir}); !errors.As(err, &nf) {
		t.Fatalf("err %v, want NotFoundError", err)
	}
	env, err := Load(Options{Dir: dir, AllowMissing: true})
	if err != nil || env.Found() || env.Name != "empty-dir" {
		t.Fatalf("allow missing: %+v %v", env, err)
	}
	if _, err := Load(Options{Dir: dir, Files: []string{"nope.yml"}, AllowMissing: true}); err == nil {
		t.Fatal("a missing --file is an error")
	}
	if _, err := Load(Options{Dir: dir, Files: []string{"a.yml", "b.yml"}}); err == nil || !strings.Contains(err.Error(), "a.yml") {
		t.Fatalf("several missing files: %v", err)
	}
}

func TestCloneURLAndInsideDir(t *testing.T) {
	for _, bad := range []string{"--upload-pack=touch /tmp/x", "ext::sh -c touch% /tmp/pwned", "fd::3", "gopher://h/r", ""} {
		if _, err := CloneURL(bad, "/w"); err == nil {
			t.Errorf("CloneURL(%q) accepted", bad)
		}
	}
	for in, want := range map[string]string{"https://h/o/r.git": "https://h/o/r.git", "git@h:o/r.git": "git@h:o/r.git", "../dep": "file:///dep", "/srv/r": "file:///srv/r"} {
		if got, err := CloneURL(in, "/w"); err != nil || got != want {
			t.Errorf("CloneURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	root := t.TempDir()
	write(t, filepath.Join(root, "ok", "devtool.yml"), "")
	if err := os.Symlink("/etc", filepath.Join(root, "out")); err != nil {
		t.Fatal(err)
	}
	if _, err := InsideDir(root, "ok/devtool.yml"); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"../x/devtool.yml", "/etc/passwd", "out/passwd", "ok/../../x"} {
		if _, err := InsideDir(root, bad); err == nil {
			t.Errorf("InsideDir(%q) accepted", bad)
		}
	}
}

func TestComposeOverrideMergedOnlyWhenDiscovered(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("compose.yaml", "services:\n  web:\n    image: busybox:base\n")
	write("compose.override.yaml", "services:\n  web:\n    image: busybox:override\n")
	image := func(o Options) string {
		t.Helper()
		env, err := Load(o)
		if err != nil {
			t.Fatal(err)
		}
		return env.Compose.Project.Services[0].Image
	}
	if got := image(Options{Dir: dir}); got != "busybox:override" {
		t.Errorf("discovered: image %q, want the override's", got)
	}
	if got := image(Options{Dir: dir, Files: []string{"compose.yaml"}}); got != "busybox:base" {
		t.Errorf("--file compose.yaml: image %q, want the file's own (Compose merges the override only when it finds the file)", got)
	}
	if got := image(Options{Dir: dir, Files: []string{"compose.yaml", "compose.override.yaml"}}); got != "busybox:override" {
		t.Errorf("two --file: image %q, want the second's", got)
	}
}

// TestStoredSecretsAreTheThirdSource: the platform's stored secrets resolve ${NAME} after the shell
// and .env (spec A6), in a Compose file (build args too), a devtool.yml and the Compose files its
// deploy section names.
func TestStoredSecretsAreTheThirdSource(t *testing.T) {
	secrets := map[string]string{"TOKEN": "stored-token", "FROM_DOTENV": "stored-loses", "FROM_SHELL": "stored-loses"}
	shell := map[string]string{"FROM_SHELL": "shell"}
	compose := "services:\n  web:\n    build:\n      context: .\n      args: {NPM_TOKEN: \"${TOKEN}\"}\n    environment:\n" +
		"      A: ${TOKEN}\n      B: ${FROM_DOTENV}\n      C: ${FROM_SHELL}\n      D: ${UNSET:-default}\n"
	for _, tc := range []struct {
		name  string
		files map[string]string
	}{
		{"compose file", map[string]string{"compose.yml": compose, ".env": "FROM_DOTENV=dotenv\n", "Dockerfile": "FROM scratch\n"}},
		{"devtool.yml naming a compose file", map[string]string{"devtool.yml": "name: ${TOKEN}-app\ndeploy:\n  compose: compose.yml\n",
			"compose.yml": compose, ".env": "FROM_DOTENV=dotenv\n", "Dockerfile": "FROM scratch\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for n, c := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			env, err := Load(Options{Dir: dir, Environ: shell, Secrets: secrets})
			if err != nil {
				t.Fatal(err)
			}
			if !env.IsCompose() {
				if env.Manifest.Name != "stored-token-app" {
					t.Errorf("devtool.yml name %q", env.Manifest.Name)
				}
				// The deploy section's Compose file is loaded by the deployer with the same sources.
				ce, err := composeenv.Load(composeenv.Options{WorkDir: dir, Files: []string{"compose.yml"}, Environ: shell, Secrets: secrets})
				if err != nil {
					t.Fatal(err)
				}
				env.Compose = ce
			}
			svc := env.Compose.Project.Service("web")
			got := map[string]string{}
			for k, v := range svc.Environment {
				got[k] = v
			}
			want := map[string]string{"A": "stored-token", "B": "dotenv", "C": "shell", "D": "default"}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			if a := svc.Build.Args["NPM_TOKEN"]; a != "stored-token" {
				t.Errorf("build arg %v", a)
			}
		})
	}
}

// TestEndpointsOnAPlatform: a platform's ingress class and port reach the Ingresses and the URLs,
// of a devtool.yml's endpoints and of a Compose file's public ports; a private label becomes the
// Ingress's annotation.
func TestEndpointsOnAPlatform(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "devtool.yml"), `name: shop
deploy:
  compose: compose.yml
  endpoints:
    admin:
      labels: {dev.devtool/private: "true"}
      rules:
        - {path: /, service: web, port: 8080}
`)
	write(t, filepath.Join(dir, "compose.yml"), `services:
  web:
    image: web:1
    ports: ["8080:8080"]
    labels: {dev.devtool/private: "true"}
  api:
    image: api:1
    ports: ["9000:9000"]
`)
	env, err := Load(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	d := &Deployer{Env: env, Target: &contexts.Target{Namespace: "dev", ClusterDomain: "devtool.localhost", IngressClass: "devtool", EndpointPort: 31443}}
	d.defaults()
	res, err := d.translateDeploySection(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for _, e := range res.Endpoints {
		urls = append(urls, e.URL)
	}
	want := "https://web-dev.devtool.localhost:31443/ https://api-dev.devtool.localhost:31443/ https://admin-dev.devtool.localhost:31443/"
	if got := strings.Join(urls, " "); got != want {
		t.Errorf("URLs:\n%s\nwant\n%s", got, want)
	}
	private := map[string]bool{}
	for _, o := range res.Objects {
		ing, ok := o.(*networkingv1.Ingress)
		if !ok {
			continue
		}
		if ing.Spec.IngressClassName == nil || *ing.Spec.IngressClassName != "devtool" {
			t.Errorf("%s: class %v", ing.Name, ing.Spec.IngressClassName)
		}
		private[ing.Name] = ing.Annotations["dev.devtool/private"] == "true"
	}
	if len(private) != 3 || !private["web"] || !private["admin"] || private["api"] {
		t.Errorf("private: %v", private)
	}
}
