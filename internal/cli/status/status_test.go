package status

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/devtool/devtool/internal/dev"
	"github.com/devtool/devtool/internal/filesync"
	"github.com/devtool/devtool/internal/iostreams"
)

// TestStatusFromService asks a real sync status service, as a running up would serve it.
func TestStatusFromService(t *testing.T) {
	work, home := t.TempDir(), t.TempDir()
	_ = os.WriteFile(filepath.Join(work, "compose.yml"), []byte("services:\n  web:\n    image: busybox\n"), 0o644)
	sd, err := dev.OpenStateDir(home, work, "web")
	if err != nil {
		t.Fatal(err)
	}
	ios, _, out, _ := iostreams.Test()
	opts := &Options{IO: ios, WorkDir: work, Environ: map[string]string{}, Getenv: func(k string) string {
		if k == "DEVTOOL_HOME" {
			return home
		}
		return ""
	}}
	if err := run(context.Background(), opts); err == nil || !strings.Contains(err.Error(), "no 'devtool up' is running") {
		t.Fatalf("without up: %v", err)
	}

	c, err := filesync.NewClient(filesync.ClientOptions{Folders: []filesync.Folder{{Local: t.TempDir(), Remote: "/app"}}, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- filesync.ServeStatus(ln, "u", "pw", c) }()
	defer func() { ln.Close(); <-done }()
	if err := sd.Lock(); err != nil {
		t.Fatal(err)
	}
	defer sd.Unlock()
	_ = sd.WriteStatusService(dev.StatusService{Addr: ln.Addr().String(), User: "u", Password: "pw"})
	if err := run(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, "0.00%") || !strings.Contains(got, "disconnected") {
		t.Errorf("status %q", got)
	}
	out.Reset()
	opts.Output = "json"
	if err := run(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Sync struct {
			Connected *bool `json:"connected"`
			Folders   []struct {
				Remote string `json:"remote"`
			} `json:"folders"`
		} `json:"sync"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || doc.Sync.Connected == nil || len(doc.Sync.Folders) != 1 || doc.Sync.Folders[0].Remote != "/app" {
		t.Errorf("-o json %q: %v", out.String(), err)
	}
	opts.Output = ""
	out.Reset()
	opts.Info = true
	if err := run(context.Background(), opts); err != nil || !strings.Contains(out.String(), "password: pw") {
		t.Errorf("info %q %v", out.String(), err)
	}
	// Wrong credentials are refused by the service.
	_ = sd.WriteStatusService(dev.StatusService{Addr: ln.Addr().String(), User: "u", Password: "bad"})
	opts.Info = false
	if err := run(context.Background(), opts); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("bad password: %v", err)
	}
}

// The text output lists each conflict, failing path and some pending ones under the summary.
func TestDetails(t *testing.T) {
	var st dev.SyncStatus
	if err := json.Unmarshal([]byte(`{"connected":true,"percent":50,"folders":[{"local":"/w/src","remote":"/app","conflicts":[{"path":"a.txt","copy":"a.conflict.txt"},{"path":"README","reason":"not created on this machine: its filesystem takes it for Readme"}],"errors":[{"path":"b/c","error":"permission denied","failures":3,"next_try":"2026-01-02T03:04:05Z"}],"pending":12,"waiting":["d/e","f"]}]}`), &st); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(details(st), "\n")
	for _, want := range []string{"conflict  /w/src/a.txt", "a.conflict.txt", "failing   /w/src/b/c: permission denied (failed 3 times, next try ",
		"conflict  /w/src/README: not created on this machine: its filesystem takes it for Readme",
		"waiting   /w/src/d/e\n", "waiting   /w/src/f (and 10 more)"} {
		if !strings.Contains(got, want) {
			t.Errorf("details %q lack %q", got, want)
		}
	}
}

func TestFormat(t *testing.T) {
	st := dev.SyncStatus{Connected: true, Percent: 100}
	if got := format(st); got != "100.00%" {
		t.Errorf("%q", got)
	}
	var h dev.SyncStatus
	if err := json.Unmarshal([]byte(`{"connected":true,"percent":50,"folders":[{"local":"/src","halted":"the local folder /src is empty"}]}`), &h); err != nil {
		t.Fatal(err)
	}
	if got, want := format(h), "50.00%, sync of /src halted: the local folder /src is empty"; got != want {
		t.Errorf("halted: %q, want %q", got, want)
	}
}

// A halted folder is named with what was seen, followed by the flags of up that go on.
func TestStatusHaltedNamesFlags(t *testing.T) {
	work, home := t.TempDir(), t.TempDir()
	_ = os.WriteFile(filepath.Join(work, "compose.yml"), []byte("services:\n  web:\n    image: busybox\n"), 0o644)
	sd, err := dev.OpenStateDir(home, work, "web")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"connected":true,"synced":true,"percent":100,"folders":[{"local":"/src","remote":"/app","percent":100,"files":3,"halted":"the local folder /src is empty"}]}`)
	}))
	defer srv.Close()
	if err := sd.Lock(); err != nil {
		t.Fatal(err)
	}
	defer sd.Unlock()
	_ = sd.WriteStatusService(dev.StatusService{Addr: strings.TrimPrefix(srv.URL, "http://"), User: "u", Password: "pw"})
	ios, _, out, _ := iostreams.Test()
	opts := &Options{IO: ios, WorkDir: work, Environ: map[string]string{}, Getenv: func(k string) string {
		if k == "DEVTOOL_HOME" {
			return home
		}
		return ""
	}}
	if err := run(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"sync of /src halted: the local folder /src is empty", "devtool up web --reset", "devtool up web --accept-deletions"} {
		if !strings.Contains(got, want) {
			t.Errorf("status %q lacks %q", got, want)
		}
	}
}
