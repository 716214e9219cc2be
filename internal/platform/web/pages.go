package web

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/store"
)

// form reads a POSTed form of at most 128 KiB (a stored secret's value is at most 64 KiB).
func (u *UI) form(w http.ResponseWriter, r *http.Request, c *caller) bool {
	r.Body = http.MaxBytesReader(w, r.Body, 128<<10)
	if err := r.ParseForm(); err != nil {
		u.errorPage(w, r, c, http.StatusBadRequest, "The form could not be read (over 128 KiB?).")
		return false
	}
	return true
}

// failStatus maps a store error to the page's status and message; ok is false for errors that are
// the platform's own (answered as internal errors).
func failStatus(err error) (int, string, bool) {
	var in *store.InputError
	switch {
	case errors.As(err, &in):
		return http.StatusBadRequest, in.Error(), true
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound, err.Error(), true
	case errors.Is(err, store.ErrForbidden):
		return http.StatusForbidden, err.Error(), true
	case errors.Is(err, store.ErrConflict):
		return http.StatusConflict, err.Error(), true
	}
	return http.StatusInternalServerError, "", false
}

// --- namespaces

type nsItem struct {
	Name, Role, Status string
	Personal           bool
}

type namespacesData struct {
	Items []nsItem
	Name  string // the create form's value
	Error string
}

func (u *UI) namespaces(w http.ResponseWriter, r *http.Request, c *caller) {
	u.namespacesWith(w, r, c, http.StatusOK, namespacesData{})
}

func (u *UI) namespacesWith(w http.ResponseWriter, r *http.Request, c *caller, status int, d namespacesData) {
	ms, err := u.o.Store.MembershipsOf(c.user.Name)
	if err != nil {
		u.internal(w, r, c, err)
		return
	}
	for _, m := range ms {
		ns := u.o.Store.ManagedNamespace(m.Namespace)
		if ns == nil {
			continue
		}
		it := nsItem{Name: m.Namespace, Role: m.Role, Status: "Active", Personal: ns.Labels[store.LabelPersonal] != ""}
		if ns.DeletionTimestamp != nil {
			it.Status = "Deleting"
		}
		d.Items = append(d.Items, it)
	}
	u.render(w, r, status, "namespaces", c, "Namespaces", d)
}

func (u *UI) createNamespace(w http.ResponseWriter, r *http.Request, c *caller) {
	if !u.form(w, r, c) {
		return
	}
	name := r.PostForm.Get("name")
	created, err := u.o.Store.CreateNamespace(r.Context(), c.user.Name, name)
	if created || err != nil {
		ns := ""
		if created {
			ns = name
		}
		u.audit(r, c.user.Name, store.Audit{Action: "create", Kind: "Namespace", Name: name, Namespace: ns, Err: err})
	}
	if err != nil {
		status, msg, ok := failStatus(err)
		if !ok {
			u.internal(w, r, c, err)
			return
		}
		u.namespacesWith(w, r, c, status, namespacesData{Name: name, Error: msg})
		return
	}
	if created {
		setFlash(w, "Namespace "+name+" created.")
	} else {
		setFlash(w, "Namespace "+name+" exists already and is yours.")
	}
	http.Redirect(w, r, "/namespaces/"+name, http.StatusSeeOther)
}

type namespaceData struct {
	Name     string
	Role     string
	Owner    bool
	Personal bool
	Deleting bool
	Members  []store.Membership
	Owners   int // a sole owner cannot be removed
	View     *NamespaceView
	Roles    []string
	Share    struct{ User, Role, Error string }
	Now      time.Time
}

func (u *UI) namespace(w http.ResponseWriter, r *http.Request, c *caller) {
	u.namespaceWith(w, r, c, http.StatusOK, "", "", "")
}

