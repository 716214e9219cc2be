package store

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Error classes the server maps to HTTP statuses.
var (
	ErrNotFound  = errors.New("not found")
	ErrConflict  = errors.New("conflict")
	ErrForbidden = errors.New("forbidden")
)

// InputError is bad input: Field names the JSON field at fault.
type InputError struct {
	Field, Reason string
}

func (e *InputError) Error() string { return e.Field + ": " + e.Reason }

// notFound, conflict and forbidden wrap the classes with a message for the caller.
func notFound(format string, a ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, a...), ErrNotFound)
}

func conflict(format string, a ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, a...), ErrConflict)
}

func forbidden(format string, a ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, a...), ErrForbidden)
}

// fromAPI turns an API server refusal of an impersonated request into the class the caller sees.
func fromAPI(err error, what string) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsForbidden(err):
		return forbidden("%s: the Kubernetes API refused it for your account", what)
	case apierrors.IsNotFound(err):
		return notFound("%s", what)
	case apierrors.IsAlreadyExists(err), apierrors.IsConflict(err):
		return conflict("%s", what)
	}
	return fmt.Errorf("%s: %w", what, err)
}
