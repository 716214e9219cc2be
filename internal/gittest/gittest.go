// Package gittest is a git server for tests: `git http-backend` (Debian's git) behind Go's
// net/http/cgi, serving bare repositories from a temporary folder over http or https, public or
// behind a token (HTTP basic auth). It listens on the address a test gives (loopback, or the local
// cluster's pod bridge so pods can clone from it), never beyond the machine. Test-only.
package gittest

import (
	"crypto/subtle"
	"crypto/tls"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server serves the repositories under Root.
type Server struct {
	Root string // bare repositories: Root/<name>.git
	URL  string // http(s)://host:port
	// Private repositories need "Authorization: Basic" with any user and this token.
	Token   string
	mu      sync.Mutex
	private map[string]bool
	// Auths counts requests that carried credentials, by repository.
	auths map[string]int
	srv   *http.Server
	ln    net.Listener
}

// Options of a server.
type Options struct {
	// Addr to listen on, e.g. "127.0.0.1:0" or "10.244.91.1:0".
	Addr string
	// TLS, when set, serves https with this certificate.
	TLS *tls.Certificate
	// Token protects the repositories made with Private.
	Token string
}

// Start starts a server; it stops when the test ends. It skips the test when git is not installed.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	backend := filepath.Join(execPath(t), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Skipf("git-http-backend not found (%v): install git", err)
	}
	s := &Server{Root: t.TempDir(), Token: o.Token, private: map[string]bool{}, auths: map[string]int{}}
	h := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + s.Root, "GIT_HTTP_EXPORT_ALL=1"}}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		t.Fatalf("git server: listening on %s: %v", o.Addr, err)
	}
	s.ln = ln
	scheme := "http"
	s.srv = &http.Server{Handler: s.guard(h), ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	if o.TLS != nil {
		scheme = "https"
		s.srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{*o.TLS}, MinVersion: tls.VersionTLS12}
		ln = tls.NewListener(ln, s.srv.TLSConfig)
	}
	s.URL = scheme + "://" + s.ln.Addr().String()
	done := make(chan struct{})
	go func() { defer close(done); _ = s.srv.Serve(ln) }()
	t.Cleanup(func() { s.srv.Close(); <-done })
	return s
}

func execPath(t testing.TB) string {
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Skipf("git not installed: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// guard asks private repositories for the token.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		repo := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 2)[0]
		s.mu.Lock()
		private := s.private[repo]
		if r.Header.Get("Authorization") != "" {
			s.auths[repo]++
		}
		s.mu.Unlock()
		if private {
			_, pass, ok := r.BasicAuth()
			if !ok || subtle.ConstantTimeCompare([]byte(pass), []byte(s.Token)) != 1 {
				w.Header().Set("WWW-Authenticate", `Basic realm="gittest"`)
				http.Error(w, "authentication required", http.StatusUnauthorized)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// Auths is how many requests for repository name carried credentials.
func (s *Server) Auths(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.auths[name+".git"]
}

// Repo makes the bare repository <name>.git from the files of folder src (committed on branch,
// as the default branch) and returns its URL. Private ones need the token.
func (s *Server) Repo(t testing.TB, name, src, branch string, private bool) string {
	t.Helper()
	work := t.TempDir()
	run := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.com",
			"GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+work)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if err := copyTree(work, src); err != nil {
		t.Fatal(err)
	}
	run(work, "init", "-q", "-b", branch)
	run(work, "add", "-A")
	run(work, "commit", "-q", "-m", "test repository")
	bare := filepath.Join(s.Root, name+".git")
	run(s.Root, "clone", "-q", "--bare", work, bare)
	run(bare, "update-server-info")
	if private {
		s.mu.Lock()
		s.private[name+".git"] = true
		s.mu.Unlock()
	}
	return s.URL + "/" + name + ".git"
}

// copyTree copies the files and folders of src into dst, symbolic links as links (os.CopyFS
// refuses them), so a test repository may hold links.
func copyTree(dst, src string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644|info.Mode().Perm()&0o111) // execute bits kept, as os.CopyFS does
	})
}

// Commit adds or changes files in repository name on branch (made from the current default branch
// when new) and returns the new commit's hash.
func (s *Server) Commit(t testing.TB, name, branch string, files map[string]string) string {
	t.Helper()
	work := t.TempDir()
	env := append(os.Environ(), "GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+work)
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	bare := filepath.Join(s.Root, name+".git")
	git(work, "clone", "-q", bare, "w")
	w := filepath.Join(work, "w")
	if out, err := exec.Command("git", "-C", w, "rev-parse", "--verify", "-q", "origin/"+branch).Output(); err == nil && len(out) > 0 {
		git(w, "checkout", "-q", branch)
	} else {
		git(w, "checkout", "-q", "-b", branch)
	}
	for p, content := range files {
		full := filepath.Join(w, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(w, "add", "-A")
	git(w, "commit", "-q", "-m", fmt.Sprintf("change %d files", len(files)))
	git(w, "push", "-q", "origin", branch)
	git(bare, "update-server-info")
	return git(w, "rev-parse", "HEAD")
}
