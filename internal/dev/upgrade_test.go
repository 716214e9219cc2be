package dev

import (
	"strings"
	"testing"

	"github.com/devtool/devtool/internal/agentversion"
)

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
