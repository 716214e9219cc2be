package filesync

import (
	"context"
	"io"
	"os"
	"testing"
)

// TestMain lets the test binary act as the agent's end over stdin/stdout
// (FILESYNC_SERVE_STATE=<state dir>), so a benchmark can measure each side
// in its own process.
func TestMain(m *testing.M) {
	if dir := os.Getenv("FILESYNC_SERVE_STATE"); dir != "" {
		err := Serve(context.Background(), stdio{}, ServerOptions{StateDir: dir})
		if err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type stdio struct{}

func (stdio) Read(p []byte) (int, error)  { return os.Stdin.Read(p) }
func (stdio) Write(p []byte) (int, error) { return os.Stdout.Write(p) }
func (stdio) Close() error                { os.Stdin.Close(); return os.Stdout.Close() }

var _ io.ReadWriteCloser = stdio{}
