package environment

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/devtool/devtool/internal/build"
	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/deploy"
	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/translate"
)

// TestManifestDryRun: deploy --dry-run of a devtool.yml names the images as a deploy would,
// shows the commands with their variables expanded and secrets masked, the dependencies, and the
// objects of the compose and endpoints parts, and runs nothing.
func TestManifestDryRun(t *testing.T) {
	const manifestFile = `name: shop
build:
  web:
    context: web
  tools:
    image: acme/tools:1
    context: tools
deploy:
  commands:
    - name: migrate
      command: touch ran; ./migrate --image $DEVTOOL_BUILD_WEB_IMAGE --ns ${DEVTOOL_NAMESPACE} --password $DB_PASSWORD --mode $MODE
  compose: compose.yml
  endpoints:
    shop:
      - {path: /, service: web, port: 8080}
dependencies:
  api: {repository: https://example.test/api.git, branch: main, variables: {API_TOKEN: tok-abcdef}}
destroy:
  - echo bye
`
	files := map[string]string{
		"devtool.yml":       manifestFile,
		"web/Dockerfile":    "FROM scratch\n",
		"tools/Dockerfile":  "FROM scratch\n",
		"compose.yml":       "services:\n  web:\n    build: web\n    ports: [\"8080\"]\n    volumes: [\"./static:/srv\"]\n  cache:\n    image: docker.io/library/busybox:local\n",
		"static/index.html": "hi\n",
	}
	fakeWithState := func(t *testing.T) *kube.Client {
		cs := fake.NewClientset()
		if err := (&deploy.StateStore{Clientset: cs, Namespace: "dev"}).Save(context.Background(), &deploy.State{Name: "api", Status: deploy.StatusDeployed}); err != nil {
			t.Fatal(err)
		}
		return &kube.Client{Clientset: cs, Namespace: "dev"}
	}
	for _, c := range []struct {
		name         string
		registry     string
		kube         func(*testing.T) *kube.Client
		force, deps  bool
		want, absent []string
		warn         string
		webImage     string // the web Deployment's image prefix
	}{
		{name: "no cluster", registry: "127.0.0.1:25000",
			want: []string{"compose file: ", "dependency api: https://example.test/api.git (branch main): would be deployed unless it is already (no cluster to ask)",
				"  variable API_TOKEN=******", "image for web: 127.0.0.1:25000/dev/shop-web:", "image for tools: acme/tools:1 (built when the registry does not have it)",
				"  DEVTOOL_BUILD_WEB_IMAGE=127.0.0.1:25000/dev/shop-web:", "  DEVTOOL_BUILD_TOOLS_TAG=1", "  DEVTOOL_BUILD_TOOLS_SHA=<digest after the build>", "  DB_PASSWORD=******", "  MODE=fast",
				"would run: touch ran; ./migrate --image 127.0.0.1:25000/dev/shop-web:", "--ns dev --password ****** --mode fast"},
			absent: []string{"s3cr3t-pass", "tok-abcdef"}, warn: "a deploy copies host folder", webImage: "127.0.0.1:25000/dev/shop-web:"},
		{name: "dependency deployed", registry: "127.0.0.1:25000", kube: fakeWithState, force: true,
			want: []string{"dependency api: https://example.test/api.git (branch main): already deployed (status deployed): skipped", "image for web: 127.0.0.1:25000/dev/shop-web:", "(always built: --build)"}},
		{name: "--dependencies", registry: "127.0.0.1:25000", kube: fakeWithState, deps: true,
			want: []string{"dependency api: https://example.test/api.git (branch main): would be deployed (--dependencies)"}},
		{name: "no registry", registry: "",
			want:   []string{"image for tools: acme/tools:1", "would run: touch ran; ./migrate --image $DEVTOOL_BUILD_WEB_IMAGE --ns dev"},
			absent: []string{"image for web"}, warn: "DEVTOOL_BUILD_WEB_* are not set (service web)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range files {
				write(t, filepath.Join(dir, name), content)
			}
			env, err := Load(Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			target := &contexts.Target{Namespace: "dev", Registry: c.registry, ClusterDomain: "example.test"}
			if c.kube != nil {
				target.Kube = c.kube(t)
			}
			var warnings []string
			d := &Deployer{Env: env, Target: target, DryRun: true, Force: c.force, Dependencies: c.deps,
				Vars:    map[string]string{"DB_PASSWORD": "s3cr3t-pass", "MODE": "fast"},
				Environ: map[string]string{"HOME": "/home/u", "GITHUB_TOKEN": "ghp-very-secret"},
				Warn:    func(s string) { warnings = append(warnings, s) },
				NewBuilder: func(context.Context) (bb build.Builder, err error) {
					t.Error("a dry run asked for a builder")
					return nil, os.ErrInvalid
				}}
			res, err := d.Deploy(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Join(res.Plan, "\n")
			for _, w := range c.want {
				if !strings.Contains(lines, w) {
					t.Errorf("plan lacks %q:\n%s", w, lines)
				}
			}
			for _, a := range append(c.absent, "ghp-very-secret", "echo bye") {
				if strings.Contains(lines, a) {
					t.Errorf("plan shows %q:\n%s", a, lines)
				}
			}
			if c.warn != "" && !strings.Contains(strings.Join(warnings, "\n"), c.warn) {
				t.Errorf("warnings lack %q: %q", c.warn, warnings)
			}
			if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
				t.Error("a dry run ran a command")
			}
			kinds := map[string]int{}
			for _, o := range res.Objects.Objects {
				u, err := kube.ToUnstructured(o)
				if err != nil {
					t.Fatal(err)
				}
				kinds[u.GetKind()]++
				if u.GetKind() == translate.KindDeployment && u.GetName() == "web" && c.webImage != "" {
					cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
					img := ""
					if len(cs) > 0 {
						img, _, _ = unstructured.NestedString(cs[0].(map[string]any), "image")
					}
					if !strings.HasPrefix(img, c.webImage) {
						t.Errorf("web runs %q, want %s…", img, c.webImage)
					}
				}
			}
			if kinds["Deployment"] != 2 || kinds["Ingress"] != 1 || kinds["Service"] != 1 {
				t.Errorf("objects by kind: %v", kinds)
			}
			if len(res.URLs) != 1 || res.URLs[0] != "https://shop-dev.example.test/" {
				t.Errorf("urls %v", res.URLs)
			}
		})
	}
}

