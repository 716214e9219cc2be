package contexts

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func TestStoreRoundTrip(t *testing.T) {
	home := t.TempDir()
	s := NewStore(home)
	want := &Context{
		Name: "https://platform.example", Token: "secret-token", Namespace: "team-a", Builder: "tcp://buildkit:1234",
		Registry: "registry.example:5000", IsDevtool: true, Certificate: "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n",
		Username: "alice", ClusterDomain: "apps.example", KubeContext: "platform-kube",
	}
	err := s.Update(func(c *Config) error {
		c.Contexts[want.Name] = want
		c.Contexts["kind-b"] = &Context{Name: "kind-b", Namespace: "b"}
		c.CurrentContext = want.Name
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := NewStore(home).Load()
	if err != nil {
		t.Fatal(err)
	}
	if got.CurrentContext != want.Name {
		t.Errorf("current = %q, want %q", got.CurrentContext, want.Name)
	}
	if g := got.Current(); g == nil || *g != *want {
		t.Errorf("round trip:\n got %+v\nwant %+v", g, want)
	}
	if n := got.Names(); strings.Join(n, ",") != "https://platform.example,kind-b" {
		t.Errorf("names = %v", n)
	}
}

func TestStoreMissingIsEmpty(t *testing.T) {
	cfg, err := NewStore(t.TempDir()).Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Contexts) != 0 || cfg.Current() != nil {
		t.Errorf("want an empty store, got %+v", cfg)
	}
}

func TestStorePermissions(t *testing.T) {
	home := t.TempDir()
	// A pre-existing, too-open .devtool folder is tightened.
	if err := os.Mkdir(filepath.Join(home, ".devtool"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := NewStore(home)
	if err := s.Update(func(c *Config) error { c.Contexts["a"] = &Context{Name: "a"}; return nil }); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{
		s.Dir:                  0o700 | os.ModeDir,
		filepath.Dir(s.Path()): 0o700 | os.ModeDir,
		s.Path():               0o600,
		s.Path() + ".lock":     0o600,
	} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode(), want)
		}
	}
}

func TestStoreCorruption(t *testing.T) {
	cases := map[string]struct{ content, want string }{
		"syntax":     {"{\n  \"contexts\": {\n    \"a\": {\"name\": \"a\",,}\n  }\n}\n", "invalid JSON at line 3"},
		"truncated":  {`{"contexts": {"a": {"name": "a"`, "invalid JSON"},
		"empty":      {"", "the file is empty"},
		"wrong type": {`{"contexts": {"a": {"name": "a", "isDevtool": "yes"}}}`, `field "contexts.isDevtool" must be bool`},
		"name":       {`{"contexts": {"a": {"name": "b"}}}`, `context stored under "a" is named "b"`},
		"null":       {`{"contexts": {"a": null}}`, `context "a" is null`},
		"empty name": {`{"contexts": {"": {}}}`, `empty name`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := NewStore(t.TempDir())
			writeFile(t, s.Path(), tc.content)
			_, err := s.Load()
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("Load: want a CorruptError, got %v", err)
			}
			if !strings.Contains(err.Error(), s.Path()) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q should name %s and say %q", err, s.Path(), tc.want)
			}
			// Update refuses too, and leaves the file exactly as it was.
			err = s.Update(func(c *Config) error { c.Contexts["x"] = &Context{Name: "x"}; return nil })
			if !errors.As(err, &ce) {
				t.Fatalf("Update: want a CorruptError, got %v", err)
			}
			if got := readFile(t, s.Path()); got != tc.content {
				t.Errorf("corrupt store was rewritten: %q", got)
			}
		})
	}
}

func TestStoreUnreadable(t *testing.T) {
	s := NewStore(t.TempDir())
	// A folder where the file should be: unreadable for everyone, root included.
	if err := os.MkdirAll(s.Path(), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := s.Load()
	if err == nil || !strings.Contains(err.Error(), s.Path()) {
		t.Fatalf("want an error naming %s, got %v", s.Path(), err)
	}
}

func TestStoreFailedWriteKeepsOldFile(t *testing.T) {
	s := NewStore(t.TempDir())
	if err := s.Update(func(c *Config) error { c.Contexts["old"] = &Context{Name: "old"}; return nil }); err != nil {
		t.Fatal(err)
	}
	before := readFile(t, s.Path())
	s.beforeRename = func(tmp string) error {
		// The new content is fully written next to the store, but not yet in place.
		if !strings.Contains(readFile(t, tmp), `"new"`) {
			t.Errorf("temporary file lacks the new content")
		}
		return errors.New("disk on fire")
	}
	err := s.Update(func(c *Config) error { c.Contexts["new"] = &Context{Name: "new"}; return nil })
	if err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("want the injected failure, got %v", err)
	}
	if after := readFile(t, s.Path()); after != before {
		t.Errorf("store changed by a failed write:\n%s", after)
	}
	entries, _ := os.ReadDir(filepath.Dir(s.Path()))
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
	// An error from the change itself writes nothing either.
	s.beforeRename = nil
	err = s.Update(func(c *Config) error { delete(c.Contexts, "old"); return errors.New("changed my mind") })
	if err == nil || readFile(t, s.Path()) != before {
		t.Errorf("a failed change must not be written (err %v)", err)
	}
}