func (u *UI) namespaceWith(w http.ResponseWriter, r *http.Request, c *caller, status int, shareUser, shareRole, shareErr string) {
	name := r.PathValue("ns")
	kc, err := u.clients.get(c.user.Name)
	if err != nil {
		u.internal(w, r, c, err)
		return
	}
	d := namespaceData{Name: name, Role: u.o.Store.RoleIn(c.user.Name, name), Roles: []string{api.RoleViewer, api.RoleEditor, api.RoleOwner}, Now: u.o.Now()}
	if d.Role == "" { // a namespace made a moment ago, not in the caches yet (member checked it live)
		if d.Role, err = u.o.Store.LiveRoleIn(r.Context(), c.user.Name, name); err != nil {
			u.internal(w, r, c, err)
			return
		}
	}
	d.Owner = d.Role == api.RoleOwner
	if ns := u.o.Store.ManagedNamespace(name); ns != nil {
		d.Personal = ns.Labels[store.LabelPersonal] != ""
		d.Deleting = ns.DeletionTimestamp != nil
	}
	d.Share.User, d.Share.Role, d.Share.Error = shareUser, shareRole, shareErr
	if d.Members, err = u.o.Store.Members(name); err != nil {
		u.internal(w, r, c, err)
		return
	}
	for _, m := range d.Members {
		if m.Role == api.RoleOwner {
			d.Owners++
		}
	}
	if d.View, err = ReadNamespace(r.Context(), kc, name, u.o.Info.EndpointPort, u.o.Now()); err != nil {
		u.internal(w, r, c, err)
		return
	}
	u.render(w, r, status, "namespace", c, "Namespace "+name, d)
}

func (u *UI) confirmDelete(w http.ResponseWriter, r *http.Request, c *caller) {
	name := r.PathValue("ns")
	if u.o.Store.RoleIn(c.user.Name, name) != api.RoleOwner {
		u.errorPage(w, r, c, http.StatusForbidden, "Only an owner of namespace "+name+" may delete it.")
		return
	}
	u.render(w, r, http.StatusOK, "confirm_delete", c, "Delete namespace "+name, map[string]string{"Name": name})
}

func (u *UI) deleteNamespace(w http.ResponseWriter, r *http.Request, c *caller) {
	if !u.form(w, r, c) {
		return
	}
	name := r.PathValue("ns")
	if r.PostForm.Get("confirm") != name {
		u.render(w, r, http.StatusBadRequest, "confirm_delete", c, "Delete namespace "+name,
			map[string]string{"Name": name, "Error": "Type the namespace's name to confirm."})
		return
	}
	err := u.o.Store.DeleteNamespace(r.Context(), c.user.Name, name)
	u.audit(r, c.user.Name, store.Audit{Action: "delete", Kind: "Namespace", Name: name, Err: err})
	if err != nil {
		status, msg, ok := failStatus(err)
		if !ok {
			u.internal(w, r, c, err)
			return
		}
		u.errorPage(w, r, c, status, msg)
		return
	}
	u.clients.forget(c.user.Name)
	setFlash(w, "Namespace "+name+" is being deleted, with everything in it.")
	http.Redirect(w, r, "/namespaces", http.StatusSeeOther)
}

func (u *UI) share(w http.ResponseWriter, r *http.Request, c *caller) {
	if !u.form(w, r, c) {
		return
	}
	ns, target, role := r.PathValue("ns"), r.PostForm.Get("user"), r.PostForm.Get("role")
	err := u.o.Store.Share(r.Context(), c.user.Name, ns, target, role)
	u.audit(r, c.user.Name, store.Audit{Action: "share", Kind: "Namespace", Name: ns, Namespace: ns, Detail: target + " as " + role, Err: err})
	if err != nil {
		status, msg, ok := failStatus(err)
		if !ok {
			u.internal(w, r, c, err)
			return
		}
		if status == http.StatusNotFound { // the namespace is the caller's (member checked it): the user is unknown
			status, msg = http.StatusBadRequest, "There is no user "+target+"."
		}
		u.namespaceWith(w, r, c, status, target, role, msg)
		return
	}
	setFlash(w, target+" is now "+role+" of "+ns+".")
	http.Redirect(w, r, "/namespaces/"+ns, http.StatusSeeOther)
}

