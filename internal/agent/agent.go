// Package agent is the SSH server that runs as the dev container's main process
// (cmd/devtool-agent). It accepts only the public keys listed in an authorized_keys
// file, serves session channels (exec, shell, PTY, signals, the devtool-sync
// subsystem), local forwards (direct-tcpip, dialled from inside the pod) and reverse
// forwards (tcpip-forward, listening on the pod's loopback only).
package agent

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/devtool/devtool/internal/atomicfile"
)

// SyncSubsystem is the name of the subsystem handed to Config.Sync.
const SyncSubsystem = "devtool-sync"

// WorkdirEnv, when sent as an environment variable of a session, is the working
// directory of its command.
const WorkdirEnv = "DEVTOOL_WORKDIR"

// Config configures Serve.
type Config struct {
	// HostKeyFile holds the agent's ed25519 host key (OpenSSH PEM). Created 0600 on the
	// first start and reused afterwards.
	HostKeyFile string
	// AuthorizedKeysFile lists the accepted client public keys. It is read again on
	// every authentication attempt, so a key added later is accepted without a restart.
	AuthorizedKeysFile string
	// Logger receives the agent's log (never key material). Nil discards it.
	Logger *slog.Logger
	// Sync serves one devtool-sync subsystem channel. Nil refuses the subsystem.
	Sync func(ctx context.Context, ch io.ReadWriteCloser) error
	// Shell is the program run for shell and exec requests; "sh" when empty.
	Shell string
	// ReapOrphans makes Serve wait for the zombie processes it inherits, as a container's
	// PID 1 must (cmd/devtool-agent sets it when it runs as PID 1).
	ReapOrphans bool
	// KeepFor is how long a terminal command a client asked to keep (keep.go) waits for that
	// client after its connection dropped; DefaultKeepFor when zero.
	KeepFor time.Duration
	// Banner is the SSH server version line (agentversion.Banner); "SSH-2.0-devtool-agent"
	// when empty.
	Banner string
	// CanRestart, when set, lets a client ask for a restart (agentversion.RestartRequest):
	// it is called first (cmd/devtool-agent checks that the binary on the dev volume runs,
	// and whether it takes over kept commands: handoff); when it returns nil, the request is
	// answered, and Serve closes every connection and command as when ctx ends (the kept
	// commands are handed over instead when handoff and HandoffFile say so, handoff_linux.go)
	// and returns a *Restart (errors.Is ErrRestart), for the caller to execute the new binary.
	// Its error is the refusal sent back. Nil refuses every restart request.
	CanRestart func() (handoff bool, err error)
	// HandoffFile is where an agent restarting in place hands its kept commands to its
	// successor, and where Serve looks for them at its start (the file is removed once read).
	// Empty: no handoff.
	HandoffFile string
}

// ErrRestart is what Serve's *Restart is (errors.Is), after a client asked for a restart
// that CanRestart allowed.
var ErrRestart = errors.New("agent: restart requested")

// Restart ends Serve after a restart request: the caller executes the new binary in this
// process's place.
type Restart struct {
	// Kept is how many kept commands were handed over to the successor (they keep running
	// across the exec); the others ended.
	Kept int
	h    *Handoff
}

func (r *Restart) Error() string { return ErrRestart.Error() }
func (r *Restart) Unwrap() error { return ErrRestart }

// Abort ends the commands handed over (the successor could not be executed): their
// processes are killed and waited for, their terminals closed, the handoff file removed.
func (r *Restart) Abort() {
	if r.h != nil {
		r.h.abort()
		r.h = nil
	}
}

// handshakeTimeout bounds how long an unauthenticated connection may stay open.
const handshakeTimeout = 30 * time.Second

// Serve accepts SSH connections on ln until ctx ends. It first takes over the kept
// commands handed over in Config.HandoffFile (a restart in place, handoff_linux.go). When
// ctx ends it closes ln, every connection, listener and channel, kills every child process
// group, waits for them and returns nil (after a restart request: a *Restart, the kept
// commands handed over when the successor takes them). It returns an error when the host
// key cannot be loaded or ln fails (after the same cleanup).
func Serve(ctx context.Context, ln net.Listener, cfg Config) error {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Shell == "" {
		cfg.Shell = "sh"
	}
	hostKey, err := LoadOrCreateHostKey(cfg.HostKeyFile)
	if err != nil {
		ln.Close()
		return err
	}
	log.Info("agent serving", "addr", ln.Addr().String(), "hostKey", ssh.FingerprintSHA256(hostKey.PublicKey()))
	sc := &ssh.ServerConfig{
		PublicKeyCallback: func(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			ok, err := authorized(cfg.AuthorizedKeysFile, key)
			if err != nil {
				log.Warn("reading authorized keys", "file", cfg.AuthorizedKeysFile, "err", err)
				return nil, errors.New("no authorized keys")
			}
			if !ok {
				log.Warn("unknown public key refused", "remote", meta.RemoteAddr().String(), "fingerprint", ssh.FingerprintSHA256(key))
				return nil, errors.New("unknown public key")
			}
			return &ssh.Permissions{Extensions: map[string]string{"fp": ssh.FingerprintSHA256(key)}}, nil
		},
		AuthLogCallback: func(meta ssh.ConnMetadata, method string, err error) {
			if err != nil && method != "none" {
				log.Info("authentication refused", "method", method, "remote", meta.RemoteAddr().String())
			}
		},
		MaxAuthTries:  6,
		ServerVersion: cfg.Banner,
	}
	if sc.ServerVersion == "" {
		sc.ServerVersion = "SSH-2.0-devtool-agent"
	}
	sc.AddHostKey(hostKey)

	s := &server{cfg: cfg, log: log, sc: sc, conns: map[net.Conn]struct{}{}, children: &children{pids: map[int]bool{}}}
	s.keeper = newKeeper(log, cfg.KeepFor, s.children)
	if cfg.HandoffFile != "" {
		// The kept commands of the agent this process replaced (a restart in place).
		s.keeper.adopt(cfg.HandoffFile)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.restart = func() {
		s.restarting.Store(true)
		cancel()
	}
	if cfg.ReapOrphans {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.children.reap(ctx)
		}()
	}
	stop := context.AfterFunc(ctx, func() {
		ln.Close()
		s.closeAll()
	})
	defer stop()
	var delay time.Duration
	var acceptErr error
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscallEMFILE) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			log.Error("accept", "err", err)
			acceptErr = fmt.Errorf("agent: accepting connections: %w", err)
			cancel()
			break
		}
		delay = 0
		if !s.track(conn) {
			conn.Close()
			break
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.untrack(conn)
			s.handleConn(ctx, conn)
		}()
	}
	ln.Close()
	s.closeAll()
	s.wg.Wait()
	var h *Handoff
	if acceptErr == nil && s.restarting.Load() && s.handoff.Load() && cfg.HandoffFile != "" {
		h = s.keeper.handOff(cfg.HandoffFile)
	}
	s.keeper.closeAll()
	if acceptErr == nil && s.restarting.Load() {
		r := &Restart{h: h}
		if h != nil {
			r.Kept = len(h.cmds)
		}
		log.Info("agent stopped for a restart", "keptCommandsHandedOver", r.Kept)
		return r
	}
	log.Info("agent stopped")
	return acceptErr
}

