package up

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"

	"github.com/devtool/devtool/internal/dev"
)

// agentSource is the agent binary: DEVTOOL_AGENT_BINARY when set (tests, development).
func agentSource(getenv func(string) string) dev.AgentSource {
	return func(goarch string) ([]byte, string, error) {
		if p := getenv("DEVTOOL_AGENT_BINARY"); p != "" {
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, "", fmt.Errorf("DEVTOOL_AGENT_BINARY: %w", err)
			}
			sum := sha256.Sum256(b)
			return b, hex.EncodeToString(sum[:]), nil
		}
		return nil, "", fmt.Errorf("this devtool carries no agent for linux/%s: build it with 'make build' or set DEVTOOL_AGENT_BINARY", goarch)
	}
}
