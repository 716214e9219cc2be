package dev

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/devtool/devtool/internal/agentversion"
	"github.com/devtool/devtool/internal/filesync"
)

// Which running agents up takes for its own (no upgrade) and which it upgrades.
func TestUpgraderTellsCurrentAgents(t *testing.T) {
	bins := map[string][]byte{"amd64": []byte("agent amd64"), "arm64": []byte("agent arm64")}
	sum := func(arch string) string { s := sha256.Sum256(bins[arch]); return hex.EncodeToString(s[:]) }
	u := &Up{Agent: func(arch string) ([]byte, string, error) {
		if b, ok := bins[arch]; ok {
			return b, sum(arch), nil
		}
		return nil, "", errors.New("no agent")
	}}
	g := newAgentUpgrader(u, nil, nil, nil)
	for _, c := range []struct {
		name string
		info agentversion.Info
		want bool
	}{
		{"previous release (banner without words)", agentversion.Info{Protocol: 2}, false},
		{"this CLI's amd64 agent", agentversion.Info{Banner: true, Protocol: filesync.ProtocolVersion, Sum: sum("amd64")[:16]}, true},
		{"this CLI's arm64 agent", agentversion.Info{Banner: true, Protocol: filesync.ProtocolVersion, Sum: sum("arm64")[:16]}, true},
		{"same protocol, other build", agentversion.Info{Banner: true, Protocol: filesync.ProtocolVersion, Sum: "0000000000000000"}, false},
		{"older protocol", agentversion.Info{Banner: true, Protocol: 2, Sum: sum("amd64")[:16]}, false},
		{"newer protocol", agentversion.Info{Banner: true, Protocol: filesync.ProtocolVersion + 1, Sum: "0000000000000000"}, true},
	} {
		if got := g.current(c.info); got != c.want {
			t.Errorf("%s: current = %v, want %v", c.name, got, c.want)
		}
	}
}

// The upgrade line says whether the dev command kept running across the agent's restart.
func TestRestartedHow(t *testing.T) {
	for _, tc := range []struct {
		reply string
		want  string
	}{
		{"handoff=1 kept=1", "the dev command kept running"},
		{"handoff=1 kept=3", "its 3 kept commands (the dev command) kept running"},
		{"handoff=1 kept=0", "restarted in place; the pod"},
		{"handoff=0", "the commands it ran ended"},
		{"", "the commands it ran ended"},
	} {
		got := restartedHow(agentversion.ParseRestartReply([]byte(tc.reply)))
		if !strings.Contains(got, tc.want) || !strings.Contains(got, "the sync state kept") {
			t.Errorf("reply %q: %q, want it to say %q", tc.reply, got, tc.want)
		}
	}
}
