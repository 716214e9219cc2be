package kube

import (
	"context"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/devtool/devtool/internal/sharedwriter"
)

// ExecOptions describe one command run in a container.
type ExecOptions struct {
	Namespace, Pod, Container string
	Command                   []string
	Stdin                     io.Reader
	Stdout, Stderr            io.Writer
	TTY                       bool
}

// Exec runs a command in a container, over WebSocket with a fallback to SPDY for older API servers.
// The command's non-zero exit comes back as an error that wraps its code (see exec.CodeExitError).
func (c *Client) Exec(ctx context.Context, o ExecOptions) error {
	req := c.Clientset.CoreV1().RESTClient().Post().
		Resource("pods").Namespace(o.Namespace).Name(o.Pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: o.Container,
			Command:   o.Command,
			Stdin:     o.Stdin != nil,
			Stdout:    o.Stdout != nil,
			Stderr:    o.Stderr != nil && !o.TTY,
			TTY:       o.TTY,
		}, scheme.ParameterCodec)
	spdy, err := remotecommand.NewSPDYExecutor(c.Config, "POST", req.URL())
	if err != nil {
		return fmt.Errorf("exec in %s/%s: %w", o.Namespace, o.Pod, err)
	}
	ws, err := remotecommand.NewWebSocketExecutor(c.Config, "GET", req.URL().String())
	if err != nil {
		return fmt.Errorf("exec in %s/%s: %w", o.Namespace, o.Pod, err)
	}
	// Fall back only when the WebSocket upgrade itself failed (as kubectl does): any later error
	// means the command already ran, and running it again over SPDY would run it twice.
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return fmt.Errorf("exec in %s/%s: %w", o.Namespace, o.Pod, err)
	}
	stdout, stderr := sharedwriter.Guard(o.Stdout, o.Stderr)
	return exec.StreamWithContext(ctx, remotecommand.StreamOptions{
		Stdin: o.Stdin, Stdout: stdout, Stderr: stderr, Tty: o.TTY,
	})
}
