package devssh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/term"

	"github.com/devtool/devtool/internal/sharedwriter"
)

// ClientConfig configures Dial and NewSession.
type ClientConfig struct {
	// Signer is the dev container's private key (LoadOrCreateKey).
	Signer ssh.Signer
	// KnownHostsFile pins the agent's host key: written on first contact, checked after.
	KnownHostsFile string
	// User is the SSH user name; "devtool" when empty (the agent ignores it).
	User string
	// KeepaliveInterval is the time between keepalive requests (default 5s); the
	// connection is closed after KeepaliveMax (default 3) unanswered intervals.
	KeepaliveInterval time.Duration
	KeepaliveMax      int
	// HandshakeTimeout bounds the SSH handshake (default 15s).
	HandshakeTimeout time.Duration
	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
	// OnEvent, when set, is called (synchronously, from Session.Run) for every Session event.
	OnEvent func(Event)
}

func (cfg *ClientConfig) defaults() {
	if cfg.User == "" {
		cfg.User = "devtool"
	}
	if cfg.KeepaliveInterval <= 0 {
		cfg.KeepaliveInterval = 5 * time.Second
	}
	if cfg.KeepaliveMax <= 0 {
		cfg.KeepaliveMax = 3
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = 15 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
}

// Client is one SSH connection to the agent.
type Client struct {
	ssh  *ssh.Client
	conn net.Conn
	log  *slog.Logger

	done    chan struct{}
	errOnce sync.Once
	err     error
	wg      sync.WaitGroup
}

// Dial runs the SSH handshake over conn (a port-forward stream or any net.Conn),
// authenticating with cfg.Signer and pinning the host key. The Client owns conn.
func Dial(ctx context.Context, conn net.Conn, cfg ClientConfig) (*Client, error) {
	cfg.defaults()
	if cfg.Signer == nil {
		conn.Close()
		return nil, errors.New("devssh: no key")
	}
	sc := &ssh.ClientConfig{
		User:              cfg.User,
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(cfg.Signer)},
		HostKeyCallback:   pinHostKey(cfg.KnownHostsFile),
		HostKeyAlgorithms: []string{ssh.KeyAlgoED25519},
		Timeout:           cfg.HandshakeTimeout,
		ClientVersion:     "SSH-2.0-devtool",
	}
	// The handshake ends after HandshakeTimeout by closing conn: a port-forward stream has no
	// deadlines (SetDeadline fails), and an agent that accepts but never answers would
	// otherwise hold the dial, and every reconnection, for ever.
	hctx, cancel := context.WithTimeout(ctx, cfg.HandshakeTimeout)
	defer cancel()
	if d, ok := hctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	}
	stop := context.AfterFunc(hctx, func() { conn.Close() })
	cc, chans, reqs, err := ssh.NewClientConn(conn, "devtool-agent", sc)
	stopped := stop()
	if err != nil {
		conn.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if hctx.Err() != nil {
			return nil, fmt.Errorf("ssh handshake with the agent: no answer within %s", cfg.HandshakeTimeout)
		}
		var hk *HostKeyChangedError
		if errors.As(err, &hk) {
			return nil, hk
		}
		if strings.Contains(err.Error(), "unable to authenticate") {
			return nil, fmt.Errorf("the agent refused this machine's key (%s): run 'devtool up' again to install it: %w", ssh.FingerprintSHA256(cfg.Signer.PublicKey()), err)
		}
		return nil, fmt.Errorf("ssh handshake with the agent: %w", err)
	}
	if !stopped {
		cc.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("ssh handshake with the agent: no answer within %s", cfg.HandshakeTimeout)
	}
	_ = conn.SetDeadline(time.Time{})
	c := &Client{ssh: ssh.NewClient(cc, chans, reqs), conn: conn, log: cfg.Logger, done: make(chan struct{})}
	c.wg.Add(2)
	go func() {
		defer c.wg.Done()
		err := c.ssh.Wait()
		if err == nil {
			err = io.EOF
		}
		c.fail(fmt.Errorf("connection closed: %w", err))
	}()
	go func() {
		defer c.wg.Done()
		c.keepalive(cfg.KeepaliveInterval, cfg.KeepaliveMax)
	}()
	return c, nil
}

// fail records the first reason the connection ended and closes it.
func (c *Client) fail(err error) {
	c.errOnce.Do(func() {
		c.err = err
		close(c.done)
	})
	c.ssh.Close()
}

