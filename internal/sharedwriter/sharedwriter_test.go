package sharedwriter

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"testing"
)

// Two copies into one bytes.Buffer through Guard keep every byte (run with -race: unguarded,
// the detector reports the buffer, and output comes back short or zeroed).
func TestGuardSerializesOneWriter(t *testing.T) {
	var buf bytes.Buffer
	out, errOut := Guard(&buf, &buf)
	if out != errOut {
		t.Fatal("one writer given twice did not become one guarded writer")
	}
	if _, ok := out.(io.ReaderFrom); ok {
		t.Fatal("the guarded writer offers ReadFrom, which io.Copy would call without the lock")
	}
	var wg sync.WaitGroup
	for _, w := range []io.Writer{out, errOut} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				if _, err := io.Copy(w, strings.NewReader("0123456789")); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if buf.Len() != 2*1000*10 {
		t.Fatalf("%d bytes, want %d", buf.Len(), 2*1000*10)
	}
	if strings.Count(buf.String(), "0123456789") != 2000 {
		t.Fatal("writes were interleaved inside a chunk")
	}
}

func TestGuardLeavesOthersAlone(t *testing.T) {
	var a, b bytes.Buffer
	if o, e := Guard(&a, &b); o != io.Writer(&a) || e != io.Writer(&b) {
		t.Error("two writers were wrapped")
	}
	if o, e := Guard(&a, nil); o != io.Writer(&a) || e != nil {
		t.Error("a nil stderr changed")
	}
	// A writer whose dynamic type cannot be compared is never "the same" (and == would panic).
	f := funcWriter(func(p []byte) (int, error) { return len(p), nil })
	if o, _ := Guard(f, f); o == nil {
		t.Error("lost the writer")
	}
}

type funcWriter func([]byte) (int, error)

func (f funcWriter) Write(p []byte) (int, error) { return f(p) }
