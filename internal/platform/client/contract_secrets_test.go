package client_test

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"

	"golang.org/x/time/rate"

	"github.com/devtool/devtool/internal/platform/analytics"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/client"
	"github.com/devtool/devtool/internal/platform/server"
	"github.com/devtool/devtool/internal/platform/store"
	"github.com/devtool/devtool/internal/platform/store/storetest"
)

// serverWithAnalytics is realServer with an analytics aggregator whose install default is allow.
func serverWithAnalytics(t *testing.T, allow bool) (admin, alice *client.Client) {
	t.Helper()
	st, kc := storetest.New(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	agg := &analytics.Aggregator{Kube: kc, Namespace: store.DefaultNamespace, Default: allow}
	t.Cleanup(func() { cancel(); agg.Wait() })
	if err := agg.Start(ctx); err != nil {
		t.Fatal(err)
	}
	_, tok, err := st.CreateUser(ctx, "admin", true, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(server.Options{Store: st, Analytics: agg, Info: api.Info{Version: "test", APIServer: "https://127.0.0.1:6443"},
		AddrRate: rate.Inf, AccountRate: rate.Inf})
	ts := httptest.NewTLSServer(srv.Handler())
	t.Cleanup(ts.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw})
	admin, _ = client.New(client.Options{URL: ts.URL, Token: tok, CA: ca})
	t.Cleanup(admin.Close)
	var r *api.CreateUserResponse
	eventually(t, "create alice", func() (err error) { r, err = admin.CreateUser(ctx, api.CreateUserRequest{Name: "alice"}); return err })
	alice, _ = client.New(client.Options{URL: ts.URL, Token: r.Token, CA: ca})
	t.Cleanup(alice.Close)
	eventually(t, "alice known", func() error { _, err := alice.Me(ctx); return err })
	return admin, alice
}

// TestContractStoredSecrets: set, list (names only), resolve (namespace over user over admin) and
// delete through the client against the server's handlers.
func TestContractStoredSecrets(t *testing.T) {
	admin, alice := serverWithAnalytics(t, false)
	ctx := context.Background()
	if _, _, err := alice.CreateNamespace(ctx, "shop"); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(admin.SetSecret(ctx, api.ScopeAdmin, "", "SHARED", "from-admin"))
	must(admin.SetSecret(ctx, api.ScopeAdmin, "", "ONLY_ADMIN", "admin-only"))
	must(alice.SetSecret(ctx, "", "", "SHARED", "from-alice"))
	must(alice.SetSecret(ctx, "", "", "API_KEY", "alice-key"))
	eventually(t, "namespace secret", func() error { return alice.SetSecret(ctx, api.ScopeNamespace, "shop", "API_KEY", "shop-key") })
	if err := alice.SetSecret(ctx, api.ScopeAdmin, "", "X", "y"); client.StatusOf(err) != 403 {
		t.Errorf("alice sets an admin-wide secret: %v, want 403", err)
	}
	if err := alice.SetSecret(ctx, "", "", "bad name", "y"); client.StatusOf(err) != 400 {
		t.Errorf("a bad name: %v, want 400", err)
	}
	names, err := alice.Secrets(ctx, "shop")
	must(err)
	if got := fmt.Sprint(names); got != "[{API_KEY namespace} {API_KEY user} {ONLY_ADMIN admin} {SHARED admin} {SHARED user}]" {
		t.Errorf("names %s", got)
	}
	vals, err := alice.ResolvedSecrets(ctx, "shop")
	must(err)
	want := map[string]string{"SHARED": "from-alice", "ONLY_ADMIN": "admin-only", "API_KEY": "shop-key"}
	if fmt.Sprint(vals) != fmt.Sprint(want) {
		t.Errorf("resolved %v, want %v", vals, want)
	}
	must(alice.DeleteSecret(ctx, "", "", "SHARED"))
	vals, err = alice.ResolvedSecrets(ctx, "")
	must(err)
	if vals["SHARED"] != "from-admin" || vals["API_KEY"] != "alice-key" {
		t.Errorf("after delete, without a namespace: %v", vals)
	}
}

// TestContractAnalytics: the platform accepts events only once its admin allows them, refuses
// fields that are not plain, and shows the admin (only) daily counts.
func TestContractAnalytics(t *testing.T) {
	admin, alice := serverWithAnalytics(t, false)
	ctx := context.Background()
	ev := api.AnalyticsEvent{Command: "deploy", DurationMs: 1234, Success: true, Version: "v1.0.0", OS: "linux", Arch: "amd64",
		InstallID: "0f8fad5b-d9cb-469f-a165-70867728950e"}
	if info, err := alice.Info(ctx); err != nil || info.Analytics {
		t.Fatalf("info %+v %v: analytics allowed by default", info, err)
	}
	if err := alice.SendAnalytics(ctx, ev); client.StatusOf(err) != 403 {
		t.Errorf("event while not allowed: %v, want 403", err)
	}
	if err := alice.SetAnalyticsSettings(ctx, true); client.StatusOf(err) != 403 {
		t.Errorf("alice allows analytics: %v, want 403", err)
	}
	if err := admin.SetAnalyticsSettings(ctx, true); err != nil {
		t.Fatal(err)
	}
	eventually(t, "allowed", func() error {
		if info, err := alice.Info(ctx); err != nil || !info.Analytics {
			return fmt.Errorf("info %+v %v", info, err)
		}
		return nil
	})
	for range 3 {
		if err := alice.SendAnalytics(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	bad := ev
	bad.Command = "deploy --namespace secret-project"
	var ae *client.APIError
	if err := alice.SendAnalytics(ctx, bad); !errors.As(err, &ae) || ae.Status != 400 || ae.Field != "command" {
		t.Errorf("an event naming things: %v, want 400 on command", err)
	}
	if _, err := alice.AnalyticsReport(ctx, 7); client.StatusOf(err) != 403 {
		t.Errorf("alice reads the counts: %v, want 403", err)
	}
	rep, err := admin.AnalyticsReport(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Days) != 1 || len(rep.Days[0].Counts) != 1 || rep.Days[0].Counts[0].Count != 3 ||
		rep.Days[0].Counts[0].TotalDurationMs != 3*1234 || rep.Days[0].Installs != 1 {
		t.Errorf("report %+v", rep)
	}
	if _, err := admin.AnalyticsReport(ctx, 365); client.StatusOf(err) != 400 {
		t.Errorf("a year of days: %v, want 400", err)
	}
}
