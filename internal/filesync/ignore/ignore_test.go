package ignore

import "testing"

func TestMatch(t *testing.T) {
	m := New([]string{"/tmp/", "*.swp"})
	m.Add("", "# comment\n*.log\n!important.log\n/build\nnode_modules/\ndocs/**/*.pdf\n**/cache\nfoo/**\n\\#hash\nspace\\ \n")
	m.Add("sub", "*.txt\n!keep.txt\n/anchored\n")
	m.Add("sub/deeper", "!*.log\n")
	cases := []struct {
		p    string
		dir  bool
		want bool
	}{
		{"a.log", false, true},
		{"x/y/a.log", false, true},
		{"important.log", false, false},
		{"build", true, true},
		{"x/build", true, false},
		{"node_modules", true, true},
		{"a/node_modules", true, true},
		{"node_modules", false, false},
		{"docs/a/b/c.pdf", false, true},
		{"docs/c.pdf", false, true},
		{"x/docs/c.pdf", false, false},
		{"a/b/cache", true, true},
		{"cache", false, true},
		{"foo", true, false},
		{"foo/x", false, true},
		{"#hash", false, true},
		{"space ", false, true},
		{"sub/a.txt", false, true},
		{"sub/keep.txt", false, false},
		{"a.txt", false, false},
		{"sub/anchored", false, true},
		{"sub/x/anchored", false, false},
		{"sub/deeper/z.log", false, false},
		{"tmp", true, true},
		{"x/tmp", true, false},
		{"a/.b.swp", false, true},
	}
	for _, c := range cases {
		if got := m.Match(c.p, c.dir); got != c.want {
			t.Errorf("Match(%q, dir=%v) = %v, want %v", c.p, c.dir, got, c.want)
		}
	}
	if !m.Ignored("build/x/y.go", false) {
		t.Error("a file below an ignored folder is ignored")
	}
}

func FuzzParseMatch(f *testing.F) {
	f.Add("*.log\n!a.log\n/b/**/c\n[a-z]?x\n", "b/x/y/c")
	f.Add("**/**/**/a/**/b/**\n", "a/a/a/a/a/a/a/b/b/b/b")
	f.Add("[\n\\\n!\n/\n", "x")
	f.Fuzz(func(t *testing.T, rules, p string) {
		m := New(nil)
		m.Add("", rules)
		m.Add("d", rules)
		_ = m.Match(p, false)
		_ = m.Match(p, true)
		_ = m.Ignored("d/"+p, false)
	})
}
