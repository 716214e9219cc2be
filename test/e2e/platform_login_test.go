//go:build integration

package e2e

import (
	"bytes"
	"context"
	"net"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/oauth2-proxy/mockoidc"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/errs"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/client"
	"github.com/devtool/devtool/internal/testcluster"
)

// ptyRun starts the built CLI on a pseudo-terminal (stdin and stderr are a terminal, as a person's),
// collecting everything it writes; wait returns its exit error and output.
type ptyRun struct {
	cmd  *exec.Cmd
	tty  *os.File
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
}

func (u *platformUser) startOnPTY(args ...string) *ptyRun {
	u.t.Helper()
	cmd := exec.Command(devtoolBin, args...)
	cmd.Dir = u.dir
	cmd.Env = append([]string{"HOME=" + u.home, "DEVTOOL_HOME=" + u.home, "KUBECONFIG=" + u.kubeconfig,
		"PATH=" + os.Getenv("PATH"), "NO_COLOR=1", "TERM=dumb", "BROWSER=none"}, u.env...)
	tty, err := pty.Start(cmd)
	if err != nil {
		u.t.Fatal(err)
	}
	r := &ptyRun{cmd: cmd, tty: tty, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			r.mu.Lock()
			r.out.Write(buf[:n])
			r.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	u.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		tty.Close()
	})
	return r
}

func (r *ptyRun) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

// waitFor waits until the output matches re and returns the first group (or the match).
func (r *ptyRun) waitFor(t *testing.T, re *regexp.Regexp, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(r.output()); m != nil {
			return m[len(m)-1]
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no %s in the CLI's output within %s:\n%s", re, within, r.output())
	return ""
}

func (r *ptyRun) wait(t *testing.T, within time.Duration) (error, string) {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- r.cmd.Wait() }()
	select {
	case err := <-errc:
		<-r.done
		return err, r.output()
	case <-time.After(within):
		_ = r.cmd.Process.Kill()
		t.Fatalf("the CLI did not end within %s:\n%s", within, r.output())
	}
	return nil, ""
}

var authorizeURL = regexp.MustCompile(`(https://\S+/login/authorize\?\S+)`)

