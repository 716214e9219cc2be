package filesync

import (
	"testing"
	"unsafe"
)

// TestEntrySize: an Entry stays 32 bytes; the engine keeps three per path (see symlinkEntry).
func TestEntrySize(t *testing.T) {
	if n := unsafe.Sizeof(Entry{}); n != 32 {
		t.Fatalf("Entry is %d bytes, want 32: each of the three indexes pays for it per path", n)
	}
}

// TestSymlinkEntries: symlinks to one target are the same, to another not; the target survives
// the wire and the index encoding; other kinds have no target.
func TestSymlinkEntries(t *testing.T) {
	a1, a2, b := symlinkEntry("../a", 1), symlinkEntry("../a", 2), symlinkEntry("../b", 1)
	if !same(a1, a2) || same(a1, b) {
		t.Fatalf("same: a1~a2 %v, a1~b %v", same(a1, a2), same(a1, b))
	}
	if a1.Target() != "../a" || b.Target() != "../b" {
		t.Fatalf("targets %q %q", a1.Target(), b.Target())
	}
	var e encoder
	e.entry(b)
	d := decoder{b: e.b}
	got := d.entry()
	if d.err != nil || got.Kind != KindSymlink || got.Target() != "../b" || got.MTime != 1 || !same(got, b) {
		t.Fatalf("decoded %+v (target %q), err %v", got, got.Target(), d.err)
	}
	if (Entry{Kind: KindFile, Hash: 1}).Target() != "" || (Entry{}).Target() != "" {
		t.Fatal("a file or an absent path has a target")
	}
	// a decoded empty target is refused, not interned
	var e2 encoder
	e2.byte1(byte(KindSymlink))
	e2.varint(0)
	e2.str("")
	d2 := decoder{b: e2.b}
	if d2.entry(); d2.err == nil {
		t.Fatal("an empty symlink target decoded")
	}
}
