//go:build integration

package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/install"
	"github.com/devtool/devtool/internal/platform/store"
	"github.com/devtool/devtool/internal/testcluster"
)

// platform is the installed platform as a test sees it: the three files `make platform-up` writes
// into the cluster's state folder ($DEVTOOL_CLUSTER_STATE, default /tmp/devtool-cluster):
// platform-url, platform-ca.crt and platform-admin-token.
type platform struct {
	t      testing.TB
	url    string
	ca     []byte
	admin  string
	client *http.Client
}

func connectPlatform(t testing.TB, c *testcluster.Cluster) *platform {
	t.Helper()
	state := platformDir()
	// Another instance's files with the shared instance's namespace: the tests that reach the
	// platform's pods (lockout, logins across replicas, the leader's pod deleted) would act on the
	// shared instance, not on the one under test.
	if state != filepath.Dir(testcluster.LocalKubeconfig()) && os.Getenv("DEVTOOL_TEST_PLATFORM_NAMESPACE") == "" {
		t.Fatalf("DEVTOOL_TEST_PLATFORM_DIR=%s names another instance: set DEVTOOL_TEST_PLATFORM_NAMESPACE to its namespace too", state)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(state, name))
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	if read("platform-url") == "" || os.Getenv("DEVTOOL_TEST_PLATFORM_REINSTALL") != "" {
		_, here, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(here), "..", "..", "..")
		cmd := exec.Command("make", "--no-print-directory", "platform-up")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig, "PLATFORM_NAMESPACE="+platformNS(), "PLATFORM_OUT_DIR="+state)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make platform-up: %v\n%s", err, out)
		}
	}
	p := &platform{t: t, url: read("platform-url"), ca: []byte(read("platform-ca.crt")), admin: read("platform-admin-token")}
	if p.url == "" || len(p.ca) == 0 || p.admin == "" {
		t.Fatalf("no platform-url, platform-ca.crt or platform-admin-token in %s after make platform-up", state)
	}
	var err error
	if p.client, err = install.Client(p.ca); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.client.CloseIdleConnections)
	return p
}

type reply struct {
	status int
	body   []byte
}

func (p *platform) do(base, method, path, token string, body any) reply {
	p.t.Helper()
	return doWith(p.t, p.client, base, method, path, token, body)
}

func doWith(t testing.TB, c *http.Client, base, method, path, token string, body any) reply {
	t.Helper()
	var rd io.Reader
	if body != nil {
		j, _ := json.Marshal(body)
		rd = bytes.NewReader(j)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, base+api.Prefix+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, body: b}
}

func (p *platform) want(r reply, status int, what string) reply {
	p.t.Helper()
	if r.status != status {
		p.t.Fatalf("%s: status %d, want %d: %s", what, r.status, status, r.body)
	}
	return r
}

