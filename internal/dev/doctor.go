package dev

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/manifest"
	"github.com/devtool/devtool/internal/safefile"
)

// DoctorOptions are the inputs of WriteDoctor.
type DoctorOptions struct {
	Client    kubernetes.Interface // nil: no cluster information
	Exec      Executor             // nil: no remote sync log
	Namespace string
	Dev       *manifest.Dev
	State     *StateDir
	Version   string
	// Secrets are values that must never appear in the bundle (the kube token, the status
	// service password...): each is replaced wherever it appears.
	Secrets []string
	Now     time.Time
}

const redacted = "<redacted>"

// secretPatterns catch secrets that are not known values: private keys, bearer tokens,
// passwords and tokens in key=value or JSON form.
var secretPatterns = []*regexp.Regexp{
	regexp.MustCompile(`(?s)-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----`),
	regexp.MustCompile(`(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}`),
	regexp.MustCompile(`(?i)((?:password|passwd|secret|token|api[_-]?key)["']?\s*[:=]\s*["']?)[^\s"',}]+`),
	regexp.MustCompile(`(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp256) [A-Za-z0-9+/=]{20,}`),
}

// Redact removes known secret values and secret-looking text.
func Redact(s string, secrets []string) string {
	for _, v := range secrets {
		if len(v) >= 4 {
			s = strings.ReplaceAll(s, v, redacted)
		}
	}
	for i, re := range secretPatterns {
		switch i {
		case 0:
			s = re.ReplaceAllString(s, redacted)
		case 3:
			s = re.ReplaceAllString(s, "$1 "+redacted)
		default:
			s = re.ReplaceAllString(s, "${1}"+redacted)
		}
	}
	return s
}

// WriteDoctor writes the diagnostic zip: the tool log, both sides' sync logs, a summary of
// the dev entry without secret values, the dev pods' conditions and events, and metadata.
// Every text is passed through Redact. Parts that cannot be read say why instead.
func WriteDoctor(ctx context.Context, w io.Writer, o DoctorOptions) error {
	z := zip.NewWriter(w)
	add := func(name, text string) error {
		f, err := z.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate, Modified: o.Now})
		if err != nil {
			return err
		}
		_, err = io.WriteString(f, Redact(text, o.Secrets))
		return err
	}
	var secrets []string
	if o.State != nil {
		if st, err := o.State.ReadStatusService(); err == nil {
			secrets = append(secrets, st.Password)
		}
	}
	o.Secrets = append(o.Secrets, secrets...)

	meta := map[string]any{"os": runtime.GOOS, "arch": runtime.GOARCH, "version": o.Version,
		"time": o.Now.UTC().Format(time.RFC3339), "namespace": o.Namespace}
	if o.Dev != nil {
		meta["dev"] = o.Dev.Name
	}
	if o.State != nil {
		if r, err := o.State.ReadState(); err == nil {
			meta["state"] = r
		}
	}
	mb, _ := json.MarshalIndent(meta, "", "  ")
	if err := add("metadata.json", string(mb)+"\n"); err != nil {
		return err
	}
	if o.Dev != nil {
		if err := add("dev.yaml", devSummary(o.Dev)); err != nil {
			return err
		}
	}
	if o.State != nil {
		if err := add("devtool.log", readOr(o.State.LogFile())); err != nil {
			return err
		}
		if err := add("sync-local.log", localSyncLog(o.State)); err != nil {
			return err
		}
	}
	if o.Client != nil && o.Dev != nil {
		pods, text := podReport(ctx, o.Client, o.Namespace, o.Dev.Name)
		if err := add("pods.yaml", text); err != nil {
			return err
		}
		if o.Exec != nil {
			agentLog, syncLog := remoteLogs(ctx, o.Exec, o.Namespace, pods, o.Dev)
			if err := add("agent.log", agentLog); err != nil {
				return err
			}
			if err := add("sync-remote.log", syncLog); err != nil {
				return err
			}
		}
	}
	return z.Close()
}

// maxLogTail is how much of the end of up's log the report holds (the log is rotated at
// logfile.DefaultMax): only that much is read, whatever the file's size.
const maxLogTail = 4 << 20

