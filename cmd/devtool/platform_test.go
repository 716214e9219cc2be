//go:build unix

package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/devtool/devtool/internal/dev"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/client/clienttest"
)

// platformUser is a temporary HOME and project folder whose commands reach the fake platform f as
// user alice through DEVTOOL_URL, DEVTOOL_TOKEN and DEVTOOL_CA_CERT (no saved context).
type platformUser struct {
	dir, home string
	env       []string
}

func newPlatformUser(t *testing.T, f *clienttest.Fake) *platformUser {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	u := &platformUser{dir: filepath.Join(base, "project"), home: filepath.Join(base, "home")}
	ca := filepath.Join(base, "platform-ca.crt")
	write(t, ca, string(f.CAPEM))
	if err := os.MkdirAll(u.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	u.env = []string{"HOME=" + u.home, "DEVTOOL_HOME=" + u.home, "KUBECONFIG=" + filepath.Join(u.home, "none"),
		"PATH=" + os.Getenv("PATH"), "NO_COLOR=1",
		api.EnvURL + "=" + f.URL(), api.EnvToken + "=" + f.AddUser("alice", false), api.EnvCACert + "=" + ca}
	return u
}

func (u *platformUser) run(t *testing.T, bin string, extraEnv []string, args ...string) (int, string, string) {
	t.Helper()
	return runBinary(t, bin, u.dir, append(append([]string(nil), u.env...), extraEnv...), args...)
}

// TestStoredSecretsNeverPrinted is issue 19's stored secrets on the CLI side, on the built binary
// against a fake platform (the same on the real platform and cluster: test/e2e
// TestPlatformStoredSecrets): a stored secret is the third source of ${NAME} (the shell and .env
// win over it), it is read for the namespace the command uses, and its value appears in no output:
// not in the dry run's objects, not in the debug log, not in an error message.
func TestStoredSecretsNeverPrinted(t *testing.T) {
	bin := devtoolBinary(t)
	f := clienttest.New(t)
	u := newPlatformUser(t, f)
	const stored = "s3cr3t-stored-value-XYZ"
	f.SetSecrets("alice", map[string]string{
		"STORED_TOKEN": stored, "DOTENV_WINS": "stored-loses-to-dotenv", "SHELL_WINS": "stored-loses-to-shell",
		"BAD_PORT": "port-secret-value-77",
	})
	write(t, filepath.Join(u.dir, ".env"), "DOTENV_WINS=dotenv-value-1\n")
	write(t, filepath.Join(u.dir, "compose.yml"), "services:\n  web:\n    image: busybox\n    environment:\n"+
		"      FROM_STORE: ${STORED_TOKEN}\n      FROM_DOTENV: ${DOTENV_WINS}\n      FROM_SHELL: ${SHELL_WINS}\n")
	code, stdout, stderr := u.run(t, bin, []string{"SHELL_WINS=shell-value-1"}, "deploy", "--dry-run", "--namespace", "alice", "--loglevel", "debug")
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{"name: FROM_STORE\n          value: ***", "value: dotenv-value-1", "value: shell-value-1"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	for _, leaked := range []string{stored, "stored-loses-to-dotenv", "stored-loses-to-shell"} {
		if strings.Contains(stdout+stderr, leaked) {
			t.Errorf("%q printed", leaked)
		}
	}
	if ns := f.SecretsNamespaces; len(ns) != 1 || ns[0] != "alice" {
		t.Errorf("secrets read for namespaces %v, want [alice]", ns)
	}

	// A devtool.yml: its commands' plan never shows a stored value.
	write(t, filepath.Join(u.dir, "devtool.yml"), "deploy:\n  commands:\n    - echo \"token $STORED_TOKEN\"\n  compose: compose.yml\n")
	code, stdout, stderr = u.run(t, bin, nil, "deploy", "--dry-run", "--namespace", "alice")
	if code != 0 || strings.Contains(stdout+stderr, stored) {
		t.Errorf("devtool.yml dry run: exit %d, value printed %v:\n%s%s", code, strings.Contains(stdout+stderr, stored), stdout, stderr)
	}
	if err := os.Remove(filepath.Join(u.dir, "devtool.yml")); err != nil {
		t.Fatal(err)
	}

	// doctor: a value that reached up's log (a dev command printing its environment) is redacted
	// from the report.
	sd := &dev.StateDir{Path: dev.StateDirPath(u.home, u.dir, "web")}
	if err := os.MkdirAll(sd.Path, 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, sd.LogFile(), "time=x level=INFO msg=\"dev command output\" line=\"hello "+stored+"\"\n")
	code, stdout, stderr = u.run(t, bin, nil, "doctor", "web", "--namespace", "alice")
	if code != 0 {
		t.Fatalf("doctor: exit %d\n%s", code, stderr)
	}
	zips, _ := filepath.Glob(filepath.Join(u.dir, "devtool-doctor-web-*.zip"))
	if len(zips) != 1 {
		t.Fatalf("reports %v", zips)
	}
	report, err := os.ReadFile(zips[0])
	if err != nil {
		t.Fatal(err)
	}
	if log := zipText(t, report, "devtool.log"); strings.Contains(log, stored) || !strings.Contains(log, "hello <redacted>") {
		t.Errorf("doctor's devtool.log: %q", log)
	}
	os.Remove(zips[0])

	// An error that quotes the value.
	write(t, filepath.Join(u.dir, "compose.yml"), "services:\n  web:\n    image: busybox\n    ports: [\"${BAD_PORT}:80\"]\n")
	code, stdout, stderr = u.run(t, bin, nil, "deploy", "--dry-run", "--namespace", "alice")
	if code == 0 || !strings.Contains(stderr, "***") || strings.Contains(stdout+stderr, "port-secret-value-77") {
		t.Errorf("an error quoting a stored value: exit %d:\n%s", code, stderr)
	}
}

// TestAnalyticsOnlyWhenBothAllow is issue 19's analytics on the CLI side, on the built binary: an
// event reaches the platform of the command's context only when the user has analytics enabled
// and the platform's admin allows them, and it holds exactly the fields of api.AnalyticsEvent
// (which docs/analytics.md lists: TestAnalyticsDocumented). A plain Kubernetes context sends
// nothing anywhere.
func TestAnalyticsOnlyWhenBothAllow(t *testing.T) {
	bin := devtoolBinary(t)
	f := clienttest.New(t)
	u := newPlatformUser(t, f)
	f.SetAnalytics(true)

	if code, _, stderr := u.run(t, bin, nil, "version"); code != 0 {
		t.Fatalf("version: %s", stderr)
	}
	if code, _, _ := u.run(t, bin, nil, "namespace", "create", "Bad_Name"); code == 0 {
		t.Fatal("a bad namespace name was accepted")
	}
	events := f.Events()
	if len(events) != 2 {
		t.Fatalf("%d events, want 2: %s", len(events), events)
	}
	var fields []string
	for i := range reflect.TypeFor[api.AnalyticsEvent]().NumField() {
		fields = append(fields, strings.Split(reflect.TypeFor[api.AnalyticsEvent]().Field(i).Tag.Get("json"), ",")[0])
	}
	sort.Strings(fields)
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	var ids []string
	for i, raw := range events {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		var keys []string
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if !reflect.DeepEqual(keys, fields) {
			t.Errorf("event %d has fields %v, want exactly %v", i, keys, fields)
		}
		ids = append(ids, m["installId"].(string))
		if !uuid.MatchString(ids[i]) || m["os"] == "" || m["arch"] == "" || m["version"] == "" {
			t.Errorf("event %d: %s", i, raw)
		}
	}
	var first, second api.AnalyticsEvent
	json.Unmarshal(events[0], &first)
	json.Unmarshal(events[1], &second)
	if first.Command != "version" || !first.Success || second.Command != "namespace create" || second.Success || ids[0] != ids[1] {
		t.Errorf("events: %+v %+v", first, second)
	}
	if strings.Contains(string(events[1]), "Bad_Name") {
		t.Error("an argument was sent")
	}

	// The user turns analytics off (that command's own event is not sent either), or DO_NOT_TRACK.
	u.run(t, bin, nil, "analytics", "--disable")
	u.run(t, bin, nil, "version")
	u.run(t, bin, nil, "analytics", "--enable")
	u.run(t, bin, []string{"DO_NOT_TRACK=1"}, "version")
	if n := len(f.Events()); n != 3 { // the --enable run's event only
		t.Errorf("%d events after the user turned analytics off, want 3: %s", n, f.Events())
	}

	// The admin does not allow them: the CLI asks and sends nothing.
	f.SetAnalytics(false)
	before := len(f.RequestsSeen())
	u.run(t, bin, nil, "version")
	for _, r := range f.RequestsSeen()[before:] {
		if strings.Contains(r, "/analytics") {
			t.Errorf("sent while the platform does not allow analytics: %s", r)
		}
	}

	// A plain Kubernetes context: the platform is never contacted.
	f.SetAnalytics(true)
	kube := []string{"HOME=" + u.home, "DEVTOOL_HOME=" + u.home, "PATH=" + os.Getenv("PATH"),
		"KUBECONFIG=" + writeKubeconfig(t, filepath.Join(u.home, "kubeconfig"), "")}
	before = len(f.RequestsSeen())
	runBinary(t, bin, u.dir, kube, "version")
	if got := f.RequestsSeen()[before:]; len(got) != 0 {
		t.Errorf("a plain Kubernetes context reached the platform: %v", got)
	}
}

// zipText is the named entry of a zip file's bytes.
func zipText(t *testing.T, data []byte, name string) string {
	t.Helper()
	z, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range z.File {
		if e.Name == name {
			rc, err := e.Open()
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			b, err := io.ReadAll(rc)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
	}
	t.Fatalf("no %s in the zip", name)
	return ""
}
