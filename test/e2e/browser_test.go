//go:build integration

package e2e

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// browser is a headless Debian chromium driven through chromedp, with a fresh profile. Each tab()
// is a separate browser context (its own cookies), so one browser serves several users.
type browser struct {
	t      *testing.T
	ctx    context.Context
	shots  string // where screenshots go (gitignored; README names it)
	prefix string
	// retried says the last submit was sent again after Chromium cut it (networkChanged): the
	// first may have reached the server.
	retried bool
}

// newBrowser starts chromium; spki lists the base64 SHA-256 of certificates' public keys chromium
// accepts without a trusted chain (the platform's, made by its own CA). The browser process is
// stopped when the test ends, and the test checks that it is gone.
func newBrowser(t *testing.T, prefix string, spki ...string) *browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		msg := "no chromium (apt-get install chromium): " + err.Error()
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	}
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	if len(spki) > 0 {
		opts = append(opts, chromedp.Flag("ignore-certificate-errors-spki-list", strings.Join(spki, ",")))
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		cancel()
		acancel()
		t.Fatalf("starting chromium: %v", err)
	}
	pid := 0
	if c := chromedp.FromContext(ctx); c != nil && c.Browser != nil && c.Browser.Process() != nil {
		pid = c.Browser.Process().Pid
	}
	t.Cleanup(func() {
		cancel()
		acancel()
		if pid > 0 {
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("chromium (pid %d) still runs after the test: %v", pid, err)
			}
		}
	})
	dir := os.Getenv("DEVTOOL_SCREENSHOTS")
	if dir == "" {
		_, here, _, _ := runtime.Caller(0)
		dir = filepath.Join(filepath.Dir(here), "..", "screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, ctx: ctx, shots: dir, prefix: prefix}
}

// tab is a new tab in a new browser context: its own cookies, as another person's browser.
func (b *browser) tab() context.Context {
	b.t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext())
	b.t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		b.t.Fatalf("opening a tab: %v", err)
	}
	return ctx
}

// open loads url (following redirects) and returns the document's HTTP status and the text of its
// main element.
func (b *browser) open(ctx context.Context, url string) (int, string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var resp *network.Response
	var err error
	for try := 0; ; try++ {
		resp, err = chromedp.Run(ctx, chromedp.NavigateResponse(url))
		if !networkChanged(err) || try == 5 {
			break
		}
	}
	if err != nil {
		b.t.Fatalf("opening %s: %v", url, err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("main"))); err != nil {
		b.t.Fatalf("opening %s: no main element: %v", url, err)
	}
	return b.status(ctx, resp), b.text(ctx, "main")
}

// status is the document's HTTP status: the navigation's response, or, when chromedp matched none
// to it (it happens while the previous page still has a stream open), the page's own Navigation
// Timing entry.
func (b *browser) status(ctx context.Context, resp *network.Response) int {
	b.t.Helper()
	if resp != nil {
		return int(resp.Status)
	}
	st, err := chromedp.Run(ctx, chromedp.Evaluate[int](`performance.getEntriesByType('navigation')[0].responseStatus`))
	if err != nil {
		b.t.Fatalf("reading the page's status: %v", err)
	}
	return st
}

func (b *browser) text(ctx context.Context, sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("reading %s: %v", sel, err)
	}
	return s
}

func (b *browser) location(ctx context.Context) *url.URL {
	b.t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		b.t.Fatal(err)
	}
	u, err := url.Parse(s)
	if err != nil {
		b.t.Fatal(err)
	}
	return u
}

// submit fills a form's fields (CSS selector -> value), clicks its button, waits for the page the
// form leads to (redirects followed) and returns its status and main text.
func (b *browser) submit(ctx context.Context, fields map[string]string, button string) (int, string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var fill []chromedp.Action[chromedp.Void]
	for sel, v := range fields {
		fill = append(fill, chromedp.SetValue(chromedp.CSS(sel), v))
	}
	here, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		b.t.Fatal(err)
	}
	var resp *network.Response
	b.retried = false
	for try := 0; ; try++ {
		if try > 0 {
			b.retried = true
		}
		// Filling is bounded apart: once in CI it waited out the whole minute on a page that
		// showed the form (a query left waiting by a navigation Chromium made under it);
		// the form is loaded again and filled again.
		fctx, fcancel := context.WithTimeout(ctx, 15*time.Second)
		ferr := chromedp.Do(fctx, fill...)
		fcancel()
		if ferr != nil {
			if ctx.Err() != nil || try == 5 {
				b.t.Fatalf("filling the form of %s: %v", button, ferr)
			}
			b.t.Logf("filling the form of %s: %v; loading %s again", button, ferr, here)
			b.open(ctx, here)
			continue
		}
		resp, err = chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(button)))
		if !networkChanged(err) || try == 5 {
			break
		}
		b.t.Logf("submitting %s: %v; the same submission again", button, err)
		b.open(ctx, here) // the form again, then the same submission
	}
	if err != nil {
		b.t.Fatalf("submitting %s: %v", button, err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("main"))); err != nil {
		b.t.Fatalf("after submitting %s: no main element: %v", button, err)
	}
	return b.status(ctx, resp), b.text(ctx, "main")
}

