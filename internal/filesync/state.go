package filesync

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/devtool/devtool/internal/atomicfile"
)

// indexMagic starts an index file; indexMagicV1 is the older layout without
// the state ID (still read: its ID is "").
const (
	indexMagic   = "DTIDX2\n"
	indexMagicV1 = "DTIDX1\n"
)

// saveIndex writes maps (with the root they belong to and a state ID) to
// file atomically: a temporary file in the same folder renamed over it. The
// ID is the remote state's identity: the agent's own on its side, the one
// the base was agreed with on the client's.
func saveIndex(file, root, id string, maps ...map[string]Entry) error {
	e := &encoder{b: make([]byte, 0, 64<<10)}
	e.b = append(e.b, indexMagic...)
	e.str(root)
	e.str(id)
	e.uvarint(uint64(len(maps)))
	for _, m := range maps {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		e.uvarint(uint64(len(keys)))
		for _, k := range keys {
			e.str(k)
			e.entry(m[k])
		}
	}
	e.b = binary.LittleEndian.AppendUint64(e.b, xxhash.Sum64(e.b))
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	return writeFileAtomic(file, e.b)
}

// writeFileAtomic writes file (0600) through a temporary file of a unique
// name in the same folder, renamed over it: two sessions on the same state
// folder (one ending while the next starts) never write the same
// temporary file.
func writeFileAtomic(file string, b []byte) error {
	return atomicfile.Write(file, b, 0o600)
}

// loadIndex reads what saveIndex wrote (maps and state ID). A missing file
// gives empty maps and no ID; a corrupt one or one for another root is an
// error (the caller starts afresh).
func loadIndex(file, root string, n int) (maps []map[string]Entry, id string, err error) {
	maps = make([]map[string]Entry, n)
	for i := range maps {
		maps[i] = map[string]Entry{}
	}
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return maps, "", nil
	}
	if err != nil {
		return maps, "", err
	}
	v1 := bytes.HasPrefix(b, []byte(indexMagicV1))
	if len(b) < len(indexMagic)+8 || !(v1 || bytes.HasPrefix(b, []byte(indexMagic))) {
		return maps, "", fmt.Errorf("%s: not a sync index", file)
	}
	body, sum := b[:len(b)-8], binary.LittleEndian.Uint64(b[len(b)-8:])
	if xxhash.Sum64(body) != sum {
		return maps, "", fmt.Errorf("%s: checksum mismatch", file)
	}
	d := &decoder{b: body[len(indexMagic):]}
	if r := d.str(); r != root {
		return maps, "", fmt.Errorf("%s: index of %s, not %s", file, r, root)
	}
	if !v1 {
		id = d.str()
	}
	if k := d.count(1); k != n {
		return maps, "", fmt.Errorf("%s: %d sections, want %d", file, k, n)
	}
	for i := 0; i < n && d.err == nil; i++ {
		c := d.count(2)
		for j := 0; j < c && d.err == nil; j++ {
			p := d.str()
			e := d.entry()
			if checkPath(p) == nil && e.Kind != KindNone {
				maps[i][p] = e
			}
		}
	}
	if d.err != nil {
		for i := range maps {
			maps[i] = map[string]Entry{}
		}
		return maps, "", fmt.Errorf("%s: %w", file, d.err)
	}
	return maps, id, nil
}

// nextRun is when work that started at start (and just ended) runs again:
// after at least every, and after 20 times what it took, so repeated work
// whose cost grows with the index (a save, the status) takes at most about
// 5 % of a busy engine's time.
func nextRun(start time.Time, every time.Duration) time.Time {
	now := time.Now()
	return now.Add(max(every, 20*now.Sub(start)))
}

// newStateID returns a random 128-bit identity for a remote index.
func newStateID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand does not fail on supported systems; a clock-based ID
		// still differs from any earlier one.
		binary.BigEndian.PutUint64(b[:], uint64(time.Now().UnixNano()))
	}
	return hex.EncodeToString(b[:])
}

func indexFile(stateDir, side, root string) string {
	return filepath.Join(stateDir, fmt.Sprintf("%s-%016x.idx", side, xxhash.Sum64String(root)))
}

func newHasher() *xxhash.Digest { return xxhash.New() }

const rulesMagic = "DTRULES1\n"

// saveRules persists the rules files of the last local scan (sent early in
// the next session).
func saveRules(file string, rules []ruleFile) error {
	e := &encoder{b: []byte(rulesMagic)}
	e.uvarint(uint64(len(rules)))
	for _, r := range rules {
		e.str(r.Dir)
		e.str(r.Content)
	}
	e.b = binary.LittleEndian.AppendUint64(e.b, xxhash.Sum64(e.b))
	return writeFileAtomic(file, e.b)
}

// loadRules reads what saveRules wrote; any damage is an error (the session
// then sends its rules after the scan, as a first one does).
func loadRules(file string) ([]ruleFile, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	if len(b) < len(rulesMagic)+8 || !bytes.HasPrefix(b, []byte(rulesMagic)) {
		return nil, fmt.Errorf("%s: not a rules file", file)
	}
	body, sum := b[:len(b)-8], binary.LittleEndian.Uint64(b[len(b)-8:])
	if xxhash.Sum64(body) != sum {
		return nil, fmt.Errorf("%s: checksum mismatch", file)
	}
	d := &decoder{b: body[len(rulesMagic):]}
	n := d.count(2)
	rules := make([]ruleFile, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		rules = append(rules, ruleFile{Dir: d.str(), Content: d.str()})
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail(fmt.Errorf("%d trailing bytes", len(d.b)))
	}
	if d.err != nil {
		return nil, fmt.Errorf("%s: %w", file, d.err)
	}
	return rules, nil
}
