package agent

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestReapOrphans makes the test process a child subreaper (as PID 1 is): the orphan a
// command leaves behind becomes our child; once it exits the agent reaps it, while the
// command's own exit status still arrives.
func TestReapOrphans(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skip("no PR_SET_CHILD_SUBREAPER:", err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	home := t.TempDir()
	k := newKey(t)
	authorize(t, home, k)
	ts := startServer(t, home, nil)
	ts.stop()
	ts.cfg.ReapOrphans = true
	ts = startServerCfg(t, ts.cfg)
	c := dial(t, ts, k)
	for i := 0; i < 3; i++ {
		s, _ := c.NewSession()
		out, err := s.Output("sleep 0.2 & echo $!; exit 3")
		s.Close()
		if err == nil || !strings.Contains(err.Error(), "exited with status 3") {
			t.Fatalf("exit status: %v", err)
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(out)))
		waitFor(t, func() bool {
			_, err := os.Stat("/proc/" + strconv.Itoa(pid))
			return err != nil
		}, "orphan reaped")
	}
}
