package dev

import (
	"archive/zip"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/manifest"
)

// TestDoctorHoldsNoSecret fills the state dir with every secret devtool knows about and
// checks the zip's every file for each of them.
func TestDoctorHoldsNoSecret(t *testing.T) {
	s, _ := OpenStateDir(t.TempDir(), "/work/app", "web")
	const (
		password = "s3cr3t-status-pw-123"
		token    = "eyJhbGciOiJSUzI1NiIsImtpZCI6IkFCQyJ9.kubetoken"
		envValue = "db-password-value-42"
		privKey  = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n-----END OPENSSH PRIVATE KEY-----"
		pubKey   = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKx1234567890abcdefghijklmnopqrstuvwxyzAB"
	)
	_ = s.WriteStatusService(StatusService{Addr: "127.0.0.1:4000", User: "devtool", Password: password})
	_ = os.WriteFile(s.KeyFile(), []byte(privKey), 0o600)
	log := strings.Join([]string{
		"level=INFO msg=connected",
		"status service password=" + password,
		"Authorization: Bearer " + token,
		`{"token": "` + token + `"}`,
		"key " + privKey,
		"authorized " + pubKey,
	}, "\n")
	log += "\nlevel=INFO msg=\"synced a.txt\" component=sync\nlevel=WARN msg=x component=sync API_KEY=" + envValue + "\n"
	_ = os.WriteFile(s.LogFile(), []byte(log), 0o600)
	_ = os.MkdirAll(s.SyncDir(), 0o700)
	_ = os.WriteFile(filepath.Join(s.SyncDir(), "local-0123456789abcdef.idx"), []byte("index"), 0o600)
	d := &manifest.Dev{Name: "web", Image: "img", Environment: map[string]string{"DB_PASSWORD": envValue}}

	var buf bytes.Buffer
	err := WriteDoctor(context.Background(), &buf, DoctorOptions{Namespace: "ns", Dev: d, State: s, Version: "test",
		Secrets: []string{token}, Now: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, f := range zr.File {
		rc, _ := f.Open()
		b, _ := io.ReadAll(rc)
		rc.Close()
		names[f.Name] = string(b)
		for _, secret := range []string{password, token, envValue, "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU", "AAAAC3NzaC1lZDI1NTE5AAAAIKx1234567890"} {
			if strings.Contains(string(b), secret) {
				t.Errorf("%s holds a secret %q:\n%s", f.Name, secret, b)
			}
		}
	}
	for _, want := range []string{"metadata.json", "dev.yaml", "devtool.log", "sync-local.log"} {
		if _, ok := names[want]; !ok {
			t.Errorf("missing %s (have %v)", want, names)
		}
	}
	if !strings.Contains(names["metadata.json"], `"os"`) || !strings.Contains(names["dev.yaml"], "DB_PASSWORD=<redacted>") ||
		!strings.Contains(names["devtool.log"], "msg=connected") || !strings.Contains(names["sync-local.log"], "synced a.txt") ||
		!strings.Contains(names["sync-local.log"], "local-0123456789abcdef.idx") || strings.Contains(names["sync-local.log"], "msg=connected") {
		t.Errorf("content lost: %v", names)
	}
}

// localShell runs the doctor's exec locally with sh, the agent's home moved to a folder.
type localShell struct{ home string }

func (l localShell) Exec(ctx context.Context, o kube.ExecOptions) error {
	script := strings.Replace(o.Command[2], "H="+Home+"\n", "H="+l.home+"\n", 1)
	cmd := exec.CommandContext(ctx, o.Command[0], o.Command[1], script)
	cmd.Stdout, cmd.Stderr = o.Stdout, o.Stderr
	return cmd.Run()
}

// TestDoctorRemoteLogs reads the agent's side where cmd/devtool-agent writes it: HOME/agent.log
// (the sync engine's lines carry component=sync) and the remote indexes in HOME/sync.
func TestDoctorRemoteLogs(t *testing.T) {
	home := t.TempDir()
	const secret = "remote-secret-value-77"
	agentLog := "level=INFO msg=\"agent listening\" addr=127.0.0.1:2222\n" +
		"level=INFO msg=\"folder synced\" component=sync root=/app\n" +
		"level=INFO msg=x password=" + secret + "\n"
	_ = os.WriteFile(filepath.Join(home, "agent.log"), []byte(agentLog), 0o600)
	_ = os.MkdirAll(filepath.Join(home, "sync"), 0o700)
	_ = os.WriteFile(filepath.Join(home, "sync", "remote-00000000000000aa.idx"), []byte("x"), 0o600)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-devtool-abc", Namespace: "ns", Labels: map[string]string{LabelDev: "web"}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "web"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	files := func(ex Executor) map[string]string {
		var buf bytes.Buffer
		err := WriteDoctor(context.Background(), &buf, DoctorOptions{Client: fake.NewSimpleClientset(pod), Exec: ex, Namespace: "ns",
			Dev: &manifest.Dev{Name: "web"}, Now: time.Unix(0, 0)})
		if err != nil {
			t.Fatal(err)
		}
		zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, f := range zr.File {
			rc, _ := f.Open()
			b, _ := io.ReadAll(rc)
			rc.Close()
			out[f.Name] = string(b)
			if strings.Contains(string(b), secret) {
				t.Errorf("%s holds a secret:\n%s", f.Name, b)
			}
		}
		return out
	}
	got := files(localShell{home})
	if a := got["agent.log"]; !strings.Contains(a, "agent listening") || !strings.Contains(a, "folder synced") {
		t.Errorf("agent.log:\n%s", a)
	}
	if s := got["sync-remote.log"]; !strings.Contains(s, "folder synced") || strings.Contains(s, "agent listening") ||
		!strings.Contains(s, "remote-00000000000000aa.idx") || !strings.Contains(s, "web-devtool-abc:"+Home+"/sync") {
		t.Errorf("sync-remote.log:\n%s", s)
	}
	// A fresh pod: no log, no sync state yet; the zip says so instead of failing.
	got = files(localShell{t.TempDir()})
	if !strings.Contains(got["agent.log"], "agent has not started") || !strings.Contains(got["sync-remote.log"], "nothing synced yet") {
		t.Errorf("empty home: %q %q", got["agent.log"], got["sync-remote.log"])
	}
}
