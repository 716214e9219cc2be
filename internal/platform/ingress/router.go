package ingress

import (
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Backend is where a matched request goes: a Service port of a namespace.
type Backend struct {
	Namespace string
	Service   string
	// Port is the Service port, by number or by name.
	Port networkingv1.ServiceBackendPort
	// Resource is set for a resource backend (spec.rules[].http.paths[].backend.resource), which
	// this proxy does not serve.
	Resource string
}

func (b Backend) String() string {
	if b.Resource != "" {
		return b.Namespace + "/" + b.Resource
	}
	if b.Port.Name != "" {
		return b.Namespace + "/" + b.Service + ":" + b.Port.Name
	}
	return b.Namespace + "/" + b.Service + ":" + strconv.Itoa(int(b.Port.Number))
}

// Route is the result of a match.
type Route struct {
	Backend Backend
	// Ingress is the Ingress the route comes from.
	Ingress types.NamespacedName
	// Host and Path are the rule's as written ("" host: any host; "" path: the default backend).
	Host, Path string
	// Private routes ask for a platform login and a member of the namespace (auth.go).
	Private bool
}

// Source is one Ingress as the table needs it.
type Source struct {
	Ingress *networkingv1.Ingress
	// Private is the Ingress's effective setting (its annotation, else its namespace's default).
	Private bool
}

// TableOptions say which rules a table honours.
type TableOptions struct {
	// Strict is for a shared cluster: a rule's host must be a name, not a wildcard nor empty; a host
	// under Domain must end its first label with -<namespace> (the endpoint naming
	// <name>-<namespace>.<domain>), so a namespace cannot take another one's names; and only an
	// Ingress in PlatformNamespace may give the default backend of every host.
	Strict            bool
	Domain            string
	PlatformNamespace string
}

// Skipped is a rule the table did not take, with why (logged by the controller).
type Skipped struct {
	Ingress types.NamespacedName
	Host    string
	Reason  string
}

// Table routes requests by host and path with the Ingress semantics:
//
//  1. the host: the rules of the exact host name when any Ingress has one; else those of a wildcard
//     (*.example.com matches one label: a.example.com, not example.com nor a.b.example.com); else the
//     rules without a host. A tier that has the host decides: there is no falling through to the next.
//  2. the path: the longest matching path wins (Exact paths match the whole path; Prefix and
//     ImplementationSpecific paths match whole /-separated elements, /foo matches /foo and /foo/bar,
//     not /foobar, and a trailing / of the rule is ignored); at equal length Exact beats Prefix, then
//     the oldest Ingress wins, then the namespace/name order.
//  3. no path matches: the default backend of the oldest Ingress with rules for this host in the
//     deciding tier; else the oldest default backend of any Ingress (in Strict mode: of the
//     platform's namespace only); else no route (404).
type Table struct {
	exact, wildcard map[string]*hostRules
	any             *hostRules
	fallback        *Route
}

type hostRules struct {
	paths    []*entry
	defaults []*entry // per Ingress of this host, oldest first
}

type entry struct {
	exact   bool
	path    string // normalized: Prefix paths without their trailing /
	created time.Time
	key     string // namespace/name, the last tie-breaker
	route   Route
}

// NewTable builds the table from the Ingresses of the controller's class.
func NewTable(sources []Source, o TableOptions) (*Table, []Skipped) {
	t := &Table{exact: map[string]*hostRules{}, wildcard: map[string]*hostRules{}, any: &hostRules{}}
	var skipped []Skipped
	var globalDefaults []*entry
	domain := strings.ToLower(strings.TrimSuffix(o.Domain, "."))
	for _, s := range sources {
		ing := s.Ingress
		id := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
		base := entry{created: ing.CreationTimestamp.Time, key: id.String()}
		var hosts []*hostRules
		for _, r := range ing.Spec.Rules {
			host := normalizeHost(r.Host)
			if why := hostRefused(host, ing.Namespace, domain, o); why != "" {
				skipped = append(skipped, Skipped{Ingress: id, Host: r.Host, Reason: why})
				continue
			}
			hr := t.bucket(host)
			hosts = append(hosts, hr)
			if r.HTTP == nil {
				continue
			}
			for _, p := range r.HTTP.Paths {
				e := base
				e.route = Route{Backend: backendOf(ing.Namespace, p.Backend), Ingress: id, Host: host, Path: p.Path, Private: s.Private}
				e.exact = p.PathType != nil && *p.PathType == networkingv1.PathTypeExact
				e.path = p.Path
				if e.path == "" {
					e.path = "/"
				}
				if !strings.HasPrefix(e.path, "/") {
					skipped = append(skipped, Skipped{Ingress: id, Host: r.Host, Reason: "path " + p.Path + " does not start with /"})
					continue
				}
				if !e.exact && len(e.path) > 1 {
					e.path = strings.TrimRight(e.path, "/")
					if e.path == "" {
						e.path = "/"
					}
				}
				hr.paths = append(hr.paths, &e)
			}
		}
		if db := ing.Spec.DefaultBackend; db != nil {
			e := base
			e.route = Route{Backend: backendOf(ing.Namespace, *db), Ingress: id, Private: s.Private}
			seen := map[*hostRules]bool{}
			for _, hr := range hosts {
				if !seen[hr] {
					seen[hr] = true
					hr.defaults = append(hr.defaults, &e)
				}
			}
			if !o.Strict || ing.Namespace == o.PlatformNamespace {
				globalDefaults = append(globalDefaults, &e)
			}
		}
	}
	sortRules := func(hr *hostRules) {
		sort.SliceStable(hr.paths, func(i, j int) bool {
			a, b := hr.paths[i], hr.paths[j]
			if len(a.path) != len(b.path) {
				return len(a.path) > len(b.path)
			}
			if a.exact != b.exact {
				return a.exact
			}
			return older(a, b)
		})
		sort.SliceStable(hr.defaults, func(i, j int) bool { return older(hr.defaults[i], hr.defaults[j]) })
	}
	for _, hr := range t.exact {
		sortRules(hr)
	}
	for _, hr := range t.wildcard {
		sortRules(hr)
	}
	sortRules(t.any)
	sort.SliceStable(globalDefaults, func(i, j int) bool { return older(globalDefaults[i], globalDefaults[j]) })
	if len(globalDefaults) > 0 {
		r := globalDefaults[0].route
		t.fallback = &r
	}
	return t, skipped
}

func older(a, b *entry) bool {
	if !a.created.Equal(b.created) {
		return a.created.Before(b.created)
	}
	return a.key < b.key
}

func (t *Table) bucket(host string) *hostRules {
	m, k := t.exact, host
	switch {
	case host == "":
		return t.any
	case strings.HasPrefix(host, "*."):
		m, k = t.wildcard, host[1:] // ".example.com"
	}
	hr := m[k]
	if hr == nil {
		hr = &hostRules{}
		m[k] = hr
	}
	return hr
}

// hostRefused says why a rule's host is not taken ("" when it is).
func hostRefused(host, ns, domain string, o TableOptions) string {
	if !o.Strict {
		return ""
	}
	switch {
	case host == "":
		return "a rule without a host would take every host's requests: name the host"
	case strings.Contains(host, "*"):
		return "a wildcard host would take other namespaces' names: name the host"
	}
	if domain != "" && strings.HasSuffix(host, "."+domain) {
		label := strings.TrimSuffix(host, "."+domain)
		if strings.Contains(label, ".") || !strings.HasSuffix(label, "-"+ns) {
			return "hosts under " + domain + " are <name>-<namespace>." + domain + ": this one is not of namespace " + ns
		}
	}
	if ns != o.PlatformNamespace && (host == domain) {
		return "the platform's own host is not for endpoints"
	}
	return ""
}

func backendOf(ns string, b networkingv1.IngressBackend) Backend {
	if b.Resource != nil {
		kind := b.Resource.Kind
		if b.Resource.APIGroup != nil && *b.Resource.APIGroup != "" {
			kind += "." + *b.Resource.APIGroup
		}
		return Backend{Namespace: ns, Resource: kind + "/" + b.Resource.Name}
	}
	if b.Service == nil {
		return Backend{Namespace: ns, Resource: "(no backend)"}
	}
	return Backend{Namespace: ns, Service: b.Service.Name, Port: b.Service.Port}
}

// Match finds the route of a request's host (as in the Host header: a port is ignored) and path
// (the decoded URL path).
func (t *Table) Match(host, p string) (Route, bool) {
	host = normalizeHost(stripPort(host))
	if p == "" {
		p = "/"
	}
	hr := t.exact[host]
	if hr == nil {
		if i := strings.IndexByte(host, '.'); i > 0 {
			hr = t.wildcard[host[i:]]
		}
	}
	if hr == nil && (len(t.any.paths) > 0 || len(t.any.defaults) > 0) {
		hr = t.any
	}
	if hr != nil {
		for _, e := range hr.paths {
			if pathMatches(e, p) {
				return e.route, true
			}
		}
		if len(hr.defaults) > 0 {
			return hr.defaults[0].route, true
		}
	}
	if t.fallback != nil {
		return *t.fallback, true
	}
	return Route{}, false
}

// Hosts lists the exact host names the table serves (for logs and tests).
func (t *Table) Hosts() []string {
	out := make([]string, 0, len(t.exact))
	for h := range t.exact {
		out = append(out, h)
	}
	sort.Strings(out)
	return out
}

func pathMatches(e *entry, p string) bool {
	if e.exact {
		return p == e.path
	}
	if e.path == "/" {
		return true
	}
	return p == e.path || strings.HasPrefix(p, e.path) && p[len(e.path)] == '/'
}

func normalizeHost(h string) string {
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// stripPort removes a :port from a Host header value ([v6]:port included).
func stripPort(h string) string {
	if strings.HasPrefix(h, "[") {
		if i := strings.IndexByte(h, ']'); i > 0 {
			return h[1:i]
		}
		return h
	}
	if i := strings.LastIndexByte(h, ':'); i >= 0 && strings.Count(h, ":") == 1 {
		return h[:i]
	}
	return h
}

// CleanPath removes dot segments and repeated slashes, keeping a trailing slash, so a request is
// routed (and forwarded) by the path its backend will see: /public/../private is /private.
func CleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if !strings.Contains(p, "//") && !strings.Contains(p, "/.") && strings.HasPrefix(p, "/") {
		return p
	}
	c := path.Clean("/" + p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}
