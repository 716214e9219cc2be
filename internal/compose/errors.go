package compose

import "github.com/devtool/devtool/internal/yamlsrc"

// Position is where something was written.
type Position = yamlsrc.Position

// Error is one problem found in a Compose file. Field is the dotted path of the value
// ("services.web.ports[1]"); Msg says what was wrong and what was expected.
type Error = yamlsrc.Error

// Errors is every problem found in one load, in the order found. Load reports them all at
// once so a user can fix a file in one pass.
type Errors []*Error

func (es Errors) Error() string { return yamlsrc.FormatErrors("compose file", es) }

// Unwrap lets errors.As find each *Error.
func (es Errors) Unwrap() []error { return yamlsrc.UnwrapErrors(es) }
