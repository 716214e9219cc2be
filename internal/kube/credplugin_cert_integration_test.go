//go:build integration && unix

package kube_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/testcluster"
)

// TestCredentialPluginCertificateOnCluster: a kubeconfig user that is an exec plugin answering
// with a client certificate (the local cluster's admin certificate and key) works through
// devtool's runner (with its deadline): the API server sees the certificate's user on REST calls
// (SelfSubjectReview) and on an exec into a pod (WebSocket upgrade), and the plugin runs once.
func TestCredentialPluginCertificateOnCluster(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kctx := admin.Contexts[admin.CurrentContext]
	cluster, user := admin.Clusters[kctx.Cluster], admin.AuthInfos[kctx.AuthInfo]
	if user == nil || len(user.ClientCertificateData) == 0 || len(user.ClientKeyData) == 0 {
		t.Skip("the test cluster's kubeconfig user has no client certificate data")
	}
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	answer := filepath.Join(dir, "answer.json")
	b, _ := json.Marshal(map[string]any{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
		"status": map[string]any{"clientCertificateData": string(user.ClientCertificateData), "clientKeyData": string(user.ClientKeyData)}})
	if err := os.WriteFile(answer, b, 0o600); err != nil {
		t.Fatal(err)
	}
	plugin := filepath.Join(dir, "cert-plugin")
	if err := os.WriteFile(plugin, []byte("#!/bin/sh\necho run >> "+runs+"\ncat "+answer+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(dir, "kubeconfig")
	ca := base64.StdEncoding.EncodeToString(cluster.CertificateAuthorityData)
	if err := os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\ncurrent-context: p\n"+
		"clusters:\n- name: c\n  cluster:\n    server: "+cluster.Server+"\n    certificate-authority-data: "+ca+"\n"+
		"contexts:\n- name: p\n  context:\n    cluster: c\n    user: plugin-user\n    namespace: "+ns+"\n"+
		"users:\n- name: plugin-user\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: "+plugin+"\n      interactiveMode: Never\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cl, err := kube.Load(kube.LoadOptions{Kubeconfig: kc, CredentialPluginTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if cl.Config.ExecProvider != nil {
		t.Fatal("client-go still runs the plugin")
	}
	want, err := c.Clientset.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := cl.Clientset.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("whoami through the plugin's certificate: %v", err)
	}
	if got.Status.UserInfo.Username != want.Status.UserInfo.Username || got.Status.UserInfo.Username == "system:anonymous" {
		t.Fatalf("the API server saw %q, want %q", got.Status.UserInfo.Username, want.Status.UserInfo.Username)
	}
	t.Logf("the API server saw %q", got.Status.UserInfo.Username)

	startPod(t, ctx, cl.Clientset, ns, "sh", "sleep", "3600")
	var out bytes.Buffer
	if err := cl.Exec(ctx, kube.ExecOptions{Namespace: ns, Pod: "sh", Command: []string{"echo", "hello"}, Stdout: &out, Stderr: &out}); err != nil {
		t.Fatalf("exec with the plugin's certificate: %v (%s)", err, out.String())
	}
	if strings.TrimSpace(out.String()) != "hello" {
		t.Fatalf("exec printed %q", out.String())
	}
	rb, _ := os.ReadFile(runs)
	if n := strings.Count(string(rb), "run"); n != 1 {
		t.Errorf("the plugin ran %d times, want 1 (its certificate has no expiry)", n)
	}
}