// TestPlannedImages: the names destroy commands and dry runs see are the names a deploy pushes:
// the image given, else the content-hash name; a service that cannot be named is described.
func TestPlannedImages(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "devtool.yml"), "name: shop\nbuild:\n  web: {context: web}\n  tools: {image: acme/tools:1, context: tools}\n  gone: {context: missing}\ndeploy: [echo]\n")
	write(t, filepath.Join(dir, "web", "Dockerfile"), "FROM scratch\n")
	env, err := Load(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	tag, err := build.ContentTagContext(context.Background(), build.Request{Context: filepath.Join(dir, "web")})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		registry string
		want     map[string]string
		problems []string
	}{
		{"127.0.0.1:25000", map[string]string{"web": "127.0.0.1:25000/dev/shop-web:" + tag, "tools": "acme/tools:1"}, []string{"DEVTOOL_BUILD_GONE_* are not set (service gone): "}},
		{"", map[string]string{"tools": "acme/tools:1"}, []string{"DEVTOOL_BUILD_WEB_* are not set (service web): service web has a build section and no image, and there is no registry", "DEVTOOL_BUILD_GONE_*"}},
	} {
		got, problems := PlannedImages(context.Background(), env.Manifest, c.registry, "dev", env.Name)
		if len(got) != len(c.want) {
			t.Errorf("registry %q: images %v, want %v", c.registry, got, c.want)
		}
		for svc, ref := range c.want {
			if got[svc].Ref != ref || got[svc].Digest != "" {
				t.Errorf("registry %q: %s = %+v, want %s", c.registry, svc, got[svc], ref)
			}
		}
		if len(problems) != len(c.problems) {
			t.Errorf("registry %q: problems %q", c.registry, problems)
			continue
		}
		for i, p := range c.problems {
			if !strings.Contains(problems[i], p) {
				t.Errorf("registry %q: problem %q lacks %q", c.registry, problems[i], p)
			}
		}
	}
	vars := deploy.CommandEnv{Images: map[string]deploy.BuiltImage{"tools": {Ref: "acme/tools:1"}}}.Build()
	if vars["DEVTOOL_BUILD_TOOLS_IMAGE"] != "acme/tools:1" || vars["DEVTOOL_BUILD_TOOLS_TAG"] != "1" || vars["DEVTOOL_BUILD_TOOLS_REPOSITORY"] != "acme/tools" {
		t.Errorf("variables %v", vars)
	}
}

