package ingress

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/devtool/devtool/internal/platform/ingress/ingresstest"
)

const (
	testNS     = "devtool-system"
	testDomain = "devtool.localhost"
)

// testCert makes a CA and a certificate for hosts signed by it (PEM).
func testCert(t testing.TB, hosts ...string) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caT := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caT, caT, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	lt := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: hosts[0]}, DNSNames: hosts,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, lt, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})
}

// fixture is the ingress on a fake cluster, serving TLS on loopback, with backends on loopback.
type fixture struct {
	t      testing.TB
	cs     *fake.Clientset
	c      *Controller
	srv    *httptest.Server
	ca     []byte
	keys   *Keys
	cancel context.CancelFunc
}

func tlsSecret(cert, key []byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "devtool-ingress-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key}}
}

func newFixture(t testing.TB, waker Waker, objs ...runtime.Object) *fixture {
	t.Helper()
	ca, cert, key := testCert(t, "*."+testDomain, testDomain)
	cs := fake.NewClientset(append(objs, tlsSecret(cert, key))...)
	keys, err := NewKeys()
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	}
	c, err := New(Options{Client: cs, Class: "devtool", Namespace: testNS, TLSSecret: "devtool-ingress-tls", Domain: testDomain, Strict: true,
		Keys: keys, PlatformURL: "https://" + testDomain + ":9443", Waker: waker, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := c.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(c.Handler())
	srv.TLS = c.TLSConfig()
	srv.StartTLS()
	f := &fixture{t: t, cs: cs, c: c, srv: srv, ca: ca, keys: keys, cancel: cancel}
	t.Cleanup(func() {
		srv.Close()
		c.CloseIdleConnections()
		cancel()
	})
	return f
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// client trusts the fixture's CA and dials every name on the test server.
func (f *fixture) client(jar http.CookieJar) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(f.ca)
	addr := f.srv.Listener.Addr().String()
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		ForceAttemptHTTP2: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}
	f.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (f *fixture) url(host, path string) string {
	_, port, _ := net.SplitHostPort(f.srv.Listener.Addr().String())
	return "https://" + host + ":" + port + path
}

// waitFor polls cond (the informers deliver asynchronously) for up to 10 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func service(ns, name string, headless bool) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}}}
	if headless {
		s.Spec.ClusterIP = corev1.ClusterIPNone
	}
	return s
}

// slice is one EndpointSlice of svc with a ready endpoint per address ("127.0.0.1:port" all on one
// port: one slice per port).
func slice(ns, svc, name string, port int, ready bool, ips ...string) *discoveryv1.EndpointSlice {
	p, pn, proto := int32(port), "http", corev1.ProtocolTCP
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Name: &pn, Port: &p, Protocol: &proto}}}
	for _, ip := range ips {
		r := ready
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &r}})
	}
	return s
}

func ingressOf(ns, name, host, svc string, annotations map[string]string) *networkingv1.Ingress {
	class, prefix := "devtool", networkingv1.PathTypePrefix
	return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations, CreationTimestamp: metav1.Now()},
		Spec: networkingv1.IngressSpec{IngressClassName: &class, Rules: []networkingv1.IngressRule{{Host: host,
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{
				{Path: "/", PathType: &prefix, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Number: 80}}}}}}}}}}}
}

