package agent

import (
	"golang.org/x/crypto/ssh"

	"github.com/devtool/devtool/internal/agentversion"
)

const restartRequest = agentversion.RestartRequest

// restartRequest answers a client's request to restart the agent (an upgrade in place:
// the CLI has put a new binary on the dev volume). Allowed by Config.CanRestart, it is
// answered true and Serve ends with ErrRestart; refused, false with the reason.
func (c *connState) restartRequest(r *ssh.Request) {
	if c.srv.cfg.CanRestart == nil {
		_ = r.Reply(false, []byte("this agent cannot restart itself"))
		return
	}
	if err := c.srv.cfg.CanRestart(); err != nil {
		c.log.Warn("restart refused", "err", err)
		_ = r.Reply(false, []byte(err.Error()))
		return
	}
	c.log.Info("restart requested: closing every connection and command")
	_ = r.Reply(true, nil)
	c.srv.restart()
}
