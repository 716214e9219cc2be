package dev

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/crypto/ssh"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/devtool/devtool/internal/devssh"
	"github.com/devtool/devtool/internal/kube"
)

// AgentSource gives the agent binary for a Linux architecture ("amd64", "arm64") and its
// sha256 in hex (agentbin.For).
type AgentSource func(goarch string) (data []byte, sha256 string, err error)

// Executor runs a command in a container (kube.Client.Exec).
type Executor interface {
	Exec(ctx context.Context, o kube.ExecOptions) error
}

// InstallOptions say where the agent goes.
type InstallOptions struct {
	Exec                      Executor
	Namespace, Pod, Container string
	Agent                     AgentSource
	// AuthorizedKey is the dev container's public key in authorized_keys format (one line).
	AuthorizedKey []byte
	// HostKey is the agent's host key (OpenSSH PEM private key) the CLI generated for this
	// dev container; nil: the agent creates its own. It is written only where the pod's
	// home has no host key yet, so a running agent's key never changes under it.
	HostKey []byte
	// NodeArch is used when the image has no uname: the node's architecture, "" for amd64.
	NodeArch string
	// LookupNodeArch, when set and NodeArch is "", is asked for the node's architecture only
	// when the image has no uname (it costs API calls on every install otherwise).
	LookupNodeArch func(ctx context.Context) string
}

// InstallResult says what Install did.
type InstallResult struct {
	Arch     string
	Uploaded bool // false when the volume already held the same agent
	// Fresh is true when the volume held no agent at all (a new or emptied dev home), as
	// opposed to another release's agent replaced by this one.
	Fresh bool
	// HostKeyInstalled is true when Install wrote HostKey into the pod: the agent, started
	// only after the upload, presents exactly that key, which the caller may pin.
	HostKeyInstalled bool
}

// Install adds the authorized key (other machines' keys stay) and, unless the dev volume already holds the same agent
// (its recorded sha256), uploads the agent through the exec API: written to a temporary
// file, made executable and renamed, so the launcher never runs a half-written binary.
func Install(ctx context.Context, o InstallOptions) (InstallResult, error) {
	var res InstallResult
	// One exec: write the authorized key (and the host key where there is none yet) atomically,
	// report the agent's hash and the machine. Stdin: the authorized_keys line, then the host
	// key's PEM text (never on the command line, which the API server may log).
	if bytes.ContainsAny(bytes.TrimRight(o.AuthorizedKey, "\n"), "\n") {
		return res, fmt.Errorf("the authorized key must be one line")
	}
	hostKey := "true"
	if len(o.HostKey) > 0 {
		hostKey = fmt.Sprintf(`if [ -e %[1]s/ssh/host_ed25519 ]; then echo hostkey=kept; cat > /dev/null; `+
			`else cat > %[1]s/ssh/.host_ed25519.tmp; [ -s %[1]s/ssh/.host_ed25519.tmp ] || { echo "the host key did not arrive on stdin" >&2; exit %[2]d; }; mv -f %[1]s/ssh/.host_ed25519.tmp %[1]s/ssh/host_ed25519; echo hostkey=installed; fi`, Home, exitShortStdin)
	}
	// The key is added to authorized_keys, never put in place of it: each machine (each home
	// and folder) has its own key, and a second one's up must not lock the first out. The
	// lines are copied to a temporary file, the key appended unless a line has its type and
	// data already, and the file renamed into place.
	script := fmt.Sprintf(`set -e; set -f; umask 077; mkdir -p %[1]s/ssh %[1]s/bin; `+
		`IFS= read -r key || { echo "the key did not arrive on stdin" >&2; exit %[4]d; }; set -- $key; k="$1 $2"; have=; `+
		`t=%[1]s/ssh/.authorized_keys.tmp; f=%[1]s/ssh/authorized_keys; : > "$t"; `+
		`if [ -f "$f" ]; then while IFS= read -r l || [ -n "$l" ]; do printf '%%s\n' "$l" >> "$t"; set -- $l; if [ "$1 $2" = "$k" ]; then have=1; fi; done < "$f"; fi; `+
		`if [ -z "$have" ]; then printf '%%s\n' "$key" >> "$t"; mv -f "$t" "$f"; else rm -f "$t"; fi; %[3]s; `+
		`echo "sha=$(cat %[2]s.sha256 2>/dev/null || true)"; echo "arch=$(uname -m 2>/dev/null || true)"`, Home, AgentPath, hostKey, exitShortStdin)
	stdin := append(append(bytes.TrimRight(append([]byte(nil), o.AuthorizedKey...), "\n"), '\n'), o.HostKey...)
	var out, errb bytes.Buffer
	err := execWhole(ctx, o, script, stdin, &out, &errb)
	if err != nil {
		return res, fmt.Errorf("writing the SSH keys into pod %s: %w%s", o.Pod, err, stderrSuffix(errb.String()))
	}
	var have, machine string
	for _, line := range strings.Split(out.String(), "\n") {
		if v, ok := strings.CutPrefix(line, "sha="); ok {
			have = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "arch="); ok {
			machine = strings.TrimSpace(v)
		}
		if strings.TrimSpace(line) == "hostkey=installed" {
			res.HostKeyInstalled = true
		}
	}
	node := o.NodeArch
	if node == "" && o.LookupNodeArch != nil && goarch(machine, "?") == "?" {
		node = o.LookupNodeArch(ctx)
	}
	res.Arch = goarch(machine, node)
	res.Fresh = have == ""
	data, sum, err := o.Agent(res.Arch)
	if err != nil {
		return res, err
	}
	if have == sum {
		return res, nil
	}
	// The size is checked before the rename (with wc where the image has it): a binary cut
	// short would otherwise sit under the right hash and never be replaced.
	up := fmt.Sprintf(`set -e; mkdir -p %[1]s/bin; cat > %[2]s.tmp; `+
		`if command -v wc >/dev/null 2>&1; then n=$(wc -c < %[2]s.tmp); n=$((n+0)); `+
		`if [ "$n" != %[4]d ]; then rm -f %[2]s.tmp; echo "the agent arrived with $n of %[4]d bytes" >&2; exit %[5]d; fi; fi; `+
		`chmod 0755 %[2]s.tmp; mv -f %[2]s.tmp %[2]s; echo %[3]s > %[2]s.sha256`,
		Home, AgentPath, sum, len(data), exitShortStdin)
	errb.Reset()
	err = execWhole(ctx, o, up, data, nil, &errb)
	if err != nil {
		return res, fmt.Errorf("uploading the agent into pod %s: %w%s", o.Pod, err, stderrSuffix(errb.String()))
	}
	res.Uploaded = true
	return res, nil
}