// TestDeploySectionSubsetWithConvertedNames: deploy.compose services are named as written in the
// Compose file; names converted for Kubernetes (My_Api → my-api) are found, with what they depend
// on, and the build section's image (keyed as written) replaces theirs.
func TestDeploySectionSubsetWithConvertedNames(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "compose.yml"), `services:
  My_Api:
    image: acme/api:0
    depends_on: [db_main]
  db_main:
    image: acme/db:1
  other:
    image: acme/other:1
`)
	for _, c := range []struct {
		services string
		want     map[string]string // deployment → image
		err      string
	}{
		{"[My_Api]", map[string]string{"my-api": "reg.test/api:built", "db-main": "acme/db:1"}, ""},
		{"[my-api]", map[string]string{"my-api": "reg.test/api:built", "db-main": "acme/db:1"}, ""},
		{"[db_main, other]", map[string]string{"db-main": "acme/db:1", "other": "acme/other:1"}, ""},
		{"[nope]", nil, `no service "nope"`},
	} {
		write(t, filepath.Join(dir, "devtool.yml"), "name: conv\ndeploy:\n  commands: [echo]\n  compose:\n    - {file: compose.yml, services: "+c.services+"}\n")
		env, err := Load(Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		d := &Deployer{Env: env, Target: &contexts.Target{Namespace: "dev"}, DryRun: true}
		d.defaults()
		res, err := d.translateDeploySection(context.Background(), map[string]deploy.BuiltImage{"My_Api": {Ref: "reg.test/api:built"}})
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err %v, want %q", c.services, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.services, err)
		}
		got := map[string]string{}
		for _, o := range res.Objects {
			u, err := kube.ToUnstructured(o)
			if err != nil {
				t.Fatal(err)
			}
			if u.GetKind() != translate.KindDeployment {
				continue
			}
			cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			got[u.GetName()], _, _ = unstructured.NestedString(cs[0].(map[string]any), "image")
		}
		if len(got) != len(c.want) {
			t.Errorf("%s: deployments %v, want %v", c.services, got, c.want)
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("%s: %s runs %q, want %q", c.services, k, got[k], v)
			}
		}
	}
}

// TestEmptyFileFlag: an empty --file is refused once, by the environment loader, alone or among several.
func TestEmptyFileFlag(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "compose.yml"), "services:\n  web: {image: a}\n")
	for _, files := range [][]string{{""}, {"compose.yml", ""}, {"", "compose.yml"}} {
		if _, err := Load(Options{Dir: dir, Files: files}); err == nil || err.Error() != "--file is empty" {
			t.Errorf("--file %q: %v", files, err)
		}
	}
}

