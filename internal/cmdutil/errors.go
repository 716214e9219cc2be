// Package cmdutil holds what every command shares: the factory, typed errors and their exit codes,
// and reusable flag groups. Commands depend on it; libraries never do.
package cmdutil

import (
	"context"
	"errors"
	"fmt"
)

// Exit codes returned by main. Kept few and stable so scripts can rely on them.
const (
	ExitOK        = 0
	ExitError     = 1   // the command ran and failed
	ExitUsage     = 2   // bad flags or arguments: nothing was attempted
	ExitCancelled = 130 // interrupted (Ctrl-C), as shells report SIGINT
)

// FlagError is a usage mistake: a missing or invalid flag or argument. main prints the usage hint.
type FlagError struct{ Err error }

func (e *FlagError) Error() string { return e.Err.Error() }
func (e *FlagError) Unwrap() error { return e.Err }

// FlagErrorf builds a FlagError.
func FlagErrorf(format string, args ...any) error {
	return &FlagError{Err: fmt.Errorf(format, args...)}
}

// UserError is a failure the user can fix; Hint tells them how.
type UserError struct {
	Err  error
	Hint string
}

func (e *UserError) Error() string { return e.Err.Error() }
func (e *UserError) Unwrap() error { return e.Err }

// WithHint attaches a hint to err.
func WithHint(err error, hint string) error { return &UserError{Err: err, Hint: hint} }

// ExitStatus carries the exit code of a command run elsewhere (devtool exec): main exits with
// Code and prints nothing, since the command already spoke for itself.
type ExitStatus struct{ Code int }

func (e *ExitStatus) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// ExitCode maps an error returned by a command to the process exit code.
func ExitCode(err error) int {
	var fe *FlagError
	var es *ExitStatus
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &es):
		return es.Code
	case errors.Is(err, context.Canceled):
		return ExitCancelled
	case errors.As(err, &fe):
		return ExitUsage
	default:
		return ExitError
	}
}

// Hint returns the hint attached to err, if any.
func Hint(err error) string {
	var ue *UserError
	if errors.As(err, &ue) {
		return ue.Hint
	}
	return ""
}