func (u *UI) unshare(w http.ResponseWriter, r *http.Request, c *caller) {
	ns, target := r.PathValue("ns"), r.PathValue("user")
	err := u.o.Store.Unshare(r.Context(), c.user.Name, ns, target)
	u.audit(r, c.user.Name, store.Audit{Action: "unshare", Kind: "Namespace", Name: ns, Namespace: ns, Detail: target, Err: err})
	if err != nil {
		status, msg, ok := failStatus(err)
		if !ok {
			u.internal(w, r, c, err)
			return
		}
		u.namespaceWith(w, r, c, status, "", "", msg)
		return
	}
	if target == c.user.Name {
		setFlash(w, "You left namespace "+ns+".")
		http.Redirect(w, r, "/namespaces", http.StatusSeeOther)
		return
	}
	setFlash(w, target+" is no longer a member of "+ns+".")
	http.Redirect(w, r, "/namespaces/"+ns, http.StatusSeeOther)
}

// --- environments

type envData struct {
	Namespace string
	Detail    *EnvDetail
	Self      string
	Logs      string
	Back      string
	BackName  string
	Now       time.Time
	Local     *localEnv // devtool ui only
}

func (u *UI) environment(w http.ResponseWriter, r *http.Request, c *caller) {
	ns, env := r.PathValue("ns"), r.PathValue("env")
	kc, err := u.clients.get(c.user.Name)
	if err != nil {
		u.internal(w, r, c, err)
		return
	}
	d, err := ReadEnvironment(r.Context(), kc, ns, env, u.o.Info.EndpointPort, u.o.Now())
	if err != nil {
		u.internal(w, r, c, err)
		return
	}
	if d.State == nil && len(d.Pods) == 0 && len(d.Services) == 0 && len(d.Problems) == 0 {
		u.errorPage(w, r, c, http.StatusNotFound, "There is no environment "+env+" in namespace "+ns+".")
		return
	}
	self := "/namespaces/" + ns + "/environments/" + env
	u.render(w, r, http.StatusOK, "environment", c, "Environment "+env,
		envData{Namespace: ns, Detail: d, Self: self, Logs: self + "/logs", Back: "/namespaces/" + ns, BackName: "namespace " + ns, Now: u.o.Now()})
}

// --- secrets

type secretsData struct {
	Namespace string // "" : the user's own and the admin-wide ones
	Items     []api.SecretInfo
	Admin     bool
	CanWrite  bool
	Note      string
	Name      string
	Scope     string
	Error     string
}

func (u *UI) secrets(w http.ResponseWriter, r *http.Request, c *caller) {
	u.secretsWith(w, r, c, http.StatusOK, secretsData{})
}

func (u *UI) secretsWith(w http.ResponseWriter, r *http.Request, c *caller, status int, d secretsData) {
	items, err := u.o.Store.Secrets(r.Context(), c.user, "")
	if err != nil {
		u.internal(w, r, c, err)
		return
	}
	d.Items, d.Admin, d.CanWrite = items, c.user.Admin, true
	u.render(w, r, status, "secrets", c, "Stored secrets", d)
}

func (u *UI) namespaceSecrets(w http.ResponseWriter, r *http.Request, c *caller) {
	u.namespaceSecretsWith(w, r, c, http.StatusOK, secretsData{})
}

func (u *UI) namespaceSecretsWith(w http.ResponseWriter, r *http.Request, c *caller, status int, d secretsData) {
	ns := r.PathValue("ns")
	d.Namespace = ns
	role := u.o.Store.RoleIn(c.user.Name, ns)
	d.CanWrite = role == api.RoleOwner || role == api.RoleEditor
	if !d.CanWrite {
		d.Note = "As a viewer of " + ns + " you may not read or change its stored secrets."
	} else {
		items, err := u.o.Store.Secrets(r.Context(), c.user, ns)
		if err != nil {
			if st, msg, ok := failStatus(err); ok {
				u.errorPage(w, r, c, st, msg)
				return
			}
			u.internal(w, r, c, err)
			return
		}
		for _, it := range items {
			if it.Scope == api.ScopeNamespace {
				d.Items = append(d.Items, it)
			}
		}
	}
	u.render(w, r, status, "secrets", c, "Stored secrets of "+ns, d)
}

