// Package prompt is a minimal numbered-choice prompt over IOStreams: the question and the numbered
// options go to stderr, the answer is one line read from stdin.
//
// Why not a prompt library: survey/v2 is deprecated, and huh (bubbletea, lipgloss) brings a dozen
// modules and a full-screen terminal UI that needs a real TTY, so it cannot be driven from the test
// buffers every command test uses. Our prompts are single choices from short lists; a numbered list
// works on any terminal and in screen readers, and is fully testable. Callers check
// IOStreams.CanPrompt first and turn "no terminal" into a flag error that names the flag.
package prompt

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// maxAttempts bounds how often an invalid answer is asked again.
const maxAttempts = 3

// ErrNoAnswer is returned when input ends before a valid answer.
var ErrNoAnswer = errors.New("no answer given")

// Select asks question, lists options numbered from 1, and returns the chosen index. An empty answer
// picks def when def is a valid index (it is shown as the default); def < 0 means no default.
// It returns ctx.Err() when ctx ends first (Ctrl-C).
func Select(ctx context.Context, in io.Reader, out io.Writer, question string, options []string, def int) (int, error) {
	if len(options) == 0 {
		return -1, errors.New("nothing to choose from")
	}
	fmt.Fprintln(out, question)
	for i, o := range options {
		marker := " "
		if i == def {
			marker = ">"
		}
		fmt.Fprintf(out, "%s %d) %s\n", marker, i+1, o)
	}
	r := bufio.NewReader(in)
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if def >= 0 && def < len(options) {
			fmt.Fprintf(out, "Enter a number [1-%d] (default %d): ", len(options), def+1)
		} else {
			fmt.Fprintf(out, "Enter a number [1-%d]: ", len(options))
		}
		line, err := readLine(ctx, r)
		if err != nil {
			fmt.Fprintln(out)
			return -1, err
		}
		line = strings.TrimSpace(line)
		if line == "" && def >= 0 && def < len(options) {
			return def, nil
		}
		n, convErr := strconv.Atoi(line)
		if convErr == nil && n >= 1 && n <= len(options) {
			return n - 1, nil
		}
		fmt.Fprintf(out, "%q is not a number between 1 and %d.\n", line, len(options))
	}
	return -1, fmt.Errorf("%w: %d invalid answers", ErrNoAnswer, maxAttempts)
}

// readLine reads one line, giving up when ctx ends. A final line without a newline counts.
func readLine(ctx context.Context, r *bufio.Reader) (string, error) {
	type result struct {
		line string
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		line, err := r.ReadString('\n')
		ch <- result{line, err}
	}()
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case res := <-ch:
		if res.err == io.EOF && res.line != "" {
			return res.line, nil
		}
		if res.err == io.EOF {
			return "", ErrNoAnswer
		}
		return res.line, res.err
	}
}