func TestStoreConcurrentGoroutines(t *testing.T) {
	home := t.TempDir()
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			// A separate Store value per writer, as separate commands would have.
			name := fmt.Sprintf("ctx-%d", i)
			errs <- NewStore(home).Update(func(c *Config) error {
				c.Contexts[name] = &Context{Name: name}
				c.CurrentContext = name
				return nil
			})
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	assertAllContexts(t, home, "ctx-", n)
}

// TestStoreConcurrentProcesses runs writers as separate processes (this test binary, re-executed),
// so the flock, not an in-process mutex, is what keeps every change.
func TestStoreConcurrentProcesses(t *testing.T) {
	if os.Getenv("DEVTOOL_TEST_STORE_WRITER") != "" {
		t.Skip("running as a writer")
	}
	home := t.TempDir()
	const procs, each = 6, 10
	cmds := make([]*exec.Cmd, procs)
	for p := range cmds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestStoreWriterProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(),
			"DEVTOOL_TEST_STORE_WRITER="+home,
			"DEVTOOL_TEST_STORE_WRITER_ID="+strconv.Itoa(p),
			"DEVTOOL_TEST_STORE_WRITER_N="+strconv.Itoa(each))
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[p] = cmd
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("writer %d output:\n%s", p, out.String())
			}
		})
	}
	for p, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("writer %d: %v", p, err)
		}
	}
	assertAllContexts(t, home, "proc-", procs*each)
}

// TestStoreWriterProcess is the body of one writer process of TestStoreConcurrentProcesses.
func TestStoreWriterProcess(t *testing.T) {
	home := os.Getenv("DEVTOOL_TEST_STORE_WRITER")
	if home == "" {
		t.Skip("only runs as a child of TestStoreConcurrentProcesses")
	}
	id := os.Getenv("DEVTOOL_TEST_STORE_WRITER_ID")
	n, _ := strconv.Atoi(os.Getenv("DEVTOOL_TEST_STORE_WRITER_N"))
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("proc-%s-%d", id, i)
		if err := NewStore(home).Update(func(c *Config) error {
			c.Contexts[name] = &Context{Name: name}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

func assertAllContexts(t *testing.T, home, prefix string, want int) {
	t.Helper()
	cfg, err := NewStore(home).Load()
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for name := range cfg.Contexts {
		if strings.HasPrefix(name, prefix) {
			got++
		}
	}
	if got != want {
		t.Errorf("store holds %d of %d contexts: concurrent writers lost changes", got, want)
	}
}

func TestAnalyticsSetting(t *testing.T) {
	s := NewStore(t.TempDir())
	if on, err := s.AnalyticsEnabled(); err != nil || !on {
		t.Fatalf("default: on=%v err=%v, want on", on, err)
	}
	if err := s.SetAnalytics(false); err != nil {
		t.Fatal(err)
	}
	if on, err := s.AnalyticsEnabled(); err != nil || on {
		t.Fatalf("after disable: on=%v err=%v", on, err)
	}
	if fi, err := os.Stat(filepath.Join(s.Dir, "analytics.json")); err != nil || fi.Mode() != 0o600 {
		t.Errorf("analytics.json: %v %v, want mode 0600", fi.Mode(), err)
	}
	if err := s.SetAnalytics(true); err != nil {
		t.Fatal(err)
	}
	if on, _ := s.AnalyticsEnabled(); !on {
		t.Fatal("after enable: still off")
	}
	writeFile(t, filepath.Join(s.Dir, "analytics.json"), "{oops")
	if _, err := s.AnalyticsEnabled(); err == nil || !strings.Contains(err.Error(), "analytics.json") {
		t.Errorf("corrupt setting: want an error naming the file, got %v", err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// FuzzReadConfig: whatever the store file holds, reading it returns a config or an error naming the
// file, never a panic.
func FuzzReadConfig(f *testing.F) {
	f.Add([]byte(`{"currentContext": "a", "contexts": {"a": {"name": "a", "namespace": "n", "isDevtool": false}}}`))
	f.Add([]byte(`{"contexts": {"a": null}}`))
	f.Add([]byte(`{"contexts": [1, 2]}`))
	f.Add([]byte("{\n\"contexts\": {\"a\": {\"name\": 7}}}"))
	f.Add([]byte{})
	path := filepath.Join(f.TempDir(), "config.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := readConfig(path)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error does not name the file: %v", err)
			}
			return
		}
		for k, c := range cfg.Contexts {
			if c == nil || c.Name != k {
				t.Errorf("accepted inconsistent context %q: %+v", k, c)
			}
		}
	})
}

// TestSymlinkedStoreOutsideHome: ~/.devtool as a link to a folder outside the home is reported,
// and the target's mode is left alone.
func TestSymlinkedStoreOutsideHome(t *testing.T) {
	home, outside := t.TempDir(), t.TempDir()
	target := filepath.Join(outside, "shared")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(home, ".devtool")); err != nil {
		t.Fatal(err)
	}
	err := NewStore(home).Update(func(*Config) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("err %v", err)
	}
	if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o755 {
		t.Fatalf("the target's mode changed to %v", fi.Mode().Perm())
	}
	// A link inside the home is fine.
	home2 := t.TempDir()
	in := filepath.Join(home2, "real")
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(in, filepath.Join(home2, ".devtool")); err != nil {
		t.Fatal(err)
	}
	if err := NewStore(home2).Update(func(*Config) error { return nil }); err != nil {
		t.Fatal(err)
	}
}
