package filesync

import (
	"bytes"
	"testing"
)

func encodeFrames(t testing.TB, msgs ...any) []byte {
	var buf bytes.Buffer
	fw := newFrameWriter(&buf)
	defer fw.close()
	var e encoder
	for _, m := range msgs {
		e.b = e.b[:0]
		typ := encodeMsg(&e, m)
		if err := fw.frame(typ, e.b); err != nil {
			t.Fatal(err)
		}
	}
	if err := fw.flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestWireRoundTrip(t *testing.T) {
	big := bytes.Repeat([]byte("compressible "), 20000)
	msgs := []any{
		&helloMsg{Reset: true, Roots: []string{"/a", "/b"}},
		&rulesMsg{Folder: 1, Excludes: []string{"x/"}, Files: []ruleFile{{Dir: "", Content: "*.o"}}},
		&entriesMsg{Folder: 0, Full: true, Done: true, Items: []item{{Path: "a", E: Entry{Kind: KindFile, Size: 3, MTime: 5, Hash: 7, Exec: true}}, {Path: "l", E: symlinkEntry("a", 0)}, {Path: "g"}}},
		&opMsg{ID: 9, Code: opMove, Path: "a", To: "b", Expect: Entry{Kind: KindDir}},
		&chunkMsg{ID: 9, Data: big[:chunkSize], Last: true},
		&resultMsg{ID: 9, OK: true, Code: failNotEmpty, Err: "e", State: Entry{Kind: KindDir}},
		&getMsg{ID: 3, Path: "p", Expect: Entry{Kind: KindFile}},
		&fatalMsg{Err: "bye"},
		&noticeMsg{Folder: 2, Text: "out of watches"},
		&helloOKMsg{IDs: []string{"0123456789abcdef0123456789abcdef", "x"}},
	}
	data := encodeFrames(t, msgs...)
	if len(data) > chunkSize/4 {
		t.Errorf("compressible data not compressed: %d bytes", len(data))
	}
	fr := newFrameReader(bytes.NewReader(data))
	defer fr.close()
	for i := range msgs {
		typ, body, err := fr.next()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeMsg(typ, body); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
}

// FuzzDecode feeds arbitrary streams to the frame reader and the message
// decoder: errors are fine, panics and huge allocations are not.
func FuzzDecode(f *testing.F) {
	f.Add(encodeFrames(f, &helloMsg{Roots: []string{"/x"}}, &entriesMsg{Items: []item{{Path: "a", E: Entry{Kind: KindFile}}}}))
	f.Add(encodeFrames(f, &chunkMsg{Data: bytes.Repeat([]byte{1}, 5000)}, &opMsg{Code: opPut, Path: "p"}))
	f.Add([]byte{0x80, 0, 0, 10, 0, 0, 0, 10, 1, 2, 3})
	f.Add([]byte{0, 0, 0, 3, 2, 1, 9})
	f.Fuzz(func(t *testing.T, data []byte) {
		fr := newFrameReader(bytes.NewReader(data))
		defer fr.close()
		for i := 0; i < 100; i++ {
			typ, body, err := fr.next()
			if err != nil {
				return
			}
			if len(body) > maxBlock {
				t.Fatalf("frame of %d bytes", len(body))
			}
			m, err := decodeMsg(typ, body)
			if err == nil && m == nil {
				t.Fatal("nil message without error")
			}
		}
	})
}
