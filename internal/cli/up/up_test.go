package up

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"k8s.io/klog/v2"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/iostreams"
)

func TestFlags(t *testing.T) {
	io, _, _, _ := iostreams.Test()
	var got *Options
	cmd := NewCmd(&cmdutil.Factory{IOStreams: io, Getenv: func(string) string { return "" }}, func(_ context.Context, o *Options) error { got = o; return nil })
	cmd.SetArgs([]string{"api", "-e", "A=1", "--env", "B=x=y", "--command", "npm run dev", "--deploy", "--reset", "-n", "dev", "-f", "a.yml", "--file", "b.yml", "--name", "shop"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	env, _ := parseEnv(got.SetEnv)
	if got.Dev != "api" || env["A"] != "1" || env["B"] != "x=y" || got.Command != "npm run dev" || !got.ForceDeploy || !got.Reset || got.Kube.Namespace != "dev" ||
		strings.Join(got.Env.Files, ",") != "a.yml,b.yml" || got.Env.Name != "shop" {
		t.Errorf("%+v", got)
	}
	cmd = NewCmd(&cmdutil.Factory{IOStreams: io, Getenv: func(string) string { return "" }}, func(_ context.Context, o *Options) error { got = o; return nil })
	cmd.SetArgs([]string{"--accept-deletions"})
	if err := cmd.Execute(); err != nil || !got.AcceptDeletions || got.Reset {
		t.Errorf("--accept-deletions: %v %+v", err, got)
	}
	cmd = NewCmd(&cmdutil.Factory{IOStreams: io, Getenv: func(string) string { return "" }}, func(context.Context, *Options) error { return nil })
	cmd.SetArgs([]string{"--accept-deletions", "--reset"})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	var fe *cmdutil.FlagError
	if err := cmd.Execute(); !errors.As(err, &fe) || !strings.Contains(err.Error(), "cannot be combined") {
		t.Errorf("--accept-deletions with --reset: %v, want a usage error", err)
	}
	cmd = NewCmd(&cmdutil.Factory{IOStreams: io, Getenv: func(string) string { return "" }}, func(context.Context, *Options) error { return nil })
	cmd.SetArgs([]string{"--env", "NOVALUE"})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "NAME=value") {
		t.Errorf("bad --env: %v", err)
	}
}

func TestAgentSource(t *testing.T) {
	_, _, err := agentSource(func(string) string { return "" })("riscv64")
	if err == nil || !strings.Contains(err.Error(), "linux/riscv64") {
		t.Errorf("%v", err)
	}
}

// client-go's klog lines go to up's log while up runs, never to the process's stderr logger
// (which would draw over the dev shell), and go back to it afterwards.
func TestClientGoLoggingGoesToUpsLog(t *testing.T) {
	var upLog, stderr bytes.Buffer
	root := slog.New(slog.NewTextHandler(&stderr, nil))
	klog.SetSlogLogger(root)
	defer klog.ClearLogger()
	restore := ownClientGoLogging(slog.New(slog.NewTextHandler(&upLog, nil)), root)
	klog.ErrorS(errors.New("stream reset"), "Unhandled Error")
	klog.Flush()
	if !strings.Contains(upLog.String(), "stream reset") || stderr.Len() != 0 {
		t.Errorf("while up runs: up's log %q, stderr %q", upLog.String(), stderr.String())
	}
	restore()
	klog.ErrorS(errors.New("later"), "after up")
	klog.Flush()
	if !strings.Contains(stderr.String(), "later") || strings.Contains(upLog.String(), "later") {
		t.Errorf("after up: up's log %q, stderr %q", upLog.String(), stderr.String())
	}
}
