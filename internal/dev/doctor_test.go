package dev

import (
	"archive/zip"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	_ = os.WriteFile(s.LogFile(), []byte(log), 0o600)
	_ = os.MkdirAll(s.SyncDir(), 0o700)
	_ = os.WriteFile(filepath.Join(s.SyncDir(), "sync.log"), []byte("synced a.txt\nAPI_KEY="+envValue+"\n"), 0o600)
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
		!strings.Contains(names["devtool.log"], "msg=connected") || !strings.Contains(names["sync-local.log"], "synced a.txt") {
		t.Errorf("content lost: %v", names)
	}
}
