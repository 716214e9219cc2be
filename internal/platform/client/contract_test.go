package client_test

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/devtool/devtool/internal/errs"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/client"
	"github.com/devtool/devtool/internal/platform/server"
	"github.com/devtool/devtool/internal/platform/store/storetest"
)

// realServer runs the platform's own HTTP handler (internal/platform/server) over fake Kubernetes
// clients, behind TLS: a contract test of the client against the server's routes, codes and bodies.
// (The fakes enforce no RBAC; the e2e test on the local cluster covers isolation.)
func realServer(t *testing.T) (url string, ca []byte, adminToken string) {
	t.Helper()
	st, _ := storetest.New(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	_, tok, err := st.CreateUser(ctx, "admin", true, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(server.Options{Store: st, Info: api.Info{Version: "test", APIServer: "https://127.0.0.1:6443", Domain: "devtool.localhost"},
		AddrRate: rate.Inf, AccountRate: rate.Inf})
	ts := httptest.NewTLSServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts.URL, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), tok
}

// eventually retries f until it succeeds: the server reads through informers, which the fake
// clients feed asynchronously (the server's own tests do the same).
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestContractWithTheRealServer(t *testing.T) {
	url, ca, adminTok := realServer(t)
	ctx := context.Background()
	admin, err := client.New(client.Options{URL: url, Token: adminTok, CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	info, err := admin.Info(ctx)
	if err != nil || info.APIServer != "https://127.0.0.1:6443" || client.CheckVersions(info, "v1.0.0", url) != nil {
		t.Fatalf("info: %+v %v", info, err)
	}
	var alice, bob *client.Client
	for _, name := range []string{"alice", "bob"} {
		var r *api.CreateUserResponse
		eventually(t, "create "+name, func() (err error) { r, err = admin.CreateUser(ctx, api.CreateUserRequest{Name: name}); return err })
		if _, ok := client.TokenID(r.Token); !ok {
			t.Fatalf("token of %s has not the contract's shape", name)
		}
		c, _ := client.New(client.Options{URL: url, Token: r.Token, CA: ca})
		t.Cleanup(c.Close)
		if name == "alice" {
			alice = c
		} else {
			bob = c
		}
	}
	eventually(t, "alice's me", func() error {
		me, err := alice.Me(ctx)
		if err == nil && me.Name != "alice" {
			return errors.New("me is " + me.Name)
		}
		return err
	})
	ns, created, err := alice.CreateNamespace(ctx, "shop")
	if err != nil || !created || ns.Name != "shop" {
		t.Fatalf("create: %+v %v %v", ns, created, err)
	}
	eventually(t, "create again (idempotent)", func() error {
		_, created, err := alice.CreateNamespace(ctx, "shop")
		if err == nil && created {
			return errors.New("created twice")
		}
		return err
	})
	if _, _, err := alice.CreateNamespace(ctx, "Bad_Name"); client.StatusOf(err) != 400 {
		t.Errorf("bad name: %v", err)
	} else if ae := (*client.APIError)(nil); errors.As(err, &ae) && ae.Field != "name" {
		t.Errorf("bad name field: %+v", ae)
	}
	eventually(t, "list", func() error {
		l, err := alice.Namespaces(ctx)
		if err == nil && !slices.ContainsFunc(l, func(n api.Namespace) bool { return n.Name == "shop" }) {
			return errors.New("shop not listed")
		}
		return err
	})
	if _, err := bob.Namespace(ctx, "shop"); !client.IsNotFound(err) {
		t.Errorf("bob reads alice's namespace: %v, want 404", err)
	}
	if _, _, err := bob.CreateNamespace(ctx, "shop"); client.StatusOf(err) != 409 {
		t.Errorf("bob creates alice's namespace: %v, want 409", err)
	}
	if err := alice.Share(ctx, "shop", "bob", api.RoleViewer); err != nil {
		t.Fatalf("share: %v", err)
	}
	eventually(t, "bob sees shop", func() error { _, err := bob.Namespace(ctx, "shop"); return err })
	if err := alice.Unshare(ctx, "shop", "bob"); err != nil {
		t.Fatalf("unshare: %v", err)
	}
	if err := alice.DeleteNamespace(ctx, "shop"); err != nil {
		t.Fatalf("delete: %v", err)
	}

	toks, err := alice.Tokens(ctx)
	if err != nil || len(toks) == 0 {
		t.Fatalf("tokens: %v %v", toks, err)
	}
	for _, tk := range toks {
		if err := alice.RevokeToken(ctx, tk.ID); err != nil {
			t.Fatalf("revoke: %v", err)
		}
	}
	eventually(t, "revoked token refused", func() error {
		_, err := alice.Me(ctx)
		if errs.ExitCode(err) != errs.ExitAuth {
			return errors.New("not refused with exit 4")
		}
		return nil
	})
}
