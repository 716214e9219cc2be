package deploy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/compose-spec/compose-go/v2/dotenv"

	"github.com/devtool/devtool/internal/manifest"
	"github.com/devtool/devtool/internal/safefile"
)

// CommandRunner runs a manifest's deploy or destroy commands, one after the other.
type CommandRunner struct {
	// Shell is "bash" (the default) or "sh" (--no-bash); each command runs as <Shell> -c <command>.
	Shell string
	Dir   string            // the manifest's folder
	Env   map[string]string // the commands' environment (see CommandEnv); DEVTOOL_ENV handoffs are added to it
	// EnvFile is the DEVTOOL_ENV file: emptied before each command and read as dotenv after it.
	EnvFile string
	// Out receives each line live, prefixed by the command's name (stderr).
	Out io.Writer
	// Output keeps the tail of what the commands printed (with prefixes), for the state record.
	Output *TailBuffer
	// Phase names the run in errors: "deploy" ("" too) or "destroy".
	Phase string
}

// CommandError is a command that failed (or was cancelled): later commands did not run.
type CommandError struct {
	Name  string
	Err   error
	Phase string // "deploy" ("" too) or "destroy": what timed out
}

func (e *CommandError) Error() string {
	if errors.Is(e.Err, context.Canceled) {
		return fmt.Sprintf("command %q was cancelled", e.Name)
	}
	if errors.Is(e.Err, context.DeadlineExceeded) {
		phase := e.Phase
		if phase == "" {
			phase = "deploy"
		}
		return fmt.Sprintf("command %q was stopped: the %s timed out", e.Name, phase)
	}
	return fmt.Sprintf("command %q failed: %v", e.Name, e.Err)
}

func (e *CommandError) Unwrap() error { return e.Err }

// Run runs cmds in order; the first failure stops it. Cancelling ctx kills the running command's
// whole process group.
func (r *CommandRunner) Run(ctx context.Context, cmds []manifest.Command) error {
	if r.Env == nil {
		r.Env = map[string]string{}
	}
	if r.Output == nil {
		r.Output = NewTailBuffer(maxOutputBytes)
	}
	for _, c := range cmds {
		if err := ctx.Err(); err != nil {
			return &CommandError{Name: c.Name, Err: err, Phase: r.Phase}
		}
		if err := r.runOne(ctx, c); err != nil {
			return &CommandError{Name: c.Name, Err: err, Phase: r.Phase}
		}
	}
	return nil
}

func (r *CommandRunner) runOne(ctx context.Context, c manifest.Command) error {
	shell := r.Shell
	if shell == "" {
		shell = "bash"
	}
	name := c.Name
	if name == "" {
		name = c.Command
	}
	if r.EnvFile != "" {
		if err := os.WriteFile(r.EnvFile, nil, 0o600); err != nil {
			return fmt.Errorf("preparing DEVTOOL_ENV: %w", err)
		}
		r.Env[EnvHandoffVar] = r.EnvFile
	}
	cmd := exec.CommandContext(ctx, shell, "-c", c.Command)
	cmd.Dir = r.Dir
	cmd.Env = EnvList(r.Env)
	killProcessGroup(cmd) // the whole group: bash -c 'kubectl …' must not leave kubectl running
	cmd.WaitDelay = 5 * time.Second
	pw := &prefixWriter{prefix: name + " | ", out: r.Out, keep: r.Output}
	cmd.Stdout, cmd.Stderr = pw, pw
	fmt.Fprintf(pw, "$ %s\n", c.Command)
	err := cmd.Run()
	pw.flush()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return err
	}
	if r.EnvFile != "" {
		vars, err := ReadEnvFile(r.EnvFile)
		if err != nil {
			return err
		}
		for k, v := range vars {
			r.Env[k] = v
		}
	}
	return nil
}

// maxEnvFileBytes bounds the DEVTOOL_ENV file; maxLineBytes a line of command output.
const (
	maxEnvFileBytes = 1 << 20
	maxLineBytes    = 64 << 10
)

// ReadEnvFile reads the DEVTOOL_ENV file a command wrote, as a dotenv file. Names --var may not
// set (KUBECONFIG, PATH, DEVTOOL_*, ...) are refused: a command cannot route later commands
// around the labelling proxy.
func ReadEnvFile(path string) (map[string]string, error) {
	data, err := safefile.Read(path, maxEnvFileBytes)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading DEVTOOL_ENV: %w", err)
	}
	vars, err := dotenv.ParseWithLookup(bytes.NewReader(data), func(string) (string, bool) { return "", false })
	if err != nil {
		return nil, fmt.Errorf("reading DEVTOOL_ENV (%s) as a dotenv file: %w", path, err)
	}
	for k := range vars {
		if Reserved(k) {
			return nil, fmt.Errorf("DEVTOOL_ENV sets %s, which is reserved: deploy sets it itself (like --var, DEVTOOL_ENV cannot set KUBECONFIG, PATH or DEVTOOL_* names)", k)
		}
	}
	return vars, nil
}

// prefixWriter writes complete lines with a prefix; stdout and stderr of one command share it.
type prefixWriter struct {
	mu     sync.Mutex
	prefix string
	out    io.Writer
	keep   *TailBuffer
	buf    []byte
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.line(w.buf[:i+1])
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > maxLineBytes { // a line without end: pass it on in pieces, memory stays bounded
		w.line(w.buf)
		w.buf = nil
	}
	return len(p), nil
}

func (w *prefixWriter) line(l []byte) {
	s := w.prefix + strings.TrimRight(string(l), "\r\n") + "\n"
	if w.out != nil {
		_, _ = io.WriteString(w.out, s)
	}
	if w.keep != nil {
		w.keep.WriteString(s)
	}
}

func (w *prefixWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.line(w.buf)
		w.buf = nil
	}
}

// TailBuffer keeps the last Max bytes written to it (the start of a long output is dropped).
type TailBuffer struct {
	mu        sync.Mutex
	max       int
	buf       []byte
	truncated bool
}

// NewTailBuffer keeps at most max bytes.
func NewTailBuffer(max int) *TailBuffer { return &TailBuffer{max: max} }

func (b *TailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	if len(p) >= b.max {
		b.buf = append(b.buf[:0], p[len(p)-b.max:]...)
		b.truncated = true
		return n, nil
	}
	b.buf = append(b.buf, p...)
	if len(b.buf) > 2*b.max { // compact: amortised O(1) per byte, memory at most 2*max
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.max:]...)
		b.truncated = true
	}
	return n, nil
}

// WriteString writes s.
func (b *TailBuffer) WriteString(s string) (int, error) { return b.Write([]byte(s)) }

// String returns the kept tail, marked when the start was dropped.
func (b *TailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.buf
	trunc := b.truncated
	if len(out) > b.max {
		out, trunc = out[len(out)-b.max:], true
	}
	if trunc {
		return "[…output truncated…]\n" + string(out)
	}
	return string(out)
}
