//go:build integration

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/testcluster"
)

// TestDevUpAgainAtOnce: up ended by SIGINT stops its dev command (httpd on 8080 in the dev
// container) before it closes its connection, so an up started at once runs its own dev command
// on the same port on the first try, several times in a row. Before, the agent saw the connection
// close about a second after up returned and only then killed the dev command: the next up's
// httpd failed with "Address already in use" and nothing answered on the forward. The agent's log
// shows the order: the dev command ended by SIGTERM, then the connection closed.
func TestDevUpAgainAtOnce(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	port := freePort(t)
	writeHello(t, u, port)
	withAgent(t, u)
	u.mustRun("deploy", "--namespace", ns, "--wait", "--timeout", "4m")

	const rounds = 4
	for i := range rounds {
		up := u.start("up", "web", "--namespace", ns)
		up.waitLine(t, "ready", 3*time.Minute)
		eventually(t, time.Minute, "the dev command serves the forward", bodyContains(port, "hello from the dev container"))
		out := up.output()
		if strings.Contains(out, "in use") || strings.Contains(out, "dev command exited") {
			t.Fatalf("round %d: the dev command could not take its port:\n%s", i+1, out)
		}
		up.interrupt(t) // and the next up at once
	}
	// Each up stopped its dev command through its connection (SIGTERM) before it closed it: the
	// agent logs each command's end by SIGTERM, then its connection's close (which reaches it later).
	pod, _ := devPod(t, c, ns)
	agentIdle(t, c, ns, pod)
	log := agentLog(t, c, ns, pod)
	lines := strings.Split(log, "\n")
	ends := 0
	for i, l := range lines {
		if !strings.Contains(l, `msg="command killed"`) {
			continue
		}
		ends++
		remote := attr(l, "remote")
		closedAfter := false
		for _, m := range lines[i+1:] {
			if strings.Contains(m, `msg="connection closed"`) && attr(m, "remote") == remote {
				closedAfter = true
				break
			}
		}
		if attr(l, "signal") != "terminated" || !closedAfter {
			t.Errorf("a dev command did not end by SIGTERM before its connection (%s) closed: %s", remote, l)
		}
	}
	if ends != rounds {
		t.Errorf("%d dev commands ended, want %d:\n%s", ends, rounds, log)
	}
	u.mustRun("down", "web", "--namespace", ns)
}

// attr is the value of key=value in a slog text line ("" when absent).
func attr(line, key string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	return ""
}
