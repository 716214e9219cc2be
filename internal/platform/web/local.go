package web

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/devtool/devtool/internal/buildinfo"
	"github.com/devtool/devtool/internal/dev"
)

// Local is `devtool ui`'s dashboard of one folder's environment: the environment's page and logs
// (the platform's templates and cluster reads, through the user's own kubeconfig), with each dev
// container's local `up` (its sync service's answer: files, bytes, pending, conflicts, errors) and
// forwards. It is meant for 127.0.0.1 only: requests must name a loopback host (a page of another
// site cannot reach it through a DNS name pointed at 127.0.0.1) and carry the token, in the URL
// once (then in a cookie of this port's dashboard).
type Local struct {
	o    LocalOptions
	t    *templates
	mux  *http.ServeMux
	csrf *http.CrossOriginProtection
	ck   string // the cookie's name: per token, so two dashboards on one host keep theirs
}

// LocalDevSource is one dev container of the folder: its name, state folder (dev.StateDirPath)
// and forwards as the manifest says.
type LocalDevSource struct {
	Name     string
	StateDir string
	Forwards []LocalForward
}

// LocalForward is a forward of a dev container: 127.0.0.1:Local to Service:Remote.
type LocalForward struct {
	Local   int32
	Service string
	Remote  int32
}

// LocalOptions configure Local.
type LocalOptions struct {
	Kube        kubernetes.Interface
	Namespace   string
	Environment string
	Context     string // the kube context's name, shown
	// EndpointPort is the HTTPS port endpoints answer on (0: 443; a platform's ingress has its own).
	EndpointPort int
	Devs         []LocalDevSource
	// Token is required in every request (constant-time compared).
	Token string
	Log   *slog.Logger
	Now   func() time.Time
	// FetchStatus asks an `up`'s sync service (default dev.FetchStatus).
	FetchStatus func(context.Context, dev.StatusService) (dev.SyncStatus, error)
}

// LocalDev is the local `up` of a dev container as `devtool ui` sees it.
type LocalDev struct {
	Running  bool // an `up` holds the state folder
	PID      int
	State    string
	Message  string
	Updated  time.Time
	Sync     *dev.SyncStatus
	SyncErr  string
	Pending  int
	Files    int
	Conflict int
	Errors   int
	Forwards []ForwardView
}

// ForwardView is a forward and whether something listens on its local port.
type ForwardView struct {
	LocalForward
	Listening bool
}

// localEnv is the environment page's extra part in devtool ui.
type localEnv struct {
	Context   string
	NotUp     []string // dev containers with no local up
	Namespace string
}

// NewLocal makes the dashboard.
func NewLocal(o LocalOptions) (*Local, error) {
	if len(o.Token) < 16 {
		return nil, errors.New("devtool ui: a token of at least 16 characters is required")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.FetchStatus == nil {
		o.FetchStatus = dev.FetchStatus
	}
	t, err := parseTemplates()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(o.Token))
	l := &Local{o: o, t: t, mux: http.NewServeMux(), csrf: http.NewCrossOriginProtection(), ck: "devtool-ui-" + hex.EncodeToString(sum[:4])}
	l.mux.Handle("GET /static/", staticHandler())
	l.mux.HandleFunc("GET /{$}", l.environment)
	l.mux.HandleFunc("GET /logs", l.logsPage)
	l.mux.HandleFunc("GET /logs/stream", l.logsStream)
	l.mux.HandleFunc("GET /logs.txt", l.logsText)
	l.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		l.errorPage(w, r, http.StatusNotFound, "There is no page at "+r.URL.Path+".")
	})
	return l, nil
}

// Handler serves the dashboard behind the loopback-host and token checks.
func (l *Local) Handler() http.Handler {
	inner := securityHeaders("", l.csrf.Handler(l.mux))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHost(r.Host) {
			http.Error(w, "devtool ui answers only on 127.0.0.1, localhost or [::1]", http.StatusMisdirectedRequest)
			return
		}
		if tok := r.URL.Query().Get("token"); tok != "" {
			if !l.tokenOK(tok) {
				l.refuse(w, r)
				return
			}
			// Keep it in a cookie of this dashboard and drop it from the address bar.
			http.SetCookie(w, &http.Cookie{Name: l.ck, Value: tok, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			q := r.URL.Query()
			q.Del("token")
			u := *r.URL
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		}
		ck, err := r.Cookie(l.ck)
		if err != nil || !l.tokenOK(ck.Value) {
			l.refuse(w, r)
			return
		}
		inner.ServeHTTP(w, r)
	})
}

func (l *Local) tokenOK(tok string) bool {
	return subtle.ConstantTimeCompare([]byte(tok), []byte(l.o.Token)) == 1
}

func (l *Local) refuse(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	l.errorPage(w, r, http.StatusUnauthorized, "This dashboard needs its token: open the address 'devtool ui' printed (it ends with ?token=...).")
}