// exitShortStdin is the exit code of Install's scripts when their stdin did not arrive
// whole: the exec API drops a command's stdin now and then (kubernetes/kubernetes#112834,
// seen here as an empty authorized_keys), and such a run is tried again.
const exitShortStdin = 75

// execWhole runs script with stdin, again (up to three runs in all) while it says its stdin
// did not arrive whole.
func execWhole(ctx context.Context, o InstallOptions, script string, stdin []byte, stdout io.Writer, stderr *bytes.Buffer) error {
	var err error
	for try := 0; try < 3; try++ {
		stderr.Reset()
		if b, ok := stdout.(*bytes.Buffer); ok {
			b.Reset()
		}
		err = o.Exec.Exec(ctx, kube.ExecOptions{Namespace: o.Namespace, Pod: o.Pod, Container: o.Container,
			Command: []string{"sh", "-c", script}, Stdin: bytes.NewReader(stdin), Stdout: stdout, Stderr: stderr})
		if err == nil || exitCode(err) != exitShortStdin || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// exitCode is the exit code an exec error carries (the exec API's or a local process's), or -1.
func exitCode(err error) int {
	var st interface{ ExitStatus() int }
	if errors.As(err, &st) {
		return st.ExitStatus()
	}
	var ec interface{ ExitCode() int }
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return -1
}

func stderrSuffix(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	return ": " + s
}

// goarch maps uname -m (or the node's architecture) to a Go architecture.
func goarch(machine, node string) string {
	switch machine {
	case "x86_64", "amd64":
		return "amd64"
	case "aarch64", "arm64", "armv8l":
		return "arm64"
	}
	if node != "" {
		return node
	}
	return "amd64"
}

// NodeArch reads the architecture of the node a pod runs on ("" when it cannot be read, for
// example without permission to read nodes).
func NodeArch(ctx context.Context, c *kube.Client, ns, pod string) string {
	p, err := c.Clientset.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil || p.Spec.NodeName == "" {
		return ""
	}
	n, err := c.Clientset.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return n.Status.NodeInfo.Architecture
}

// PinHostKey pins the public half of a host key the CLI installed itself (OpenSSH PEM).
func PinHostKey(knownHosts string, hostKeyPEM []byte) error {
	s, err := ssh.ParsePrivateKey(hostKeyPEM)
	if err != nil {
		return err
	}
	return devssh.Pin(knownHosts, s.PublicKey())
}
