package dev

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// PortFree reports whether up can listen on 127.0.0.1:port, as its forwards do; when it cannot,
// the error names the port and, where it can be found, the process holding it (PortOwner).
func PortFree(port int) error {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err == nil {
		return ln.Close()
	}
	if owner := PortOwner(port); owner != "" {
		return fmt.Errorf("local port %d is in use by %s", port, owner)
	}
	return fmt.Errorf("local port %d cannot be used: %v", port, unwrapOpError(err))
}

func unwrapOpError(err error) error {
	if oe, ok := err.(*net.OpError); ok && oe.Err != nil {
		if se, ok := oe.Err.(*os.SyscallError); ok {
			return se.Err
		}
		return oe.Err
	}
	return err
}

// PortOwner names the process listening on a local TCP port ("process 1234 (python3)"), or ""
// when it cannot be found: best effort, from /proc on Linux (the socket's inode in
// /proc/net/tcp and tcp6, then the process with a descriptor on it; only processes whose
// descriptors this user may read are found), "" elsewhere.
func PortOwner(port int) string {
	return portOwner("/proc", port)
}

func portOwner(proc string, port int) string {
	inodes := map[string]bool{}
	for _, f := range []string{"net/tcp", "net/tcp6"} {
		listeningInodes(filepath.Join(proc, f), port, inodes)
	}
	if len(inodes) == 0 {
		return ""
	}
	pids, err := os.ReadDir(proc)
	if err != nil {
		return ""
	}
	for _, p := range pids {
		pid := p.Name()
		if _, err := strconv.Atoi(pid); err != nil {
			continue
		}
		fds, err := os.ReadDir(filepath.Join(proc, pid, "fd"))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(proc, pid, "fd", fd.Name()))
			if err != nil {
				continue
			}
			inode, ok := strings.CutPrefix(link, "socket:[")
			if !ok || !inodes[strings.TrimSuffix(inode, "]")] {
				continue
			}
			name := ""
			if b, err := os.ReadFile(filepath.Join(proc, pid, "comm")); err == nil {
				name = strings.TrimSpace(string(b))
			}
			if name == "" {
				return "process " + pid
			}
			return fmt.Sprintf("process %s (%s)", pid, name)
		}
	}
	return "another process (not one of this user's)"
}

// listeningInodes adds the inodes of the sockets listening on port found in a /proc/net/tcp
// table: "sl local_address rem_address st ... inode", addresses as hex IP:port, state 0A LISTEN.
func listeningInodes(file string, port int, into map[string]bool) {
	f, err := os.Open(file)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[3] != "0A" {
			continue
		}
		_, hexPort, ok := strings.Cut(fields[1], ":")
		if !ok {
			continue
		}
		if p, err := strconv.ParseUint(hexPort, 16, 16); err != nil || int(p) != port {
			continue
		}
		if fields[9] != "0" {
			into[fields[9]] = true
		}
	}
}