// eventually repeats f until it returns "" or the deadline passes (the platform's reads come from
// informers and a removed ServiceAccount's tokens are refused once the API server sees the removal:
// neither has an event this test could wait for).
func eventually(t testing.TB, within time.Duration, f func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		msg := f()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, msg)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func suffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func kubeAs(t *testing.T, kt api.KubeToken) kubernetes.Interface {
	t.Helper()
	cfg := &rest.Config{Host: kt.APIServer, BearerToken: kt.Token, TLSClientConfig: rest.TLSClientConfig{CAData: []byte(kt.APIServerCA)}}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// TestPlatformOnCluster drives the installed platform (2 replicas) over HTTPS as the CLI would, and
// checks that Kubernetes itself enforces what a user's kube token may do.
func TestPlatformOnCluster(t *testing.T) {
	c := testcluster.Connect(t)
	p := connectPlatform(t, c)
	ctx := context.Background()
	var info api.Info
	if err := json.Unmarshal(p.want(p.do(p.url, "GET", "/info", "", nil), 200, "info").body, &info); err != nil || info.APIServer == "" || info.APIServerCA == "" {
		t.Fatalf("info: %+v %v", info, err)
	}

	s := suffix()
	alice, bob := "alice-"+s, "bob-"+s
	var aliceU, bobU api.CreateUserResponse
	_ = json.Unmarshal(p.want(p.do(p.url, "POST", "/users", p.admin, api.CreateUserRequest{Name: alice}), 201, "create alice").body, &aliceU)
	_ = json.Unmarshal(p.want(p.do(p.url, "POST", "/users", p.admin, api.CreateUserRequest{Name: bob}), 201, "create bob").body, &bobU)
	shared := "shared-" + s
	t.Cleanup(func() {
		for _, u := range []string{alice, bob} {
			p.do(p.url, "DELETE", "/users/"+u, p.admin, nil)
		}
		for _, ns := range []string{alice, bob, shared} {
			_ = c.Clientset.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		}
	})

	// each lists namespaces: the personal one, with its quota and limits.
	for _, u := range []struct{ name, token string }{{alice, aliceU.Token}, {bob, bobU.Token}} {
		eventually(t, 10*time.Second, func() string {
			var l api.NamespaceList
			r := p.do(p.url, "GET", "/namespaces", u.token, nil)
			_ = json.Unmarshal(r.body, &l)
			if r.status != 200 || len(l.Items) != 1 || l.Items[0].Name != u.name || !l.Items[0].Personal || l.Items[0].Role != api.RoleOwner {
				return fmt.Sprintf("%s's namespaces: %d %s", u.name, r.status, r.body)
			}
			return ""
		})
		if _, err := c.Clientset.CoreV1().ResourceQuotas(u.name).Get(ctx, store.QuotaName, metav1.GetOptions{}); err != nil {
			t.Errorf("quota of %s: %v", u.name, err)
		}
		if _, err := c.Clientset.CoreV1().LimitRanges(u.name).Get(ctx, store.LimitsName, metav1.GetOptions{}); err != nil {
			t.Errorf("limits of %s: %v", u.name, err)
		}
	}

	// alice creates a namespace (idempotently); bob cannot see it; a bad token is refused.
	p.want(p.do(p.url, "POST", "/namespaces", aliceU.Token, api.CreateNamespaceRequest{Name: shared}), 201, "alice creates "+shared)
	p.want(p.do(p.url, "POST", "/namespaces", aliceU.Token, api.CreateNamespaceRequest{Name: shared}), 200, "alice creates "+shared+" again")
	p.want(p.do(p.url, "POST", "/namespaces", bobU.Token, api.CreateNamespaceRequest{Name: shared}), 409, "bob creates "+shared)
	eventually(t, 10*time.Second, func() string {
		if r := p.do(p.url, "GET", "/namespaces/"+shared, aliceU.Token, nil); r.status != 200 {
			return fmt.Sprintf("alice reads %s: %d", shared, r.status)
		}
		return ""
	})
	p.want(p.do(p.url, "GET", "/namespaces/"+shared, bobU.Token, nil), 404, "bob reads "+shared)
	p.want(p.do(p.url, "GET", "/namespaces/"+alice, bobU.Token, nil), 404, "bob reads alice's personal namespace")
	p.want(p.do(p.url, "GET", "/me", bobU.Token[:len(bobU.Token)-2]+"xx", nil), 401, "a bad token")

	// kube tokens: Kubernetes lets alice work in her namespaces and refuses her everywhere else.
	var akt api.KubeToken
	_ = json.Unmarshal(p.want(p.do(p.url, "POST", "/kubetoken", aliceU.Token, api.KubeTokenRequest{ExpirationSeconds: 600}), 200, "alice's kube token").body, &akt)
	ak := kubeAs(t, akt)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "note"}, Data: map[string]string{"k": "v"}}
	for _, ns := range []string{alice, shared} {
		if _, err := ak.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("alice creates a ConfigMap in %s: %v", ns, err)
		}
	}
	for _, ns := range []string{bob, platformNS(), "default"} {
		if _, err := ak.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("alice creates a ConfigMap in %s: %v, want Forbidden", ns, err)
		}
	}
	if _, err := ak.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x-" + s}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("alice creates a namespace: %v, want Forbidden", err)
	}
	if _, err := ak.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("alice lists namespaces: %v, want Forbidden", err)
	}
	if _, err := ak.CoreV1().ResourceQuotas(alice).Update(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: store.QuotaName}}, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("alice changes her quota: %v, want Forbidden", err)
	}

	// sharing (written impersonating alice): bob as viewer reads and cannot write.
	p.want(p.do(p.url, "PUT", "/namespaces/"+shared+"/members/"+bob, aliceU.Token, api.ShareRequest{Role: api.RoleViewer}), 200, "alice shares")
	p.want(p.do(p.url, "PUT", "/namespaces/"+shared+"/members/"+alice, bobU.Token, api.ShareRequest{Role: api.RoleViewer}), 403, "viewer bob changes alice's role")
	var bkt api.KubeToken
	_ = json.Unmarshal(p.want(p.do(p.url, "POST", "/kubetoken", bobU.Token, nil), 200, "bob's kube token").body, &bkt)
	bk := kubeAs(t, bkt)
	if _, err := bk.CoreV1().ConfigMaps(shared).Get(ctx, "note", metav1.GetOptions{}); err != nil {
		t.Errorf("viewer bob reads a ConfigMap: %v", err)
	}
	if _, err := bk.CoreV1().ConfigMaps(shared).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bob"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("viewer bob writes: %v, want Forbidden", err)
	}
	// stored secrets: a namespace's are read impersonating the caller, so a viewer (no Secrets in
	// Kubernetes' view role) does not get them; a user's own are nobody else's.
	p.want(p.do(p.url, "PUT", "/secrets/API_KEY", aliceU.Token, api.SecretValue{Value: "alice-own"}), 200, "alice's secret")
	p.want(p.do(p.url, "PUT", "/secrets/DB_PASS?scope=namespace&namespace="+shared, aliceU.Token, api.SecretValue{Value: "ns-value"}), 200, "a namespace secret")
	p.want(p.do(p.url, "PUT", "/secrets/DB_PASS?scope=namespace&namespace="+shared, bobU.Token, api.SecretValue{Value: "x"}), 403, "viewer bob writes a namespace secret")
	var res api.ResolvedSecrets
	_ = json.Unmarshal(p.want(p.do(p.url, "GET", "/secrets/values?namespace="+shared, aliceU.Token, nil), 200, "alice resolves").body, &res)
	if res.Values["API_KEY"] != "alice-own" || res.Values["DB_PASS"] != "ns-value" {
		t.Errorf("alice's resolved secrets: %v", res.Values)
	}
	res = api.ResolvedSecrets{} // Unmarshal into a map adds to it: start empty
	_ = json.Unmarshal(p.want(p.do(p.url, "GET", "/secrets/values?namespace="+shared, bobU.Token, nil), 200, "bob resolves").body, &res)
	if _, ok := res.Values["API_KEY"]; ok || res.Values["DB_PASS"] != "" {
		t.Errorf("viewer bob's resolved secrets hold alice's or the namespace's: %v", res.Values)
	}
	p.want(p.do(p.url, "GET", "/secrets/values?namespace="+alice, bobU.Token, nil), 404, "bob resolves in alice's namespace")

	p.want(p.do(p.url, "DELETE", "/namespaces/"+shared+"/members/"+bob, aliceU.Token, nil), 204, "alice unshares")
	eventually(t, 10*time.Second, func() string {
		if _, err := bk.CoreV1().ConfigMaps(shared).Get(ctx, "note", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			return fmt.Sprintf("bob reads after unshare: %v", err)
		}
		return ""
	})

	// two replicas: each pod serves; a token revoked through one is refused by the other at once.
	pods := platformPods(t, c)
	if len(pods) < 2 {
		t.Fatalf("%d ready platform pods, want 2", len(pods))
	}
	var tok api.Token
	_ = json.Unmarshal(p.want(doWith(t, pods[0], p.podURL(), "POST", "/tokens", aliceU.Token, api.CreateTokenRequest{Name: "ci"}), 201, "token via pod 0").body, &tok)
	p.want(doWith(t, pods[1], p.podURL(), "GET", "/me", tok.Token, nil), 200, "new token via pod 1")
	p.want(doWith(t, pods[0], p.podURL(), "DELETE", "/tokens/"+tok.ID, aliceU.Token, nil), 204, "revoke via pod 0")
	p.want(doWith(t, pods[1], p.podURL(), "GET", "/me", tok.Token, nil), 401, "revoked token via pod 1")
	p.want(doWith(t, pods[0], p.podURL(), "GET", "/me", tok.Token, nil), 401, "revoked token via pod 0")

	// removing alice: her API token at once, her kube token within seconds.
	p.want(p.do(p.url, "DELETE", "/users/"+alice, p.admin, nil), 204, "remove alice")
	p.want(p.do(p.url, "GET", "/me", aliceU.Token, nil), 401, "removed alice's token")
	eventually(t, 10*time.Second, func() string {
		if _, err := ak.CoreV1().ConfigMaps(alice).Get(ctx, "note", metav1.GetOptions{}); !apierrors.IsUnauthorized(err) {
			return fmt.Sprintf("removed alice's kube token: %v, want Unauthorized", err)
		}
		return ""
	})
}

