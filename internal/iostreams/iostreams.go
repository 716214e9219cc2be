// Package iostreams is the one place that knows about the terminal: where results go (Out),
// where progress and hints go (ErrOut), whether prompting and colour are possible, and a
// spinner that only draws on a terminal.
package iostreams

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
)

// IOStreams holds the standard streams of a command and what they are connected to.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	inTTY, outTTY, errTTY bool
	colorEnabled          bool
}

// System returns streams bound to the process's stdin/stdout/stderr.
func System() *IOStreams {
	s := &IOStreams{
		In:     os.Stdin,
		Out:    os.Stdout,
		ErrOut: os.Stderr,
		inTTY:  isTerminal(os.Stdin),
		outTTY: isTerminal(os.Stdout),
		errTTY: isTerminal(os.Stderr),
	}
	_, noColor := os.LookupEnv("NO_COLOR")
	s.colorEnabled = s.outTTY && !noColor && os.Getenv("TERM") != "dumb"
	return s
}

// Test returns streams backed by buffers, for tests: no terminal, no colour.
func Test() (*IOStreams, *bytes.Buffer, *bytes.Buffer, *bytes.Buffer) {
	in, out, errOut := &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errOut}, in, out, errOut
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// SetTTY marks all streams as terminals (or not); for tests of interactive paths.
func (s *IOStreams) SetTTY(tty bool) { s.inTTY, s.outTTY, s.errTTY = tty, tty, tty }

// IsStdoutTTY reports whether results go to a terminal.
func (s *IOStreams) IsStdoutTTY() bool { return s.outTTY }

// IsStderrTTY reports whether progress goes to a terminal.
func (s *IOStreams) IsStderrTTY() bool { return s.errTTY }

// CanPrompt reports whether the user can be asked questions: both stdin and stderr are terminals.
func (s *IOStreams) CanPrompt() bool { return s.inTTY && s.errTTY }

// ColorEnabled reports whether output may carry ANSI colour (stdout is a terminal and NO_COLOR is unset).
func (s *IOStreams) ColorEnabled() bool { return s.colorEnabled }

// Color wraps text in an ANSI colour code (30–37, 90–97) when colour is enabled.
func (s *IOStreams) Color(code int, text string) string {
	if !s.colorEnabled {
		return text
	}
	return fmt.Sprintf("\x1b[%dm%s\x1b[0m", code, text)
}

// Spinner shows progress on stderr. On a terminal it animates in place; otherwise it prints
// the message once as a plain line, so logs stay readable.
type Spinner struct {
	s       *IOStreams
	mu      sync.Mutex
	msg     string
	stop    chan struct{}
	done    chan struct{}
	running bool
}

// StartSpinner begins showing msg; call Stop when the work ends.
func (s *IOStreams) StartSpinner(msg string) *Spinner {
	sp := &Spinner{s: s, msg: msg}
	if !s.errTTY {
		fmt.Fprintln(s.ErrOut, msg)
		return sp
	}
	sp.stop, sp.done, sp.running = make(chan struct{}), make(chan struct{}), true
	go sp.loop()
	return sp
}

// Update changes the message shown (printed as a new line when not on a terminal).
func (sp *Spinner) Update(msg string) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if msg == sp.msg {
		return
	}
	sp.msg = msg
	if !sp.running {
		fmt.Fprintln(sp.s.ErrOut, msg)
	}
}

func (sp *Spinner) loop() {
	defer close(sp.done)
	frames := []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for i := 0; ; i++ {
		sp.mu.Lock()
		fmt.Fprintf(sp.s.ErrOut, "\r\x1b[K%s %s", frames[i%len(frames)], sp.msg)
		sp.mu.Unlock()
		select {
		case <-sp.stop:
			fmt.Fprint(sp.s.ErrOut, "\r\x1b[K")
			return
		case <-t.C:
		}
	}
}

// Stop clears the spinner. Safe to call more than once.
func (sp *Spinner) Stop() {
	sp.mu.Lock()
	running := sp.running
	sp.running = false
	sp.mu.Unlock()
	if running {
		close(sp.stop)
		<-sp.done
	}
}
