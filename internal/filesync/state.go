package filesync

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/cespare/xxhash/v2"
)

const indexMagic = "DTIDX1\n"

// saveIndex writes maps (with the root they belong to) to file atomically:
// a temporary file in the same folder renamed over it.
func saveIndex(file, root string, maps ...map[string]Entry) error {
	e := &encoder{b: make([]byte, 0, 64<<10)}
	e.b = append(e.b, indexMagic...)
	e.str(root)
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
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, e.b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

// loadIndex reads what saveIndex wrote. A missing file gives empty maps; a
// corrupt one or one for another root is an error (the caller starts afresh).
func loadIndex(file, root string, n int) ([]map[string]Entry, error) {
	maps := make([]map[string]Entry, n)
	for i := range maps {
		maps[i] = map[string]Entry{}
	}
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return maps, nil
	}
	if err != nil {
		return maps, err
	}
	if len(b) < len(indexMagic)+8 || !bytes.HasPrefix(b, []byte(indexMagic)) {
		return maps, fmt.Errorf("%s: not a sync index", file)
	}
	body, sum := b[:len(b)-8], binary.LittleEndian.Uint64(b[len(b)-8:])
	if xxhash.Sum64(body) != sum {
		return maps, fmt.Errorf("%s: checksum mismatch", file)
	}
	d := &decoder{b: body[len(indexMagic):]}
	if r := d.str(); r != root {
		return maps, fmt.Errorf("%s: index of %s, not %s", file, r, root)
	}
	if k := d.count(1); k != n {
		return maps, fmt.Errorf("%s: %d sections, want %d", file, k, n)
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
		return maps, fmt.Errorf("%s: %w", file, d.err)
	}
	return maps, nil
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
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, e.b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, file)
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
