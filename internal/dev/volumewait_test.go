package dev

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/devtool/devtool/internal/manifest"
)

func TestWaitVolumeDeleted(t *testing.T) {
	ctx := context.Background()
	now := metav1.Now()
	deleting := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "web-devtool", Namespace: "ns",
		DeletionTimestamp: &now, Finalizers: []string{"kubernetes.io/pvc-protection"}}}
	var events []Event
	opts := func(cs *fake.Clientset) *ActivateOptions {
		events = nil
		return &ActivateOptions{Client: cs, Namespace: "ns", Dev: &manifest.Dev{Name: "web"}, Progress: func(e Event) { events = append(events, e) }}
	}

	// None, or one not being deleted: at once, silently.
	if err := waitVolumeDeleted(ctx, opts(fake.NewClientset()), "web-devtool"); err != nil || len(events) != 0 {
		t.Errorf("no claim: %v %v", err, events)
	}
	live := deleting.DeepCopy()
	live.DeletionTimestamp, live.Finalizers = nil, nil
	if err := waitVolumeDeleted(ctx, opts(fake.NewClientset(live)), "web-devtool"); err != nil || len(events) != 0 {
		t.Errorf("live claim: %v %v", err, events)
	}

	// Being deleted, gone a moment later: waits, says so once.
	cs := fake.NewClientset(deleting.DeepCopy())
	go func() {
		time.Sleep(400 * time.Millisecond)
		_ = cs.CoreV1().PersistentVolumeClaims("ns").Delete(ctx, "web-devtool", metav1.DeleteOptions{})
	}()
	start := time.Now()
	if err := waitVolumeDeleted(ctx, opts(cs), "web-devtool"); err != nil || time.Since(start) < 300*time.Millisecond {
		t.Errorf("deleted later: %v after %s", err, time.Since(start))
	}
	if len(events) != 1 || !strings.Contains(events[0].Message, "previous dev volume web-devtool") {
		t.Errorf("progress %v", events)
	}

	// Never gone: a clear error after VolumeDeleteWait.
	old := VolumeDeleteWait
	VolumeDeleteWait = 300 * time.Millisecond
	defer func() { VolumeDeleteWait = old }()
	err := waitVolumeDeleted(ctx, opts(fake.NewClientset(deleting.DeepCopy())), "web-devtool")
	if err == nil || !strings.Contains(err.Error(), "still being deleted") || !strings.Contains(err.Error(), "pvc-protection") {
		t.Errorf("stuck: %v", err)
	}
}