type server struct {
	cfg Config
	log *slog.Logger
	sc  *ssh.ServerConfig
	wg  sync.WaitGroup

	children *children
	keeper   *keeper

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}

	// restart ends Serve with ErrRestart (a client's restart request).
	restart    func()
	restarting atomic.Bool
	// handoff: the successor takes the kept commands over (CanRestart said so).
	handoff atomic.Bool
}

func (s *server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	c.Close()
}

func (s *server) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
}

func (s *server) handleConn(ctx context.Context, nc net.Conn) {
	_ = nc.SetDeadline(time.Now().Add(handshakeTimeout))
	conn, chans, reqs, err := ssh.NewServerConn(nc, s.sc)
	if err != nil {
		s.log.Info("handshake failed", "remote", nc.RemoteAddr().String(), "err", err)
		return
	}
	_ = nc.SetDeadline(time.Time{})
	log := s.log.With("remote", nc.RemoteAddr().String(), "key", conn.Permissions.Extensions["fp"])
	log.Info("connection opened", "client", string(conn.ClientVersion()))
	ctx, cancel := context.WithCancel(ctx)
	c := &connState{srv: s, conn: conn, log: log, ctx: ctx, forwards: map[string]net.Listener{}}
	defer func() {
		cancel()
		conn.Close()
		c.closeForwards()
		c.wg.Wait()
		log.Info("connection closed")
	}()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.globalRequests(reqs)
	}()
	for nch := range chans {
		switch nch.ChannelType() {
		case "session":
			ch, creqs, err := nch.Accept()
			if err != nil {
				continue
			}
			c.wg.Add(1)
			go func() {
				defer c.wg.Done()
				c.session(ch, creqs)
			}()
		case "direct-tcpip":
			c.wg.Add(1)
			go func() {
				defer c.wg.Done()
				c.directTCPIP(nch)
			}()
		default:
			_ = nch.Reject(ssh.UnknownChannelType, "unknown channel type "+nch.ChannelType())
		}
	}
}

// connState is one authenticated connection.
type connState struct {
	srv  *server
	conn *ssh.ServerConn
	log  *slog.Logger
	ctx  context.Context
	wg   sync.WaitGroup

	mu       sync.Mutex
	done     bool
	forwards map[string]net.Listener
}

// authorized reports whether key is listed in the authorized_keys file.
func authorized(file string, key ssh.PublicKey) (bool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return false, err
	}
	want := key.Marshal()
	for len(bytes.TrimSpace(data)) > 0 {
		k, _, _, rest, err := ssh.ParseAuthorizedKey(data)
		if err != nil {
			// ParseAuthorizedKey skips bad lines; an error means nothing valid is left.
			return false, nil
		}
		if bytes.Equal(k.Marshal(), want) {
			return true, nil
		}
		data = rest
	}
	return false, nil
}

// LoadOrCreateHostKey reads the ed25519 host key at path, creating it (0600, its
// folder 0700) when it does not exist.
func LoadOrCreateHostKey(path string) (ssh.Signer, error) {
	if path == "" {
		return nil, errors.New("agent: no host key file configured")
	}
	return loadOrCreateEd25519(path, "devtool-agent host key")
}

func loadOrCreateEd25519(path, comment string) (ssh.Signer, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		s, err := ssh.ParsePrivateKey(data)
		if err != nil {
			return nil, fmt.Errorf("%s: not a valid private key (%v); delete it to create a new one", path, err)
		}
		return s, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return nil, err
	}
	// Link, not rename: a key created meanwhile by another process wins. A file system without
	// hard links gets the key by rename.
	keyPEM := pem.EncodeToMemory(block)
	if err := atomicfile.WriteNew(path, keyPEM, 0o600); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return loadOrCreateEd25519(path, comment)
		}
		if err := atomicfile.Write(path, keyPEM, 0o600); err != nil {
			return nil, err
		}
	}
	return ssh.NewSignerFromKey(priv)
}
