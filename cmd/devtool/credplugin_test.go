//go:build unix

package main

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/cli/root"
	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/iostreams"
)

// TestCredentialPluginDeadline: a kubeconfig whose user runs a credential plugin that never
// answers (a script sleeping in a child, the worst case for killing it), pointing at a closed
// loopback port. The command fails with an error saying which plugin it waited for and how long,
// once the deadline (DEVTOOL_CREDENTIAL_PLUGIN_TIMEOUT, 1s here) passes; Ctrl-C while waiting
// is a cancellation (exit 130); a plugin that answers gets its token used (the request then
// reaches the closed port). No plugin process is left behind.
func TestCredentialPluginDeadline(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "plugin.pid")
	sleeper := filepath.Join(dir, "sleeper")
	// The child sleep keeps the plugin's stdout open: killing only the script would not end the wait.
	write(t, sleeper, "#!/bin/sh\necho $$ > "+pidFile+"\nsleep 3600\necho never\n")
	answerer := filepath.Join(dir, "answerer")
	infoFile := filepath.Join(dir, "exec-info")
	write(t, answerer, "#!/bin/sh\nprintf '%s' \"$KUBERNETES_EXEC_INFO\" > "+infoFile+"\n"+
		`echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"plugin-token"}}'`+"\n")
	for _, p := range []string{sleeper, answerer} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	closed := closedPort(t)

	for _, c := range []struct {
		name    string
		plugin  string
		timeout string
		cancel  time.Duration // cancel the command after this long (0: never)
		want    string
		code    int
	}{
		{name: "a plugin that never answers hits the deadline", plugin: sleeper, timeout: "1s",
			want: `waiting for the kubeconfig credential plugin "sleeper" (user "me") for 1s: it did not answer (set DEVTOOL_CREDENTIAL_PLUGIN_TIMEOUT to wait longer)`,
			code: cmdutil.ExitError},
		{name: "Ctrl-C while a plugin runs", plugin: sleeper, timeout: "1m", cancel: 500 * time.Millisecond,
			want: "context canceled", code: cmdutil.ExitCancelled},
		{name: "a plugin that answers: its token is used", plugin: answerer, timeout: "1s",
			want: "connection refused", code: cmdutil.ExitError},
		{name: "a bad timeout is refused", plugin: answerer, timeout: "soon",
			want: `DEVTOOL_CREDENTIAL_PLUGIN_TIMEOUT="soon" is not a duration`, code: cmdutil.ExitError},
	} {
		t.Run(c.name, func(t *testing.T) {
			os.Remove(pidFile)
			proj := filepath.Join(t.TempDir(), "project")
			write(t, filepath.Join(proj, "compose.yml"), "services:\n  web:\n    image: busybox\n")
			kc := writeKubeconfigExec(t, filepath.Join(proj, "kubeconfig"), "https://"+closed, c.plugin)
			env := map[string]string{"HOME": t.TempDir(), "KUBECONFIG": kc, "DEVTOOL_CREDENTIAL_PLUGIN_TIMEOUT": c.timeout,
				"PATH": os.Getenv("PATH")}
			env["DEVTOOL_HOME"] = env["HOME"]
			getenv := func(k string) string { return env[k] }
			ios, _, _, errOut := iostreams.Test()
			f := &cmdutil.Factory{IOStreams: ios, Logger: slog.New(slog.DiscardHandler), Getenv: getenv, WorkDir: proj}
			f.Target = cmdutil.TargetFunc(&contexts.Resolver{Getenv: getenv})
			cmd := root.NewCmd(f, new(slog.LevelVar))
			cmd.SetArgs([]string{"endpoints", "-n", "dev"})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if c.cancel > 0 {
				// Ctrl-C once the plugin runs (its pid file exists), at c.cancel at the earliest:
				// a fixed delay raced the plugin's start on a loaded machine.
				go func() {
					time.Sleep(c.cancel)
					for i := 0; i < 600; i++ {
						if _, err := os.Stat(pidFile); err == nil {
							break
						}
						time.Sleep(50 * time.Millisecond)
					}
					cancel()
				}()
			}
			start := time.Now()
			done := make(chan error, 1)
			go func() { done <- root.Execute(ctx, cmd) }()
			var err error
			select {
			case err = <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("the command still waits for the plugin after 60s")
			}
			t.Logf("returned after %v: %v", time.Since(start).Round(time.Millisecond), err)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q; stderr %s", err, c.want, errOut)
			}
			if got := cmdutil.ExitCode(err); got != c.code {
				t.Errorf("exit code %d, want %d", got, c.code)
			}
			if c.plugin == answerer && c.timeout == "1s" {
				info, rerr := os.ReadFile(infoFile)
				if rerr != nil || !strings.Contains(string(info), `"kind":"ExecCredential"`) {
					t.Errorf("the plugin got KUBERNETES_EXEC_INFO %q (%v)", info, rerr)
				}
			}
			if c.plugin == sleeper {
				assertGroupGone(t, pidFile)
			}
		})
	}
}

// assertGroupGone checks that the plugin's process group (the script and its sleep) is gone.
func assertGroupGone(t *testing.T, pidFile string) {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the plugin never started: %v", err)
	}
	pid := strings.TrimSpace(string(b))
	deadline := time.Now().Add(10 * time.Second)
	for {
		alive := false
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if err != nil {
				continue
			}
			// pid (comm) state ppid pgrp ...: the fifth field is the process group.
			s := string(stat)
			fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
			if len(fields) > 2 && fields[2] == pid && fields[0] != "Z" {
				alive = true
			}
		}
		if !alive {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a process of the plugin's group %s is still running", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func writeKubeconfigExec(t *testing.T, p, server, plugin string) string {
	t.Helper()
	write(t, p, "apiVersion: v1\nkind: Config\ncurrent-context: local\n"+
		"clusters:\n- name: local\n  cluster:\n    server: "+server+"\n    insecure-skip-tls-verify: true\n"+
		"contexts:\n- name: local\n  context:\n    cluster: local\n    user: me\n    namespace: dev\n"+
		"users:\n- name: me\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"+
		"      command: "+plugin+"\n      interactiveMode: Never\n      provideClusterInfo: true\n")
	return p
}