// loopbackHost says whether a Host header names this machine's loopback (any port).
func loopbackHost(host string) bool {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func (l *Local) render(w http.ResponseWriter, r *http.Request, status int, page, title string, data any) {
	v := view{Title: title, Version: buildinfo.Version, Data: data, Nav: page, Local: true}
	writePage(w, r, l.t, status, page, v, l.o.Log.Error)
}

func (l *Local) errorPage(w http.ResponseWriter, r *http.Request, status int, msg string) {
	l.render(w, r, status, "error", http.StatusText(status), errorData{Status: status, Message: msg})
}

func (l *Local) environment(w http.ResponseWriter, r *http.Request) {
	d, err := ReadEnvironment(r.Context(), l.o.Kube, l.o.Namespace, l.o.Environment, l.o.EndpointPort, l.o.Now())
	if err != nil {
		l.o.Log.Error("reading the environment", "err", err)
		l.errorPage(w, r, http.StatusBadGateway, "The cluster could not be read: "+err.Error())
		return
	}
	ld := l.localDevs(r.Context())
	le := &localEnv{Context: l.o.Context, Namespace: l.o.Namespace}
	have := map[string]bool{}
	for i := range d.Devs {
		have[d.Devs[i].Name] = true
		d.Devs[i].Local = ld[d.Devs[i].Name]
	}
	for _, s := range l.o.Devs {
		if have[s.Name] {
			continue
		}
		if x := ld[s.Name]; x != nil && x.Running {
			d.Devs = append(d.Devs, DevView{Name: s.Name, Env: l.o.Environment, Local: x})
			continue
		}
		le.NotUp = append(le.NotUp, s.Name)
	}
	u := envData{Namespace: l.o.Namespace, Detail: d, Self: "/", Logs: "/logs", Now: l.o.Now(), Local: le}
	l.render(w, r, http.StatusOK, "environment", "Environment "+l.o.Environment, u)
}

// localDevs reads each dev container's local state: whether an `up` runs, what it reported, and
// its sync service's answer (asked in parallel, each bounded by FetchStatus's own deadline).
func (l *Local) localDevs(ctx context.Context) map[string]*LocalDev {
	out := map[string]*LocalDev{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range l.o.Devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := l.localDev(ctx, s)
			mu.Lock()
			out[s.Name] = x
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

func (l *Local) localDev(ctx context.Context, s LocalDevSource) *LocalDev {
	sd := &dev.StateDir{Path: s.StateDir}
	x := &LocalDev{}
	for _, f := range s.Forwards {
		x.Forwards = append(x.Forwards, ForwardView{LocalForward: f})
	}
	if err := sd.Check(); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			x.SyncErr = err.Error()
		}
		return x
	}
	x.PID = sd.Holder()
	x.Running = x.PID > 0
	if rec, err := sd.ReadState(); err == nil {
		x.State, x.Message, x.Updated = string(rec.State), rec.Message, rec.Updated
	}
	if !x.Running {
		return x
	}
	for i := range x.Forwards {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(x.Forwards[i].Local))), 300*time.Millisecond)
		if err == nil {
			x.Forwards[i].Listening = true
			c.Close()
		}
	}
	svc, err := sd.ReadStatusService()
	if err != nil {
		x.SyncErr = "no sync service recorded yet"
		return x
	}
	st, err := l.o.FetchStatus(ctx, svc)
	if err != nil {
		x.SyncErr = err.Error()
		return x
	}
	x.Sync = &st
	for _, f := range st.Folders {
		x.Files += f.Files
		x.Pending += f.Pending
		x.Conflict += len(f.Conflicts)
		x.Errors += len(f.Errors)
	}
	return x
}

func (l *Local) scope() logScope {
	return logScope{kube: l.o.Kube, namespace: l.o.Namespace, env: l.o.Environment, self: "/logs", back: "/", backName: "environment " + l.o.Environment}
}

func (l *Local) logsPage(w http.ResponseWriter, r *http.Request) {
	s := l.scope()
	if r.URL.Query().Get("all") != "" {
		s.env = ""
	}
	d, status := readLogs(r.Context(), s, withAll(r.URL.Query(), s.env == ""))
	d.Env = l.o.Environment
	l.render(w, r, status, "logs", "Logs of "+l.o.Environment, d)
}

func (l *Local) logsStream(w http.ResponseWriter, r *http.Request) { l.follow(w, r, true) }

func (l *Local) logsText(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("follow") != "" {
		l.follow(w, r, false)
		return
	}
	s := l.scope()
	if r.URL.Query().Get("all") != "" {
		s.env = ""
	}
	writeLogText(w, r, s)
}

func (l *Local) follow(w http.ResponseWriter, r *http.Request, sse bool) {
	s := l.scope()
	if r.URL.Query().Get("all") != "" {
		s.env = ""
	}
	q, problems := parseLogQuery(r.URL.Query(), s.env == "")
	if len(problems) > 0 {
		http.Error(w, fmt.Sprintf("bad selection: %v", problems), http.StatusBadRequest)
		return
	}
	followLogs(r.Context(), w, s, q, sse, nil, l.o.Log)
}

func withAll(v url.Values, all bool) url.Values {
	if all {
		v.Set("all", "1")
	}
	return v
}

// ServeLocal serves the dashboard on ln until ctx ends, then stops: open log streams end at once,
// other requests get up to 5 seconds. It returns nil after a stop by ctx.
func ServeLocal(ctx context.Context, ln net.Listener, o LocalOptions) error {
	if a, ok := ln.Addr().(*net.TCPAddr); !ok || !a.IP.IsLoopback() {
		ln.Close()
		return fmt.Errorf("devtool ui: listens on loopback only, not %s", ln.Addr())
	}
	l, err := NewLocal(o)
	if err != nil {
		ln.Close()
		return err
	}
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := &http.Server{
		Handler:           l.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(l.o.Log.Handler(), slog.LevelDebug),
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	cancel() // the log streams' requests end now
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	err = srv.Shutdown(sctx)
	<-done
	if errors.Is(err, context.DeadlineExceeded) {
		srv.Close()
		return nil
	}
	return err
}
