package ingress

import (
	"crypto/tls"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// BenchmarkProxySmall: small responses from a loopback backend through the proxy (TLS, HTTP/1.1
// and HTTP/2 clients) and directly, same run; the proxy's own cost per request.
//
//	go test -run '^$' -bench ProxySmall -benchmem ./internal/platform/ingress/
func BenchmarkProxySmall(b *testing.B) {
	port := backend(b, "bench", nil)
	host := "web-shop." + testDomain
	f := newFixture(b, nil, service("shop", "web", false), slice("shop", "web", "web-a", port, true, "127.0.0.1"), ingressOf("shop", "web", host, "web", nil))
	for _, c := range []struct {
		name string
		cl   *http.Client
		url  string
	}{
		{"direct", &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}, "http://127.0.0.1:" + strconv.Itoa(port) + "/small"},
		{"proxy-h1", f.clientProto(false), f.url(host, "/small")},
		{"proxy-h2", f.clientProto(true), f.url(host, "/small")},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := c.cl.Get(c.url)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		})
	}
}

func (f *fixture) clientProto(h2 bool) *http.Client {
	c := f.client(nil)
	tr := c.Transport.(*http.Transport)
	tr.MaxIdleConnsPerHost = 64
	if !h2 {
		tr.ForceAttemptHTTP2 = false
		tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	c.Timeout = time.Minute
	return c
}

// BenchmarkProxyDownload: 100 MiB from a loopback backend through the proxy (TLS, HTTP/1.1 and
// HTTP/2) and directly, same run; reports MiB/s.
//
//	go test -run '^$' -bench ProxyDownload -benchtime 3x ./internal/platform/ingress/
func BenchmarkProxyDownload(b *testing.B) {
	port := backend(b, "bench", nil)
	host := "web-shop." + testDomain
	f := newFixture(b, nil, service("shop", "web", false), slice("shop", "web", "web-a", port, true, "127.0.0.1"), ingressOf("shop", "web", host, "web", nil))
	const size = 100 << 20
	path := "/bytes?n=" + strconv.Itoa(size)
	for _, c := range []struct {
		name string
		cl   *http.Client
		url  string
	}{
		{"direct", &http.Client{Transport: &http.Transport{}}, "http://127.0.0.1:" + strconv.Itoa(port) + path},
		{"proxy-h1", f.clientProto(false), f.url(host, path)},
		{"proxy-h2", f.clientProto(true), f.url(host, path)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(size)
			for range b.N {
				resp, err := c.cl.Get(c.url)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || n != size {
					b.Fatalf("%d bytes, %v", n, err)
				}
			}
		})
	}
}
