package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Audit is one change: who did what to which object, and the result.
type Audit struct {
	Actor, Action string // e.g. "alice", "share"
	Kind, Name    string // the object changed: User, AccessToken, Namespace, Secret
	Namespace     string // where the Event goes: the object's namespace ("" = the platform's)
	Detail        string // what else to say (the role given, never a value)
	Err           error  // nil: succeeded
}

// Record writes an audit record as a Kubernetes Event on the object changed (involvedObject), so
// `kubectl get events` shows who did what and when. Best effort within 5 s: the change is already
// made or refused.
func (s *Store) Record(ctx context.Context, a Audit, instance string) error {
	ns := a.Namespace
	if ns == "" {
		ns = s.Namespace
	}
	msg := a.Actor + " " + a.Action + " " + a.Kind + " " + a.Name
	if a.Detail != "" {
		msg += " (" + a.Detail + ")"
	}
	typ, reason := corev1.EventTypeNormal, "Platform"+title(a.Action)
	if a.Err != nil {
		typ = corev1.EventTypeWarning
		msg += ": refused: " + a.Err.Error()
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	now := metav1.NewTime(s.now())
	apiVersion := "v1"
	if a.Kind == "User" || a.Kind == "AccessToken" {
		apiVersion = Group + "/" + Version
	}
	// The API server takes an Event only in its involved object's namespace (or, for a cluster-scoped
	// object, in "default"): a Namespace's record names the namespace it is written in, as the
	// object's, so it stays in that namespace for `kubectl get events -n <namespace>`.
	objNS := ns
	ev := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: a.Name + "." + hex.EncodeToString(b[:]), Namespace: ns, Labels: map[string]string{LabelManaged: "true"}},
		InvolvedObject:      corev1.ObjectReference{APIVersion: apiVersion, Kind: a.Kind, Name: a.Name, Namespace: objNS},
		Reason:              reason,
		Message:             msg,
		Type:                typ,
		Source:              corev1.EventSource{Component: "devtool-platform"},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		ReportingController: "devtool.dev/platform",
		ReportingInstance:   instance,
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, err := s.Kube.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{})
	return err
}

func title(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
