package manifest

import (
	"strings"
	"testing"
)

func TestDryRunPlan(t *testing.T) {
	m, _ := mustLoad(t, `deploy:
  commands:
    - name: migrate
      command: ./migrate --token $API_TOKEN
  compose: compose.yml
dependencies:
  api: {repository: https://github.com/acme/api, branch: main}
destroy:
  - ./cleanup
`, map[string]string{"compose.yml": "services:\n  web: {image: w}\n"})
	vars := map[string]string{"DEVTOOL_NAMESPACE": "dev", "API_TOKEN": "tok-12345", "DEVTOOL_BUILD_WEB_IMAGE": "reg/web:1"}
	lines := strings.Join(m.Plan(false, vars, nil).Lines("tok-12345"), "\n")
	for _, want := range []string{"compose file: ", "compose.yml", "dependency api: https://github.com/acme/api (branch main)",
		"  API_TOKEN=******", "  DEVTOOL_NAMESPACE=dev", "  DEVTOOL_BUILD_WEB_IMAGE=reg/web:1", "would run: ./migrate --token ******"} {
		if !strings.Contains(lines, want) {
			t.Errorf("plan does not contain %q:\n%s", want, lines)
		}
	}
	if strings.Contains(lines, "tok-12345") {
		t.Errorf("secret shown:\n%s", lines)
	}
	d := m.Plan(true, vars, nil)
	if len(d.Commands) != 1 || d.Commands[0].Command != "./cleanup" || len(d.Dependencies) != 0 {
		t.Errorf("destroy plan = %+v", d)
	}
}

