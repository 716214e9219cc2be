//go:build integration

package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/client"
	"github.com/devtool/devtool/internal/platform/install"
	"github.com/devtool/devtool/internal/testcluster"
)

// BenchmarkPlatformLogins: 50 users at once against the platform's 2 replicas (through its
// Service), each with its own connection: (a) with its API token, list its namespaces; (b) log in
// with its password (argon2id, at most a few hashes at once per replica), then list its
// namespaces with the new token (the CLI's client, which tries a 429 again after its Retry-After).
// Both in the same run; reports p50/p99 of each, the errors (want
// none) and the ratio of the password login to the token request.
//
//	go test -tags integration -run '^$' -bench PlatformLogins -benchtime 1x ./internal/platform/server/
func BenchmarkPlatformLogins(b *testing.B) {
	const users = 50
	const pw = "correct horse battery"
	c := testcluster.Connect(b)
	p := connectPlatform(b, c)
	s := suffix()
	names := make([]string, users)
	tokens := make([]string, users)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range names {
		names[i] = fmt.Sprintf("bench%02d-%s", i, s)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			r := doWith(b, p.client, p.url, "POST", "/users", p.admin, api.CreateUserRequest{Name: names[i], Password: pw})
			var cu api.CreateUserResponse
			if r.status != 201 || json.Unmarshal(r.body, &cu) != nil {
				b.Errorf("creating %s: %d %s", names[i], r.status, r.body)
				return
			}
			tokens[i] = cu.Token
		}(i)
	}
	wg.Wait()
	b.Cleanup(func() {
		for _, n := range names {
			doWith(b, p.client, p.url, "DELETE", "/users/"+n, p.admin, nil)
			_ = c.Clientset.CoreV1().Namespaces().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	if b.Failed() {
		b.FailNow()
	}
	for i := 0; i < b.N; i++ {
		tok := storm(b, p, users, func(j int, hc *http.Client) (time.Duration, error) {
			start := time.Now()
			r := doWith(b, hc, p.url, "GET", "/namespaces", tokens[j], nil)
			if r.status != 200 {
				return 0, fmt.Errorf("list: %d %s", r.status, r.body)
			}
			return time.Since(start), nil
		})
		pass := storm(b, p, users, func(j int, hc *http.Client) (time.Duration, error) {
			start := time.Now()
			// The CLI's own client: a 429 (too many hashes waiting) is tried again after Retry-After.
			pc, err := client.New(client.Options{URL: p.url, CA: p.ca})
			if err != nil {
				return 0, err
			}
			defer pc.Close()
			t, err := pc.PasswordLogin(context.Background(), names[j], pw, "bench")
			if err != nil {
				return 0, fmt.Errorf("login: %w", err)
			}
			if r := doWith(b, hc, p.url, "GET", "/namespaces", t.Token, nil); r.status != 200 {
				return 0, fmt.Errorf("list: %d %s", r.status, r.body)
			}
			return time.Since(start), nil
		})
		b.ReportMetric(tok.p50.Seconds(), "token-p50-s")
		b.ReportMetric(tok.p99.Seconds(), "token-p99-s")
		b.ReportMetric(pass.p50.Seconds(), "password-p50-s")
		b.ReportMetric(pass.p99.Seconds(), "password-p99-s")
		b.ReportMetric(float64(tok.errors+pass.errors), "errors")
		b.ReportMetric(pass.p50.Seconds()/tok.p50.Seconds(), "p50-ratio")
		b.Logf("%d users at once: token+list p50 %s p99 %s (%d errors); password login+list p50 %s p99 %s (%d errors)",
			users, tok.p50, tok.p99, tok.errors, pass.p50, pass.p99, pass.errors)
		if tok.errors+pass.errors > 0 {
			b.Errorf("%d errors", tok.errors+pass.errors)
		}
	}
}

type stormResult struct {
	p50, p99 time.Duration
	errors   int
}

// storm runs f for n users at once (a barrier starts them together), each with its own client.
func storm(b *testing.B, p *platform, n int, f func(int, *http.Client) (time.Duration, error)) stormResult {
	clients := make([]*http.Client, n)
	for i := range clients {
		hc, err := install.Client(p.ca)
		if err != nil {
			b.Fatal(err)
		}
		clients[i] = hc
		defer hc.CloseIdleConnections()
	}
	var (
		mu    sync.Mutex
		times []time.Duration
		errs  int
		wg    sync.WaitGroup
	)
	gate := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			d, err := f(i, clients[i])
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs++
				b.Log(err)
				return
			}
			times = append(times, d)
		}()
	}
	close(gate)
	wg.Wait()
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	pct := func(q float64) time.Duration {
		if len(times) == 0 {
			return 0
		}
		return times[min(len(times)-1, int(q*float64(len(times))))]
	}
	return stormResult{p50: pct(0.5), p99: pct(0.99), errors: errs}
}
