package cmdutil

import (
	"context"
	"log/slog"

	"github.com/devtool/devtool/internal/iostreams"
)

// Factory is built once, in main, and handed to every NewCmd. Commands copy what they need into
// their Options; run functions never see the factory. Expensive things are lazy providers.
type Factory struct {
	IOStreams *iostreams.IOStreams
	Logger    *slog.Logger
	// Getenv reads the environment; tests replace it instead of calling os.Setenv.
	Getenv func(string) string
	// Environ is the whole environment ("NAME=value"), for interpolation and child processes.
	Environ []string
	// WorkDir is the directory commands resolve relative paths against (the process's cwd in main).
	WorkDir string
	// Target resolves where a cluster command runs (see KubeFlags). Built in main.
	Target func(KubeFlags) (*Target, error)
	// StoredSecrets returns the platform's stored secrets for a command on the context these
	// flags select (nil off a platform), already added to what the process's output masks
	// (StoredSecretsFunc). nil: none.
	StoredSecrets func(context.Context, KubeFlags) (map[string]string, error)
}
