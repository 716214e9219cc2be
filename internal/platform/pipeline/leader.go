package pipeline

import (
	"context"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaderLease names the Lease (in the platform's namespace) that elects the replica running the
// pipeline and preview controllers.
const LeaderLease = "devtool-platform-controllers"

// WhileLeader runs fn whenever this replica (identity) holds the Lease name in ns: fn's context ends
// when leadership is lost, and the replica then stands for election again, until ctx ends. It is the
// seam for the platform's own leader election: anything with this shape can replace it.
func WhileLeader(ctx context.Context, kc kubernetes.Interface, ns, name, identity string, log *slog.Logger, fn func(context.Context)) {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: name, Namespace: ns},
		Client:     kc.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, ReleaseOnCancel: true, Name: name,
			LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) {
					log.Info("leading", "lease", name)
					fn(lctx)
				},
				OnStoppedLeading: func() { log.Info("not leading", "lease", name) },
			},
		})
		if err != nil {
			log.Error("leader election", "err", err)
			return
		}
		le.Run(ctx)
	}
}
