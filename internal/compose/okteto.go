package compose

import (
	"net/url"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/devtool/devtool/internal/yamlsrc"
)

// Okteto's Compose extensions (issue 22), so files written for Okteto load unchanged. Where
// Okteto contradicts Docker Compose (scale against deploy.replicas, a service name with a
// space), Docker Compose's error stays.

// oktetoSpellings are the service keys Okteto accepts in another spelling than Compose's, and
// the Compose key each one is read as (with a warning naming it).
var oktetoSpellings = map[string]string{
	"capAdd":          "cap_add",
	"capDrop":         "cap_drop",
	"envFile":         "env_file",
	"stopGracePeriod": "stop_grace_period",
	"workdir":         "working_dir",
}

// serviceKey is the Compose key a service's field is read as: its own, or for one of Okteto's
// spellings the Compose one, with a warning. seen holds the keys read so far in the service,
// so a file setting both spellings gets an error instead of one silently winning.
func (l *loader) serviceKey(f *yamlsrc.Entry, field string, seen map[string]string) (string, bool) {
	key := f.Key
	if compose, ok := oktetoSpellings[key]; ok {
		l.Warnf("%s: %s: %s is Okteto's spelling; read as %s, the name Docker Compose knows", l.Pos(f.KeyNode), yamlsrc.Join(field, key), key, compose)
		key = compose
	}
	if written, ok := seen[key]; ok && written != f.Key {
		l.Errorf(f.KeyNode, yamlsrc.Join(field, f.Key), "%s and %s are the same field; set one of them", written, f.Key)
		return key, false
	}
	seen[key] = f.Key
	return key, true
}

// userMapping reads Okteto's user: {runAsUser, runAsGroup}, the mapping form of "uid:gid".
func (l *loader) userMapping(n *yaml.Node, field string, s *Service) {
	es, _ := l.Mapping(n, field)
	for _, e := range es {
		f := yamlsrc.Join(field, e.Key)
		var dst **int64
		switch e.Key {
		case "runAsUser":
			dst = &s.RunAsUser
		case "runAsGroup":
			dst = &s.RunAsGroup
		default:
			l.Ignore(e.KeyNode, f)
			continue
		}
		v, ok := l.Int(e.Val, f)
		if !ok {
			continue
		}
		if v < 0 {
			l.Errorf(e.Val, f, "expected a numeric id of 0 or more, found %d", v)
			continue
		}
		id := int64(v)
		*dst = &id
	}
}

// curlCheck recognises a healthcheck test that only asks curl for a URL of the container
// itself, and returns the HTTP check that means the same, so images without curl still get
// a probe. exec is the test as healthTest made it: ["sh", "-c", cmd] for a string or
// CMD-SHELL, the arguments for CMD. It returns nil for anything else, which stays an exec
// probe. Accepted:
//
//	curl [flags] URL               flags: -f --fail --fail-with-body -s --silent -S --show-error
//	curl [flags] URL || exit 1            -k --insecure -L --location, combined (-fsSL),
//	curl [flags] URL || exit              (or || false)
//	                                      -o /dev/null, --output /dev/null
//
// URL: http:// or https:// (or no scheme: http), host localhost, 127.0.0.1, [::1] or 0.0.0.0,
// any port (default 80/443), path and query. "|| exit 1" only in the shell forms, where it
// means what the probe means (curl's own failure is already the check's failure). Anything
// else (other flags, headers, a method, pipes, &&, variables, quotes inside a word) keeps the
// exec probe.
func curlCheck(exec []string) *HTTPCheck {
	words := exec
	if len(exec) == 3 && exec[0] == "sh" && exec[1] == "-c" {
		var ok bool
		if words, ok = shellWords(exec[2]); !ok {
			return nil
		}
		words = trimOrFail(words)
	}
	if len(words) < 2 || words[0] != "curl" {
		return nil
	}
	var target string
	for i := 1; i < len(words); i++ {
		w := words[i]
		switch {
		case w == "-o" || w == "--output":
			if i+1 >= len(words) || words[i+1] != "/dev/null" {
				return nil
			}
			i++
		case strings.HasPrefix(w, "--"):
			switch w {
			case "--fail", "--fail-with-body", "--silent", "--show-error", "--insecure", "--location":
			default:
				return nil
			}
		case strings.HasPrefix(w, "-"):
			if len(w) < 2 || strings.Trim(w[1:], "fsSkL") != "" {
				return nil
			}
		default:
			if target != "" {
				return nil // two URLs: curl would fetch both
			}
			target = w
		}
	}
	if target == "" {
		return nil
	}
	return localURL(target)
}

// trimOrFail drops a trailing "|| exit 1", "|| exit" or "|| false": after curl, each fails the
// check exactly when curl failed, so the check means the same without it.
func trimOrFail(words []string) []string {
	n := len(words)
	switch {
	case n >= 3 && words[n-3] == "||" && words[n-2] == "exit" && words[n-1] == "1":
		return words[:n-3]
	case n >= 2 && words[n-2] == "||" && (words[n-1] == "exit" || words[n-1] == "false"):
		return words[:n-2]
	}
	return words
}

// localURL reads a URL curl would fetch from the container itself.
func localURL(s string) *HTTPCheck {
	if !strings.Contains(s, "://") {
		s = "http://" + s // curl's default scheme
	}
	u, err := url.Parse(s)
	if err != nil || u.User != nil || u.Fragment != "" || u.Opaque != "" {
		return nil
	}
	c := &HTTPCheck{Scheme: u.Scheme}
	switch u.Scheme {
	case "http":
		c.Port = 80
	case "https":
		c.Port = 443
	default:
		return nil
	}
	switch u.Hostname() {
	case "localhost", "127.0.0.1", "0.0.0.0", "::1":
	default:
		return nil
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return nil
		}
		c.Port = int32(n)
	}
	c.Path = u.EscapedPath()
	if c.Path == "" {
		c.Path = "/"
	}
	if u.RawQuery != "" {
		c.Path += "?" + u.RawQuery
	}
	return c
}

// shellWords splits a command line the shell would run as plain words: words separated by
// blanks, each bare or wholly inside single or double quotes. A character the shell would
// treat specially ($, `, \, ;, &, |, <, >, (, ), globs, ~, #, a newline, a quote inside a
// word) makes it refuse (ok false), except a bare "||" word, which the caller checks. In
// double quotes $, ` and \ are refused too.
func shellWords(s string) (words []string, ok bool) {
	for _, w := range strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\t' }) {
		if w == "||" {
			words = append(words, w)
			continue
		}
		if n := len(w); n >= 2 && (w[0] == '\'' || w[0] == '"') && w[n-1] == w[0] {
			inner := w[1 : n-1]
			bad := "'\n"
			if w[0] == '"' {
				bad = "\"$`\\\n"
			}
			if strings.ContainsAny(inner, bad) {
				return nil, false
			}
			words = append(words, inner)
			continue
		}
		if strings.ContainsAny(w, "$`\\;&|<>()*?[]{}~#!'\"\n") {
			return nil, false
		}
		words = append(words, w)
	}
	return words, true
}
