package agent

import (
	"golang.org/x/crypto/ssh"

	"github.com/devtool/devtool/internal/agentversion"
)

const restartRequest = agentversion.RestartRequest

// restartRequest answers a client's request to restart the agent (an upgrade in place:
// the CLI has put a new binary on the dev volume). Allowed by Config.CanRestart, it is
// answered true (with an agentversion.RestartReply: whether the kept commands go on) and
// Serve ends with a *Restart; refused, false with the reason.
func (c *connState) restartRequest(r *ssh.Request) {
	if c.srv.cfg.CanRestart == nil {
		_ = r.Reply(false, []byte("this agent cannot restart itself"))
		return
	}
	handoff, err := c.srv.cfg.CanRestart()
	if err != nil {
		c.log.Warn("restart refused", "err", err)
		_ = r.Reply(false, []byte(err.Error()))
		return
	}
	handoff = handoff && c.srv.cfg.HandoffFile != "" && HandoffVersion > 0
	ans := agentversion.RestartReply{Handoff: handoff}
	if handoff {
		ans.Kept = c.srv.keeper.handOffCount()
		c.log.Info("restart requested: closing every connection; the kept commands go on in the new agent", "kept", ans.Kept)
	} else {
		c.log.Info("restart requested: closing every connection and command")
	}
	c.srv.handoff.Store(handoff)
	_ = r.Reply(true, []byte(ans.String()))
	c.srv.restart()
}

// handOffCount is how many kept commands could be handed over now.
func (k *keeper) handOffCount() int {
	k.mu.Lock()
	all := make([]*keptCmd, 0, len(k.cmds))
	for _, c := range k.cmds {
		all = append(all, c)
	}
	k.mu.Unlock()
	n := 0
	for _, c := range all {
		if c.canHandOff() {
			n++
		}
	}
	return n
}
