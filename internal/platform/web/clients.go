package web

import (
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/devtool/devtool/internal/platform/store"
)

// userClients are Kubernetes clients that impersonate users' ServiceAccounts, made from the
// platform's own config (which may impersonate only the ServiceAccounts in its namespace: a Role
// there grants it) and kept per user for a while: building one costs more than a page's reads.
type userClients struct {
	st  *store.Store
	ttl time.Duration
	max int

	mu sync.Mutex
	m  map[string]userClient
}

type userClient struct {
	kc   kubernetes.Interface
	made time.Time
}

func newUserClients(st *store.Store) *userClients {
	return &userClients{st: st, ttl: 10 * time.Minute, max: 512, m: map[string]userClient{}}
}

// get is the client acting as user's ServiceAccount.
func (c *userClients) get(user string) (kubernetes.Interface, error) {
	now := time.Now()
	c.mu.Lock()
	e, ok := c.m[user]
	c.mu.Unlock()
	if ok && now.Sub(e.made) < c.ttl {
		return e.kc, nil
	}
	kc, err := c.make(c.st.SAUsername(user))
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max { // drop the oldest entries (a burst of distinct users)
		for k, v := range c.m {
			if now.Sub(v.made) >= c.ttl || len(c.m) >= c.max {
				delete(c.m, k)
			}
		}
	}
	c.m[user] = userClient{kc: kc, made: now}
	return kc, nil
}

func (c *userClients) make(username string) (kubernetes.Interface, error) {
	if c.st.Impersonate != nil { // tests give fakes here
		return c.st.Impersonate(username)
	}
	cfg := rest.CopyConfig(c.st.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: username}
	// Protocol buffers for the built-in types: a page lists pods, ConfigMaps and Services.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	if cfg.QPS < 50 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	return kubernetes.NewForConfig(cfg)
}

// forget drops user's client (after a change of the user's memberships or account).
func (c *userClients) forget(user string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, user)
}