// TestPlatformLogins drives every way to log in through the built CLI: a password (from a pipe, and
// the refusals without a terminal or with CI set), the browser login in headless Chromium (the web
// UI's sign-in page with a password, then its consent page; then single sign-on through an OpenID
// Connect provider, mockoidc), and the device login on the UI's device page; then a token revoked
// through the API is refused at once (exit 4).
func TestPlatformLogins(t *testing.T) {
	p := findPlatform(t)
	ca, err := os.ReadFile(p.caFile)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	admin, err := client.New(client.Options{URL: p.url, Token: p.adminToken, CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	s := randomSuffix()
	alice := "alice-" + s
	const password = "correct horse battery"
	if _, err := admin.CreateUser(ctx, api.CreateUserRequest{Name: alice, Password: password}); err != nil {
		t.Fatalf("creating %s: %v", alice, err)
	}
	c := testcluster.Connect(t)
	oidcUser := "sso-" + s
	t.Cleanup(func() {
		_ = admin.DeleteUser(context.Background(), alice)
		for _, ns := range []string{alice, oidcUser} { // personal namespaces outlive their users
			_ = c.Clientset.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		}
	})

	// A password from a pipe; a wrong one is exit 4; no password flag exists.
	u := newPlatformUser(t)
	home := u.home
	run := func(stdin string, env []string, args ...string) (string, error) {
		cmd := exec.Command(devtoolBin, args...)
		cmd.Dir = u.dir
		cmd.Env = append([]string{"HOME=" + home, "DEVTOOL_HOME=" + home, "PATH=" + os.Getenv("PATH"), "NO_COLOR=1", "BROWSER=/bin/false"}, env...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		t.Logf("$ devtool %s\n%s", strings.Join(args, " "), out)
		return string(out), err
	}
	out, err := run(password+"\n", nil, "context", "use", p.url, "--ca-cert", p.caFile, "--user", alice, "--password-stdin")
	if err != nil || !strings.Contains(out, "as "+alice) {
		t.Fatalf("password login: %v\n%s", err, out)
	}
	out, err = run("wrong password\n", nil, "context", "use", p.url, "--ca-cert", p.caFile, "--user", alice, "--password-stdin")
	if exitCode(err) != errs.ExitAuth || !strings.Contains(out, "wrong user name or password") {
		t.Errorf("wrong password: exit %d\n%s", exitCode(err), out)
	}
	if out, err = run("", nil, "context", "use", p.url, "--user", alice, "--password", password); exitCode(err) != 2 {
		t.Errorf("--password exists? exit %d\n%s", exitCode(err), out)
	}
	// Without a terminal, or with CI set, nothing is asked and no browser opened: exit 4 with the ways
	// out (on a machine with no saved context: a saved one would be checked again instead).
	home = t.TempDir()
	for _, env := range [][]string{nil, {"CI=true"}} {
		out, err = run("", env, "context", "use", p.url, "--ca-cert", p.caFile)
		if exitCode(err) != errs.ExitAuth || !strings.Contains(out, "--password-stdin") || !strings.Contains(out, api.EnvToken) {
			t.Errorf("no token, env %v: exit %d\n%s", env, exitCode(err), out)
		}
		out, err = run("", env, "context", "use", p.url, "--ca-cert", p.caFile, "--user", alice)
		if exitCode(err) != errs.ExitAuth || !strings.Contains(out, "--password-stdin") {
			t.Errorf("--user without a terminal, env %v: exit %d\n%s", env, exitCode(err), out)
		}
	}
	home = u.home

	// On a terminal, --user asks the password without echoing it.
	tu := newPlatformUser(t)
	tr := tu.startOnPTY("context", "use", p.url, "--ca-cert", p.caFile, "--user", alice)
	tr.waitFor(t, regexp.MustCompile(`(Password of \S+ at \S+: )`), time.Minute)
	if _, err := tr.tty.Write([]byte(password + "\r")); err != nil {
		t.Fatal(err)
	}
	if err, out := tr.wait(t, time.Minute); err != nil || !strings.Contains(out, "as "+alice) || strings.Contains(out, password) {
		t.Fatalf("password asked on a terminal: %v (the password must not be echoed)\n%s", err, out)
	}

	// The browser login: the CLI on a terminal prints the address (BROWSER=none: no browser of its
	// own); Chromium signs in on the web UI's sign-in page, the consent page (the UI's) allows, the
	// CLI saves the context, and the browser is signed in to the UI with the same session.
	base, err := url.Parse(p.url)
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, "platform-login", spkiOf(t, base.Host, ca))
	tab := b.tab()
	bu := newPlatformUser(t)
	r := bu.startOnPTY("context", "use", p.url, "--ca-cert", p.caFile)
	addr := r.waitFor(t, authorizeURL, time.Minute)
	if _, text := b.open(tab, addr); !strings.Contains(text, "The devtool CLI on this computer is logging in") {
		t.Fatalf("the login's address without a session: %s\n%s", b.location(tab), text)
	}
	b.shot(tab, "signin-for-cli")
	if st, text := b.submit(tab, map[string]string{"#name": alice, "#password": "wrong password"}, "#signin-password"); st != 401 || !strings.Contains(text, "name or password is wrong") {
		t.Errorf("a wrong password on the sign-in page: %d\n%s", st, text)
	}
	st, text := b.submit(tab, map[string]string{"#name": alice, "#password": password}, "#signin-password")
	if st != 200 || !strings.Contains(text, "Log in the devtool CLI") || !strings.Contains(text, "asks to act as you, "+alice) || b.location(tab).Path != api.AuthorizePath {
		t.Fatalf("the consent page after signing in: %d %s\n%s", st, b.location(tab), text)
	}
	if nav := b.text(tab, "header"); !strings.Contains(nav, "Signed in as "+alice) || !strings.Contains(nav, "Namespaces") {
		t.Errorf("the consent page is not in the UI's layout: %q", nav)
	}
	b.shot(tab, "cli-consent")
	loc, text := b.leave(tab, "#allow")
	// The browser was sent to the CLI's loopback listener, which answered before it stopped.
	if loc.Scheme != "http" || loc.Hostname() != "127.0.0.1" || !strings.Contains(text, "logged in") {
		t.Errorf("the page after allowing: %s %q", loc, text)
	}
	if err, out := r.wait(t, time.Minute); err != nil || !strings.Contains(out, "Logged in to "+p.url+" as "+alice) {
		t.Fatalf("browser login: %v\n%s", err, out)
	}
	if out, _ := bu.mustRun("namespace", "list"); !strings.Contains(out, alice) {
		t.Errorf("namespace list after the browser login:\n%s", out)
	}
	if st, text := b.open(tab, p.url+"/namespaces"); st != 200 || b.location(tab).Path != "/namespaces" || !strings.Contains(text, alice) {
		t.Errorf("the UI after the CLI's login (one session): %d %s\n%s", st, b.location(tab), text)
	}

	// The device login: the code is entered on the UI's device page (already signed in: the session).
	du := newPlatformUser(t)
	dr := du.startOnPTY("context", "use", p.url, "--ca-cert", p.caFile, "--device")
	complete := dr.waitFor(t, regexp.MustCompile(`\(or open (\S+)\)`), time.Minute)
	if st, text := b.open(tab, complete); st != 200 || !strings.Contains(text, "Enter the code your terminal shows") {
		t.Fatalf("the device page: %d\n%s", st, text)
	}
	b.shot(tab, "cli-device")
	if st, text := b.submit(tab, nil, "#approve"); st != 200 || !strings.Contains(text, "logging in as "+alice) {
		t.Errorf("approving the device login: %d\n%s", st, text)
	}
	if err, out := dr.wait(t, time.Minute); err != nil || !strings.Contains(out, "as "+alice) {
		t.Fatalf("device login: %v\n%s", err, out)
	}

	// Single sign-on: an OpenID Connect provider (mockoidc, on the pod bridge so the platform's pods
	// and the browser both reach it) configured through the platform's Secret; its user gets an
	// account on first login, admin through its group.
	issuer := startMockOIDC(t, c, platformNamespace(t, c, p), oidcUser)
	if issuer != "" {
		t.Cleanup(func() { _ = admin.DeleteUser(context.Background(), oidcUser) })
		waitForProvider(t, p, ca)
		su := newPlatformUser(t)
		otab := b.tab() // a browser context of its own: no session yet
		sr := su.startOnPTY("context", "use", p.url, "--ca-cert", p.caFile)
		addr := sr.waitFor(t, authorizeURL, time.Minute)
		b.open(otab, addr)
		b.shot(otab, "signin-with-sso")
		st, text := b.submit(otab, nil, "#sso-oidc") // the provider (mockoidc asks nothing) and back
		if st != 200 || !strings.Contains(text, "asks to act as you, "+oidcUser) {
			t.Fatalf("the consent page after single sign-on: %d %s\n%s", st, b.location(otab), text)
		}
		if loc, _ := b.leave(otab, "#allow"); loc.Hostname() != "127.0.0.1" {
			t.Errorf("after allowing: %s", loc)
		}
		if err, out := sr.wait(t, time.Minute); err != nil || !strings.Contains(out, "as "+oidcUser) {
			t.Fatalf("single sign-on login: %v\n%s", err, out)
		}
		var me *api.User
		if out, _ := su.mustRun("context", "show"); !strings.Contains(out, oidcUser) {
			t.Errorf("context show after SSO: %s", out)
		}
		users, err := adminUsers(ctx, p, ca)
		if err != nil {
			t.Fatal(err)
		}
		for i := range users {
			if users[i].Name == oidcUser {
				me = &users[i]
			}
		}
		if me == nil || !me.Admin || !me.OIDC {
			t.Errorf("the SSO account: %+v (want made on first login, admin through its group)", me)
		}
	}

	// A revoked token is refused at once: exit 4, saying how to log in again.
	tok := u.token(t)
	id, _ := client.TokenID(tok)
	uc, err := client.New(client.Options{URL: p.url, Token: tok, CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	if err := uc.RevokeToken(ctx, id); err != nil {
		t.Fatal(err)
	}
	uc.Close()
	out, errOut, err := u.run("namespace", "list")
	if exitCode(err) != errs.ExitAuth || !strings.Contains(errOut, "devtool context use") {
		t.Errorf("revoked token: exit %d\n%s%s", exitCode(err), out, errOut)
	}
}

// waitForProvider waits until the platform offers the OpenID Connect provider just configured: a
// replica re-reads the provider's Secret within 5 s of a change, so once one lists it (a fresh
// connection each time, any replica), 6 s more cover the other.
func waitForProvider(t *testing.T, p platformFiles, ca []byte) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		pc, err := client.New(client.Options{URL: p.url, CA: ca})
		if err != nil {
			t.Fatal(err)
		}
		info, err := pc.Info(context.Background())
		pc.Close()
		if err == nil && info.Login != nil && len(info.Login.Providers) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the platform does not offer the provider a minute after its Secret was made (last: %v)", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(6 * time.Second)
}

// token reads the saved context's token from the user's devtool home.
func (u *platformUser) token(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(u.home + "/.devtool/context/config.json")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`"token":\s*"(dvt_[^"]+)"`).FindStringSubmatch(string(data))
	if m == nil {
		t.Fatalf("no token in %s", data)
	}
	return m[1]
}

func adminUsers(ctx context.Context, p platformFiles, ca []byte) ([]api.User, error) {
	ac, err := client.New(client.Options{URL: p.url, Token: p.adminToken, CA: ca})
	if err != nil {
		return nil, err
	}
	defer ac.Close()
	return ac.Users(ctx)
}

// startMockOIDC runs mockoidc on the pod bridge (DEVTOOL_TEST_BRIDGE_IP, default the local
// cluster's 10.244.91.1), queues one user of the group devtool-admins, and points the platform at it
// (in namespace ns) through its OIDC Secret (removed again at the end). It returns "" (after logging why) when the
// platform already has a provider configured: a real configuration is never replaced.
func startMockOIDC(t *testing.T, c *testcluster.Cluster, ns, user string) string {
	t.Helper()
	ip := os.Getenv("DEVTOOL_TEST_BRIDGE_IP")
	if ip == "" {
		ip = "10.244.91.1"
	}
	secs := c.Clientset.CoreV1().Secrets(ns)
	if _, err := secs.Get(context.Background(), "devtool-platform-oidc", metav1.GetOptions{}); err == nil {
		t.Logf("the platform in %s has an OIDC provider configured already: single sign-on not tested", ns)
		return ""
	} else if !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("listening on the pod bridge %s (DEVTOOL_TEST_BRIDGE_IP): %v", ip, err)
	}
	if err := m.Start(ln, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	for range 10 { // one per attempt: an attempt cut by a network change may have taken one
		m.QueueUser(&mockoidc.MockUser{Subject: "sub-" + user, Email: user + "@example.com", EmailVerified: true,
			PreferredUsername: user, Groups: []string{"devtool-admins"}})
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "devtool-platform-oidc", Namespace: ns}, StringData: map[string]string{
		"issuer": m.Issuer(), "clientID": m.ClientID, "clientSecret": m.ClientSecret, "name": "Mock SSO",
		"scopes": "openid profile email groups", "adminGroups": "devtool-admins"}}
	if _, err := secs.Create(context.Background(), sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = secs.Delete(context.Background(), "devtool-platform-oidc", metav1.DeleteOptions{}) })
	return m.Issuer()
}
