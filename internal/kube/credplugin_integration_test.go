//go:build integration && unix

package kube_test

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/testcluster"
)

// TestCredentialPluginOnCluster: a kubeconfig whose user is an exec credential plugin (a script
// printing a ServiceAccount token) works against the real API server through devtool's runner:
// kube.Load takes the plugin from client-go, lists pods with the plugin's token (the
// ServiceAccount may, the anonymous user may not), and a second client of the same process runs
// it again only when it must.
func TestCredentialPluginOnCluster(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := c.Clientset
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "plugin"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "list-pods"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "list-pods"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "list-pods"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "plugin", Namespace: ns}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "plugin", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrInt64(600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	plugin := filepath.Join(dir, "sa-token")
	script := "#!/bin/sh\necho run >> " + runs + "\n" +
		`printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"}}\n' "` + tr.Status.Token + `"` + "\n"
	if err := os.WriteFile(plugin, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	admin, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cluster := admin.Clusters[admin.Contexts[admin.CurrentContext].Cluster]
	kc := filepath.Join(dir, "kubeconfig")
	ca := base64.StdEncoding.EncodeToString(cluster.CertificateAuthorityData)
	if err := os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\ncurrent-context: sa\n"+
		"clusters:\n- name: c\n  cluster:\n    server: "+cluster.Server+"\n    certificate-authority-data: "+ca+"\n"+
		"contexts:\n- name: sa\n  context:\n    cluster: c\n    user: plugin-user\n    namespace: "+ns+"\n"+
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
	for i := 0; i < 3; i++ {
		if _, err := cl.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatalf("listing pods with the plugin's token: %v", err)
		}
	}
	// Not allowed for the ServiceAccount: the API server saw its identity, not admin's.
	_, err = cl.Clientset.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	if err == nil || !strings.Contains(err.Error(), "system:serviceaccount:"+ns+":plugin") {
		t.Fatalf("listing secrets: %v (want a refusal naming the ServiceAccount)", err)
	}
	b, _ := os.ReadFile(runs)
	if n := strings.Count(string(b), "run"); n != 1 {
		t.Errorf("the plugin ran %d times for one client, want 1 (its token has no expiry)", n)
	}
}

func ptrInt64(v int64) *int64 { return &v }
