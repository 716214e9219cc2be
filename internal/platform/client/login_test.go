package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/devtool/devtool/internal/errs"
	"github.com/devtool/devtool/internal/platform/client"
)

// TestPasswordLoginRetriesBusy: a 429 is tried again after its Retry-After, at most 3 tries; a 401
// is not tried again and is exit 4.
func TestPasswordLoginRetriesBusy(t *testing.T) {
	var calls atomic.Int32
	var busyFor atomic.Int32
	busyFor.Store(2)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path != "/api/v1/login":
			w.WriteHeader(404)
		case n <= busyFor.Load():
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(429)
			_, _ = w.Write([]byte(`{"error":{"code":"rate_limited","message":"busy"}}`))
		case busyFor.Load() < 0:
			w.WriteHeader(401)
			_, _ = w.Write([]byte(`{"error":{"code":"unauthorized","message":"wrong user name or password"}}`))
		default:
			_, _ = w.Write([]byte(`{"id":"0123456789abcdef","owner":"alice","token":"dvt_x"}`))
		}
	}))
	defer srv.Close()
	pc, err := client.New(client.Options{URL: srv.URL, CA: certPEM(srv)})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	tok, err := pc.PasswordLogin(context.Background(), "alice", "pw", "t")
	if err != nil || tok.Token != "dvt_x" || calls.Load() != 3 {
		t.Fatalf("after two 429: %+v %v (%d calls)", tok, err, calls.Load())
	}
	calls.Store(0)
	busyFor.Store(5)
	if _, err := pc.PasswordLogin(context.Background(), "alice", "pw", "t"); client.StatusOf(err) != 429 || calls.Load() != 3 {
		t.Fatalf("always busy: %v (%d calls)", err, calls.Load())
	}
	calls.Store(0)
	busyFor.Store(-1)
	if _, err := pc.PasswordLogin(context.Background(), "alice", "pw", "t"); errs.ExitCode(err) != errs.ExitAuth || calls.Load() != 1 {
		t.Fatalf("refused: exit %d %v (%d calls)", errs.ExitCode(err), err, calls.Load())
	}
}