func (u *UI) setSecret(w http.ResponseWriter, r *http.Request, c *caller) {
	if !u.form(w, r, c) {
		return
	}
	name, scope := r.PostForm.Get("name"), r.PostForm.Get("scope")
	if scope != api.ScopeAdmin {
		scope = api.ScopeUser
	}
	err := u.o.Store.SetSecret(r.Context(), c.user, store.SecretScope{Scope: scope}, name, r.PostForm.Get("value"))
	u.audit(r, c.user.Name, store.Audit{Action: "set-secret", Kind: "Secret", Name: name, Detail: "scope " + scope, Err: err})
	if err != nil {
		status, msg, ok := failStatus(err)
		if !ok {
			u.internal(w, r, c, err)
			return
		}
		u.secretsWith(w, r, c, status, secretsData{Name: name, Scope: scope, Error: msg})
		return
	}
	setFlash(w, "Secret "+name+" stored ("+scope+").")
	http.Redirect(w, r, "/secrets", http.StatusSeeOther)
}

func (u *UI) deleteSecret(w http.ResponseWriter, r *http.Request, c *caller) {
	if !u.form(w, r, c) {
		return
	}
	name, scope := r.PathValue("name"), r.PostForm.Get("scope")
	if scope != api.ScopeAdmin {
		scope = api.ScopeUser
	}
	err := u.o.Store.DeleteSecret(r.Context(), c.user, store.SecretScope{Scope: scope}, name)
	u.audit(r, c.user.Name, store.Audit{Action: "delete-secret", Kind: "Secret", Name: name, Detail: "scope " + scope, Err: err})
	if err != nil {
		status, msg, ok := failStatus(err)
		if !ok {
			u.internal(w, r, c, err)
			return
		}
		u.secretsWith(w, r, c, status, secretsData{Error: msg})
		return
	}
	setFlash(w, "Secret "+name+" deleted.")
	http.Redirect(w, r, "/secrets", http.StatusSeeOther)
}

func (u *UI) setNamespaceSecret(w http.ResponseWriter, r *http.Request, c *caller) {
	if !u.form(w, r, c) {
		return
	}
	ns, name := r.PathValue("ns"), r.PostForm.Get("name")
	err := u.o.Store.SetSecret(r.Context(), c.user, store.SecretScope{Scope: api.ScopeNamespace, Namespace: ns}, name, r.PostForm.Get("value"))
	u.audit(r, c.user.Name, store.Audit{Action: "set-secret", Kind: "Secret", Name: name, Detail: "scope namespace " + ns, Err: err})
	if err != nil {
		status, msg, ok := failStatus(err)
		if !ok {
			u.internal(w, r, c, err)
			return
		}
		u.namespaceSecretsWith(w, r, c, status, secretsData{Name: name, Error: msg})
		return
	}
	setFlash(w, "Secret "+name+" stored in "+ns+".")
	http.Redirect(w, r, "/namespaces/"+ns+"/secrets", http.StatusSeeOther)
}

func (u *UI) deleteNamespaceSecret(w http.ResponseWriter, r *http.Request, c *caller) {
	ns, name := r.PathValue("ns"), r.PathValue("name")
	err := u.o.Store.DeleteSecret(r.Context(), c.user, store.SecretScope{Scope: api.ScopeNamespace, Namespace: ns}, name)
	u.audit(r, c.user.Name, store.Audit{Action: "delete-secret", Kind: "Secret", Name: name, Detail: "scope namespace " + ns, Err: err})
	if err != nil {
		status, msg, ok := failStatus(err)
		if !ok {
			u.internal(w, r, c, err)
			return
		}
		u.namespaceSecretsWith(w, r, c, status, secretsData{Error: msg})
		return
	}
	setFlash(w, "Secret "+name+" deleted from "+ns+".")
	http.Redirect(w, r, "/namespaces/"+ns+"/secrets", http.StatusSeeOther)
}

