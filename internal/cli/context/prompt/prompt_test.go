package prompt

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestSelect(t *testing.T) {
	opts := []string{"alpha", "beta", "gamma"}
	cases := []struct {
		input string
		def   int
		want  int
		err   error
	}{
		{"2\n", -1, 1, nil},
		{"3", -1, 2, nil},
		{"\n", 1, 1, nil},
		{"x\n0\n1\n", -1, 0, nil},
		{"x\n9\n\n", -1, -1, ErrNoAnswer},
		{"", 0, -1, ErrNoAnswer},
	}
	for _, tc := range cases {
		var out bytes.Buffer
		got, err := Select(context.Background(), strings.NewReader(tc.input), &out, "Pick one:", opts, tc.def)
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("input %q: got %d, %v; want %d, %v", tc.input, got, err, tc.want, tc.err)
		}
		if !strings.Contains(out.String(), "2) beta") {
			t.Errorf("options not listed: %q", out.String())
		}
	}
}

func TestSelectCancelled(t *testing.T) {
	pr, pw := io.Pipe() // never written: the user does not answer
	defer pw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := Select(ctx, pr, io.Discard, "Pick:", []string{"a"}, -1)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want the context's error, got %v", err)
	}
}
