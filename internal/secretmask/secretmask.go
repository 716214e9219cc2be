// Package secretmask keeps secret values out of what devtool prints: a Set of values (the platform's
// stored secrets a command resolved) and Writers that replace every occurrence of one of them with
// Mask before it reaches the terminal, a file or a pipe. A value split across writes is still
// masked: the end of a write that could be the start of a value is held back until the next write
// shows whether it is one, or until Flush. It is a leaf: no devtool imports, never prints itself.
//
// Besides each value as it is, its JSON-escaped form (how it appears quoted in JSON or YAML output),
// its standard base64 form (a Secret's data in a dry run) and, for a value of several lines, each of
// its lines are masked. Values shorter than MinLen bytes are not masked: they would turn every
// occurrence of a common short string in the output into Mask, and are no secret worth the name.
package secretmask

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
)

// Mask replaces a secret value in output.
const Mask = "***"

// MinLen is the shortest value (in bytes) that is masked.
const MinLen = 4

// Set is the values to mask, shared by the Writers of a process. Safe for concurrent use; the zero
// value is an empty set.
type Set struct {
	mu       sync.RWMutex
	patterns [][]byte          // longest first
	byFirst  map[byte][][]byte // the patterns by their first byte, longest first
	seen     map[string]bool
	first    string // the first byte of every pattern, for bytes.IndexAny
}

// Add adds values (and their escaped forms) to the set; values shorter than MinLen are skipped.
func (s *Set) Add(values ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	add := func(p string) {
		if len(p) < MinLen || s.seen[p] {
			return
		}
		s.seen[p] = true
		s.patterns = append(s.patterns, []byte(p))
		if !strings.Contains(s.first, p[:1]) {
			s.first += p[:1]
		}
	}
	for _, v := range values {
		add(v)
		if b, err := json.Marshal(v); err == nil {
			add(string(b[1 : len(b)-1]))
		}
		add(base64.StdEncoding.EncodeToString([]byte(v)))
		if strings.ContainsAny(v, "\r\n") {
			for _, line := range strings.FieldsFunc(v, func(r rune) bool { return r == '\n' || r == '\r' }) {
				add(strings.TrimSpace(line))
			}
		}
	}
	sort.SliceStable(s.patterns, func(i, j int) bool { return len(s.patterns[i]) > len(s.patterns[j]) })
	s.byFirst = map[byte][][]byte{}
	for _, p := range s.patterns {
		s.byFirst[p[0]] = append(s.byFirst[p[0]], p)
	}
}

// Len is the number of patterns masked (values and their forms).
func (s *Set) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.patterns)
}

// String masks every value in text (for a message built before it is written).
func (s *Set) String(text string) string {
	out, _ := s.mask(nil, []byte(text), true)
	return string(out)
}

// mask appends data, masked, to out. Unless final, it stops at the first position from which the
// rest of data is a proper prefix of a pattern (a value the next write may complete) and returns
// that rest as held.
func (s *Set) mask(out, data []byte, final bool) (masked, held []byte) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.patterns) == 0 {
		return append(out, data...), nil
	}
	for i := 0; i < len(data); {
		j := bytes.IndexAny(data[i:], s.first)
		if j < 0 {
			return append(out, data[i:]...), nil
		}
		out = append(out, data[i:i+j]...)
		i += j
		rest := data[i:]
		candidates := s.byFirst[rest[0]]
		if !final && isProperPrefix(candidates, rest) {
			return out, append([]byte(nil), rest...)
		}
		if n := matchAt(candidates, rest); n > 0 {
			out = append(out, Mask...)
			i += n
			continue
		}
		out = append(out, data[i])
		i++
	}
	return out, nil
}

// matchAt is the length of the longest of patterns (longest first) data starts with (0: none).
func matchAt(patterns [][]byte, data []byte) int {
	for _, p := range patterns {
		if len(p) <= len(data) && p[len(p)-1] == data[len(p)-1] && bytes.HasPrefix(data, p) {
			return len(p)
		}
	}
	return 0
}

// isProperPrefix reports whether data is shorter than one of patterns and starts it.
func isProperPrefix(patterns [][]byte, data []byte) bool {
	for _, p := range patterns {
		if len(data) < len(p) && bytes.HasPrefix(p, data) {
			return true
		}
	}
	return false
}

// Writer masks what is written to it before passing it on. Safe for concurrent use (writes are
// passed on whole, one at a time).
type Writer struct {
	set  *Set
	w    io.Writer
	mu   sync.Mutex
	held []byte
	buf  []byte
}

// NewWriter masks the values of set (as it is when each write happens) in what goes to w.
func NewWriter(w io.Writer, set *Set) *Writer {
	return &Writer{set: set, w: w}
}

// Write masks p and writes what is certain; it reports len(p) written when the underlying write
// succeeds (the held bytes are written later or by Flush).
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.held) == 0 && w.set.Len() == 0 { // nothing to mask: passed on as it is
		return w.w.Write(p)
	}
	data := p
	if len(w.held) > 0 {
		data = append(w.held, p...)
		w.held = nil
	}
	out, held := w.set.mask(w.buf[:0], data, false)
	w.held = held
	w.buf = out[:0]
	if len(out) == 0 {
		return len(p), nil
	}
	if _, err := w.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes the bytes held back (masked: what is held cannot be completed any more).
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.held) == 0 {
		return nil
	}
	out, _ := w.set.mask(nil, w.held, true)
	w.held = nil
	_, err := w.w.Write(out)
	return err
}

// File is the underlying writer when it is a file (nil otherwise), so a caller that asks whether
// output goes to a terminal still can; what it writes must still go through Write.
func (w *Writer) File() *os.File {
	f, _ := w.w.(*os.File)
	return f
}
