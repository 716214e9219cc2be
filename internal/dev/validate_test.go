package dev

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/devtool/devtool/internal/environment"
	"github.com/devtool/devtool/internal/errs"
	"github.com/devtool/devtool/internal/manifest"
	"github.com/devtool/devtool/internal/yamlsrc"
)

// validateProject makes a project folder with a folder, a file, a FIFO, a link leading out and
// a folder beside the project, and returns the project folder.
func validateProject(t *testing.T) string {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, "project")
	for _, d := range []string{"src", "lib", "project-out"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(base, "outside"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(base, "outside"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// loadDev loads a devtool.yml with the given dev entry "web" (its lines, indented under web:).
func loadDev(t *testing.T, dir, entry string) *manifest.Dev {
	t.Helper()
	data := "dev:\n  web:\n" + entry
	m, err := manifest.LoadBytes(manifest.LoadOptions{File: filepath.Join(dir, "devtool.yml"), Environ: map[string]string{}, HomeDir: dir}, []byte(data))
	if err != nil {
		t.Fatalf("loading:\n%s\n%v", data, err)
	}
	return m.Dev[0]
}

func TestValidate(t *testing.T) {
	dir := validateProject(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port
	self := fmt.Sprintf("process %d", os.Getpid())

	cases := []struct {
		name    string
		entry   string // the lines under "  web:"; line 3 of the file is the first
		opts    func(*CheckOptions)
		line    int    // the line of the first error; 0: valid
		field   string // the field of the first error
		want    string // in the error
		another string // also in the error
	}{
		{name: "valid", entry: "    image: registry.example:5000/app:1.2\n    workdir: /app\n    sync: [./src:/app, lib:/opt/lib]\n    forward: [8080:80, 8081:80]\n    reverse: [9000:9000, 9001:9000]\n    environment: {A: b, my.env-name: x}\n    resources: {requests: {cpu: 500m, memory: 1Gi}, limits: {cpu: '1', memory: 1Gi}}\n"},
		{name: "local folder missing", entry: "    sync: [./nope:/app]\n", line: 3, field: "dev.web.sync[0]", want: "does not exist"},
		{name: "local folder is a file", entry: "    sync:\n      - ./src:/app\n      - ./file:/data\n", line: 5, field: "dev.web.sync[1]", want: "is a file, not a folder"},
		{name: "local folder is a FIFO", entry: "    sync: [./fifo:/app]\n", line: 3, field: "dev.web.sync[0]", want: "named pipe (FIFO)"},
		{name: "local folder is a device", entry: "    sync: [/dev/null:/app]\n", opts: func(o *CheckOptions) { o.AllowOutside = true }, line: 3, want: "is a device"},
		{name: "local folder outside the project", entry: "    sync: [../outside:/app]\n", line: 3, field: "dev.web.sync[0]", want: "is outside the project folder", another: "--allow-outside-volumes"},
		{name: "outside allowed with the flag", entry: "    sync: [../outside:/app]\n", opts: func(o *CheckOptions) { o.AllowOutside = true }},
		{name: "a link leading outside", entry: "    sync: [./link:/app]\n", line: 3, want: "a symbolic link leads to", another: "--allow-outside-volumes"},
		{name: "a folder named like the project is not inside it", entry: "    sync: [../project-out:/app]\n", line: 3, want: "does not exist"},
		{name: "remote climbs out", entry: "    sync: [./src:/app/../etc]\n", line: 3, field: "dev.web.sync[0]", want: `clean absolute path`, another: `(write "/etc")`},
		{name: "remote root", entry: "    sync: [./src:/]\n", line: 3, want: "root of the container"},
		{name: "remote with a trailing slash", entry: "    sync: [./src:/app/]\n", line: 3, want: `(write "/app")`},
		{name: "remote system folder", entry: "    sync: [./src:/usr]\n", line: 3, want: "system folder"},
		{name: "remote in /proc", entry: "    sync: [./src:/proc/x]\n", line: 3, want: "kernel or devtool"},
		{name: "remote in the dev volume", entry: "    sync: [./src:/devtool/app]\n", line: 3, want: "kernel or devtool"},
		{name: "remote twice", entry: "    sync:\n      - ./src:/app\n      - ./lib:/app\n", line: 5, field: "dev.web.sync[1]", want: "also the one of sync[0]"},
		{name: "remote nested", entry: "    sync:\n      - ./src:/app\n      - ./lib:/app/lib\n", line: 5, want: "nest"},
		{name: "remote nesting an earlier one", entry: "    sync:\n      - ./src:/app/lib\n      - ./lib:/app\n", line: 5, want: "nest"},
		{name: "newline in the remote", entry: "    sync: [\"./src:/ap\\np\"]\n", line: 3, want: "line break"},
		{name: "NUL in the local folder", entry: "    sync: [\"./s\\0rc:/app\"]\n", line: 3, want: "NUL byte"},
		{name: "local port twice", entry: "    forward:\n      - 8080:80\n      - 8080:81\n", line: 5, field: "dev.web.forward[1]", want: "local port 8080 is also the one of forward[0]"},
		{name: "remote reverse port twice", entry: "    reverse:\n      - 9000:9000\n      - 9000:9001\n", line: 5, field: "dev.web.reverse[1]", want: "remote port 9000"},
		{name: "local port in use", entry: fmt.Sprintf("    forward: [%d:80]\n", busyPort), opts: func(o *CheckOptions) { o.PortFree = PortFree },
			line: 3, field: "dev.web.forward[0]", want: fmt.Sprintf("local port %d is in use by %s", busyPort, self)},
		{name: "env name with =", entry: "    environment: {\"A=B\": x}\n", line: 3, field: "dev.web.environment.A=B", want: "not a valid environment variable name"},
		{name: "env name with a newline", entry: "    environment: [\"X\\nY=1\"]\n", line: 3, field: "dev.web.environment[0]", want: "not a valid environment variable name"},
		{name: "empty env name", entry: "    environment: {\"\": x}\n", line: 3, want: "empty"},
		{name: "spaced env name", entry: "    environment:\n      A B: x\n", line: 4, field: "dev.web.environment.A B", want: "not a valid"},
		{name: "NUL in an env value", entry: "    environment: {A: \"a\\0b\"}\n", line: 3, want: "NUL byte"},
		{name: "--env name", entry: "    image: x\n", opts: func(o *CheckOptions) { o.Env = map[string]string{"A B": "1"} }, want: `--env: "A B" is not a valid`},
		{name: "empty image", entry: "    image: \"\"\n", line: 3, field: "dev.web.image", want: "found an empty string"},
		{name: "a 1 MB image name", entry: "    image: " + strings.Repeat("a", 1<<20) + "\n", line: 3, field: "dev.web.image", want: "a name of 1048576 bytes"},
		{name: "image with upper case", entry: "    image: Busybox\n", line: 3, want: "must be lowercase"},
		{name: "image with a space", entry: "    image: a b\n", line: 3, want: "image reference"},
		{name: "limit below request", entry: "    resources:\n      requests: {cpu: 500m}\n      limits: {cpu: 100m, memory: 1Gi}\n", line: 5, field: "dev.web.resources.limits.cpu", want: "below the request"},
		{name: "memory limit below request", entry: "    resources:\n      limits:\n        memory: 1Mi\n      requests:\n        memory: 1Gi\n", line: 5, want: "memory limit 1Mi is below the request 1Gi"},
		{name: "relative remote folder", entry: "    sync: [./src:app]\n", line: 3, field: "dev.web.sync[0]", want: `expected an absolute path in the container, found "app"`},
		{name: "relative workdir", entry: "    workdir: app\n", line: 3, field: "dev.web.workdir", want: `expected an absolute path in the container, found "app"`},
		{name: "workdir not clean", entry: "    workdir: /app/../x\n", line: 3, field: "dev.web.workdir", want: `(write "/x")`},
		{name: "every problem at once", entry: "    image: \"\"\n    sync: [./nope:/]\n", line: 3, want: "3 problems in the dev entry"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := loadDev(t, dir, c.entry)
			o := CheckOptions{ProjectDir: dir}
			if c.opts != nil {
				c.opts(&o)
			}
			err := Validate(d, o)
			if c.want == "" {
				if err != nil {
					t.Fatalf("valid entry refused: %v", err)
				}
				return
			}
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("err %v (%T), want Errors", err, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, c.want) || !strings.Contains(msg, c.another) {
				t.Errorf("error %q, want %q and %q", msg, c.want, c.another)
			}
			if c.line != 0 && (es[0].Pos.Line != c.line || es[0].Pos.File != filepath.Join(dir, "devtool.yml")) {
				t.Errorf("position %v, want line %d of devtool.yml", es[0].Pos, c.line)
			}
			if c.field != "" && es[0].Field != c.field {
				t.Errorf("field %q, want %q", es[0].Field, c.field)
			}
			if len(msg) > 2000 {
				t.Errorf("message of %d bytes", len(msg))
			}
		})
	}
}

// TestPortOwner: a listener of this process is found with its pid; a free port has no owner.
func TestPortOwner(t *testing.T) {
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Skip("no /proc/net/tcp here: the owner is best effort")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if got, want := PortOwner(port), fmt.Sprintf("process %d (", os.Getpid()); !strings.HasPrefix(got, want) {
		t.Errorf("owner %q, want %q…", got, want)
	}
	ln.Close()
	if got := PortOwner(port); got != "" {
		t.Errorf("owner of a closed port %q", got)
	}
	if err := PortFree(port); err != nil {
		t.Errorf("closed port: %v", err)
	}
}

// TestSyncableFolders is issue 17: a Compose-only entry keeps only the folders of the project
// mounted read-write as sync folders, and LoadDev says in one warning which it left out.
func TestSyncableFolders(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "p")
	for _, d := range []string{"src", "data", "../out"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sock, err := net.Listen("unix", filepath.Join(dir, "docker.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	compose := `services:
  web:
    image: busybox
    working_dir: /app/
    volumes:
      - ./src:/app/
      - ./nginx.conf:/etc/nginx/nginx.conf
      - ./docker.sock:/var/run/docker.sock
      - ./data:/data:ro
      - ../out:/out
      - ./missing:/missing
      - cache:/cache
  other:
    image: busybox
    volumes: ["/etc:/host-etc"]
volumes:
  cache: {}
`
	if err := os.WriteFile(filepath.Join(dir, "compose.yml"), []byte(compose), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := LoadDev(LoadOptions{Env: environment.Options{Dir: dir, Environ: map[string]string{}}, Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	d := s.Dev
	if len(d.Sync) != 1 || d.Sync[0].Local != filepath.Join(dir, "src") || d.Sync[0].Remote != "/app" || d.Workdir != "/app" {
		t.Errorf("sync folders %+v, workdir %q", d.Sync, d.Workdir)
	}
	if src := d.Source("sync[0]"); src.Field != "services.web.volumes[0]" || src.Pos.Line != 6 {
		t.Errorf("source of sync[0] %+v", src)
	}
	var warned []string
	for _, w := range s.Project.Warnings {
		if strings.Contains(w, "not synced") {
			warned = append(warned, w)
		}
	}
	if len(warned) != 1 {
		t.Fatalf("warnings %q, want one naming the left-out volumes", s.Project.Warnings)
	}
	for _, want := range []string{"service web", "./nginx.conf (a file)", "./docker.sock (a socket)", "./data (read-only)", filepath.Join(base, "out") + " (outside the project)", "./missing (does not exist)"} {
		if !strings.Contains(warned[0], want) {
			t.Errorf("warning %q lacks %q", warned[0], want)
		}
	}
	if strings.Contains(warned[0], "host-etc") || strings.Contains(warned[0], "cache") {
		t.Errorf("warning %q names another service's or a named volume", warned[0])
	}
	if err := Validate(d, CheckOptions{ProjectDir: dir}); err != nil {
		t.Errorf("the kept folders do not pass Validate: %v", err)
	}
}

func TestUnknownDevIsUsageError(t *testing.T) {
	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, "compose.yml"), []byte("services:\n  api:\n    image: busybox\n  worker:\n    image: busybox\n"), 0o644)
	_, err := LoadDev(LoadOptions{Env: environment.Options{Dir: dir, Environ: map[string]string{}}, Name: "nope", Usage: "devtool up NAME"})
	if err == nil || errs.ExitCode(err) != errs.ExitUsage || !strings.Contains(err.Error(), "(it has api, worker)") {
		t.Errorf("unknown dev: %v (exit %d)", err, errs.ExitCode(err))
	}
}

// An error without a recorded source is placed at the entry.
func TestSourceFallback(t *testing.T) {
	d := &manifest.Dev{Name: "web", Pos: yamlsrc.Position{File: "f", Line: 2, Column: 3}}
	if s := d.Source("forward[0]"); s.Field != "dev.web.forward[0]" || s.Pos.Line != 2 {
		t.Errorf("%+v", s)
	}
}
