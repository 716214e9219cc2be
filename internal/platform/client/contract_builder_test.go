package client_test

import (
	"context"
	"testing"

	"github.com/devtool/devtool/internal/platform/client"
	"github.com/devtool/devtool/internal/platform/pki"
)

// The client's POST /builder/credentials against the real handler: a platform without a build
// service answers 404, which the client reports as such.
func TestContractBuilderCredentialsWithoutBuildService(t *testing.T) {
	url, ca, tok := realServer(t)
	c, err := client.New(client.Options{URL: url, Token: tok, CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, csr, err := pki.NewClientKey("admin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.BuilderCredentials(context.Background(), csr, 0); !client.IsNotFound(err) {
		t.Fatalf("want 404, got %v", err)
	}
}
