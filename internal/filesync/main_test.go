package filesync

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"
	"testing"
)

// TestMain lets the test binary act as the agent's end over stdin/stdout
// (FILESYNC_SERVE_STATE=<state dir>) or as the local end
// (FILESYNC_CLIENT_STATE, _LOCAL, _REMOTE), so a benchmark can measure each
// side in its own process. The local end prints "synced" on stderr once
// synchronized and, with FILESYNC_CLIENT_STATUS=1, "status <addr>" for its
// status service (user "u", password "p"), FILESYNC_RELEASE=<n> sets
// memRelease. Either ends on SIGTERM or when
// its stream ends; FILESYNC_CPUPROFILE / FILESYNC_MEMPROFILE name files for
// a CPU profile of its whole run and a heap profile at its end.
func TestMain(m *testing.M) {
	client, server := os.Getenv("FILESYNC_CLIENT_STATE"), os.Getenv("FILESYNC_SERVE_STATE")
	if client == "" && server == "" {
		os.Exit(m.Run())
	}
	stdin, stdout = pollable(0, "stdin"), pollable(1, "stdout")
	if v := os.Getenv("FILESYNC_RELEASE"); v != "" { // releaseNone, releaseMaps, releaseAll
		fmt.Sscan(v, &memRelease)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if p := os.Getenv("FILESYNC_CPUPROFILE"); p != "" {
		f, err := os.Create(p)
		if err == nil && pprof.StartCPUProfile(f) == nil {
			defer pprof.StopCPUProfile()
		}
	}
	defer func() {
		if p := os.Getenv("FILESYNC_MEMPROFILE"); p != "" {
			if f, err := os.Create(p); err == nil {
				runtime.GC()
				_ = pprof.WriteHeapProfile(f)
				f.Close()
			}
		}
	}()
	if server != "" {
		_ = Serve(ctx, stdio{}, ServerOptions{StateDir: server})
		return
	}
	// SIGUSR1: the heap profile now (FILESYNC_MEMPROFILE + ".now") and the
	// runtime's memory figures on stderr.
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	go func() {
		for range usr1 {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			fmt.Fprintf(os.Stderr, "memstats heap-alloc=%d heap-inuse=%d heap-idle=%d heap-released=%d stack=%d sys=%d other=%d gc-sys=%d mspan=%d\n",
				ms.HeapAlloc>>10, ms.HeapInuse>>10, ms.HeapIdle>>10, ms.HeapReleased>>10, ms.StackInuse>>10, ms.Sys>>10, ms.OtherSys>>10, ms.GCSys>>10, ms.MSpanInuse>>10)
			if p := os.Getenv("FILESYNC_MEMPROFILE"); p != "" {
				if f, err := os.Create(p + ".now"); err == nil {
					_ = pprof.WriteHeapProfile(f)
					f.Close()
				}
			}
		}
	}()
	c, err := NewClient(ClientOptions{Folders: []Folder{{Local: os.Getenv("FILESYNC_CLIENT_LOCAL"), Remote: os.Getenv("FILESYNC_CLIENT_REMOTE")}}, StateDir: client})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if os.Getenv("FILESYNC_CLIENT_STATUS") != "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer ln.Close()
		go func() { _ = ServeStatus(ln, "u", "p", c) }()
		fmt.Fprintf(os.Stderr, "status %s\n", ln.Addr())
	}
	go func() {
		select {
		case <-c.Synced():
			fmt.Fprintln(os.Stderr, "synced")
		case <-ctx.Done():
		}
	}()
	_ = c.Run(ctx, func() (io.ReadWriteCloser, error) { return stdio{}, nil })
}

// stdio is the stream over stdin and stdout, both through the runtime's
// poller (non-blocking), so closing them ends a read or write under way.
type stdio struct{}

// stdin and stdout are set by TestMain in the child modes only (a
// non-blocking stdout would break the test runner's own output).
var stdin, stdout *os.File

func (stdio) Read(p []byte) (int, error)  { return stdin.Read(p) }
func (stdio) Write(p []byte) (int, error) { return stdout.Write(p) }
func (stdio) Close() error                { stdin.Close(); return stdout.Close() }

var _ io.ReadWriteCloser = stdio{}
