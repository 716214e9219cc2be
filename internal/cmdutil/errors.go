// Package cmdutil holds what every command shares: the factory, flag groups and the names of
// the error types (defined in internal/errs, a leaf package libraries use without cobra).
// Commands depend on it; libraries never do.
package cmdutil

import "github.com/devtool/devtool/internal/errs"

// Exit codes returned by main (see internal/errs).
const (
	ExitOK        = errs.ExitOK
	ExitError     = errs.ExitError
	ExitUsage     = errs.ExitUsage
	ExitAuth      = errs.ExitAuth
	ExitCancelled = errs.ExitCancelled
)

// FlagError is a usage mistake (exit 2).
type FlagError = errs.FlagError

// InputError is bad input found before anything was attempted (exit 2, no usage line).
type InputError = errs.InputError

// UserError is a failure the user can fix; Hint tells them how.
type UserError = errs.UserError

// FlagErrorf builds a FlagError.
func FlagErrorf(format string, args ...any) error { return errs.FlagErrorf(format, args...) }

// WithHint attaches a hint to err.
func WithHint(err error, hint string) error { return errs.WithHint(err, hint) }

// ExitStatus carries the exit code of a command run elsewhere (devtool exec).
type ExitStatus = errs.ExitStatus

// ExitCode maps an error returned by a command to the process exit code.
func ExitCode(err error) int { return errs.ExitCode(err) }

// Hint returns the hint for err (attached, or explaining a well-known failure).
func Hint(err error) string { return errs.Hint(err) }
