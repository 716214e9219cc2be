package agentversion

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBannerRoundTrip(t *testing.T) {
	in := Info{Release: "v1.2.3-4-gabc", Protocol: 3, Sum: "0123456789abcdef0123", Banner: true}
	b := Banner(in)
	if !strings.HasPrefix(b, "SSH-2.0-devtool-agent ") || strings.ContainsAny(b, "\r\n") || len(b) > 255 {
		t.Fatalf("banner %q", b)
	}
	out, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	want := in
	want.Sum = in.Sum[:16]
	if out != want {
		t.Fatalf("parsed %+v, want %+v", out, want)
	}
	if !strings.Contains(out.String(), "release v1.2.3-4-gabc (sync protocol 3)") {
		t.Errorf("String: %s", out)
	}
}

func TestParse(t *testing.T) {
	// the previous releases' banner
	i, err := Parse("SSH-2.0-devtool-agent")
	if err != nil || i.Banner || i.Protocol != 2 {
		t.Errorf("previous banner: %+v %v", i, err)
	}
	for _, bad := range []string{"SSH-2.0-OpenSSH_9.6", "SSH-2.0-devtool-agentX", "SSH-2.0-devtool-agent release=x", "SSH-2.0-devtool-agent proto=abc"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	// a release with spaces or control characters stays one word
	i, err = Parse(Banner(Info{Release: "dev build\r\n", Protocol: 3}))
	if err != nil || i.Release != "dev_build__" {
		t.Errorf("%+v %v", i, err)
	}
}

func TestOutdated(t *testing.T) {
	sum := "0123456789abcdef" + strings.Repeat("0", 48)
	for _, c := range []struct {
		name    string
		running Info
		want    bool
	}{
		{"previous release", Info{Protocol: 2}, true},
		{"older protocol", Info{Banner: true, Protocol: 2, Sum: "ffff"}, true},
		{"same binary", Info{Banner: true, Protocol: 3, Sum: sum[:16]}, false},
		{"same protocol, other build", Info{Banner: true, Protocol: 3, Sum: "ffffffffffffffff"}, true},
		{"newer protocol", Info{Banner: true, Protocol: 4, Sum: "ffffffffffffffff"}, false},
	} {
		if got := Outdated(c.running, 3, sum); got != c.want {
			t.Errorf("%s: Outdated = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestFileSum(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := FileSum(p)
	if err != nil || s != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Errorf("%s %v", s, err)
	}
}

// The restart reply round-trips, an earlier release's empty reply says nothing, and words
// this release does not know (a later one's) are skipped.
func TestRestartReply(t *testing.T) {
	for _, tc := range []struct {
		payload string
		want    RestartReply
	}{
		{"", RestartReply{}},
		{RestartReply{Handoff: true, Kept: 2}.String(), RestartReply{Handoff: true, Kept: 2, Said: true}},
		{RestartReply{Handoff: false, Kept: 5}.String(), RestartReply{Said: true}},
		{"handoff=1 kept=1 future=yes", RestartReply{Handoff: true, Kept: 1, Said: true}},
		{"handoff=1 kept=-3", RestartReply{Handoff: true, Said: true}},
		{"handoff=2 kept=x", RestartReply{Said: true}},
	} {
		if got := ParseRestartReply([]byte(tc.payload)); got != tc.want {
			t.Errorf("ParseRestartReply(%q) = %+v, want %+v", tc.payload, got, tc.want)
		}
	}
}
