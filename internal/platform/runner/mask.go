package runner

import (
	"bytes"
	"io"
	"sort"
	"strings"
	"sync"
)

// Masker replaces secret values by "****" in what it writes on. It holds back output until a line
// ends ('\n' or '\r'; by size alone when a value holds a line end) or 8 KiB are pending, keeping
// enough bytes back that a value cut by that limit is still caught; Flush writes what is held. Safe for concurrent writers (stdout and stderr of one
// command): each Write is applied whole.
type Masker struct {
	w       io.Writer
	secrets [][]byte // longest first
	longest int
	// multiline: a value holds a line end, so output is cut by size only
	multiline bool
	mu        sync.Mutex
	pending   []byte
}

const maskLimit = 8 << 10

// NewMasker masks values of at least 4 bytes (shorter ones would blank out ordinary words).
func NewMasker(w io.Writer, values []string) *Masker {
	m := &Masker{w: w}
	seen := map[string]bool{}
	for _, v := range values {
		if len(v) < 4 || seen[v] {
			continue
		}
		seen[v] = true
		m.secrets = append(m.secrets, []byte(v))
		m.longest = max(m.longest, len(v))
		m.multiline = m.multiline || strings.ContainsAny(v, "\r\n")
	}
	sort.Slice(m.secrets, func(i, j int) bool { return len(m.secrets[i]) > len(m.secrets[j]) })
	return m
}

var stars = []byte("****")

// Mask replaces every secret in b.
func (m *Masker) Mask(b []byte) []byte {
	for _, s := range m.secrets {
		if bytes.Contains(b, s) {
			b = bytes.ReplaceAll(b, s, stars)
		}
	}
	return b
}

func (m *Masker) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	// Complete values are replaced first; what may still be the start of one (at most longest-1
	// bytes at the end) is held back with the unfinished line.
	masked := m.Mask(append(m.pending, p...))
	cut := 0
	if !m.multiline {
		cut = bytes.LastIndexAny(masked, "\r\n") + 1
	}
	if cut == 0 && len(masked) > maskLimit {
		cut = len(masked) - max(m.longest-1, 0)
	}
	out := append([]byte(nil), masked[:cut]...)
	m.pending = append([]byte(nil), masked[cut:]...)
	if len(out) > 0 {
		if _, err := m.w.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Flush writes what is held back.
func (m *Masker) Flush() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.pending) == 0 {
		return nil
	}
	out := m.Mask(m.pending)
	m.pending = nil
	_, err := m.w.Write(out)
	return err
}
