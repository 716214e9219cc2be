// Package leader elects one replica of the platform, through a Lease in its namespace
// (client-go's leaderelection), to run the background work: the store's sweep of expired tokens,
// stale failed-login counts and expired logins, and the pipeline and preview controllers. Any
// replica serves requests; only the leader sweeps and runs the controllers.
package leader

import (
	"context"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaseName is the Lease the replicas compete for.
const LeaseName = "devtool-platform-leader"

// Options configure an election.
type Options struct {
	Kube      kubernetes.Interface
	Namespace string
	Identity  string // this replica (its pod name)
	Log       *slog.Logger
	// Lease timing; zero values are 15 s, 10 s and 2 s.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Lead runs while this replica leads; its context ends when leadership is lost.
	Lead func(ctx context.Context)
}

// Run takes part in the election until ctx ends, running Lead whenever this replica leads. When
// ctx ends a held Lease is released, so another replica takes over at once.
func Run(ctx context.Context, o Options) {
	if o.LeaseDuration == 0 {
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 15*time.Second, 10*time.Second, 2*time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1ObjectMeta(LeaseName, o.Namespace),
		Client:     o.Kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: o.Identity},
	}
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, ReleaseOnCancel: true, Name: LeaseName,
			LeaseDuration: o.LeaseDuration, RenewDeadline: o.RenewDeadline, RetryPeriod: o.RetryPeriod,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) {
					o.Log.Info("leading", "lease", o.Namespace+"/"+LeaseName)
					o.Lead(lctx)
				},
				OnStoppedLeading: func() { o.Log.Info("not leading", "lease", o.Namespace+"/"+LeaseName) },
				OnNewLeader: func(id string) {
					if id != o.Identity {
						o.Log.Info("leader", "identity", id)
					}
				},
			},
		})
		if err != nil {
			o.Log.Error("leader election", "err", err)
			return
		}
		le.Run(ctx) // returns when leadership is lost or ctx ends; then compete again
	}
}

// Every runs f now and then every interval until ctx ends (the leader's loop).
func Every(ctx context.Context, interval time.Duration, f func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		f(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func metav1ObjectMeta(name, ns string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: ns}
}