// logTail is the end of a log (at most maxLogTail bytes, from its first whole line), saying
// when the start was left out; safefile.Tail never follows a link nor blocks.
func logTail(path string) (string, error) {
	b, cut, err := safefile.Tail(path, maxLogTail)
	if err != nil {
		return "", err
	}
	if !cut {
		return string(b), nil
	}
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	return fmt.Sprintf("(the last %s of %s)\n%s", safefile.FormatSize(maxLogTail), path, b), nil
}

func readOr(path string) string {
	s, err := logTail(path)
	if err != nil {
		return fmt.Sprintf("(not available: %v)\n", err)
	}
	return s
}

// SyncLogComponent is the slog attribute both sides give the sync engine's lines: the agent
// (cmd/devtool-agent, component=sync in HOME/agent.log) and up (in the state dir's devtool.log).
const SyncLogComponent = "component=sync"

// syncLines keeps the sync engine's lines of a log.
func syncLines(log string) string {
	var b strings.Builder
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, SyncLogComponent) {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// localSyncLog is the sync engine's lines of up's log (devtool.log) and a listing of the local
// sync state (the persisted indexes: names, sizes and times, not their content).
func localSyncLog(s *StateDir) string {
	var b strings.Builder
	log, err := logTail(s.LogFile())
	switch {
	case err != nil:
		fmt.Fprintf(&b, "(no log: %v)\n", err)
	case syncLines(log) == "":
		fmt.Fprintf(&b, "(no sync line in %s)\n", s.LogFile())
	default:
		fmt.Fprintf(&b, "==> sync lines of %s <==\n%s", s.LogFile(), syncLines(log))
	}
	fmt.Fprintf(&b, "==> %s <==\n", s.SyncDir())
	ents, err := os.ReadDir(s.SyncDir())
	if err != nil {
		fmt.Fprintf(&b, "(not available: %v)\n", err)
	}
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			fmt.Fprintf(&b, "%s %10d %s %s\n", fi.Mode(), fi.Size(), fi.ModTime().UTC().Format(time.RFC3339), e.Name())
		}
	}
	return b.String()
}

// devSummary is the dev entry with environment values removed (names kept).
func devSummary(d *manifest.Dev) string {
	env := make([]string, 0, len(d.Environment))
	for k := range d.Environment {
		env = append(env, k+"="+redacted)
	}
	sort.Strings(env)
	sum := map[string]any{
		"name": d.Name, "image": d.Image, "command": d.Command, "workdir": d.Workdir,
		"sync": d.Sync, "forward": d.Forward, "reverse": d.Reverse, "environment": env,
		"resources": d.Resources, "securityContext": d.SecurityContext, "persistentVolume": d.PersistentVolume,
		"selector": d.Selector, "container": d.Container,
	}
	b, err := yaml.Marshal(sum)
	if err != nil {
		return fmt.Sprintf("(cannot summarise: %v)\n", err)
	}
	return string(b)
}

type podSummary struct {
	Name       string                   `json:"name"`
	Phase      corev1.PodPhase          `json:"phase"`
	Node       string                   `json:"node,omitempty"`
	Conditions []corev1.PodCondition    `json:"conditions,omitempty"`
	Containers []corev1.ContainerStatus `json:"containers,omitempty"`
	Events     []string                 `json:"events,omitempty"`
}

func podReport(ctx context.Context, cs kubernetes.Interface, ns, dev string) ([]corev1.Pod, string) {
	sel := labels.SelectorFromSet(map[string]string{LabelDev: dev}).String()
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Sprintf("(cannot list the dev pods: %v)\n", err)
	}
	if len(list.Items) == 0 {
		return nil, "(no dev pod: the dev container is not active)\n"
	}
	var out []podSummary
	for _, p := range list.Items {
		s := podSummary{Name: p.Name, Phase: p.Status.Phase, Node: p.Spec.NodeName, Conditions: p.Status.Conditions, Containers: p.Status.ContainerStatuses}
		evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + p.Name})
		if err == nil {
			for _, e := range evs.Items {
				s.Events = append(s.Events, fmt.Sprintf("%s %s %s: %s", e.LastTimestamp.UTC().Format(time.RFC3339), e.Type, e.Reason, e.Message))
			}
		}
		out = append(out, s)
	}
	b, _ := yaml.Marshal(out)
	return list.Items, string(b)
}

