package registryproxy

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// apiServer is what the fake API server knows: tokens and who may push where.
type apiServer struct {
	mu       sync.Mutex
	tokens   map[string]string          // token -> username
	members  map[string]map[string]bool // namespace -> username -> may push
	reviews  int
	sars     []authzv1.SubjectAccessReviewSpec
	failNext error
}

func newProxy(t *testing.T, api *apiServer) (*httptest.Server, *httptest.Server) {
	t.Helper()
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			t.Errorf("the registry got an Authorization header (%s %s)", r.Method, r.URL.Path)
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(upstream.Close)
	kc := fake.NewSimpleClientset()
	kc.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		api.mu.Lock()
		defer api.mu.Unlock()
		api.reviews++
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview)
		if api.failNext != nil {
			err := api.failNext
			api.failNext = nil
			return true, nil, err
		}
		if u, ok := api.tokens[tr.Spec.Token]; ok {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: u, Groups: []string{"system:serviceaccounts"}}}
		}
		return true, tr, nil
	})
	kc.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		api.mu.Lock()
		defer api.mu.Unlock()
		sar := a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview)
		api.sars = append(api.sars, sar.Spec)
		ra := sar.Spec.ResourceAttributes
		sar.Status.Allowed = ra.Group == Group && ra.Resource == Resource && (ra.Verb == "create" || ra.Verb == "delete") &&
			api.members[ra.Namespace][sar.Spec.User]
		return true, sar, nil
	})
	up, _ := url.Parse(upstream.URL)
	p := httptest.NewServer(&Proxy{Upstream: up, Kube: kc, CacheTTL: time.Hour})
	t.Cleanup(p.Close)
	return p, upstream
}

func push(t *testing.T, host, repo, user, pass string) int {
	t.Helper()
	r, err := name.ParseReference(host+"/"+repo+":1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, _ := random.Image(256, 1)
	auth := authn.Anonymous
	if pass != "" {
		auth = authn.FromConfig(authn.AuthConfig{Username: user, Password: pass})
	}
	err = remote.Write(r, img, remote.WithAuth(auth))
	if err == nil {
		return 0
	}
	var te *transport.Error
	if errors.As(err, &te) {
		return te.StatusCode
	}
	t.Fatalf("push: %v", err)
	return -1
}

func TestProxyAllowsMembersOnly(t *testing.T) {
	api := &apiServer{
		tokens:  map[string]string{"tok-alice": "system:serviceaccount:devtool-system:u-alice", "tok-bob": "system:serviceaccount:devtool-system:u-bob"},
		members: map[string]map[string]bool{"alice": {"system:serviceaccount:devtool-system:u-alice": true}},
	}
	p, _ := newProxy(t, api)
	host := strings.TrimPrefix(p.URL, "http://")

	if code := push(t, host, "alice/app", "alice", "tok-alice"); code != 0 {
		t.Fatalf("alice into alice/: %d", code)
	}
	for _, tc := range []struct {
		repo, user, pass string
		want             int
	}{
		{"alice/app2", "bob", "tok-bob", http.StatusForbidden},          // not a member
		{"alice/app2", "", "", http.StatusUnauthorized},                 // anonymous
		{"alice/app2", "alice", "tok-expired", http.StatusUnauthorized}, // not a token the API server knows
		{"app", "alice", "tok-alice", http.StatusForbidden},             // no namespace in the name
		{"a.b/app", "alice", "tok-alice", http.StatusForbidden},         // not a namespace name
	} {
		if code := push(t, host, tc.repo, tc.user, tc.pass); code != tc.want {
			t.Errorf("push %s as %q: %d, want %d", tc.repo, tc.user, code, tc.want)
		}
	}
	// Pulls are open; a pull with a bad password is refused.
	r, _ := name.ParseReference(host+"/alice/app:1", name.Insecure)
	if _, err := remote.Image(r); err != nil {
		t.Errorf("anonymous pull: %v", err)
	}
	if _, err := remote.Image(r, remote.WithAuth(authn.FromConfig(authn.AuthConfig{Username: "x", Password: "tok-expired"}))); err == nil {
		t.Error("a pull with a bad password worked")
	}
	// The catalog would name every namespace's images.
	resp, err := http.Get(p.URL + "/v2/_catalog")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("catalog: %d", resp.StatusCode)
	}
	// The review asked the API server as the user, about images.devtool.dev in the namespace.
	api.mu.Lock()
	defer api.mu.Unlock()
	found := false
	for _, s := range api.sars {
		ra := s.ResourceAttributes
		if s.User == "system:serviceaccount:devtool-system:u-alice" && ra.Namespace == "alice" && ra.Name == "app" && ra.Verb == "create" &&
			len(s.Groups) == 1 && s.Groups[0] == "system:serviceaccounts" {
			found = true
		}
	}
	if !found {
		t.Errorf("no access review as alice for alice/app: %+v", api.sars)
	}
}

// Answers are cached: one push of several requests asks the API server once per token.
func TestProxyCachesAndSurvivesAPIErrors(t *testing.T) {
	api := &apiServer{
		tokens:  map[string]string{"tok": "u"},
		members: map[string]map[string]bool{"ns": {"u": true}},
	}
	p, _ := newProxy(t, api)
	host := strings.TrimPrefix(p.URL, "http://")
	if code := push(t, host, "ns/a", "u", "tok"); code != 0 {
		t.Fatal(code)
	}
	api.mu.Lock()
	reviews, sars := api.reviews, len(api.sars)
	api.mu.Unlock()
	if reviews != 1 || sars != 1 {
		t.Errorf("a push asked %d token reviews and %d access reviews, want 1 and 1", reviews, sars)
	}
	// The API server failing: 503, never a pass.
	api.mu.Lock()
	api.failNext = errors.New("etcd is down")
	api.mu.Unlock()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, p.URL+"/v2/ns/b/blobs/uploads/", nil)
	req.SetBasicAuth("u", "another-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("API server down: %d, want 503", resp.StatusCode)
	}
}

func TestParse(t *testing.T) {
	for path, want := range map[string]string{
		"/v2/ns/app/manifests/latest":         "ns/app manifests",
		"/v2/ns/a/b/blobs/sha256:00":          "ns/a/b blobs",
		"/v2/ns/app/blobs/uploads/":           "ns/app blobs",
		"/v2/ns/app/tags/list":                "ns/app tags",
		"/v2/ns/manifests/x/manifests/latest": "ns/manifests/x manifests",
		"/v2/_catalog":                        "",
		"/v2/ns/../x/manifests/1":             "",
	} {
		repo, kind, ok := parse(path)
		got := ""
		if ok {
			got = repo + " " + kind
		}
		if got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
}
