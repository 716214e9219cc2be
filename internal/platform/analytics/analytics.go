// Package analytics is the platform's side of devtool's analytics: it checks the events the CLI
// sends (api.AnalyticsEvent), adds them to daily counts, and keeps those counts, never the events.
//
// Where the counts live: each replica adds events to counts in its own memory and, once a minute
// (and when it stops), adds them to one ConfigMap per UTC day in the platform's namespace,
// devtool-analytics-YYYY-MM-DD (resourceVersion-guarded read-add-write, retried on conflict). So
// etcd sees at most one small write per replica per minute whatever the number of CLI commands,
// and a day's object stays a few kilobytes: at most MaxKeysPerDay distinct (command, version,
// os, arch, success) rows, the rest counted as "(other)", and a 256-byte HyperLogLog sketch of
// the install ids in place of the ids. Days older than Retention are deleted. Whether the admin
// allows analytics is the ConfigMap devtool-analytics-settings (the install's default until an
// admin sets it through the API). Reads go through an informer on those ConfigMaps.
package analytics

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/devtool/devtool/internal/platform/api"
)

const (
	// Label marks the analytics ConfigMaps: "day" or "settings".
	Label = "devtool.dev/analytics"
	// DayPrefix starts the name of a day's ConfigMap (then YYYY-MM-DD).
	DayPrefix = "devtool-analytics-"
	// SettingsName is the admin's setting.
	SettingsName = "devtool-analytics-settings"
	// MaxKeysPerDay bounds a day's rows; further distinct rows are counted as OtherCommand.
	MaxKeysPerDay = 2000
	// OtherCommand is the row of events past MaxKeysPerDay.
	OtherCommand = "(other)"
	// Retention is how many days are kept.
	Retention = 90
	// FlushInterval is how often a replica stores what it counted.
	FlushInterval = time.Minute
	// MaxReportDays bounds GET /api/v1/analytics?days=.
	MaxReportDays = Retention
)

// InputError is an event field the aggregator refuses.
type InputError struct{ Field, Reason string }

func (e *InputError) Error() string { return e.Field + ": " + e.Reason }