// backend serves ingresstest.Handler plus /hold (one line, then waits for release) on loopback.
func backend(t testing.TB, name string, release <-chan struct{}) (port int) {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/", ingresstest.Handler(name))
	mux.HandleFunc("/hold", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "first")
		_ = http.NewResponseController(w).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		fmt.Fprintln(w, "second")
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	_, p, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ = strconv.Atoi(p)
	return port
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

func get(t *testing.T, c *http.Client, u string) (int, string, http.Header) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func TestProxyServesWebSocketsAndStreams(t *testing.T) {
	release := make(chan struct{})
	port := backend(t, "web-1", release)
	host := "web-shop." + testDomain
	f := newFixture(t, nil,
		service("shop", "web", false),
		slice("shop", "web", "web-a", port, true, "127.0.0.1"),
		ingressOf("shop", "web", host, "web", nil),
		// another class: never served
		func() *networkingv1.Ingress {
			i := ingressOf("shop", "other", "other-shop."+testDomain, "web", nil)
			cls := "nginx"
			i.Spec.IngressClassName = &cls
			return i
		}(),
	)
	c := f.client(nil)

	code, body, _ := get(t, c, f.url(host, "/echo?x=1"))
	var seen ingresstest.Request
	if err := json.Unmarshal([]byte(body), &seen); code != 200 || err != nil {
		t.Fatalf("GET /echo: %d %s", code, body)
	}
	_, port2, _ := net.SplitHostPort(f.srv.Listener.Addr().String())
	if seen.Host != host+":"+port2 || seen.Path != "/echo" || seen.Query != "x=1" ||
		first(seen.Headers["X-Forwarded-Proto"]) != "https" || first(seen.Headers["X-Forwarded-Host"]) != host+":"+port2 || first(seen.Headers["X-Forwarded-For"]) != "127.0.0.1" {
		t.Errorf("the backend saw %+v", seen)
	}
	if code, _, _ := get(t, c, f.url("other-shop."+testDomain, "/")); code != http.StatusNotFound {
		t.Errorf("an Ingress of another class answered %d", code)
	}
	if code, body, _ := get(t, c, f.url(host, "/public/../echo")); code != 200 || !strings.Contains(body, `"path":"/echo"`) {
		t.Errorf("dot segments: %d %s", code, body)
	}

	// WebSocket through the proxy.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(f.ca)
	d := websocket.Dialer{TLSClientConfig: &tls.Config{RootCAs: pool}, NetDialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, f.srv.Listener.Addr().String())
	}}
	ws, resp, err := d.Dial(strings.Replace(f.url(host, "/ws"), "https", "wss", 1), nil)
	if err != nil {
		t.Fatalf("websocket: %v (%v)", err, resp)
	}
	for i := range 3 {
		msg := fmt.Sprintf("hello %d", i)
		if err := ws.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		_, got, err := ws.ReadMessage()
		if err != nil || string(got) != msg {
			t.Fatalf("echo %q: %q %v", msg, got, err)
		}
	}
	ws.Close()

	// Streaming: the first line arrives while the backend still holds the response open.
	resp, err = c.Get(f.url(host, "/hold"))
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("first line: %q %v", line, err)
	}
	close(release)
	rest, _ := io.ReadAll(br)
	resp.Body.Close()
	if string(rest) != "second\n" {
		t.Errorf("rest: %q", rest)
	}
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// TestProxyEndpoints: ready endpoints only, a refused dial retried on another endpoint, a headless
// Service, updates followed, no endpoint → 503.
func TestProxyEndpoints(t *testing.T) {
	good := backend(t, "good", nil)
	dead := closedPort(t)
	host := "web-shop." + testDomain
	headlessHost := "db-shop." + testDomain
	f := newFixture(t, nil,
		service("shop", "web", false),
		slice("shop", "web", "web-dead", dead, true, "127.0.0.1"),      // ready but refuses: kube-proxy lag, a pod just gone
		slice("shop", "web", "web-good", good, true, "127.0.0.1"),      // the one that answers
		slice("shop", "web", "web-notready", dead, false, "127.0.0.2"), // never tried
		ingressOf("shop", "web", host, "web", nil),
		service("shop", "db", true),
		slice("shop", "db", "db-a", good, true, "127.0.0.1"),
		ingressOf("shop", "db", headlessHost, "db", nil),
	)
	c := f.client(nil)
	for i := range 20 {
		if code, body, _ := get(t, c, f.url(host, "/small")); code != 200 || body != "ok good\n" {
			t.Fatalf("request %d: %d %q", i, code, body)
		}
	}
	if code, body, _ := get(t, c, f.url(headlessHost, "/small")); code != 200 || body != "ok good\n" {
		t.Errorf("headless: %d %q", code, body)
	}
	// a POST with a body is retried too when the dial was refused (nothing was sent)
	for i := range 5 {
		resp, err := c.Post(f.url(host, "/echo"), "text/plain", strings.NewReader("payload"))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("POST %d: %v %v", i, err, resp)
		}
		resp.Body.Close()
	}

	// the good endpoint goes away: 503 naming the service
	ctx := context.Background()
	if err := f.cs.DiscoveryV1().EndpointSlices("shop").Delete(ctx, "web-good", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.cs.DiscoveryV1().EndpointSlices("shop").Delete(ctx, "web-dead", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "503 without endpoints", func() bool {
		code, body, _ := get(t, c, f.url(host, "/small"))
		return code == http.StatusServiceUnavailable && strings.Contains(body, "shop/web")
	})
	// and comes back
	if _, err := f.cs.DiscoveryV1().EndpointSlices("shop").Create(ctx, slice("shop", "web", "web-back", good, true, "127.0.0.1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new endpoint", func() bool { code, _, _ := get(t, c, f.url(host, "/small")); return code == 200 })

	// a new Ingress is served once seen; a deleted one no longer
	if _, err := f.cs.NetworkingV1().Ingresses("shop").Create(ctx, ingressOf("shop", "new", "new-shop."+testDomain, "web", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new Ingress", func() bool { code, _, _ := get(t, c, f.url("new-shop."+testDomain, "/small")); return code == 200 })
	if err := f.cs.NetworkingV1().Ingresses("shop").Delete(ctx, "new", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the Ingress gone", func() bool { code, _, _ := get(t, c, f.url("new-shop."+testDomain, "/small")); return code == 404 })
}

// TestProxyCertificateReload: a changed TLS Secret is served to the next handshake.
func TestProxyCertificateReload(t *testing.T) {
	f := newFixture(t, nil)
	serial := func() string {
		conn, err := tls.Dial("tcp", f.srv.Listener.Addr().String(), &tls.Config{ServerName: "x." + testDomain, InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return string(conn.ConnectionState().PeerCertificates[0].Raw)
	}
	before := serial()
	_, cert, key := testCert(t, "*."+testDomain)
	if _, err := f.cs.CoreV1().Secrets(testNS).Update(context.Background(), tlsSecret(cert, key), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(cert)
	waitFor(t, "the new certificate", func() bool { return serial() == string(blk.Bytes) })
	if before == string(blk.Bytes) {
		t.Fatal("the certificates are the same")
	}
	// a broken Secret keeps the last good certificate
	if _, err := f.cs.CoreV1().Secrets(testNS).Update(context.Background(), tlsSecret([]byte("junk"), key), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := serial(); got != string(blk.Bytes) {
		t.Error("a broken Secret replaced the certificate")
	}
}

type fakeWaker struct {
	f    *fixture
	port int
	mu   sync.Mutex
	n    int
}

func (w *fakeWaker) Wake(ctx context.Context, b Backend) error {
	w.mu.Lock()
	w.n++
	w.mu.Unlock()
	_, err := w.f.cs.DiscoveryV1().EndpointSlices(b.Namespace).Create(ctx, slice(b.Namespace, b.Service, "woken", w.port, true, "127.0.0.1"), metav1.CreateOptions{})
	return err
}

func TestProxyWakesSleepingBackend(t *testing.T) {
	w := &fakeWaker{port: backend(t, "woken", nil)}
	host := "web-shop." + testDomain
	f := newFixture(t, w, service("shop", "web", false), ingressOf("shop", "web", host, "web", nil))
	w.f = f
	if code, body, _ := get(t, f.client(nil), f.url(host, "/small")); code != 200 || body != "ok woken\n" {
		t.Fatalf("woken: %d %q", code, body)
	}
	if w.n != 1 {
		t.Errorf("Wake called %d times", w.n)
	}
}

// TestProxyWokenBackendListensLate: the woken pod's endpoint is ready before its server
// listens (a pod without a readiness probe); the request that woke it waits for the server
// instead of answering 502. A backend that is not woken by the request gets no such wait.
func TestProxyWokenBackendListensLate(t *testing.T) {
	port := closedPort(t)
	w := &fakeWaker{port: port}
	host := "web-shop." + testDomain
	f := newFixture(t, w, service("shop", "web", false), ingressOf("shop", "web", host, "web", nil))
	w.f = f
	listening := make(chan struct{})
	go func() {
		defer close(listening)
		time.Sleep(700 * time.Millisecond)
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Error(err)
			return
		}
		srv := &http.Server{Handler: ingresstest.Handler("late")}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
	}()
	if code, body, _ := get(t, f.client(nil), f.url(host, "/small")); code != 200 || body != "ok late\n" {
		t.Fatalf("woken, listening late: %d %q", code, body)
	}
	<-listening

	// Not woken by the request (the endpoint exists): a refused dial answers 502 at once.
	closed := closedPort(t)
	f2 := newFixture(t, nil, service("shop", "web", false), slice("shop", "web", "web-a", closed, true, "127.0.0.1"),
		ingressOf("shop", "web", host, "web", nil))
	if code, _, _ := get(t, f2.client(nil), f2.url(host, "/small")); code != http.StatusBadGateway {
		t.Fatalf("refused, not woken: %d, want 502", code)
	}
}

// TestPrivateEndpoint: anonymous → the platform's login; the token form → a ticket → the cookie →
// served to a member; a non-member refused; the cookie never reaches the backend; a forged or
// foreign-host ticket refused.
func TestPrivateEndpoint(t *testing.T) {
	port := backend(t, "private", nil)
	host := "web-shop." + testDomain
	f := newFixture(t, nil,
		service("shop", "web", false),
		slice("shop", "web", "web-a", port, true, "127.0.0.1"),
		ingressOf("shop", "web", host, "web", map[string]string{AnnotationPrivate: "true"}),
		ingressOf("shop", "pub", "pub-shop."+testDomain, "web", nil),
		// a namespace whose Ingresses are private by default (previews)
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pv-1", Annotations: map[string]string{AnnotationPrivate: "true"}}},
		service("pv-1", "web", false),
		slice("pv-1", "web", "web-a", port, true, "127.0.0.1"),
		ingressOf("pv-1", "web", "web-pv-1."+testDomain, "web", nil),
		ingressOf("pv-1", "open", "open-pv-1."+testDomain, "web", map[string]string{AnnotationPrivate: "false"}),
	)
	alice, bob := "system:serviceaccount:devtool-system:u-alice", "system:serviceaccount:devtool-system:u-bob"
	var reviews []authorizationv1.SubjectAccessReviewSpec
	var mu sync.Mutex
	f.cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		mu.Lock()
		reviews = append(reviews, sar.Spec)
		mu.Unlock()
		sar.Status.Allowed = sar.Spec.User == alice
		return true, sar, nil
	})
	tokens := map[string]Identity{"tok-alice": {User: "alice", KubeUser: alice}, "tok-bob": {User: "bob", KubeUser: bob}}
	loginSrv := httptest.NewTLSServer(LoginHandler(LoginOptions{Key: f.keys.TicketKey, Domain: testDomain,
		Authenticate: func(_ context.Context, tok string) (Identity, error) {
			if id, ok := tokens[tok]; ok {
				return id, nil
			}
			return Identity{}, ErrBadCredentials
		}}))
	defer loginSrv.Close()

	// Public routes need nothing; private ones redirect a browser to the login, refuse others.
	anon := f.client(nil)
	if code, _, _ := get(t, anon, f.url("pub-shop."+testDomain, "/small")); code != 200 {
		t.Errorf("public: %d", code)
	}
	if code, _, _ := get(t, anon, f.url("open-pv-1."+testDomain, "/small")); code != 200 {
		t.Errorf("annotated public in a private namespace: %d", code)
	}
	for _, h := range []string{host, "web-pv-1." + testDomain} {
		code, _, hdr := get(t, anon, f.url(h, "/small?a=b"))
		loc, _ := url.Parse(hdr.Get("Location"))
		if code != http.StatusFound || loc == nil || loc.Host != testDomain+":9443" || loc.Path != LoginPath || loc.Query().Get("rd") != f.url(h, "/small?a=b") {
			t.Errorf("%s anonymous: %d %s", h, code, hdr.Get("Location"))
		}
	}
	req, _ := http.NewRequest(http.MethodPost, f.url(host, "/echo"), strings.NewReader("x"))
	if resp, err := anon.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous POST: %v %v", err, resp)
	} else {
		resp.Body.Close()
	}

	// signIn follows the whole dance with a browser-like client (a cookie jar), through the login
	// server for the platform's host.
	signIn := func(token string) *http.Client {
		jar, _ := cookiejar.New(nil)
		c := f.client(jar)
		lc := loginSrv.Client()
		code, _, hdr := get(t, c, f.url(host, "/echo?q=1"))
		if code != http.StatusFound {
			t.Fatalf("first visit: %d", code)
		}
		loc, _ := url.Parse(hdr.Get("Location"))
		// the form
		code, page, _ := get(t, lc, loginSrv.URL+loc.RequestURI())
		if code != 200 || !strings.Contains(page, `name="token"`) || !strings.Contains(page, "web-shop."+testDomain) {
			t.Fatalf("login page: %d %s", code, page)
		}
		lc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		resp, err := lc.PostForm(loginSrv.URL+LoginPath, url.Values{"token": {token}, "rd": {loc.Query().Get("rd")}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("login POST: %d", resp.StatusCode)
		}
		back, _ := url.Parse(resp.Header.Get("Location"))
		if back.Hostname() != host || back.Path != AuthPath {
			t.Fatalf("hand-over to %s", back)
		}
		code, _, hdr = get(t, c, back.String())
		if code != http.StatusSeeOther || hdr.Get("Location") != "/echo?q=1" || !strings.Contains(hdr.Get("Set-Cookie"), CookieName) {
			t.Fatalf("ticket: %d %v", code, hdr)
		}
		for _, want := range []string{"Secure", "HttpOnly", "SameSite=Lax", "Path=/"} {
			if !strings.Contains(hdr.Get("Set-Cookie"), want) {
				t.Errorf("cookie lacks %s: %s", want, hdr.Get("Set-Cookie"))
			}
		}
		return c
	}
	ac := signIn("tok-alice")
	code, body, _ := get(t, ac, f.url(host, "/echo?q=1"))
	if code != 200 || strings.Contains(body, CookieName) {
		t.Errorf("alice: %d %s", code, body)
	}
	mu.Lock()
	last := reviews[len(reviews)-1]
	mu.Unlock()
	if last.User != alice || last.ResourceAttributes.Namespace != "shop" || last.ResourceAttributes.Verb != "get" ||
		last.ResourceAttributes.Resource != "services" || last.ResourceAttributes.Name != "web" || !contains(last.Groups, "system:serviceaccounts:devtool-system") {
		t.Errorf("review: %+v", last)
	}
	// the cookie is for its host only: another private host asks again
	if code, _, _ := get(t, ac, f.url("web-pv-1."+testDomain, "/small")); code != http.StatusFound {
		t.Errorf("alice on another host without signing in there: %d", code)
	}
	bc := signIn("tok-bob")
	if code, body, _ := get(t, bc, f.url(host, "/small")); code != http.StatusForbidden || !strings.Contains(body, "bob") {
		t.Errorf("bob: %d %s", code, body)
	}

	// a bad token shows the form again, 401
	resp, err := loginSrv.Client().PostForm(loginSrv.URL+LoginPath, url.Values{"token": {"nope"}, "rd": {f.url(host, "/")}})
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("bad token: %v %v", err, resp)
	} else {
		resp.Body.Close()
	}
	// rd must be an endpoint: no ticket for another site, nor for the platform itself
	for _, rd := range []string{"https://evil.example.com/", "http://web-shop." + testDomain + "/", "https://" + testDomain + "/", "https://a.b." + testDomain + "/", "//x"} {
		code, _, _ := get(t, loginSrv.Client(), loginSrv.URL+LoginPath+"?rd="+url.QueryEscape(rd))
		if code != http.StatusBadRequest {
			t.Errorf("rd %s: %d", rd, code)
		}
	}
	// tickets: forged, expired, for another host, and an open redirect in rd
	now := time.Now()
	aliceID := Identity{User: "alice", KubeUser: alice}
	other, err := NewKeys()
	if err != nil {
		t.Fatal(err)
	}
	for name, tk := range map[string]string{
		"forged":  mustTicket(t, other.TicketKey, aliceID, host, now),
		"expired": mustTicket(t, f.keys.TicketKey, aliceID, host, now.Add(-2*TicketTTL)),
		"foreign": mustTicket(t, f.keys.TicketKey, aliceID, "pub-shop."+testDomain, now),
		"garbage": "abc.def",
	} {
		if code, _, hdr := get(t, anon, f.url(host, AuthPath+"?ticket="+url.QueryEscape(tk)+"&rd=/")); code != http.StatusBadRequest || hdr.Get("Set-Cookie") != "" {
			t.Errorf("%s ticket: %d", name, code)
		}
	}
	good := mustTicket(t, f.keys.TicketKey, aliceID, host, now)
	if code, _, hdr := get(t, anon, f.url(host, AuthPath+"?ticket="+url.QueryEscape(good)+"&rd=//evil.example.com/")); code != http.StatusSeeOther || hdr.Get("Location") != "/" {
		t.Errorf("open redirect: %d %s", code, hdr.Get("Location"))
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func mustTicket(t *testing.T, key []byte, id Identity, host string, now time.Time) string {
	t.Helper()
	tk, err := SignTicket(key, id, host, now)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// TestControllerStopsEverything: after serving (a WebSocket included) and being stopped, no
// goroutine of the controller, its informers or its connections is left.
func TestControllerStopsEverything(t *testing.T) {
	port := backend(t, "leak", nil)
	before := goruntime.NumGoroutine()
	host := "web-shop." + testDomain
	ctx, cancel := context.WithCancel(context.Background())
	ca, cert, key := testCert(t, "*."+testDomain)
	cs := fake.NewClientset(tlsSecret(cert, key), service("shop", "web", false), slice("shop", "web", "a", port, true, "127.0.0.1"), ingressOf("shop", "web", host, "web", nil))
	c, err := New(Options{Client: cs, Class: "devtool", Namespace: testNS, TLSSecret: "devtool-ingress-tls", Domain: testDomain, Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(c.Handler())
	srv.TLS = c.TLSConfig()
	srv.StartTLS()
	f := &fixture{t: t, srv: srv, ca: ca}
	cl := f.client(nil)
	if code, _, _ := get(t, cl, f.url(host, "/small")); code != 200 {
		t.Fatalf("GET: %d", code)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	d := websocket.Dialer{TLSClientConfig: &tls.Config{RootCAs: pool}, NetDialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, srv.Listener.Addr().String())
	}}
	ws, _, err := d.Dial(strings.Replace(f.url(host, "/ws"), "https", "wss", 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	ws.Close()
	cl.CloseIdleConnections()
	srv.CloseClientConnections()
	srv.Close()
	c.CloseIdleConnections()
	cancel()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := goruntime.NumGoroutine()
		if n <= before {
			break
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before, %d after stopping:\n%s", before, n, buf[:goruntime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}
