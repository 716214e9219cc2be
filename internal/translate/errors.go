package translate

import (
	"fmt"

	"github.com/devtool/devtool/internal/compose"
)

// errorAt prefixes an error with where the offending value was written, when that is known
// (a model built by hand has no positions).
func errorAt(pos compose.Position, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if where := pos.String(); where != "" {
		return fmt.Errorf("%s: %s", where, msg)
	}
	return fmt.Errorf("%s", msg)
}
