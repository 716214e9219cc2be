package filesync

import (
	"errors"
	"fmt"
	"io/fs"
)

// testHookBeforeReplace, when set (tests only), runs after a path was checked
// and before the received file replaces it: where a concurrent writer can
// slip in.
var testHookBeforeReplace func(p string)

// replace puts the received temporary file tmp at p, which was cur when it was
// checked. When p was absent, the file is hard-linked instead of renamed:
// linking fails when a file appeared at p since the check (a person's new
// file, which a rename would silently replace and lose); the path is then
// reconciled again. A filesystem without hard links gets the rename.
func (t *tree) replace(tmp, p string, cur Entry) error {
	if testHookBeforeReplace != nil {
		testHookBeforeReplace(p)
	}
	if cur.Kind != KindNone {
		return t.r.Rename(tmp, p)
	}
	err := t.r.Link(tmp, p)
	if err == nil {
		_ = t.r.Remove(tmp)
		return nil
	}
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s: %w (created meanwhile)", p, errChanged)
	}
	return t.r.Rename(tmp, p)
}
