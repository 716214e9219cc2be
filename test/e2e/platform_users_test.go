//go:build integration

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/testcluster"
)

// TestPlatformUserRemovalDeletesPersonalNamespace: an admin removing a user deletes the user's
// personal namespace with the pod running there and its stored secrets; a namespace the user
// created stays. The same name made again starts empty. Needs this branch's platform
// (DEVTOOL_TEST_PLATFORM_DIR: releases before kept the namespace and the secrets).
func TestPlatformUserRemovalDeletesPersonalNamespace(t *testing.T) {
	p := findPlatform(t)
	c := testcluster.Connect(t)
	ctx := context.Background()
	cs := c.Clientset
	admin := p.adminClient(t)
	name := "rm-" + randomSuffix()
	team := name + "-team"
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), team, metav1.DeleteOptions{}) })
	r, err := admin.CreateUser(ctx, api.CreateUserRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	removePlatformUserAfter(t, admin, name)
	user := p.userClient(t, r.Token)
	if _, _, err := user.CreateNamespace(ctx, team); err != nil {
		t.Fatal(err)
	}
	if err := user.SetSecret(ctx, "", "", "RM_TOKEN", "kept-nowhere"); err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	if _, err := cs.CoreV1().Pods(name).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "work"},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &zero, Containers: []corev1.Container{{Name: "c",
			Image: "docker.io/library/busybox:local", ImagePullPolicy: corev1.PullIfNotPresent, Command: []string{"sleep", "3600"}}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	if err := admin.DeleteUser(ctx, name); err != nil {
		t.Fatal(err)
	}
	// Answered once the deletion was asked for: the namespace is terminating or gone.
	ns, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if err == nil && ns.DeletionTimestamp == nil {
		t.Fatalf("the removed user's personal namespace %s is kept (is %s this branch's platform?)", name, p.url)
	} else if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if ns, err := cs.CoreV1().Namespaces().Get(ctx, team, metav1.GetOptions{}); err != nil || ns.DeletionTimestamp != nil {
		t.Errorf("namespace %s the user created: %v (deleting: %v), want it kept", team, err, err == nil && ns.DeletionTimestamp != nil)
	}

	// The same name again, once the old namespace is gone: nothing of the removed user.
	eventually(t, 3*time.Minute, "the removed user's namespace gone", func() error {
		if _, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace %s: %v", name, err)
		}
		return nil
	})
	r2, err := admin.CreateUser(ctx, api.CreateUserRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := p.userClient(t, r2.Token).Secrets(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		if s.Scope == api.ScopeUser {
			t.Errorf("the new %s sees the removed user's secret %s", name, s.Name)
		}
	}
	if pods, err := cs.CoreV1().Pods(name).List(ctx, metav1.ListOptions{}); err != nil || len(pods.Items) != 0 {
		t.Errorf("pods in the new %s's namespace: %v %d", name, err, len(pods.Items))
	}
}
