package store

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// SettingsName is the ConfigMap in the platform's namespace holding what admins change at run
// time: the quota and limits new namespaces get (keys below). Absent keys keep Store.Limits.
const SettingsName = "devtool-platform-settings"

// limitKeys are the settings' keys, in the order forms show them, with the field each sets.
var limitKeys = []struct {
	Key   string
	Field func(*Limits) *string
}{
	{"quota.cpu", func(l *Limits) *string { return &l.QuotaCPU }},
	{"quota.memory", func(l *Limits) *string { return &l.QuotaMemory }},
	{"quota.pods", func(l *Limits) *string { return &l.QuotaPods }},
	{"quota.storage", func(l *Limits) *string { return &l.QuotaStorage }},
	{"default.cpu", func(l *Limits) *string { return &l.DefaultCPU }},
	{"default.memory", func(l *Limits) *string { return &l.DefaultMemory }},
	{"default-request.cpu", func(l *Limits) *string { return &l.DefaultRequestCPU }},
	{"default-request.memory", func(l *Limits) *string { return &l.DefaultRequestMemory }},
}

// LimitKeys lists the settings' keys (the web UI's form fields are named after them).
func LimitKeys() []string {
	out := make([]string, len(limitKeys))
	for i, k := range limitKeys {
		out[i] = k.Key
	}
	return out
}

// LimitValue is the value of key in l.
func LimitValue(l Limits, key string) string {
	for _, k := range limitKeys {
		if k.Key == key {
			return *k.Field(&l)
		}
	}
	return ""
}

// EffectiveLimits are the quota and limits a namespace made now gets: the settings' values over
// Store.Limits. A value that is not a quantity (the ConfigMap edited by hand) is ignored, so a
// namespace is never made with a quota the API server would refuse.
func (s *Store) EffectiveLimits(ctx context.Context) (Limits, error) {
	l := s.Limits
	cm, err := s.Kube.CoreV1().ConfigMaps(s.Namespace).Get(ctx, SettingsName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return l, nil
	} else if err != nil {
		return l, fmt.Errorf("reading the platform's settings: %w", err)
	}
	for _, k := range limitKeys {
		if v, ok := cm.Data[k.Key]; ok {
			if _, err := resource.ParseQuantity(v); err == nil {
				*k.Field(&l) = v
			}
		}
	}
	return l, nil
}

// SetLimits saves the quota and limits new namespaces get (namespaces made before keep theirs).
// Every value must be a Kubernetes quantity; a default request above its default limit is refused.
func (s *Store) SetLimits(ctx context.Context, l Limits) error {
	data := map[string]string{}
	for _, k := range limitKeys {
		v := *k.Field(&l)
		q, err := resource.ParseQuantity(v)
		if err != nil || q.Sign() < 0 {
			return &InputError{Field: k.Key, Reason: fmt.Sprintf("%q is not a quantity such as 500m, 2, 512Mi or 10Gi", v)}
		}
		data[k.Key] = q.String()
	}
	for _, pair := range [][2]string{{"default-request.cpu", "default.cpu"}, {"default-request.memory", "default.memory"}} {
		req, lim := resource.MustParse(data[pair[0]]), resource.MustParse(data[pair[1]])
		if req.Cmp(lim) > 0 {
			return &InputError{Field: pair[0], Reason: "above " + pair[1] + " (a container's default request cannot exceed its default limit)"}
		}
	}
	cms := s.Kube.CoreV1().ConfigMaps(s.Namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(ctx, SettingsName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: SettingsName, Namespace: s.Namespace, Labels: map[string]string{LabelManaged: "true"}}, Data: data}
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), SettingsName, err)
			}
			return err
		} else if err != nil {
			return err
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		for k, v := range data {
			cm.Data[k] = v
		}
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
}