// --- tokens

type tokensData struct {
	Items []*store.AccessToken
	Name  string
	Days  string
	Error string
	Now   time.Time
}

// tokenDays are the lifetimes the form offers.
var tokenDays = map[string]time.Duration{"7": 7 * 24 * time.Hour, "30": 30 * 24 * time.Hour, "90": 90 * 24 * time.Hour, "365": 365 * 24 * time.Hour}

func (u *UI) tokens(w http.ResponseWriter, r *http.Request, c *caller) {
	u.tokensWith(w, r, c, http.StatusOK, tokensData{Days: "90"})
}

func (u *UI) tokensWith(w http.ResponseWriter, r *http.Request, c *caller, status int, d tokensData) {
	ts, err := u.o.Store.Tokens(c.user.Name)
	if err != nil {
		u.internal(w, r, c, err)
		return
	}
	d.Items, d.Now = ts, u.o.Now()
	u.render(w, r, status, "tokens", c, "API tokens", d)
}

func (u *UI) createToken(w http.ResponseWriter, r *http.Request, c *caller) {
	if !u.form(w, r, c) {
		return
	}
	name, days := r.PostForm.Get("name"), r.PostForm.Get("days")
	life, ok := tokenDays[days]
	if !ok {
		u.tokensWith(w, r, c, http.StatusBadRequest, tokensData{Name: name, Days: "90", Error: "days: one of 7, 30, 90, 365"})
		return
	}
	t, tok, err := u.o.Store.CreateToken(r.Context(), c.user.Name, name, life)
	if err != nil {
		u.audit(r, c.user.Name, store.Audit{Action: "create", Kind: "AccessToken", Name: "(new)", Err: err})
		status, msg, ok := failStatus(err)
		if !ok {
			u.internal(w, r, c, err)
			return
		}
		u.tokensWith(w, r, c, status, tokensData{Name: name, Days: days, Error: msg})
		return
	}
	u.audit(r, c.user.Name, store.Audit{Action: "create", Kind: "AccessToken", Name: t.ID, Detail: "name " + t.Name})
	// Shown once, in this answer (no-store), never again.
	u.render(w, r, http.StatusCreated, "token_created", c, "Token created", map[string]any{"Token": tok, "Item": t})
}

func (u *UI) revokeToken(w http.ResponseWriter, r *http.Request, c *caller) {
	id := r.PathValue("id")
	err := u.o.Store.DeleteToken(r.Context(), c.user.Name, id)
	u.audit(r, c.user.Name, store.Audit{Action: "revoke", Kind: "AccessToken", Name: id, Err: err})
	if err != nil {
		status, msg, ok := failStatus(err)
		if !ok {
			u.internal(w, r, c, err)
			return
		}
		u.tokensWith(w, r, c, status, tokensData{Days: "90", Error: msg})
		return
	}
	setFlash(w, "Token "+id+" revoked.")
	http.Redirect(w, r, "/tokens", http.StatusSeeOther)
}

// --- admin

type adminUser struct {
	Name      string
	Admin     bool
	Created   time.Time
	Namespace string
	Locked    bool
}

// limitLabels name the settings of store.LimitKeys on the admin page.
var limitLabels = map[string]string{
	"quota.cpu": "CPU limits, whole namespace", "quota.memory": "Memory limits, whole namespace",
	"quota.pods": "Pods", "quota.storage": "Storage requests, whole namespace",
	"default.cpu": "A container's CPU limit when it sets none", "default.memory": "A container's memory limit when it sets none",
	"default-request.cpu": "A container's CPU request when it sets none", "default-request.memory": "A container's memory request when it sets none",
}

type limitRow struct{ Key, Label, Value string }

