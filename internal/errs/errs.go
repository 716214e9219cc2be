// Package errs holds devtool's error types and the one mapping from an error to an exit code
// and a hint. It is a leaf: libraries (contexts, environment, deploy) return these errors without
// importing cobra, and main turns them into an exit code and sentences.
package errs

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Exit codes returned by main. Kept few and stable so scripts can rely on them.
const (
	ExitOK        = 0
	ExitError     = 1   // the command ran and failed
	ExitUsage     = 2   // bad flags or arguments: nothing was attempted
	ExitAuth      = 4   // credentials are missing, expired or refused: log in again
	ExitCancelled = 130 // interrupted (Ctrl-C, SIGTERM), as shells report SIGINT
)

// FlagError is a usage mistake: a missing or invalid flag or argument, an unknown command.
// main prints the usage hint and exits 2.
type FlagError struct{ Err error }

func (e *FlagError) Error() string { return e.Err.Error() }
func (e *FlagError) Unwrap() error { return e.Err }

// FlagErrorf builds a FlagError.
func FlagErrorf(format string, args ...any) error {
	return &FlagError{Err: fmt.Errorf(format, args...)}
}

// InputError is bad input found before anything was attempted: a value of a file or a flag
// that a command checks before it changes anything (`up` validating a dev entry). main prints
// it and exits 2, like a FlagError, without the usage line (the error names the file and field).
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// UserError is a failure the user can fix; Hint tells them how.
type UserError struct {
	Err  error
	Hint string
}

func (e *UserError) Error() string { return e.Err.Error() }
func (e *UserError) Unwrap() error { return e.Err }

// WithHint attaches a hint to err.
func WithHint(err error, hint string) error { return &UserError{Err: err, Hint: hint} }

// AuthError says credentials are needed or were refused (exit ExitAuth).
type AuthError struct {
	Err  error
	Hint string
}

func (e *AuthError) Error() string { return e.Err.Error() }
func (e *AuthError) Unwrap() error { return e.Err }

// ExitCode maps an error returned by a command to the process exit code.
func ExitCode(err error) int {
	var fe *FlagError
	var ie *InputError
	var ae *AuthError
	var es *ExitStatus
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &es):
		return es.Code
	case errors.Is(err, context.Canceled):
		return ExitCancelled
	case errors.As(err, &fe), errors.As(err, &ie):
		return ExitUsage
	case errors.As(err, &ae), apierrors.IsUnauthorized(err):
		return ExitAuth
	default:
		return ExitError
	}
}

// ExitStatus carries the exit code of a command run elsewhere (devtool exec): main exits with
// Code and prints nothing, since the command already spoke for itself.
type ExitStatus struct{ Code int }

func (e *ExitStatus) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// Hint returns the hint for err: the one attached to it, else an explanation of well-known
// failures (TLS, transport, 401/403, a missing namespace); "" when there is nothing to add.
func Hint(err error) string {
	var ue *UserError
	if errors.As(err, &ue) && ue.Hint != "" {
		return ue.Hint
	}
	var ae *AuthError
	if errors.As(err, &ae) && ae.Hint != "" {
		return ae.Hint
	}
	return explain(err)
}

func explain(err error) string {
	if err == nil {
		return ""
	}
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var se *apierrors.StatusError
	switch {
	case errors.Is(err, context.Canceled):
		return ""
	case errors.As(err, &unknownAuthority), errors.As(err, &hostname), errors.As(err, &invalid),
		strings.Contains(err.Error(), "x509: "):
		return "the cluster's TLS certificate was not accepted: check the certificate-authority data and server address of the kubeconfig context ('devtool context show')"
	case apierrors.IsUnauthorized(err):
		return "the cluster refused the credentials (401): they are missing or expired; log in again or refresh the kubeconfig"
	case apierrors.IsForbidden(err):
		return "the cluster knows who you are but refuses this action (403): ask for access to the namespace, or pick another with --namespace"
	case errors.As(err, &se) && apierrors.IsNotFound(err) && se.ErrStatus.Details != nil && se.ErrStatus.Details.Kind == "namespaces":
		return "the namespace does not exist: create it with 'devtool namespace create <name>' or pick another with --namespace"
	case apierrors.IsNotFound(err) && strings.Contains(err.Error(), "namespaces \""):
		return "the namespace does not exist: create it with 'devtool namespace create <name>' or pick another with --namespace"
	}
	var ue *url.Error
	var oe *net.OpError
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) || errors.As(err, &oe) || (errors.As(err, &ue) && !errors.Is(err, context.DeadlineExceeded)) {
		return "the cluster cannot be reached: check the server address of the kubeconfig context, your network or VPN, and that the cluster is running"
	}
	return ""
}