func (c *Client) keepalive(interval time.Duration, maxMissed int) {
	t := time.NewTicker(interval)
	defer t.Stop()
	answered := make(chan struct{}, 1)
	pending := false
	missed := 0
	for {
		select {
		case <-c.done:
			return
		case <-answered:
			pending = false
			missed = 0
		case <-t.C:
			if pending {
				missed++
				if missed >= maxMissed {
					c.log.Debug("keepalive failed", "missed", missed)
					c.fail(fmt.Errorf("no keepalive answer from the agent for %s", time.Duration(missed)*interval))
					return
				}
				continue
			}
			pending = true
			go func() {
				if _, _, err := c.ssh.SendRequest("keepalive@openssh.com", true, nil); err == nil {
					answered <- struct{}{}
				}
			}()
		}
	}
}

// Close closes the connection and waits for the client's goroutines.
func (c *Client) Close() error {
	c.fail(errors.New("closed"))
	c.wg.Wait()
	return nil
}

// Done is closed when the connection has ended; Err then says why.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is the reason the connection ended, nil while it is up.
func (c *Client) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// SSH is the underlying x/crypto/ssh client.
func (c *Client) SSH() *ssh.Client { return c.ssh }

// SyncSubsystem is the agent's file-sync subsystem.
const SyncSubsystem = "devtool-sync"

// WorkdirEnv is the environment variable the agent takes a command's working directory from.
const WorkdirEnv = "DEVTOOL_WORKDIR"

// ExecOptions describe one remote command.
type ExecOptions struct {
	// Command is run as `sh -c 'exec WORDS...'` with each word quoted (so it is found in
	// PATH, like kubectl exec, and signals reach it directly); empty starts a login shell.
	Command []string
	// Env is added to the container's environment; Dir is the working directory.
	Env map[string]string
	Dir string
	// Stdin (nil: none), Stdout and Stderr (nil: discarded). In TTY mode Stderr is
	// unused (the terminal merges both).
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// TTY asks for a PTY. When Stdin is a terminal it is put in raw mode for the
	// duration, and its size changes (SIGWINCH) are forwarded.
	TTY bool
	// Term is the TERM value in TTY mode ("xterm-256color" when empty).
	Term string
	// Signals, when set, are forwarded to the remote process group (SIGINT, SIGTERM,
	// SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2).
	Signals <-chan os.Signal
}

// ExitStatusUnknown is returned as the exit code when the agent sent none (connection lost).
const ExitStatusUnknown = 255

// Exec runs a command in the dev container and returns its exit code (128+n when it
// was killed by signal n). When ctx ends, the remote command is sent SIGTERM and,
// two seconds later, its session is closed (the agent kills its process group).
func (c *Client) Exec(ctx context.Context, o ExecOptions) (int, error) {
	s, err := c.ssh.NewSession()
	if err != nil {
		return ExitStatusUnknown, fmt.Errorf("opening a session: %w", err)
	}
	defer s.Close()
	keys := make([]string, 0, len(o.Env))
	for k := range o.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := s.Setenv(k, o.Env[k]); err != nil {
			return ExitStatusUnknown, fmt.Errorf("setting %s: %w", k, err)
		}
	}
	if o.Dir != "" {
		if err := s.Setenv(WorkdirEnv, o.Dir); err != nil {
			return ExitStatusUnknown, err
		}
	}
	o.Stdout, o.Stderr = sharedwriter.Guard(o.Stdout, o.Stderr)
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	s.Stdout, s.Stderr = o.Stdout, o.Stderr
	stdin, err := s.StdinPipe()
	if err != nil {
		return ExitStatusUnknown, err
	}
	var restore func()
	var winch chan os.Signal
	if o.TTY {
		termName := o.Term
		if termName == "" {
			termName = "xterm-256color"
		}
		w, h := 80, 24
		fd, isTerm := terminalFd(o.Stdin)
		if isTerm {
			if tw, th, err := term.GetSize(fd); err == nil {
				w, h = tw, th
			}
		}
		if err := s.RequestPty(termName, h, w, ssh.TerminalModes{ssh.ECHO: 1}); err != nil {
			return ExitStatusUnknown, fmt.Errorf("requesting a terminal: %w", err)
		}
		if isTerm {
			st, err := term.MakeRaw(fd)
			if err != nil {
				return ExitStatusUnknown, err
			}
			restore = func() { _ = term.Restore(fd, st) }
			defer restore()
			winch = notifyResize()
			defer signal.Stop(winch)
		}
	}
	if len(o.Command) == 0 {
		err = s.Shell()
	} else {
		// exec: the command replaces the shell, so signals and the exit status are its own.
		err = s.Start("exec " + ShellQuote(o.Command))
	}
	if err != nil {
		return ExitStatusUnknown, fmt.Errorf("starting the command: %w", err)
	}
	// Stdin: copied until EOF, then EOF sent. A reader that never returns (a terminal)
	// leaves this goroutine blocked in Read until the process exits; there is no way
	// to interrupt a Read of os.Stdin.
	go func() {
		if o.Stdin != nil {
			_, _ = io.Copy(stdin, o.Stdin)
		}
		_ = stdin.Close()
	}()
	waited := make(chan error, 1)
	go func() { waited <- s.Wait() }()
	var killTimer <-chan time.Time
	ctxDone := ctx.Done()
	for {
		select {
		case err := <-waited:
			code, err := exitCode(err)
			if err == nil && ctxDone == nil {
				err = ctx.Err()
			}
			return code, err
		case <-winch:
			if fd, ok := terminalFd(o.Stdin); ok {
				if w, h, err := term.GetSize(fd); err == nil {
					_ = s.WindowChange(h, w)
				}
			}
		case sig := <-o.Signals:
			if name, ok := sshSignal(sig); ok {
				_ = s.Signal(name)
			}
		case <-ctxDone:
			ctxDone = nil
			_ = s.Signal(ssh.SIGTERM)
			killTimer = time.After(2 * time.Second)
		case <-killTimer:
			s.Close()
			<-waited
			return ExitStatusUnknown, ctx.Err()
		case <-c.done:
			s.Close()
			<-waited
			return ExitStatusUnknown, fmt.Errorf("lost the connection to the agent: %w", c.Err())
		}
	}
}

