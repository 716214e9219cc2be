package build

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRemoteExistsDeadline: a registry that accepts the connection and never answers makes the
// check fail once registryCheckTimeout passes, saying what it waited for; a cancelled command
// returns at once.
func TestRemoteExistsDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	var conns []net.Conn
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	old := registryCheckTimeout
	registryCheckTimeout = 500 * time.Millisecond
	defer func() { registryCheckTimeout = old }()
	ref := ln.Addr().String() + "/ns/app:tag"

	start := time.Now()
	_, err = RemoteExists(context.Background(), ref)
	t.Logf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if err == nil || !strings.Contains(err.Error(), "waiting for the registry "+ln.Addr().String()+" (or its Docker credential helper) for 500ms") {
		t.Fatalf("err %v", err)
	}
	if time.Since(start) > 20*time.Second {
		t.Fatal("the deadline was not applied")
	}

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	registryCheckTimeout = time.Minute
	_, err = RemoteExists(ctx, ref)
	if err == nil || ctx.Err() == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("cancelled check: %v", err)
	}
}