type adminData struct {
	Users     []adminUser
	Limits    []limitRow
	LimitsErr string
	// Analytics: Collected says whether a store for them exists, On whether the admin allows them.
	Collected bool
	On        bool
	Analytics []AnalyticsRow
	Installs  map[string]int64 // by day: installations that sent events (an estimate)
	NoCounts  string
	Name      string
	AdminBox  bool
	Error     string
	Self      string
}

func (u *UI) adminPage(w http.ResponseWriter, r *http.Request, c *caller) {
	u.adminWith(w, r, c, http.StatusOK, adminData{})
}

func (u *UI) adminWith(w http.ResponseWriter, r *http.Request, c *caller, status int, d adminData) {
	us, err := u.o.Store.Users()
	if err != nil {
		u.internal(w, r, c, err)
		return
	}
	now := u.o.Now()
	for _, x := range us {
		au := adminUser{Name: x.Name, Admin: x.Admin, Created: x.Created, Locked: x.LockedUntil.After(now)}
		if ns := u.o.Store.ManagedNamespace(x.Name); ns != nil && ns.Labels[store.LabelPersonal] == x.Name {
			au.Namespace = x.Name
		}
		d.Users = append(d.Users, au)
	}
	d.Self = c.user.Name
	if d.Limits == nil {
		l, err := u.o.Store.EffectiveLimits(r.Context())
		if err != nil {
			u.internal(w, r, c, err)
			return
		}
		for _, k := range store.LimitKeys() {
			d.Limits = append(d.Limits, limitRow{Key: k, Label: limitLabels[k], Value: store.LimitValue(l, k)})
		}
	}
	switch {
	case u.o.Analytics == nil:
		d.NoCounts = "This platform runs without a store for analytics."
	default:
		d.Collected, d.On = true, u.o.Analytics.Enabled()
		rep, err := u.o.Analytics.Report(analyticsDays)
		if err != nil {
			d.NoCounts = "The analytics could not be read: " + err.Error()
			break
		}
		d.Analytics, d.Installs = analyticsRows(rep)
		if len(d.Analytics) == 0 {
			d.NoCounts = fmt.Sprintf("No analytics events in the last %d days.", analyticsDays)
		}
	}
	u.render(w, r, status, "admin", c, "Administration", d)
}

func (u *UI) createUser(w http.ResponseWriter, r *http.Request, c *caller) {
	if !u.form(w, r, c) {
		return
	}
	name := r.PostForm.Get("name")
	admin, _ := strconv.ParseBool(r.PostForm.Get("admin"))
	usr, tok, err := u.o.Store.CreateUser(r.Context(), name, admin, "")
	u.audit(r, c.user.Name, store.Audit{Action: "create", Kind: "User", Name: name, Detail: "admin=" + strconv.FormatBool(admin), Err: err})
	if err != nil {
		status, msg, ok := failStatus(err)
		if !ok {
			u.internal(w, r, c, err)
			return
		}
		u.adminWith(w, r, c, status, adminData{Name: name, AdminBox: admin, Error: msg})
		return
	}
	u.render(w, r, http.StatusCreated, "user_created", c, "User created", map[string]any{"Name": usr.Name, "Token": tok})
}

func (u *UI) deleteUser(w http.ResponseWriter, r *http.Request, c *caller) {
	name := r.PathValue("name")
	if name == c.user.Name {
		u.adminWith(w, r, c, http.StatusConflict, adminData{Error: "You cannot remove your own account."})
		return
	}
	err := u.o.Store.DeleteUser(r.Context(), name)
	u.audit(r, c.user.Name, store.Audit{Action: "delete", Kind: "User", Name: name, Err: err})
	if err != nil {
		status, msg, ok := failStatus(err)
		if !ok {
			u.internal(w, r, c, err)
			return
		}
		u.adminWith(w, r, c, status, adminData{Error: msg})
		return
	}
	u.clients.forget(name)
	setFlash(w, "User "+name+" removed (their personal namespace is kept).")
	http.Redirect(w, r, "/admin", http.StatusSeeOther)
}

