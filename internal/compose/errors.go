package compose

import (
	"fmt"
	"strings"
)

// Error is one problem found in a Compose file. Field is the dotted path of the value
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

// Errors is every problem found in one load, in the order found. Load reports them all at
// once so a user can fix a file in one pass.
type Errors []*Error

func (es Errors) Error() string {
	if len(es) == 1 {
		return es[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d problems in the compose file:", len(es))
	for _, e := range es {
		b.WriteString("\n  ")
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap lets errors.As find each *Error.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}
