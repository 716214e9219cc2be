package compose

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSystemMountsDropped: real-world files that mount the Docker host's own files (immich's
// /etc/localtime, supabase's docker socket for vector) load with those mounts dropped and one
// warning naming them; their other host volumes are kept.
func TestSystemMountsDropped(t *testing.T) {
	cases := []struct {
		dir, service, dropped, kept string
	}{
		{"immich", "immich-server", "/etc/localtime", "library"},
		{"supabase", "vector", "/var/run/docker.sock", "volumes/logs/vector.yml"},
	}
	for _, c := range cases {
		t.Run(c.dir, func(t *testing.T) {
			dir, err := filepath.Abs(filepath.Join("testdata", "realworld", c.dir))
			if err != nil {
				t.Fatal(err)
			}
			p, err := Load(LoadOptions{File: filepath.Join(dir, "docker-compose.yml"), Environ: map[string]string{}})
			if err != nil {
				t.Fatal(err)
			}
			s := p.Service(c.service)
			if s == nil {
				t.Fatalf("no service %s", c.service)
			}
			kept := false
			for _, v := range s.Volumes {
				if v.Source == c.dropped || v.Target == c.dropped {
					t.Errorf("%s is still mounted: %+v", c.dropped, v)
				}
				if v.Kind == VolumeHost && v.Source == filepath.Join(dir, c.kept) {
					kept = true
				}
			}
			if !kept {
				t.Errorf("the project's own host volume %s was dropped: %+v", c.kept, s.Volumes)
			}
			var about []string
			for _, w := range p.Warnings {
				if strings.Contains(w, c.dropped) {
					about = append(about, w)
				}
			}
			if len(about) != 1 || !strings.Contains(about[0], "not mounted") || !strings.Contains(about[0], "services."+c.service+".volumes[1]") {
				t.Fatalf("want one warning naming %s, got %q", c.dropped, p.Warnings)
			}
		})
	}
}

// TestSystemMountsOneWarning: several system mounts in several services make one warning.
func TestSystemMountsOneWarning(t *testing.T) {
	p := mustLoad(t, `services:
  a:
    image: x
    volumes: ["/proc:/host/proc:ro", "/sys/fs/cgroup:/sys/fs/cgroup", "./data:/data"]
  b:
    image: x
    volumes:
      - {type: bind, source: /dev/shm, target: /dev/shm}
      - /etc/timezone:/etc/timezone:ro
`)
	var n int
	for _, w := range p.Warnings {
		if strings.Contains(w, "not mounted") {
			n++
			for _, path := range []string{"/proc", "/sys/fs/cgroup", "/dev/shm", "/etc/timezone"} {
				if !strings.Contains(w, path) {
					t.Errorf("the warning does not name %s: %s", path, w)
				}
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d warnings about system mounts, want 1: %q", n, p.Warnings)
	}
	if got := len(p.Service("a").Volumes) + len(p.Service("b").Volumes); got != 1 {
		t.Fatalf("%d mounts kept, want only ./data", got)
	}
}

// TestEnvFileOutsideProject: an env file outside the project folder, or a link in it that leads
// out, is refused unread unless AllowOutside.
func TestEnvFileOutsideProject(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "project")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "outside.env"), []byte("A=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/shadow", filepath.Join(dir, "leak.env")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../outside.env", filepath.Join(dir, "up.env")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		envFile, want string
	}{
		{"leak.env", "links to /etc/shadow, outside the project folder"},
		{"../outside.env", "is outside the project folder"},
		{"up.env", "up.env links to " + filepath.Join(base, "outside.env")},
	}
	for _, c := range cases {
		file := filepath.Join(dir, "compose.yml")
		if err := os.WriteFile(file, []byte("services:\n  web:\n    image: x\n    env_file: "+c.envFile+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(LoadOptions{File: file, Environ: map[string]string{}})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "--allow-outside-volumes") ||
			!strings.Contains(err.Error(), "compose.yml:4") {
			t.Errorf("env_file %s: err %v, want %q", c.envFile, err, c.want)
		}
		if c.envFile == "leak.env" {
			continue // never read, even when allowed, in a test
		}
		p, err := Load(LoadOptions{File: file, Environ: map[string]string{}, AllowOutside: true})
		if err != nil {
			t.Fatalf("env_file %s allowed: %v", c.envFile, err)
		}
		if got := p.Service("web").Environment["A"]; got != "1" {
			t.Errorf("env_file %s allowed: A = %v", c.envFile, got)
		}
	}
}

// TestClearMessages: issue 18's messages for values the loader refuses.
func TestClearMessages(t *testing.T) {
	cases := []struct {
		name, compose, want string
	}{
		{"negative published port keeps its sign", "services:\n  web:\n    image: x\n    ports: [\"-80:80\"]\n", `"-80" is not a number between 1 and 65535`},
		{"negative container port keeps its sign", "services:\n  web:\n    image: x\n    ports: [\"80:-8080\"]\n", `"-8080" is not a number`},
		{"negative long target keeps its sign", "services:\n  web:\n    image: x\n    ports: [{target: -1}]\n", `found "-1"`},
		{"grace period in seconds too large", "services:\n  web:\n    image: x\n    stop_grace_period: 99999999999\n", "99999999999 seconds is too large"},
		{"grace period beyond int64 too large", "services:\n  web:\n    image: x\n    stop_grace_period: 99999999999999999999999\n", "seconds is too large"},
		{"grace period duration too large", "services:\n  web:\n    image: x\n    stop_grace_period: 9999999999h\n", `"9999999999h" is too large`},
		{"one route where a list is expected", "services:\n  web:\n    image: x\n    ports: [80]\nendpoints:\n  web:\n    path: /\n    service: web\n    port: 80\n", "expected a list of routes, found a mapping"},
		{"one route as the rules", "services:\n  web:\n    image: x\n    ports: [80]\nendpoints:\n  web:\n    rules:\n      path: /\n      service: web\n      port: 80\n", "expected a list of routes, found a mapping"},
		{"a key over the parser's limit", "services:\n  web:\n    image: x\n    environment:\n      " + strings.Repeat("K", 1100) + ": v\n", "a key of 1100 characters is longer than the YAML parser's limit of 1024"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := loadYAML(t, c.compose, nil, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
}