var (
	commandRe = regexp.MustCompile(`^[a-z][a-z0-9-]*( [a-z][a-z0-9-]*){0,3}$`)
	versionRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.+_-]*$`)
	wordRe    = regexp.MustCompile(`^[a-z0-9]+$`)
	installRe = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
)

// Check validates an event: bounded, plain values only (no room for names or paths).
func Check(ev api.AnalyticsEvent) error {
	switch {
	case len(ev.Command) > 64 || !commandRe.MatchString(ev.Command):
		return &InputError{"command", "a command path of lower-case words, at most 4 and 64 characters, as \"namespace create\""}
	case ev.DurationMs < 0 || ev.DurationMs > int64(7*24*time.Hour/time.Millisecond):
		return &InputError{"durationMs", "between 0 and 604800000 (a week)"}
	case len(ev.Version) > 64 || !versionRe.MatchString(ev.Version):
		return &InputError{"version", "a version of letters, digits and . + _ -, at most 64 characters"}
	case len(ev.OS) > 16 || !wordRe.MatchString(ev.OS):
		return &InputError{"os", "a GOOS value, as linux"}
	case len(ev.Arch) > 16 || !wordRe.MatchString(ev.Arch):
		return &InputError{"arch", "a GOARCH value, as amd64"}
	case !installRe.MatchString(ev.InstallID):
		return &InputError{"installId", "a random UUID in lower case"}
	}
	return nil
}

// key is one row of a day.
type key struct {
	Command, Version, OS, Arch string
	Success                    bool
}

type row struct{ count, durationMs int64 }

// day is one UTC day's counts.
type day struct {
	rows     map[key]*row
	installs sketch
}

func newDay() *day { return &day{rows: map[key]*row{}} }

func (d *day) add(k key, count, durationMs int64) {
	other := key{Command: OtherCommand}
	r := d.rows[k]
	if r == nil {
		real := len(d.rows) // rows other than "(other)", which the bound does not count
		if d.rows[other] != nil {
			real--
		}
		if real >= MaxKeysPerDay && k != other {
			k = other
		}
		if r = d.rows[k]; r == nil {
			r = &row{}
			d.rows[k] = r
		}
	}
	r.count += count
	r.durationMs += durationMs
}

func (d *day) merge(o *day) {
	for k, r := range o.rows {
		d.add(k, r.count, r.durationMs)
	}
	d.installs.merge(&o.installs)
}

// Aggregator counts events and stores the counts.
type Aggregator struct {
	Kube      kubernetes.Interface
	Namespace string // the platform's
	// Default is whether analytics are allowed until an admin sets it (serve --analytics).
	Default bool
	Log     *slog.Logger
	Now     func() time.Time
	// SyncTimeout bounds Start's wait for the informer (default 30 s): past it the platform serves
	// without analytics (Enabled is false) until the informer syncs, e.g. once its RBAC allows it.
	SyncTimeout time.Duration

	mu      sync.Mutex
	pending map[string]*day // by date, not yet stored
	lister  corelisters.ConfigMapLister
	synced  cache.InformerSynced
	done    chan struct{}
}

func (a *Aggregator) now() time.Time {
	if a.Now != nil {
		return a.Now().UTC()
	}
	return time.Now().UTC()
}

func (a *Aggregator) log() *slog.Logger {
	if a.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return a.Log
}

// Start runs the informer on the analytics ConfigMaps and the flush loop until ctx ends (then
// stores what is left, within 10 s); it returns once the informer has synced or SyncTimeout has
// passed (then analytics stay off until it syncs: the API is served either way). Wait waits for
// the last flush.
func (a *Aggregator) Start(ctx context.Context) error {
	f := informers.NewSharedInformerFactoryWithOptions(a.Kube, 0, informers.WithNamespace(a.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = Label }))
	inf := f.Core().V1().ConfigMaps()
	a.lister, a.synced = inf.Lister(), inf.Informer().HasSynced
	f.Start(ctx.Done())
	timeout := a.SyncTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !cache.WaitForCacheSync(sctx.Done(), a.synced) {
		if ctx.Err() != nil {
			return fmt.Errorf("the analytics cache did not sync: %w", ctx.Err())
		}
		a.log().Warn("analytics are off until the platform can read its analytics ConfigMaps (check its Role)", "namespace", a.Namespace)
	}
	a.done = make(chan struct{})
	go func() {
		defer close(a.done)
		t := time.NewTicker(FlushInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				if err := a.Flush(fctx); err != nil {
					a.log().Warn("analytics counts not stored at shutdown", "err", err)
				}
				cancel()
				return
			case <-t.C:
				if err := a.Flush(ctx); err != nil {
					a.log().Warn("analytics counts not stored (kept for the next try)", "err", err)
				}
				a.prune(ctx)
			}
		}
	}()
	return nil
}

// Wait returns once the loop Start began has stored its last counts.
func (a *Aggregator) Wait() {
	if a.done != nil {
		<-a.done
	}
}

// Enabled reports whether the admin allows analytics (false while the informer has not synced).
func (a *Aggregator) Enabled() bool {
	if a.synced != nil && !a.synced() {
		return false
	}
	if a.lister != nil {
		if cm, err := a.lister.ConfigMaps(a.Namespace).Get(SettingsName); err == nil {
			return cm.Data["enabled"] == "true"
		}
	}
	return a.Default
}

// SetEnabled stores the admin's choice.
func (a *Aggregator) SetEnabled(ctx context.Context, enabled bool) error {
	cms := a.Kube.CoreV1().ConfigMaps(a.Namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(ctx, SettingsName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: SettingsName, Namespace: a.Namespace,
				Labels: map[string]string{Label: "settings"}}, Data: map[string]string{"enabled": strconv.FormatBool(enabled)}}
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
		cm.Data["enabled"] = strconv.FormatBool(enabled)
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
}

// Record checks an event and adds it to today's counts.
func (a *Aggregator) Record(ev api.AnalyticsEvent) error {
	if err := Check(ev); err != nil {
		return err
	}
	date := a.now().Format(time.DateOnly)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pending == nil {
		a.pending = map[string]*day{}
	}
	d := a.pending[date]
	if d == nil {
		d = newDay()
		a.pending[date] = d
	}
	d.add(key{ev.Command, ev.Version, ev.OS, ev.Arch, ev.Success}, 1, ev.DurationMs)
	d.installs.add(ev.InstallID)
	return nil
}

// Flush adds the pending counts to their days' ConfigMaps. A day that cannot be stored stays
// pending (and is tried again at the next flush).
func (a *Aggregator) Flush(ctx context.Context) error {
	a.mu.Lock()
	pending := a.pending
	a.pending = nil
	a.mu.Unlock()
	var firstErr error
	if a.synced != nil && !a.synced() && len(pending) > 0 {
		a.mu.Lock()
		a.pending = pending // nothing is counted before it syncs; keep what there is
		a.mu.Unlock()
		return errors.New("the analytics cache has not synced")
	}
	for date, d := range pending {
		if err := a.store(ctx, date, d); err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("day %s: %w", date, err)
			}
			a.mu.Lock()
			if a.pending == nil {
				a.pending = map[string]*day{}
			}
			if cur := a.pending[date]; cur != nil {
				d.merge(cur)
			}
			a.pending[date] = d
			a.mu.Unlock()
		}
	}
	return firstErr
}

func (a *Aggregator) store(ctx context.Context, date string, d *day) error {
	cms := a.Kube.CoreV1().ConfigMaps(a.Namespace)
	name := DayPrefix + date
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: a.Namespace,
				Labels: map[string]string{Label: "day"}}}
			encode(cm, d)
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), name, err)
			}
			return err
		} else if err != nil {
			return err
		}
		stored, err := decode(cm)
		if err != nil {
			a.log().Warn("analytics day unreadable: starting it again", "configmap", name, "err", err)
			stored = newDay()
		}
		stored.merge(d)
		encode(cm, stored)
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
}

// prune deletes the days older than Retention (any replica may: deleting twice is harmless).
func (a *Aggregator) prune(ctx context.Context) {
	if a.synced != nil && !a.synced() {
		return
	}
	cms, err := a.lister.ConfigMaps(a.Namespace).List(labels.SelectorFromSet(labels.Set{Label: "day"}))
	if err != nil {
		return
	}
	oldest := a.now().AddDate(0, 0, -Retention).Format(time.DateOnly)
	for _, cm := range cms {
		if date := strings.TrimPrefix(cm.Name, DayPrefix); date < oldest {
			err := a.Kube.CoreV1().ConfigMaps(a.Namespace).Delete(ctx, cm.Name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				a.log().Warn("old analytics day not deleted", "configmap", cm.Name, "err", err)
			}
		}
	}
}

// Report is the last days days (today first): stored counts plus this replica's pending ones.
func (a *Aggregator) Report(days int) (api.AnalyticsReport, error) {
	if days < 1 || days > MaxReportDays {
		return api.AnalyticsReport{}, &InputError{"days", fmt.Sprintf("between 1 and %d", MaxReportDays)}
	}
	today := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	out := api.AnalyticsReport{Days: []api.AnalyticsDay{}}
	for i := 0; i < days; i++ {
		date := today.AddDate(0, 0, -i).Format(time.DateOnly)
		d := newDay()
		if a.lister != nil {
			if cm, err := a.lister.ConfigMaps(a.Namespace).Get(DayPrefix + date); err == nil {
				if stored, err := decode(cm); err == nil {
					d.merge(stored)
				}
			}
		}
		if p := a.pending[date]; p != nil {
			d.merge(p)
		}
		if len(d.rows) == 0 {
			continue
		}
		out.Days = append(out.Days, api.AnalyticsDay{Date: date, Installs: d.installs.estimate(), Counts: d.counts()})
	}
	return out, nil
}

func (d *day) counts() []api.AnalyticsCount {
	out := make([]api.AnalyticsCount, 0, len(d.rows))
	for k, r := range d.rows {
		out = append(out, api.AnalyticsCount{Command: k.Command, Version: k.Version, OS: k.OS, Arch: k.Arch,
			Success: k.Success, Count: r.count, TotalDurationMs: r.durationMs})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Command != b.Command {
			return a.Command < b.Command
		}
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		if a.OS+a.Arch != b.OS+b.Arch {
			return a.OS+a.Arch < b.OS+b.Arch
		}
		return !a.Success && b.Success
	})
	return out
}

// encode writes d into cm's data: "counts" (JSON rows) and "installs" (the sketch, base64).
func encode(cm *corev1.ConfigMap, d *day) {
	b, _ := json.Marshal(d.counts())
	cm.Data = map[string]string{"counts": string(b), "installs": base64.StdEncoding.EncodeToString(d.installs[:])}
}

func decode(cm *corev1.ConfigMap) (*day, error) {
	d := newDay()
	var rows []api.AnalyticsCount
	if s := cm.Data["counts"]; s != "" {
		if err := json.Unmarshal([]byte(s), &rows); err != nil {
			return nil, err
		}
	}
	for _, r := range rows {
		d.add(key{r.Command, r.Version, r.OS, r.Arch, r.Success}, r.Count, r.TotalDurationMs)
	}
	if s := cm.Data["installs"]; s != "" {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b) != len(d.installs) {
			return nil, fmt.Errorf("installs: not a %d-byte sketch", len(d.installs))
		}
		copy(d.installs[:], b)
	}
	return d, nil
}