func exitCode(err error) (int, error) {
	if err == nil {
		return 0, nil
	}
	var ee *ssh.ExitError
	if errors.As(err, &ee) {
		if ee.Signal() != "" {
			if n, ok := signalNumbers[ssh.Signal(ee.Signal())]; ok {
				return 128 + n, nil
			}
			return 128 + 15, nil
		}
		return ee.ExitStatus(), nil
	}
	var em *ssh.ExitMissingError
	if errors.As(err, &em) {
		return ExitStatusUnknown, errors.New("the remote command ended without an exit status (connection lost?)")
	}
	return ExitStatusUnknown, err
}

var signalNumbers = map[ssh.Signal]int{
	ssh.SIGABRT: 6, ssh.SIGALRM: 14, ssh.SIGFPE: 8, ssh.SIGHUP: 1, ssh.SIGILL: 4, ssh.SIGINT: 2,
	ssh.SIGKILL: 9, ssh.SIGPIPE: 13, ssh.SIGQUIT: 3, ssh.SIGSEGV: 11, ssh.SIGTERM: 15,
	ssh.SIGUSR1: 10, ssh.SIGUSR2: 12,
}

func terminalFd(r io.Reader) (int, bool) {
	f, ok := r.(interface{ Fd() uintptr })
	if !ok {
		return 0, false
	}
	fd := int(f.Fd())
	return fd, term.IsTerminal(fd)
}

// ShellQuote joins words into one sh command line, quoting each where needed.
func ShellQuote(words []string) string {
	var b strings.Builder
	for i, w := range words {
		if i > 0 {
			b.WriteByte(' ')
		}
		if w != "" && strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=@%+,") == "" {
			b.WriteString(w)
			continue
		}
		b.WriteByte('\'')
		b.WriteString(strings.ReplaceAll(w, "'", `'\''`))
		b.WriteByte('\'')
	}
	return b.String()
}

// OpenSubsystem opens a session running the named subsystem and returns its stream;
// Close ends the session.
func (c *Client) OpenSubsystem(name string) (io.ReadWriteCloser, error) {
	s, err := c.ssh.NewSession()
	if err != nil {
		return nil, fmt.Errorf("opening a session: %w", err)
	}
	w, err := s.StdinPipe()
	if err != nil {
		s.Close()
		return nil, err
	}
	r, err := s.StdoutPipe()
	if err != nil {
		s.Close()
		return nil, err
	}
	if err := s.RequestSubsystem(name); err != nil {
		s.Close()
		return nil, fmt.Errorf("the agent refused subsystem %s (an agent built without it?): %w", name, err)
	}
	return &subsystem{s: s, r: r, w: w}, nil
}

type subsystem struct {
	s *ssh.Session
	r io.Reader
	w io.WriteCloser

	// x/crypto/ssh's channel close is not safe to call from two goroutines at once, and the
	// sync engine closes its stream from both its reader and its writer: close once.
	closeWrite, closeAll sync.Once
	closeErr             error
}

func (s *subsystem) Read(p []byte) (int, error)  { return s.r.Read(p) }
func (s *subsystem) Write(p []byte) (int, error) { return s.w.Write(p) }

// CloseWrite sends EOF; the remote end may still write.
func (s *subsystem) CloseWrite() error {
	var err error
	s.closeWrite.Do(func() { err = s.w.Close() })
	return err
}

func (s *subsystem) Close() error {
	s.closeAll.Do(func() {
		_ = s.CloseWrite()
		if err := s.s.Close(); err != nil && !errors.Is(err, io.EOF) {
			s.closeErr = err
		}
	})
	return s.closeErr
}
