package forward

import (
	"bufio"
	"context"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestParseRule(t *testing.T) {
	r, err := ParseRule("127.0.0.1:30500=devtool-registry.devtool-system.svc.cluster.local:5000")
	if err != nil || r.Listen != "127.0.0.1:30500" || r.To != "devtool-registry.devtool-system.svc.cluster.local:5000" {
		t.Fatalf("%+v %v", r, err)
	}
	for _, bad := range []string{"", "127.0.0.1:1", "a=b", "127.0.0.1:1=host", "=h:1"} {
		if _, err := ParseRule(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Connections are relayed both ways with half-closes kept; cancelling stops the listener and the
// open connections, and every goroutine ends.
func TestForwardRelaysAndStops(t *testing.T) {
	before := runtime.NumGoroutine()
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, _ := io.ReadAll(c) // until the client half-closes
				_, _ = c.Write([]byte(strings.ToUpper(string(b))))
			}()
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- (&Forwarder{}).Serve(ctx, []net.Listener{ln}, []Rule{{Listen: ln.Addr().String(), To: echo.Addr().String()}})
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.Write([]byte("hello"))
	_ = c.(*net.TCPConn).CloseWrite()
	b, err := io.ReadAll(c)
	c.Close()
	if err != nil || string(b) != "HELLO" {
		t.Fatalf("relayed %q %v", b, err)
	}
	// A connection still open when the forwarder stops is closed.
	idle, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the forwarder did not stop")
	}
	_ = idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := bufio.NewReader(idle).ReadByte(); err == nil {
		t.Error("an open connection survived the stop")
	}
	echo.Close()
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before+1 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+1 { // +1: the echo server's last Accept returning
		t.Errorf("goroutines: %d before, %d after", before, n)
	}
}
