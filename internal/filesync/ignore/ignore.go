// Package ignore matches paths against ignore rules in gitignore syntax:
// rules files at every level of a tree (.gitignore, .devtoolignore) plus
// extra patterns, with git's precedence (deeper files over shallower ones,
// later lines over earlier ones, "!" re-including).
//
// It is written here rather than taken from a library because the packages
// looked at either read one file only (sabhiram/go-gitignore, unmaintained
// since 2021) or come with all of go-git; nested files, negation and "**" fit
// in this one small file, fuzzed.
package ignore

import (
	"path"
	"strings"
)

// Names of the rules files read at every level of a tree, in increasing
// precedence within one folder.
var FileNames = []string{".gitignore", ".devtoolignore"}

type rule struct {
	segs    []string // pattern split on "/"
	neg     bool
	dirOnly bool
	base    bool // matches the last path element only (no slash in the pattern)
}

// Matcher holds the rules of one tree. The zero value matches nothing.
// A Matcher is not safe for concurrent mutation; Match may run concurrently.
type Matcher struct {
	extra []rule
	byDir map[string][]rule // folder ("" = root) -> rules, in file order
}

// New returns a Matcher with extra patterns (relative to the root) that take
// precedence over every rules file.
func New(extra []string) *Matcher {
	m := &Matcher{byDir: map[string][]rule{}}
	for _, l := range extra {
		if r, ok := parseLine(l); ok {
			m.extra = append(m.extra, r)
		}
	}
	return m
}

// Add adds the content of one rules file found in folder dir (slash-separated,
// relative to the root, "" for the root). Files added later for the same dir
// take precedence.
func (m *Matcher) Add(dir, content string) {
	if m.byDir == nil {
		m.byDir = map[string][]rule{}
	}
	m.byDir[dir] = append(m.byDir[dir], parse(content)...)
}

// parse parses the lines of a rules file; lines that are blank, comments or
// not valid patterns are skipped, as git does.
func parse(content string) []rule {
	var rules []rule
	for _, l := range strings.Split(content, "\n") {
		if r, ok := parseLine(l); ok {
			rules = append(rules, r)
		}
	}
	return rules
}

func parseLine(l string) (rule, bool) {
	l = strings.TrimSuffix(l, "\r")
	// Trailing spaces are dropped unless escaped with a backslash.
	for strings.HasSuffix(l, " ") && !strings.HasSuffix(l, "\\ ") {
		l = l[:len(l)-1]
	}
	if l == "" || l[0] == '#' {
		return rule{}, false
	}
	var r rule
	if l[0] == '!' {
		r.neg = true
		l = l[1:]
	} else if strings.HasPrefix(l, "\\!") || strings.HasPrefix(l, "\\#") {
		l = l[1:]
	}
	if strings.HasSuffix(l, "/") {
		r.dirOnly = true
		l = strings.TrimRight(l, "/")
	}
	if l == "" {
		return rule{}, false
	}
	anchored := strings.Contains(l, "/")
	l = strings.TrimPrefix(l, "/")
	if l == "" {
		return rule{}, false
	}
	var segs []string
	for _, s := range strings.Split(l, "/") {
		if s == "" {
			continue
		}
		if s == "**" && len(segs) > 0 && segs[len(segs)-1] == "**" {
			continue // a/**/**/b is a/**/b
		}
		s = strings.ReplaceAll(s, "[!", "[^")
		if s != "**" {
			if _, err := path.Match(s, ""); err != nil {
				return rule{}, false // malformed pattern: never matches, as in git
			}
		}
		segs = append(segs, s)
	}
	if len(segs) == 0 {
		return rule{}, false
	}
	r.segs = segs
	r.base = !anchored && len(segs) == 1 && segs[0] != "**"
	return r, true
}

// Match reports whether p (slash-separated, relative to the root) is ignored
// by the rules, looking at p itself only: callers walking a tree skip ignored
// folders, so the folders above p are known not to be ignored.
func (m *Matcher) Match(p string, isDir bool) bool {
	if m == nil {
		return false
	}
	if ok, hit := matchRules(m.extra, p, isDir); hit {
		return ok
	}
	if len(m.byDir) == 0 {
		return false
	}
	dir := p
	for {
		i := strings.LastIndexByte(dir, '/')
		if i < 0 {
			dir = ""
		} else {
			dir = dir[:i]
		}
		if rs := m.byDir[dir]; len(rs) > 0 {
			rel := p
			if dir != "" {
				rel = p[len(dir)+1:]
			}
			if ok, hit := matchRules(rs, rel, isDir); hit {
				return ok
			}
		}
		if dir == "" {
			return false
		}
	}
}

// Ignored reports whether p or any folder above it is ignored.
func (m *Matcher) Ignored(p string, isDir bool) bool {
	for i := 0; i < len(p); i++ {
		if p[i] == '/' && m.Match(p[:i], true) {
			return true
		}
	}
	return m.Match(p, isDir)
}

// matchRules applies rules last to first; hit says whether one matched.
func matchRules(rs []rule, rel string, isDir bool) (ignored, hit bool) {
	for i := len(rs) - 1; i >= 0; i-- {
		r := &rs[i]
		if r.dirOnly && !isDir {
			continue
		}
		if r.match(rel) {
			return !r.neg, true
		}
	}
	return false, false
}

func (r *rule) match(rel string) bool {
	if r.base {
		name := rel
		if i := strings.LastIndexByte(rel, '/'); i >= 0 {
			name = rel[i+1:]
		}
		ok, _ := path.Match(r.segs[0], name)
		return ok
	}
	return matchSegs(r.segs, strings.Split(rel, "/"))
}

// matchSegs matches pattern segments against path segments, "**" standing
// for any number of segments (at least one when it ends the pattern). It is
// dynamic programming over (pattern, path) positions: linear in their product
// whatever the number of "**".
func matchSegs(pat, segs []string) bool {
	// ok[j]: pat[:i] matches segs[:j]
	ok := make([]bool, len(segs)+1)
	next := make([]bool, len(segs)+1)
	ok[0] = true
	for i, p := range pat {
		clear(next)
		if p == "**" {
			last := i == len(pat)-1
			seen := false
			for j := 0; j <= len(segs); j++ {
				if last {
					// at least one segment
					next[j] = seen
				} else {
					next[j] = seen || ok[j]
				}
				seen = seen || ok[j]
			}
		} else {
			for j := 1; j <= len(segs); j++ {
				if ok[j-1] {
					if m, _ := path.Match(p, segs[j-1]); m {
						next[j] = true
					}
				}
			}
		}
		ok, next = next, ok
	}
	return ok[len(segs)]
}
