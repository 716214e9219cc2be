// Command synccli is compiled by test/compat into the source tree of an earlier release
// (testrelease.Build): that release's sync client over that release's SSH client, as its
// `up` runs them. It prints "banner ..." once connected and "synced" after the first
// synchronization, then syncs until its stdin closes.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/devtool/devtool/internal/devssh"
	"github.com/devtool/devtool/internal/filesync"
)

func main() {
	addr := flag.String("addr", "", "the agent's address")
	dir := flag.String("dir", "", "state folder (id_ed25519, known_hosts, sync)")
	local := flag.String("local", "", "local folder")
	remote := flag.String("remote", "", "remote folder")
	flag.Parse()
	if err := run(*addr, *dir, *local, *remote); err != nil {
		fmt.Fprintln(os.Stderr, "synccli:", err)
		os.Exit(1)
	}
}

func run(addr, dir, local, remote string) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signer, err := devssh.LoadOrCreateKey(filepath.Join(dir, "id_ed25519"))
	if err != nil {
		return err
	}
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return err
	}
	c, err := devssh.Dial(ctx, conn, devssh.ClientConfig{Signer: signer, KnownHostsFile: filepath.Join(dir, "known_hosts")})
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Println("banner", string(c.SSH().ServerVersion()))
	sc, err := filesync.NewClient(filesync.ClientOptions{Folders: []filesync.Folder{{Local: local, Remote: remote}}, StateDir: filepath.Join(dir, "sync")})
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		done <- sc.Run(ctx, func() (io.ReadWriteCloser, error) { return c.OpenSubsystem(devssh.SyncSubsystem) })
	}()
	select {
	case <-sc.Synced():
		fmt.Println("synced")
	case err := <-done:
		return fmt.Errorf("sync ended before the first synchronization: %w", err)
	case <-time.After(2 * time.Minute):
		return fmt.Errorf("no first synchronization within 2 minutes: %+v", sc.Status())
	}
	stdin := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stdin)
	}()
	select {
	case <-stdin:
		cancel()
		<-done
		return nil
	case err := <-done:
		return fmt.Errorf("sync ended: %w", err)
	}
}
