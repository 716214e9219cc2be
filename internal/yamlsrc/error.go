package yamlsrc

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Position is where something was written.
type Position struct {
	File         string
	Line, Column int
}

func (p Position) String() string {
	if p.Line == 0 {
		return p.File
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Column)
}

// ComparePos orders positions as they appear in the files: by file, line, then column.
func ComparePos(a, b Position) int {
	return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
}

// Error is one problem found in a file. Field is the dotted path of the value
// ("services.web.ports[1]"); Msg says what was wrong and what was expected.
type Error struct {
	Pos   Position
	Field string
	Msg   string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s: %s", e.Pos, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", e.Pos, e.Field, e.Msg)
}

// SortErrors puts errs in file order (stable), so a user can fix them top to bottom.
func SortErrors(errs []*Error) {
	slices.SortStableFunc(errs, func(a, b *Error) int { return ComparePos(a.Pos, b.Pos) })
}

// FormatErrors is the message of a list of errors: the one error's message, or
// "N problems in the <what>:" followed by one indented line per error.
func FormatErrors(what string, errs []*Error) string {
	if len(errs) == 1 {
		return errs[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d problems in the %s:", len(errs), what)
	for _, e := range errs {
		b.WriteString("\n  ")
		b.WriteString(e.Error())
	}
	return b.String()
}

// UnwrapErrors returns errs as []error, for an error list's Unwrap method (so errors.As
// finds each *Error).
func UnwrapErrors(errs []*Error) []error {
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
	}
	return out
}