// platformDir is where the platform's files are (DEVTOOL_TEST_PLATFORM_DIR, default the local
// cluster's state folder); platformNS its namespace (DEVTOOL_TEST_PLATFORM_NAMESPACE, default
// devtool-system): a branch tests its own instance beside the shared one.
func platformDir() string {
	if d := os.Getenv("DEVTOOL_TEST_PLATFORM_DIR"); d != "" {
		return d
	}
	return filepath.Dir(testcluster.LocalKubeconfig())
}

func platformNS() string {
	if ns := os.Getenv("DEVTOOL_TEST_PLATFORM_NAMESPACE"); ns != "" {
		return ns
	}
	return store.DefaultNamespace
}

// podURL is a URL whose host name matches the serving certificate; platformPods' clients dial a
// pod's own address whatever the URL says.
func (p *platform) podURL() string { return "https://devtool.localhost" }

// platformPods returns one HTTP client per ready platform pod, each dialling that pod's IP (on the
// cluster's pod bridge) directly.
func platformPods(t *testing.T, c *testcluster.Cluster) []*http.Client {
	t.Helper()
	ca, err := os.ReadFile(filepath.Join(platformDir(), "platform-ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	return c.PodClients(t, platformNS(), "app.kubernetes.io/name="+install.Name, install.Port, func() (*http.Client, error) {
		hc, err := install.Client(ca)
		if err != nil {
			return nil, err
		}
		tr := hc.Transport.(*http.Transport)
		tr.TLSClientConfig = tr.TLSClientConfig.Clone()
		tr.TLSClientConfig.ServerName = "devtool.localhost"
		return hc, nil
	})
}