// setLimits saves the quota and limits new namespaces get.
func (u *UI) setLimits(w http.ResponseWriter, r *http.Request, c *caller) {
	if !u.form(w, r, c) {
		return
	}
	var l store.Limits
	var rows []limitRow
	for _, k := range store.LimitKeys() {
		v := strings.TrimSpace(r.PostForm.Get(k))
		rows = append(rows, limitRow{Key: k, Label: limitLabels[k], Value: v})
	}
	l = limitsFrom(rows)
	err := u.o.Store.SetLimits(r.Context(), l)
	u.audit(r, c.user.Name, store.Audit{Action: "set-limits", Kind: "ConfigMap", Name: store.SettingsName, Err: err})
	if err != nil {
		status, msg, ok := failStatus(err)
		if !ok {
			u.internal(w, r, c, err)
			return
		}
		u.adminWith(w, r, c, status, adminData{Limits: rows, LimitsErr: msg})
		return
	}
	setFlash(w, "Saved: namespaces made from now on get these quota and limits.")
	http.Redirect(w, r, "/admin", http.StatusSeeOther)
}

func limitsFrom(rows []limitRow) store.Limits {
	var l store.Limits
	set := map[string]*string{
		"quota.cpu": &l.QuotaCPU, "quota.memory": &l.QuotaMemory, "quota.pods": &l.QuotaPods, "quota.storage": &l.QuotaStorage,
		"default.cpu": &l.DefaultCPU, "default.memory": &l.DefaultMemory,
		"default-request.cpu": &l.DefaultRequestCPU, "default-request.memory": &l.DefaultRequestMemory,
	}
	for _, r := range rows {
		if p := set[r.Key]; p != nil {
			*p = r.Value
		}
	}
	return l
}

// analyticsDays is how far back the admin page shows analytics.
const analyticsDays = 14

// analyticsRows sums a report's counts by day, command and version (every OS, architecture),
// newest day first.
func analyticsRows(rep api.AnalyticsReport) ([]AnalyticsRow, map[string]int64) {
	type k struct{ day, cmd, ver string }
	sum := map[k]*AnalyticsRow{}
	installs := map[string]int64{}
	var out []AnalyticsRow
	for _, d := range rep.Days {
		installs[d.Date] = d.Installs
		for _, c := range d.Counts {
			key := k{d.Date, c.Command, c.Version}
			r := sum[key]
			if r == nil {
				r = &AnalyticsRow{Day: d.Date, Command: c.Command, Version: c.Version}
				sum[key] = r
			}
			if c.Success {
				r.Successes += c.Count
			} else {
				r.Failures += c.Count
			}
		}
	}
	for _, r := range sum {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Day != out[j].Day {
			return out[i].Day > out[j].Day
		}
		if out[i].Command != out[j].Command {
			return out[i].Command < out[j].Command
		}
		return out[i].Version < out[j].Version
	})
	return out, installs
}

// setAnalytics switches the platform's analytics on or off (the admin's setting, as the API's
// PUT /api/v1/analytics/settings).
func (u *UI) setAnalytics(w http.ResponseWriter, r *http.Request, c *caller) {
	if !u.form(w, r, c) {
		return
	}
	if u.o.Analytics == nil {
		u.adminWith(w, r, c, http.StatusConflict, adminData{Error: "This platform runs without a store for analytics."})
		return
	}
	on := r.PostForm.Get("enabled") == "true"
	err := u.o.Analytics.SetEnabled(r.Context(), on)
	u.audit(r, c.user.Name, store.Audit{Action: "set-analytics", Kind: "ConfigMap", Name: "devtool-analytics-settings", Detail: "enabled=" + strconv.FormatBool(on), Err: err})
	if err != nil {
		u.internal(w, r, c, err)
		return
	}
	if on {
		setFlash(w, "Analytics are on: the CLI sends its events when its user allows them too.")
	} else {
		setFlash(w, "Analytics are off: the platform accepts no events.")
	}
	http.Redirect(w, r, "/admin", http.StatusSeeOther)
}
