package agent

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
)

var syscallEMFILE = syscall.EMFILE

// dialTimeout bounds a direct-tcpip dial inside the pod.
const dialTimeout = 10 * time.Second

type directTCPIPMsg struct {
	Host       string
	Port       uint32
	OriginHost string
	OriginPort uint32
}

type tcpipForwardMsg struct {
	Addr string
	Port uint32
}

type tcpipForwardReply struct {
	Port uint32
}

type forwardedTCPIPMsg struct {
	Addr       string
	Port       uint32
	OriginAddr string
	OriginPort uint32
}

// directTCPIP serves a local forward: it dials exactly the requested host:port from
// inside the pod and joins it to the channel.
func (c *connState) directTCPIP(nch ssh.NewChannel) {
	var m directTCPIPMsg
	if err := ssh.Unmarshal(nch.ExtraData(), &m); err != nil {
		_ = nch.Reject(ssh.ConnectionFailed, "malformed direct-tcpip request")
		return
	}
	addr := net.JoinHostPort(m.Host, strconv.Itoa(int(m.Port)))
	dctx, cancel := context.WithTimeout(c.ctx, dialTimeout)
	var d net.Dialer
	tc, err := d.DialContext(dctx, "tcp", addr)
	cancel()
	if err != nil {
		c.log.Info("forward dial failed", "addr", addr, "err", err)
		_ = nch.Reject(ssh.ConnectionFailed, "dial "+addr+": "+err.Error())
		return
	}
	ch, reqs, err := nch.Accept()
	if err != nil {
		tc.Close()
		return
	}
	go ssh.DiscardRequests(reqs)
	join(c.ctx, ch, tc)
}

// join copies both ways between an SSH channel and a TCP connection, passing on
// half-closes, until both directions end or ctx ends; then it closes both.
func join(ctx context.Context, ch ssh.Channel, tc net.Conn) {
	stop := context.AfterFunc(ctx, func() {
		ch.Close()
		tc.Close()
	})
	defer stop()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(tc, ch)
		if cw, ok := tc.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			tc.Close()
		}
	}()
	go func() {
		defer wg.Done()
		_, _ = io.Copy(ch, tc)
		_ = ch.CloseWrite()
	}()
	wg.Wait()
	ch.Close()
	tc.Close()
}

func (c *connState) globalRequests(reqs <-chan *ssh.Request) {
	for r := range reqs {
		switch r.Type {
		case "keepalive@openssh.com":
			_ = r.Reply(true, nil)
		case restartRequest:
			c.restartRequest(r)
		case "tcpip-forward":
			c.tcpipForward(r)
		case "cancel-tcpip-forward":
			var m tcpipForwardMsg
			if err := ssh.Unmarshal(r.Payload, &m); err != nil {
				_ = r.Reply(false, nil)
				continue
			}
			key := forwardKey(m.Addr, m.Port)
			c.mu.Lock()
			ln, ok := c.forwards[key]
			delete(c.forwards, key)
			c.mu.Unlock()
			if ok {
				ln.Close()
				c.log.Info("reverse forward cancelled", "port", m.Port)
			}
			_ = r.Reply(ok, nil)
		default:
			if r.WantReply {
				_ = r.Reply(false, nil)
			}
		}
	}
}

func forwardKey(addr string, port uint32) string {
	return net.JoinHostPort(addr, strconv.Itoa(int(port)))
}

// tcpipForward listens on 127.0.0.1:<port> inside the pod, whatever bind address was
// asked for, and opens a forwarded-tcpip channel to the client for each connection.
func (c *connState) tcpipForward(r *ssh.Request) {
	var m tcpipForwardMsg
	if err := ssh.Unmarshal(r.Payload, &m); err != nil || m.Port > 65535 {
		_ = r.Reply(false, nil)
		return
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(m.Port))))
	if err != nil {
		c.log.Info("reverse forward listen failed", "port", m.Port, "err", err)
		_ = r.Reply(false, nil)
		return
	}
	port := uint32(ln.Addr().(*net.TCPAddr).Port)
	key := forwardKey(m.Addr, port)
	c.mu.Lock()
	if c.done {
		c.mu.Unlock()
		ln.Close()
		_ = r.Reply(false, nil)
		return
	}
	if old, ok := c.forwards[key]; ok {
		old.Close()
	}
	c.forwards[key] = ln
	c.mu.Unlock()
	var reply []byte
	if m.Port == 0 {
		reply = ssh.Marshal(tcpipForwardReply{Port: port})
	}
	_ = r.Reply(true, reply)
	c.log.Info("reverse forward listening", "addr", ln.Addr().String())
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer ln.Close()
		for {
			tc, err := ln.Accept()
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					continue
				}
				return
			}
			c.wg.Add(1)
			go func() {
				defer c.wg.Done()
				ra := tc.RemoteAddr().(*net.TCPAddr)
				payload := ssh.Marshal(forwardedTCPIPMsg{Addr: m.Addr, Port: port, OriginAddr: ra.IP.String(), OriginPort: uint32(ra.Port)})
				ch, reqs, err := c.conn.OpenChannel("forwarded-tcpip", payload)
				if err != nil {
					tc.Close()
					return
				}
				go ssh.DiscardRequests(reqs)
				join(c.ctx, ch, tc)
			}()
		}
	}()
}

func (c *connState) closeForwards() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done = true
	for k, ln := range c.forwards {
		ln.Close()
		delete(c.forwards, k)
	}
}
