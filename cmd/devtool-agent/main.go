// devtool-agent is the dev container's SSH agent: `devtool-agent serve --home DIR
// --addr 127.0.0.1:2222 [--log FILE]`. It is a small static Linux binary (no
// client-go) that the CLI uploads into the pod.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/devtool/devtool/internal/agent"
	"github.com/devtool/devtool/internal/agentversion"
	"github.com/devtool/devtool/internal/buildinfo"
	"github.com/devtool/devtool/internal/filesync"
	"github.com/devtool/devtool/internal/logfile"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "devtool-agent:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError struct{ error }

const usage = `usage:
  devtool-agent serve --home DIR [--addr 127.0.0.1:2222] [--log FILE]
  devtool-agent version
  devtool-agent capabilities`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{errors.New(usage)}
	}
	switch args[0] {
	case "version":
		i := buildinfo.Get()
		fmt.Fprintf(stdout, "devtool-agent %s (commit %s, sync protocol %d, %s, %s)\n", i.Version, i.Commit, filesync.ProtocolVersion, i.GoVersion, i.Platform)
		return nil
	case "capabilities":
		// What an agent restarting into this binary needs to know (checkBinary): the
		// handoff version it takes kept commands over with.
		fmt.Fprintf(stdout, "handoff=%d\n", agent.HandoffVersion)
		return nil
	case "serve":
		return serve(ctx, args[1:], stderr)
	case "-h", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return nil
	}
	return usageError{fmt.Errorf("unknown command %q\n%s", args[0], usage)}
}

func serve(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	home := fs.String("home", "", "the agent's folder (the dev volume): ssh/host_ed25519, ssh/authorized_keys, the log")
	addr := fs.String("addr", "127.0.0.1:2222", "loopback address to serve SSH on")
	logFile := fs.String("log", "", "log file (default HOME/agent.log)")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if *home == "" {
		return usageError{errors.New("serve: --home is required")}
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		return usageError{fmt.Errorf("--addr %s: %v", *addr, err)}
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return usageError{fmt.Errorf("--addr %s: the agent listens on a loopback address only (the port-forward reaches the pod's loopback)", *addr)}
	}
	if *logFile == "" {
		*logFile = filepath.Join(*home, "agent.log")
	}
	if err := os.MkdirAll(filepath.Dir(*logFile), 0o700); err != nil {
		return err
	}
	// Rotated at a size cap (doctor reads its end), never opened through a link.
	lf, err := logfile.Open(*logFile, logfile.DefaultMax)
	if err != nil {
		return err
	}
	defer lf.Close()
	logger := slog.New(slog.NewTextHandler(io.MultiWriter(lf, stderr), &slog.HandlerOptions{Level: slog.LevelInfo}))
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	exe, exeErr := os.Executable() // the binary on the dev volume ("(deleted)" once replaced is cut off)
	sum := ""
	if exeErr == nil {
		sum, _ = agentversion.FileSum(exe)
	}
	cfg := agent.Config{
		Banner:             agentversion.Banner(agentversion.Info{Release: buildinfo.Get().Version, Protocol: filesync.ProtocolVersion, Sum: sum}),
		CanRestart:         func() (bool, error) { return checkBinary(ctx, exe, exeErr) },
		HandoffFile:        filepath.Join(*home, "agent-handoff.json"),
		HostKeyFile:        filepath.Join(*home, "ssh", "host_ed25519"),
		AuthorizedKeysFile: filepath.Join(*home, "ssh", "authorized_keys"),
		Logger:             logger,
		Sync:               syncServer(*home, logger),
		// As the container's main process (exec'd by the launcher) the agent is PID 1 and
		// inherits every orphan.
		ReapOrphans: os.Getpid() == 1,
	}
	logger.Info("devtool-agent starting", "version", buildinfo.Get().Version, "protocol", filesync.ProtocolVersion, "sha256", sum, "pid", os.Getpid())
	err = agent.Serve(ctx, ln, cfg)
	var restart *agent.Restart
	if !errors.As(err, &restart) {
		return err
	}
	// An upgrade in place: the binary on the dev volume takes this process's place (same
	// PID, so the container keeps running); every connection was closed, and every command
	// but the kept ones handed over (their processes stay this process's children, their
	// terminals open across the exec: the new agent takes them over).
	logger.Info("restarting with the binary on the dev volume", "path", exe, "keptCommands", restart.Kept)
	lf.Close()
	err = syscall.Exec(exe, append([]string{exe}, os.Args[1:]...), os.Environ())
	restart.Abort()
	return fmt.Errorf("restarting %s: %w", exe, err)
}

// checkBinary makes sure the agent binary at exe runs before this process is replaced by
// it: `exe version` must exit 0 within 10 s. handoff: it takes over the kept commands of
// this agent (`exe capabilities` says the same handoff version; an agent of an earlier
// release knows no such command).
func checkBinary(ctx context.Context, exe string, exeErr error) (handoff bool, err error) {
	if exeErr != nil {
		return false, fmt.Errorf("the agent's own binary is unknown: %w", exeErr)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, exe, "version").CombinedOutput()
	if err != nil {
		return false, fmt.Errorf("the agent binary %s does not run (%v): %s", exe, err, strings.TrimSpace(string(out)))
	}
	out, err = exec.CommandContext(ctx, exe, "capabilities").Output()
	if err != nil || agent.HandoffVersion == 0 {
		return false, nil
	}
	for _, w := range strings.Fields(string(out)) {
		if w == fmt.Sprintf("handoff=%d", agent.HandoffVersion) {
			return true, nil
		}
	}
	return false, nil
}
