package web

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/devtool/devtool/internal/buildinfo"
	"github.com/devtool/devtool/internal/logs"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// pages are the templates under templates/, each parsed with layout.html and parts.html.
var pages = []string{"signin", "consent", "device", "notice", "error", "namespaces", "namespace", "confirm_delete", "environment", "logs",
	"secrets", "tokens", "token_created", "admin", "user_created"}

type templates struct {
	pages map[string]*template.Template
}

var funcs = template.FuncMap{
	"ago": ago,
	"datetime": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339)
	},
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return t.UTC().Format("2006-01-02 15:04 UTC")
	},
	"join": strings.Join,
	"query": func(kv ...string) template.URL { // a query string from pairs, values escaped
		q := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] != "" {
				q.Set(kv[i], kv[i+1])
			}
		}
		if len(q) == 0 {
			return ""
		}
		return template.URL("?" + q.Encode())
	},
	"color":  func(prefix string) int { return logs.ColorCode(prefix) % 12 },
	"pct":    func(f float64) string { return fmt.Sprintf("%.1f%%", f) },
	"bytes":  formatBytes,
	"status": statusClass,
	"list":   func(v ...string) []string { return v },
	"dict": func(kv ...any) (map[string]any, error) { // arguments of a shared part
		if len(kv)%2 != 0 {
			return nil, fmt.Errorf("dict: odd number of arguments")
		}
		m := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			k, ok := kv[i].(string)
			if !ok {
				return nil, fmt.Errorf("dict: key %v is not a string", kv[i])
			}
			m[k] = kv[i+1]
		}
		return m, nil
	},
}

func parseTemplates() (*templates, error) {
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/parts.html")
	if err != nil {
		return nil, err
	}
	t := &templates{pages: map[string]*template.Template{}}
	for _, p := range pages {
		c, err := base.Clone()
		if err != nil {
			return nil, err
		}
		if _, err := c.ParseFS(templateFS, "templates/"+p+".html"); err != nil {
			return nil, fmt.Errorf("template %s: %w", p, err)
		}
		t.pages[p] = c
	}
	return t, nil
}

// view is what the layout gets: the page's own data in Data.
type view struct {
	Title   string
	User    string
	Admin   bool
	Local   bool   // devtool ui
	Token   string // devtool ui: carried in links when the browser keeps no cookie
	Flash   string
	Version string
	Nav     string // the active navigation entry
	Data    any
}

// render writes a page (or, with ?fragment=NAME, only that part of it, for the script's refresh)
// into a buffer first, so a template error never sends half a page.
func (u *UI) render(w http.ResponseWriter, r *http.Request, status int, page string, c *caller, title string, data any) {
	v := view{Title: title, Version: buildinfo.Version, Data: data, Nav: page, Flash: readFlash(w, r)}
	if c != nil {
		v.User, v.Admin = c.user.Name, c.user.Admin
	}
	writePage(w, r, u.t, status, page, v, u.o.Log.Error)
}

func writePage(w http.ResponseWriter, r *http.Request, t *templates, status int, page string, v view, logErr func(string, ...any)) {
	tp := t.pages[page]
	name := "layout.html"
	if f := r.URL.Query().Get("fragment"); f != "" && r.Method == http.MethodGet {
		if tp.Lookup("fragment-"+f) == nil {
			http.Error(w, "no such fragment", http.StatusNotFound)
			return
		}
		name = "fragment-" + f
	}
	var b bytes.Buffer
	if err := tp.ExecuteTemplate(&b, name, v); err != nil {
		logErr("rendering a page", "page", page, "err", err)
		http.Error(w, "internal error: the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

type errorData struct {
	Status  int
	Message string
}

func (u *UI) errorPage(w http.ResponseWriter, r *http.Request, c *caller, status int, msg string) {
	u.render(w, r, status, "error", c, http.StatusText(status), errorData{Status: status, Message: msg})
}

func (u *UI) internal(w http.ResponseWriter, r *http.Request, c *caller, err error) {
	if r.Context().Err() != nil {
		return // the browser went away
	}
	u.o.Log.Error("web request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	u.errorPage(w, r, c, http.StatusInternalServerError, "Something went wrong on the platform's side; its log says what.")
}

// --- flash: one message shown on the next page (a short-lived cookie, read once)

const flashCookie = "__Host-devtool-flash"

func setFlash(w http.ResponseWriter, msg string) {
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: url.QueryEscape(msg), Path: "/", MaxAge: 60,
		Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
}

func readFlash(w http.ResponseWriter, r *http.Request) string {
	ck, err := r.Cookie(flashCookie)
	if err != nil {
		return ""
	}
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: "", Path: "/", MaxAge: -1, Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	msg, err := url.QueryUnescape(ck.Value)
	if err != nil || len(msg) > 500 {
		return ""
	}
	return msg
}

// --- static assets

func staticHandler() http.Handler {
	sub, _ := fs.Sub(staticFS, "static")
	fsrv := http.StripPrefix("/static/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=3600")
		fsrv.ServeHTTP(w, r)
	})
}

// --- formatting

func ago(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := time.Since(t)
	switch {
	case d < 0:
		return "now"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// statusClass is the CSS class of an environment's or pod's state (good, busy, bad).
func statusClass(s string) string {
	switch s {
	case "deployed", "Running", "Succeeded", "ready", "synchronized", "live":
		return "good"
	case "progressing", "destroying", "Pending", "ContainerCreating", "PodInitializing", "Terminating", "starting", "activating":
		return "busy"
	case "":
		return ""
	}
	return "bad"
}
