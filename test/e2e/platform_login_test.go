//go:build integration

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
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

// headless starts Debian's chromium (headless, no sandbox as root, no background networking) with
// the platform's CA trusted by its key hash, and returns a tab; it is stopped at the test's end.
func headless(t *testing.T, caFile string) (context.Context, *netWatch) {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is not installed (apt-get install -y chromium)")
		}
		t.Skip("chromium is not installed (apt-get install -y chromium)")
	}
	data, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(data)
	if blk == nil {
		t.Fatal("no PEM in " + caFile)
	}
	ca, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	spki := sha256.Sum256(ca.RawSubjectPublicKeyInfo)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		// The platform's certificate chain ends in its own CA: trusted by that CA's key only.
		chromedp.Flag("ignore-certificate-errors-spki-list", base64.StdEncoding.EncodeToString(spki[:])),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); acancel() })
	tctx, tcancel := context.WithTimeout(ctx, 5*time.Minute)
	t.Cleanup(tcancel)
	// Chromium aborts requests in flight when a pod's veth comes or goes (ingress_test.go's netWatch):
	// such an attempt is made again.
	nw := &netWatch{urls: map[network.RequestID]string{}}
	if err := chromedp.Listen(tctx, func(ev any) {
		nw.mu.Lock()
		defer nw.mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			if len(nw.urls) < 10000 {
				nw.urls[e.RequestID] = e.Request.URL
			}
		case *network.EventLoadingFailed:
			nw.failed = append(nw.failed, e.ErrorText)
			nw.log = append(nw.log, fmt.Sprintf("failed %s: %s", nw.urls[e.RequestID], e.ErrorText))
		case *page.EventFrameNavigated:
			nw.log = append(nw.log, "navigated "+e.Frame.URL)
		}
	}); err != nil {
		t.Fatal(err)
	}
	return tctx, nw
}

// step runs browser actions with a deadline of their own, so the tab outlives a failed attempt.
func step(tab context.Context, actions ...chromedp.Action[chromedp.Void]) (string, error) {
	ctx, cancel := context.WithTimeout(tab, 90*time.Second)
	defer cancel()
	return "", chromedp.Do(ctx, actions...)
}

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
// the refusals without a terminal or with CI set), the browser login in headless Chromium (the
// platform's sign-in form, then single sign-on through an OpenID Connect provider, mockoidc), and the
// device login; then a token revoked through the API is refused at once (exit 4).
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
	// own); Chromium signs in on the platform's page and allows; the CLI saves the context.
	tab, nw := headless(t, p.caFile)
	bu := newPlatformUser(t)
	r := bu.startOnPTY("context", "use", p.url, "--ca-cert", p.caFile)
	addr := r.waitFor(t, authorizeURL, time.Minute)
	nw.retry(t, func() (string, error) {
		return step(tab,
			chromedp.Navigate(addr),
			chromedp.WaitVisible(chromedp.CSS("#user")),
			chromedp.SendKeys(chromedp.CSS("#user"), alice),
			chromedp.SendKeys(chromedp.CSS("#password"), password),
			chromedp.Click(chromedp.CSS("#signin")),
			chromedp.WaitVisible(chromedp.CSS("#allow")),
			chromedp.Click(chromedp.CSS("#allow")))
	})
	if err, out := r.wait(t, time.Minute); err != nil || !strings.Contains(out, "Logged in to "+p.url+" as "+alice) {
		t.Fatalf("browser login: %v\n%s", err, out)
	}
	// The browser was sent to the CLI's loopback listener, which answered before it stopped.
	loc, _ := chromedp.Run(tab, chromedp.Location())
	text, _ := chromedp.Run(tab, chromedp.Text(chromedp.CSS("p")))
	if !strings.HasPrefix(loc, "http://127.0.0.1:") || !strings.Contains(text, "logged in") {
		t.Errorf("the page after allowing: %s %q", loc, text)
	}
	if out, _ := bu.mustRun("namespace", "list"); !strings.Contains(out, alice) {
		t.Errorf("namespace list after the browser login:\n%s", out)
	}

	// The device login: the code is entered in Chromium (already signed in: the session cookie).
	du := newPlatformUser(t)
	dr := du.startOnPTY("context", "use", p.url, "--ca-cert", p.caFile, "--device")
	complete := dr.waitFor(t, regexp.MustCompile(`\(or open (\S+)\)`), time.Minute)
	nw.retry(t, func() (string, error) {
		return step(tab, chromedp.Navigate(complete), chromedp.WaitVisible(chromedp.CSS("#approve")), chromedp.Click(chromedp.CSS("#approve")),
			chromedp.WaitVisible(chromedp.CSS("#message")))
	})
	if err, out := dr.wait(t, time.Minute); err != nil || !strings.Contains(out, "as "+alice) {
		t.Fatalf("device login: %v\n%s", err, out)
	}

	// Single sign-on: an OpenID Connect provider (mockoidc, on the pod bridge so the platform's pods
	// and the browser both reach it) configured through the platform's Secret; its user gets an
	// account on first login, admin through its group.
	issuer := startMockOIDC(t, c, platformNamespace(t, c, p), oidcUser)
	if issuer != "" {
		t.Cleanup(func() { _ = admin.DeleteUser(context.Background(), oidcUser) })
		su := newPlatformUser(t)
		otab, onw := headless(t, p.caFile) // a fresh browser: no session yet
		sr := su.startOnPTY("context", "use", p.url, "--ca-cert", p.caFile)
		addr := sr.waitFor(t, authorizeURL, time.Minute)
		onw.retry(t, func() (string, error) {
			return step(otab,
				chromedp.Navigate(addr),
				chromedp.WaitVisible(chromedp.CSS("#oidc-oidc")),
				chromedp.Click(chromedp.CSS("#oidc-oidc")),
				chromedp.WaitVisible(chromedp.CSS("#allow")),
				chromedp.Click(chromedp.CSS("#allow")))
		})
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
