package web

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/sso"
	"github.com/devtool/devtool/internal/platform/store"
)

// TestSingleSignOn: the sign-in page offers the configured provider (mockoidc on loopback); its
// sign-in makes the account on first login (admin through its group), starts a web session and
// returns where it was asked to; the provider's answer is taken only in the browser that started
// the sign-in, and once.
func TestSingleSignOn(t *testing.T) {
	f := newPlatform(t, nil)
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	m.QueueUser(&mockoidc.MockUser{Subject: "sub-carol", Email: "carol@example.com", EmailVerified: true,
		PreferredUsername: "carol", Groups: []string{"devtool-admins"}})
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: sso.SecretName, Namespace: f.st.Namespace}, Data: map[string][]byte{
		"issuer": []byte(m.Issuer()), "clientID": []byte(m.ClientID), "clientSecret": []byte(m.ClientSecret), "name": []byte("Mock SSO"),
		"scopes": []byte("openid profile email groups"), "adminGroups": []byte("devtool-admins")}}
	if _, err := f.kc.CoreV1().Secrets(f.st.Namespace).Create(context.Background(), sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var info api.Info
	if err := getJSON(f, "", api.Prefix+"/info", &info); err != nil || len(info.Login.Providers) != 1 || info.Login.Providers[0].Name != "Mock SSO" {
		t.Fatalf("info's providers: %+v %v", info.Login, err)
	}
	b := f.browser()
	if p := f.do(b, "GET", "/signin?return=%2Ftokens", nil, nil); !strings.Contains(p.body, `id="sso-oidc" href="/login/oidc/oidc?return=%2Ftokens"`) ||
		!strings.Contains(p.body, "Sign in with Mock SSO") {
		t.Fatalf("sign-in page without the provider's link:\n%s", p.body)
	}
	p := f.do(b, "GET", "/login/oidc/oidc?return=%2Ftokens", nil, nil)
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.loc, m.AuthorizationEndpoint()+"?") {
		t.Fatalf("start: %d %q\n%s", p.status, p.loc, p.body)
	}
	// The provider (no questions asked: mockoidc) sends the browser back with a code.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(p.loc)
	if err != nil {
		t.Fatal(err)
	}
	readBody(resp)
	back, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || back.Path != sso.CallbackPath {
		t.Fatalf("the provider's answer: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	// Another browser cannot take it.
	if p := f.do(f.browser(), "GET", back.RequestURI(), nil, nil); p.status != http.StatusBadRequest || !strings.Contains(p.body, "not started in this browser") {
		t.Fatalf("the answer in another browser: %d\n%s", p.status, p.body)
	}
	p = f.do(b, "GET", back.RequestURI(), nil, nil)
	if p.status != http.StatusSeeOther || p.loc != "/tokens" {
		t.Fatalf("callback: %d %q\n%s", p.status, p.loc, p.body)
	}
	if p := f.do(b, "GET", "/tokens", nil, nil); p.status != 200 || !strings.Contains(p.body, "Signed in as <strong>carol</strong> (admin)") {
		t.Fatalf("the UI after single sign-on: %d\n%s", p.status, p.body)
	}
	var u *store.User
	deadline := time.Now().Add(5 * time.Second)
	for u, err = f.st.GetUser("carol"); err != nil && time.Now().Before(deadline); u, err = f.st.GetUser("carol") {
		time.Sleep(10 * time.Millisecond) // the informer is fed asynchronously
	}
	if err != nil || !u.Admin || u.Subject == "" {
		t.Fatalf("the account made on first login: %+v %v", u, err)
	}
	// The answer works once: its binding cookie is gone.
	if p := f.do(b, "GET", back.RequestURI(), nil, nil); p.status != http.StatusBadRequest {
		t.Fatalf("the answer taken twice: %d", p.status)
	}
	// An unknown provider.
	if p := f.do(b, "GET", "/login/oidc/other", nil, nil); p.status != http.StatusNotFound {
		t.Fatalf("unknown provider: %d", p.status)
	}
}