func TestDryRunDependencyNotes(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "devtool.yml"), `name: shop
deploy: [echo]
dependencies:
  good: {repository: https://example.test/good.git}
  bad: {repository: https://example.test/bad.git, variables: {DEVTOOL_X: "1"}}
`)
	env, err := Load(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	d := &Deployer{Env: env, Target: &contexts.Target{Namespace: "dev"}, DryRun: true}
	res, err := d.Deploy(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Join(res.Plan, "\n")
	for _, want := range []string{"dependency good: https://example.test/good.git: would be deployed unless it is already (no cluster to ask)",
		"dependency bad: https://example.test/bad.git: the deploy would fail: variable \"DEVTOOL_X=1\": DEVTOOL_X is reserved"} {
		if !strings.Contains(lines, want) {
			t.Errorf("plan lacks %q:\n%s", want, lines)
		}
	}
	if res.Objects != nil {
		t.Errorf("objects without compose or endpoints: %+v", res.Objects)
	}
}

// TestDryRunVariableSources: the plan of a devtool.yml shows each variable as the deploy would
// set it (.env < shell < --var < DEVTOOL_*), never a value from the shell (references to it are
// left as written), and no secret value anywhere, by name or as a URL password.
func TestDryRunVariableSources(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "devtool.yml"), `name: shop
deploy:
  - ./run --a $FROM_DOTENV --b $DOTENV_OVER_SHELL --c $DOTENV_OVER_VAR --d $SHELL_ONLY --e ${DB_PASS} --f $DATABASE_URL --g $MYSQL_PWD --h $SENTRY_DSN --i $DEVTOOL_NAME --j $SHELL_URL
  - ls `+dir+`/inner
`)
	write(t, filepath.Join(dir, ".env"), "FROM_DOTENV=dotenv-a\nDOTENV_OVER_SHELL=dotenv-b\nDOTENV_OVER_VAR=dotenv-c\nSENTRY_DSN=https://dsnkey1@sentry.example/1\n")
	environ := map[string]string{"DOTENV_OVER_SHELL": "shell-b", "SHELL_ONLY": "shell-d", "MYSQL_PWD": "shellpw-g",
		"SHELL_URL": "postgres://u:shellurlpw@db/x", "DEVTOOL_NAME": "shell-name", "HOME": "/home/u", "PWD": dir}
	env, err := Load(Options{Dir: dir, Environ: environ})
	if err != nil {
		t.Fatal(err)
	}
	d := &Deployer{Env: env, Target: &contexts.Target{Namespace: "dev"}, DryRun: true, Environ: environ,
		Vars: map[string]string{"DOTENV_OVER_VAR": "var-c", "DB_PASS": "hunter22", "DATABASE_URL": "postgres://u:varurlpw@db:5432/app"}}
	res, err := d.Deploy(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Join(res.Plan, "\n")
	for _, c := range []struct{ source, want, absent string }{
		{".env", "  FROM_DOTENV=dotenv-a", ""},
		{".env under the shell", "--b $DOTENV_OVER_SHELL", "dotenv-b"},
		{".env under the shell: not listed", "", "DOTENV_OVER_SHELL="},
		{"shell", "--d $SHELL_ONLY", "shell-d"},
		{"shell secret", "--g $MYSQL_PWD", "shellpw-g"},
		{"shell URL", "--j $SHELL_URL", "shellurlpw"},
		{"--var over .env", "  DOTENV_OVER_VAR=var-c", "dotenv-c"},
		{"--var over .env, command", "--c var-c", ""},
		{"--var secret by name", "  DB_PASS=******", "hunter22"},
		{"--var secret by name, command", "--e ******", ""},
		{"--var URL", "  DATABASE_URL=postgres://u:xxxxx@db:5432/app", "varurlpw"},
		{"--var URL, command", "--f postgres://u:xxxxx@db:5432/app", ""},
		{".env DSN", "  SENTRY_DSN=******", "dsnkey1"},
		{"DEVTOOL_* over the shell", "--i shop", "shell-name"},
		{"shell not listed", "", "HOME="},
		{"the shell's PWD is a path, not a secret", "would run: ls " + dir + "/inner", ""},
	} {
		if c.want != "" && !strings.Contains(lines, c.want) {
			t.Errorf("%s: plan lacks %q:\n%s", c.source, c.want, lines)
		}
		if c.absent != "" && strings.Contains(lines, c.absent) {
			t.Errorf("%s: plan shows %q:\n%s", c.source, c.absent, lines)
		}
	}
}
