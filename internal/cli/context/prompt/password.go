package prompt

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"
)

// Line asks question and returns one line of input, trimmed.
func Line(ctx context.Context, in io.Reader, out io.Writer, question string) (string, error) {
	fmt.Fprint(out, question)
	line, err := readLine(ctx, bufio.NewReader(in))
	if err != nil {
		fmt.Fprintln(out)
		return "", err
	}
	return strings.TrimSpace(line), nil
}

// ErrNoTerminal is Password's error when in is not a terminal (echo cannot be turned off).
var ErrNoTerminal = errors.New("not a terminal: the password would be echoed")

// Password asks question and reads a line from the terminal in without echoing it. When ctx ends
// first (Ctrl-C) the terminal's echo is restored before returning ctx.Err().
func Password(ctx context.Context, in io.Reader, out io.Writer, question string) (string, error) {
	f, ok := in.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return "", ErrNoTerminal
	}
	fd := int(f.Fd())
	state, err := term.GetState(fd)
	if err != nil {
		return "", err
	}
	fmt.Fprint(out, question)
	type result struct {
		b   []byte
		err error
	}
	ch := make(chan result, 1)
	go func() {
		b, err := term.ReadPassword(fd)
		ch <- result{b, err}
	}()
	select {
	case <-ctx.Done():
		_ = term.Restore(fd, state)
		fmt.Fprintln(out)
		return "", ctx.Err()
	case r := <-ch:
		fmt.Fprintln(out)
		if r.err != nil {
			return "", r.err
		}
		return string(r.b), nil
	}
}

// ReadSecret reads a secret from r (a pipe: --password-stdin): everything up to the first line
// end, at most max bytes.
func ReadSecret(r io.Reader, max int) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, int64(max)+1))
	if err != nil {
		return "", err
	}
	if len(b) > max {
		return "", fmt.Errorf("more than %d bytes", max)
	}
	s := string(b)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	return s, nil
}