// leave clicks a button or link whose page is another site's (the CLI's loopback page after the
// consent page's Allow), waits for it, and returns where the browser is and the page's text. A
// click cut by a network change is made again from the page it was on.
func (b *browser) leave(ctx context.Context, button string) (*url.URL, string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	here, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		b.t.Fatal(err)
	}
	for try := 0; ; try++ {
		_, err = chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(button)))
		if !networkChanged(err) || try == 5 {
			break
		}
		b.open(ctx, here)
	}
	if err != nil {
		b.t.Fatalf("clicking %s: %v", button, err)
	}
	return b.location(ctx), b.text(ctx, "body")
}

// networkChanged: Chromium on Linux fails the requests in flight when a network interface comes or
// goes, and on a machine where pods start and stop (each a veth on the pod bridge) that happens
// often. Such a navigation is tried again.
func networkChanged(err error) bool {
	return err != nil && strings.Contains(err.Error(), "ERR_NETWORK_CHANGED")
}

var nonFile = regexp.MustCompile(`[^a-z0-9-]+`)

// a11yProblems is a page's markup checked as a script sees it: one h1, a main element, a language,
// every visible field with a label, every button with a name, every table with headers, images
// with alternative text, and the skip link as the first stop. Empty when all hold.
const a11yProblems = `(() => {
  const p = [];
  if (document.querySelectorAll('h1').length !== 1) p.push('h1 count ' + document.querySelectorAll('h1').length);
  if (!document.querySelector('main')) p.push('no main');
  if (!document.documentElement.lang) p.push('no lang');
  document.querySelectorAll('input:not([type=hidden]), select, textarea').forEach(e => {
    if (!e.labels || e.labels.length === 0) p.push('unlabelled field ' + (e.id || e.name));
  });
  document.querySelectorAll('button').forEach(e => {
    if (!e.textContent.trim() && !e.getAttribute('aria-label')) p.push('unnamed button');
  });
  document.querySelectorAll('table').forEach(t => { if (!t.querySelector('th')) p.push('table without headers'); });
  document.querySelectorAll('img').forEach(i => { if (!i.hasAttribute('alt')) p.push('img without alt'); });
  const first = document.querySelector('a[href], button, input:not([type=hidden]), select, textarea');
  if (document.querySelector('.skip') && first !== document.querySelector('.skip')) p.push('the skip link is not the first stop');
  return p;
})()`

// shot checks the page's markup (a11yProblems) and saves a full-page PNG screenshot as <prefix>-<name>.png.
func (b *browser) shot(ctx context.Context, name string) {
	b.t.Helper()
	if probs, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](a11yProblems)); err != nil {
		b.t.Errorf("checking the markup of %s: %v", name, err)
	} else if len(probs) > 0 {
		b.t.Errorf("markup of %s: %s", name, strings.Join(probs, "; "))
	}
	b.save(ctx, name)
}

// save writes a full-page PNG screenshot as <prefix>-<name>.png.
func (b *browser) save(ctx context.Context, name string) {
	b.t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(b.shots, b.prefix+"-"+nonFile.ReplaceAllString(strings.ToLower(name), "-")+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s", p)
}

// spkiOf is the base64 SHA-256 of the public key of the certificate a TLS server at addr (host:port,
// .localhost names on loopback) presents, checked against ca.
func spkiOf(t *testing.T, addr string, ca []byte) string {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatal("no certificate in the CA file")
	}
	dial := addr
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		dial = net.JoinHostPort("127.0.0.1", port)
	}
	d := &net.Dialer{Timeout: 10 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", dial, &tls.Config{RootCAs: pool, ServerName: host})
	if err != nil {
		t.Fatalf("TLS to %s: %v", addr, err)
	}
	defer conn.Close()
	leaf := conn.ConnectionState().PeerCertificates[0]
	sum := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}
