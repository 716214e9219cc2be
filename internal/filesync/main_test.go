package filesync

import (
	"context"
	"io"
	"os"
	"testing"
)

// TestMain lets the test binary act as the agent's end over stdin/stdout
// (FILESYNC_SERVE_STATE=<state dir>) or as the local end
// (FILESYNC_CLIENT_STATE, _LOCAL, _REMOTE), so a benchmark can measure each
// side in its own process.
func TestMain(m *testing.M) {
	if dir := os.Getenv("FILESYNC_CLIENT_STATE"); dir != "" {
		// The local end over stdin/stdout: prints "synced" on stderr once
		// synchronized, runs until stdin closes.
		c, err := NewClient(ClientOptions{Folders: []Folder{{Local: os.Getenv("FILESYNC_CLIENT_LOCAL"), Remote: os.Getenv("FILESYNC_CLIENT_REMOTE")}}, StateDir: dir})
		if err != nil {
			os.Exit(1)
		}
		go func() {
			<-c.Synced()
			os.Stderr.WriteString("synced\n")
		}()
		_ = c.Run(context.Background(), func() (io.ReadWriteCloser, error) { return stdio{}, nil })
		os.Exit(0)
	}
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
