package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/platform/api"
)

// TestDeviceSlowDown: a pending device login polled sooner than its interval answers slow_down
// (RFC 8628 §3.5) and its interval grows by 5 seconds; polled at the interval it stays pending;
// once approved, the token comes whatever the timing, and the code is forgotten.
func TestDeviceSlowDown(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	ts, _, st := newTestServerOptions(t, func(o *Options) { o.Now = clock })
	ctx := context.Background()
	dc, uc, err := st.CreateDeviceLogin(ctx, "test", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	poll := func() string {
		t.Helper()
		resp, err := ts.Client().PostForm(ts.URL+api.TokenPath, url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:device_code"},
			"client_id": {api.CLIClientID}, "device_code": {dc}})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		if tok, _ := m["access_token"].(string); tok != "" {
			return "token"
		}
		s, _ := m["error"].(string)
		return s
	}
	steps := []struct {
		after time.Duration
		want  string
	}{
		{0, "authorization_pending"},                                // the first poll
		{devicePollInterval * time.Second, "authorization_pending"}, // at the interval
		{time.Second, "slow_down"},                                  // too soon: the interval is now 7 s
		{devicePollInterval * time.Second, "slow_down"},             // 2 s is too soon for 7 s: 12 s now
		{12 * time.Second, "authorization_pending"},                 // at the grown interval
	}
	for i, s := range steps {
		advance(s.after)
		if got := poll(); got != s.want {
			t.Fatalf("poll %d (+%s): %s, want %s", i, s.after, got, s.want)
		}
	}
	if err := st.DecideDeviceLogin(ctx, uc, "admin", true); err != nil {
		t.Fatal(err)
	}
	if got := poll(); got != "token" { // approved: no slow_down, however soon
		t.Fatalf("approved, polled at once: %s", got)
	}
	if got := poll(); got != "invalid_grant" {
		t.Fatalf("the device code used twice: %s", got)
	}
}

// TestDevicePollsBounded: the per-replica record of polls never holds more than maxDevicePolls
// codes; expired ones make room, and an untracked code is never slowed down.
func TestDevicePollsBounded(t *testing.T) {
	now := time.Now()
	p := devicePolls{now: func() time.Time { return now }}
	for i := 0; i < maxDevicePolls+10; i++ {
		if p.tooSoon(fmt.Sprint("code-", i)) {
			t.Fatalf("a first poll answered slow_down")
		}
	}
	if len(p.m) != maxDevicePolls {
		t.Fatalf("%d codes kept, want %d", len(p.m), maxDevicePolls)
	}
	if p.tooSoon("untracked") || p.tooSoon("untracked") {
		t.Fatal("an untracked code was slowed down")
	}
	now = now.Add(deviceLoginLifetime + time.Second)
	if p.tooSoon("new") || len(p.m) != 1 {
		t.Fatalf("after expiry: %d codes kept, want 1", len(p.m))
	}
	if !p.tooSoon("new") {
		t.Fatal("a second poll at once was not slowed down")
	}
}