func TestDryRunExpand(t *testing.T) {
	p := (&Manifest{}).Plan(false, map[string]string{"DEVTOOL_NAMESPACE": "dev", "DB_PASSWORD": "hunter22", "MODE": "test", "EMPTY": ""}, nil)
	for _, c := range []struct{ in, want string }{
		{"kubectl -n $DEVTOOL_NAMESPACE apply -f k8s", "kubectl -n dev apply -f k8s"},
		{"echo ${DEVTOOL_NAMESPACE}-x", "echo dev-x"},
		{"psql -p $DB_PASSWORD", "psql -p ******"},
		{"echo $MODE $HOME", "echo test $HOME"}, // names the plan does not have (the shell's) are left as written
		{`echo '$MODE' \$MODE "$MODE"`, `echo '$MODE' \$MODE "test"`},
		{"echo $UNKNOWN ${UNKNOWN} ${MODE:-x} $1 $$ $", "echo $UNKNOWN ${UNKNOWN} ${MODE:-x} $1 $$ $"},
		{"echo [$EMPTY]", "echo []"},
		{"echo $MODE_X $MODEx", "echo $MODE_X $MODEx"},
	} {
		if got := p.Expand(c.in); got != c.want {
			t.Errorf("Expand(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestDryRunLinesImagesAndDependencies(t *testing.T) {
	m := &Manifest{Dependencies: []*Dependency{
		{Name: "api", Repository: "https://example.test/api", Variables: map[string]string{"API_TOKEN": "abcdef", "LEVEL": "2"}},
		{Name: "db", Repository: "https://example.test/db"},
	}}
	p := m.Plan(false, nil, nil)
	p.Images = []PlannedImage{{Service: "web", Ref: "reg:5000/dev/shop-web:abc"}, {Service: "job", Ref: "acme/job:1", Note: "always built: --build"}}
	p.DependencyNotes = map[string]string{"db": "already deployed (status deployed): skipped"}
	got := strings.Join(p.Lines(), "\n")
	want := strings.Join([]string{
		"dependency api: https://example.test/api: would be deployed",
		"  variable API_TOKEN=******",
		"  variable LEVEL=2",
		"dependency db: https://example.test/db: already deployed (status deployed): skipped",
		"image for web: reg:5000/dev/shop-web:abc (built when the registry does not have it)",
		"image for job: acme/job:1 (always built: --build)",
	}, "\n")
	if got != want {
		t.Errorf("lines:\n%s\nwant:\n%s", got, want)
	}
}

// TestDryRunSecrets: no secret value appears anywhere in the printed plan, whatever the name
// (the widened rule) or the value (URLs with a password), in variables, commands and
// dependencies; names the plan does not have are left as written.
func TestDryRunSecrets(t *testing.T) {
	vars := map[string]string{
		"DB_PASS":           "hunter22",
		"MYSQL_PWD":         "mysqlpw-1",
		"SENTRY_DSN":        "https://k3y@o1.ingest.example/1",
		"DATABASE_URL":      "postgres://u:dbpw-secret@db:5432/app",
		"PRIVATE_PEM":       "-----BEGIN-x",
		"TLS_CERT":          "certdata-1",
		"SESSION_ID":        "sess-123",
		"COOKIE_JAR":        "cookie-123",
		"api_key":           "lower-key-1",
		"PLAIN_URL":         "https://db.example/x",
		"MODE":              "fast",
		"DEVTOOL_NAMESPACE": "dev",
	}
	m := &Manifest{Deploy: Deploy{Commands: []Command{
		{Command: "mysql -p$MYSQL_PWD -u root --pass ${DB_PASS}"},
		{Command: "psql $DATABASE_URL && curl $PLAIN_URL"},
		{Command: "sentry --dsn $SENTRY_DSN --cert $TLS_CERT $PRIVATE_PEM $SESSION_ID $COOKIE_JAR $api_key"},
		{Command: "psql postgres://admin:literal-pw@db/x -n $DEVTOOL_NAMESPACE --mode $MODE $HOME_SECRET $HOME"},
	}}, Dependencies: []*Dependency{{Name: "api", Repository: "https://bot:repo-pw@git.example/api.git",
		Variables: map[string]string{"UPSTREAM": "redis://:redispw-1@cache:6379", "LEVEL": "2"}}}}
	lines := strings.Join(m.Plan(false, vars, nil).Lines(), "\n")
	for _, secret := range []string{"hunter22", "mysqlpw-1", "k3y", "dbpw-secret", "BEGIN-x", "certdata-1", "sess-123",
		"cookie-123", "lower-key-1", "literal-pw", "repo-pw", "redispw-1"} {
		if strings.Contains(lines, secret) {
			t.Errorf("plan shows %q:\n%s", secret, lines)
		}
	}
	for _, want := range []string{
		"  DB_PASS=******", "  MYSQL_PWD=******", "  SENTRY_DSN=******", "  DATABASE_URL=postgres://u:xxxxx@db:5432/app",
		"  PLAIN_URL=https://db.example/x", "  MODE=fast", "  DEVTOOL_NAMESPACE=dev",
		"would run: mysql -p****** -u root --pass ******",
		"would run: psql postgres://u:xxxxx@db:5432/app && curl https://db.example/x",
		"would run: sentry --dsn ****** --cert ****** ****** ****** ****** ******",
		"would run: psql postgres://admin:xxxxx@db/x -n dev --mode fast $HOME_SECRET $HOME",
		"dependency api: https://bot:xxxxx@git.example/api.git", "  variable UPSTREAM=redis://:xxxxx@cache:6379", "  variable LEVEL=2",
	} {
		if !strings.Contains(lines, want) {
			t.Errorf("plan lacks %q:\n%s", want, lines)
		}
	}
}

func TestIsSecretName(t *testing.T) {
	for name, want := range map[string]bool{
		"API_TOKEN": true, "DB_PASSWORD": true, "DB_PASSWD": true, "DB_PASS": true, "MYSQL_PWD": true, "AWS_SECRET_ACCESS_KEY": true,
		"SSH_KEY": true, "GOOGLE_CREDENTIALS": true, "BASIC_AUTH": true, "SENTRY_DSN": true, "PRIVATE_PEM": true,
		"TLS_CERT": true, "SESSION_ID": true, "COOKIE": true, "api_key": true,
		"KUBECONFIG": false, "PWD": false, "OLDPWD": false, "MODE": false, "HOME": false, "DATABASE_URL": false, "DEVTOOL_NAMESPACE": false, "DEVTOOL_BUILD_AUTH_IMAGE": false,
	} {
		if got := IsSecretName(name); got != want {
			t.Errorf("IsSecretName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestRedactURLs(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://u:pw@db/x", "postgres://u:xxxxx@db/x"},
		{"https://db.example/x", "https://db.example/x"},
		{"https://user@db.example/x", "https://user@db.example/x"},
		{"not a url", "not a url"},
		{"DATABASE_URL=postgres://u:pw@db", "DATABASE_URL=postgres://u:xxxxx@db"},
		{`run "mysql://root:pw@h:3306/d" 'x://a:b@c' end`, `run "mysql://root:xxxxx@h:3306/d" 'x://a:xxxxx@c' end`},
		{"bad://u:p%zz@h", "bad://xxxxx@h"},
	} {
		if got := RedactURLs(c.in); got != c.want {
			t.Errorf("RedactURLs(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