// Marks split the output of the one exec that reads the agent's side.
const (
	markAgentLog = "==> devtool-doctor agent.log <=="
	markSyncDir  = "==> devtool-doctor sync <=="
)

// remoteLogsScript prints the agent's log (HOME/agent.log, the agent's default --log; its
// last MiB) and lists the remote sync state (HOME/sync: filesync.ServerOptions.StateDir). It
// needs only sh: tail and ls are used when the image has them.
func remoteLogsScript(home string) string {
	return fmt.Sprintf(`H=%[1]s
show() { if command -v tail >/dev/null 2>&1; then tail -c 1048576 "$1"; else while IFS= read -r l || [ -n "$l" ]; do printf '%%s\n' "$l"; done < "$1"; fi; }
echo '%[2]s'
if [ -f "$H/agent.log" ]; then show "$H/agent.log"; else echo "(no $H/agent.log: the agent has not started in this pod)"; fi
echo '%[3]s'
if [ -d "$H/sync" ]; then ls -la "$H/sync" 2>/dev/null || for f in "$H"/sync/*; do echo "$f"; done; else echo "(no $H/sync: nothing synced yet)"; fi
true`, home, markAgentLog, markSyncDir)
}

// remoteLogs reads the agent's log and the remote sync state of the first running dev pod:
// the whole agent log, and the sync engine's lines of it with the listing of HOME/sync.
func remoteLogs(ctx context.Context, ex Executor, ns string, pods []corev1.Pod, d *manifest.Dev) (agentLog, syncLog string) {
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		idx, err := DevContainer(&p.Spec, d, p.Name)
		if err != nil {
			continue
		}
		// The script prints the last MiB of the agent's log with tail; without tail the whole log
		// (rotated by the agent at logfile.DefaultMax). Either way the output kept is capped.
		out, errb := &capped{max: maxRemoteOutput}, &capped{max: 64 << 10}
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err = ex.Exec(cctx, kube.ExecOptions{Namespace: ns, Pod: p.Name, Container: p.Spec.Containers[idx].Name,
			Command: []string{"sh", "-c", remoteLogsScript(Home)}, Stdout: out, Stderr: errb})
		cancel()
		if err != nil {
			msg := fmt.Sprintf("(cannot read the agent's files in %s: %v%s)\n", p.Name, err, stderrSuffix(errb.String()))
			return msg, msg
		}
		agentLog, syncLog = splitRemoteLogs(p.Name, Home, out.String())
		if out.dropped > 0 {
			agentLog += fmt.Sprintf("\n(%d more bytes left out: the report keeps %s of the agent's files)\n", out.dropped, safefile.FormatSize(maxRemoteOutput))
		}
		return agentLog, syncLog
	}
	return "(no running dev pod)\n", "(no running dev pod)\n"
}

// maxRemoteOutput caps what doctor keeps of the agent's side: the agent's log (rotated at
// logfile.DefaultMax) and the sync state's listing.
const maxRemoteOutput = 12 << 20

// capped keeps the first max bytes written to it and counts the rest.
type capped struct {
	bytes.Buffer
	max     int
	dropped int64
}

func (c *capped) Write(p []byte) (int, error) {
	n := len(p)
	if room := c.max - c.Len(); room < len(p) {
		c.dropped += int64(len(p) - max(room, 0))
		p = p[:max(room, 0)]
	}
	c.Buffer.Write(p)
	return n, nil
}

func splitRemoteLogs(pod, home, out string) (agentLog, syncLog string) {
	_, rest, ok := strings.Cut(out, markAgentLog+"\n")
	if !ok {
		return "(unexpected output)\n" + out, ""
	}
	// The last mark: the log itself cannot end the script's output.
	i := strings.LastIndex(rest, markSyncDir+"\n")
	if i < 0 {
		return rest, ""
	}
	agentLog, listing := rest[:i], rest[i+len(markSyncDir)+1:]
	lines := syncLines(agentLog)
	if lines == "" {
		lines = "(no sync line in the agent's log)\n"
	}
	syncLog = fmt.Sprintf("==> sync lines of %s:%s/agent.log <==\n%s==> %s:%s/sync <==\n%s", pod, home, lines, pod, home, listing)
	return agentLog, syncLog
}
