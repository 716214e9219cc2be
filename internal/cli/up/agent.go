package up

import (
	"github.com/devtool/devtool/internal/agentbin"
	"github.com/devtool/devtool/internal/dev"
)

// agentSource is the agent binary this devtool carries (DEVTOOL_AGENT_BINARY wins).
func agentSource(getenv func(string) string) dev.AgentSource {
	return func(goarch string) ([]byte, string, error) { return agentbin.ForEnv(goarch, getenv) }
}
