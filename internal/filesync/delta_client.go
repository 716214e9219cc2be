package filesync

import "fmt"

// The client's side of delta transfers (protocol 3, rsync.go): a push waits
// for the agent's signature of its copy; a pull sends this side's signature
// before its get.

// maxDeltasInFlight bounds the pushes waiting for a signature or holding
// one (each up to maxSigChunks chunks); past it a file goes whole.
const maxDeltasInFlight = 8

// deltaWorth reports whether a new version (to) replacing basis is sent as
// a delta in this session.
func (c *Client) deltaWorth(p string, to, basis Entry) bool {
	return c.proto >= 3 && !c.opts.noDelta && to.Kind == KindFile && basis.Kind == KindFile &&
		to.Size >= deltaMin && sigBits(basis.Size) != 0 && !c.noDelta[p]
}

// push sends local file p (state l) to the agent, whose copy is r: as a
// delta when worth it, else whole; a file goes with exec bit exec (decided
// for the agent's side).
func (c *Client) push(f *cfolder, id uint64, p, ln, rn string, l, r Entry, exec bool) {
	j := &sendJob{ID: id, Folder: f.i, Path: rn, Expect: l, Peer: r, SetExec: true, Exec: exec}
	if ln != rn {
		j.Local = ln
	}
	c.deltaMu.Lock()
	delta := c.deltaWorth(p, l, r) && len(c.deltas) < maxDeltasInFlight
	if delta {
		c.deltas[id] = j
		c.deltaOps[id] = true
	}
	c.deltaMu.Unlock()
	if delta {
		c.out.push(&sigReqMsg{ID: id, Folder: f.i, Path: rn, Expect: r})
		return
	}
	c.out.push(j)
}

// pull asks the agent for its file p (state r), this side's copy being l:
// this side's signature goes first when a delta is worth it.
func (c *Client) pull(f *cfolder, id uint64, p, ln, rn string, l, r Entry) {
	g := &getMsg{ID: id, Folder: f.i, Path: rn, Expect: r}
	c.deltaMu.Lock()
	delta := c.deltaWorth(p, r, l)
	if delta {
		c.deltaOps[id] = true
	}
	c.deltaMu.Unlock()
	if delta {
		c.out.push(&sigJob{ID: id, Folder: f.i, Path: ln, Expect: l, then: g})
		return
	}
	c.out.push(g)
}

// signed hands the agent's signature (nil: send whole) to the push waiting
// for it (the stream reader calls it).
func (c *Client) signed(id uint64, sig *signature) error {
	c.deltaMu.Lock()
	j := c.deltas[id]
	delete(c.deltas, id)
	c.deltaMu.Unlock()
	if j == nil {
		return fmt.Errorf("protocol: the agent sent a signature for op %d, which did not ask for one", id)
	}
	j.Sig = sig
	c.out.push(j)
	return nil
}

// deltaDone notes the end of op id on p (the engine calls it): a transfer
// tried as a delta that failed is sent whole from then on in this session,
// so a delta that cannot apply never keeps a file from arriving.
func (c *Client) deltaDone(id uint64, p string, ok bool) {
	c.deltaMu.Lock()
	defer c.deltaMu.Unlock()
	if c.deltaOps[id] {
		delete(c.deltaOps, id)
		if !ok {
			c.noDelta[p] = true
		}
	}
}
