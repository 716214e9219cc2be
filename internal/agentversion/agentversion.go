// Package agentversion is what the dev container's agent says about itself in
// its SSH banner (the server version line every SSH client reads before
// authenticating): its release, the newest sync protocol it speaks and the
// sha256 of its binary. `up` reads it to find an agent older than itself and
// upgrade it in place. It imports nothing of the agent, so the CLI uses it on
// every OS (the agent package is Linux-only).
package agentversion

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Prefix opens every agent's banner. The releases before this package sent it
// alone; from then on words follow, separated by spaces (RFC 4253 comments).
const Prefix = "SSH-2.0-devtool-agent"

// PreviousProtocol is the sync protocol of the agents whose banner is Prefix
// alone (the releases before the banner said more).
const PreviousProtocol = 2

// RestartRequest is the SSH global request (want-reply) that makes an agent
// re-execute its binary on the dev volume: the agent checks the new binary
// runs, answers (RestartReply), closes every connection and command (its kept
// commands are handed to the new binary when it takes them: they keep running),
// and executes it in its own place (same PID, the container keeps running).
// Agents of the releases before it answer false, as to any unknown request.
const RestartRequest = "restart@devtool"

// Info is what a banner says.
type Info struct {
	// Release is the agent's release (its buildinfo version).
	Release string
	// Protocol is the newest sync protocol the agent speaks.
	Protocol int
	// Sum is the start of the sha256 of the agent's binary, hex ("" when unknown).
	Sum string
	// Banner is false for an agent of a release before banners said more
	// (Release and Sum unknown, Protocol PreviousProtocol).
	Banner bool
}

// sumLen is how many hex digits of the binary's sha256 the banner carries.
const sumLen = 16

// Banner is the SSH server version line for an agent.
func Banner(i Info) string {
	b := fmt.Sprintf("%s proto=%d release=%s", Prefix, i.Protocol, clean(i.Release))
	if i.Sum != "" {
		b += " sha256=" + clean(i.Sum[:min(len(i.Sum), sumLen)])
	}
	return b
}

// clean keeps a banner word printable ASCII without spaces (RFC 4253), at
// most 64 bytes.
func clean(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r > ' ' && r < 0x7f {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
		if b.Len() >= 64 {
			break
		}
	}
	if b.Len() == 0 {
		return "unknown"
	}
	return b.String()
}

// Parse reads an SSH server version line. A banner that is not a devtool
// agent's is an error.
func Parse(banner string) (Info, error) {
	rest, ok := strings.CutPrefix(banner, Prefix)
	if !ok || (rest != "" && rest[0] != ' ') {
		return Info{}, fmt.Errorf("%q is not a devtool agent's SSH banner", banner)
	}
	if rest == "" {
		return Info{Protocol: PreviousProtocol}, nil
	}
	i := Info{Banner: true}
	for _, w := range strings.Fields(rest) {
		k, v, _ := strings.Cut(w, "=")
		switch k {
		case "proto":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 1<<15 {
				return Info{}, fmt.Errorf("agent banner %q: protocol %q is not a version number", banner, v)
			}
			i.Protocol = n
		case "release":
			i.Release = v
		case "sha256":
			i.Sum = v
		}
	}
	if i.Protocol == 0 {
		return Info{}, fmt.Errorf("agent banner %q names no protocol", banner)
	}
	return i, nil
}

// String names the agent for a message: "release R (sync protocol N)".
func (i Info) String() string {
	if !i.Banner {
		return fmt.Sprintf("a release before %s (sync protocol %d)", "banners", i.Protocol)
	}
	return fmt.Sprintf("release %s (sync protocol %d)", i.Release, i.Protocol)
}

// Outdated reports whether a running agent should be replaced by the agent
// this CLI carries (protocol: the newest this CLI speaks; sum: the sha256 of
// the binary it would upload, hex): an agent of a release before banners, one
// speaking an older protocol, or one of the same protocol built from other
// code (its binary's sum differs). An agent speaking a newer protocol is
// left alone: it speaks this CLI's protocol too.
func Outdated(running Info, protocol int, sum string) bool {
	switch {
	case !running.Banner:
		return true
	case running.Protocol > protocol:
		return false
	case running.Protocol < protocol:
		return true
	}
	return running.Sum == "" || !strings.HasPrefix(sum, running.Sum)
}

// FileSum is the sha256 of the file at path, hex (the agent hashes its own
// binary with it).
func FileSum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// RestartReply is what an agent says when it accepts a RestartRequest (the reply's
// payload, words like the banner's). Agents of the releases before it send nothing: their
// commands end with the restart.
type RestartReply struct {
	// Handoff: the agent hands its kept commands (the dev command run with a terminal) to
	// the new binary, which goes on with them: they keep running across the restart.
	Handoff bool
	// Kept is how many kept commands it was running when it answered.
	Kept int
	// Said is false for an empty reply (an agent of an earlier release).
	Said bool
}

// String is the reply's payload.
func (r RestartReply) String() string {
	if !r.Handoff {
		return "handoff=0"
	}
	return fmt.Sprintf("handoff=1 kept=%d", r.Kept)
}

// ParseRestartReply reads a restart reply's payload; words it does not know are skipped.
func ParseRestartReply(payload []byte) RestartReply {
	var r RestartReply
	for _, w := range strings.Fields(string(payload)) {
		k, v, _ := strings.Cut(w, "=")
		switch k {
		case "handoff":
			r.Said = true
			r.Handoff = v == "1"
		case "kept":
			if n, err := strconv.Atoi(v); err == nil && n >= 0 && n < 1<<16 {
				r.Kept = n
			}
		}
	}
	return r
}
