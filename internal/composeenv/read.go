package composeenv

import (
	"fmt"

	"github.com/devtool/devtool/internal/compose"
	"github.com/devtool/devtool/internal/safefile"
)

// readFile reads the Compose file again for Env.Raw, through the same reader and cap as the loader.
func readFile(p string) ([]byte, error) {
	b, err := safefile.Read(p, compose.MaxFileSize)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", p, err)
	}
	return b, nil
}
