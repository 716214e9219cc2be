package dev

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
		if err := add("sync-local.log", readLogs(o.State.SyncDir())); err != nil {
			return err
		}
	}
	if o.Client != nil && o.Dev != nil {
		pods, text := podReport(ctx, o.Client, o.Namespace, o.Dev.Name)
		if err := add("pods.yaml", text); err != nil {
			return err
		}
		if o.Exec != nil {
			if err := add("sync-remote.log", remoteLogs(ctx, o.Exec, o.Namespace, pods, o.Dev)); err != nil {
				return err
			}
		}
	}
	return z.Close()
}

func readOr(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(not available: %v)\n", err)
	}
	return string(b)
}

func readLogs(dir string) string {
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(files) == 0 {
		return "(no local sync log in " + dir + ")\n"
	}
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintf(&b, "==> %s <==\n%s\n", filepath.Base(f), readOr(f))
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

func remoteLogs(ctx context.Context, ex Executor, ns string, pods []corev1.Pod, d *manifest.Dev) string {
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		idx, err := DevContainer(&p.Spec, d, p.Name)
		if err != nil {
			continue
		}
		var out, errb bytes.Buffer
		script := fmt.Sprintf(`for f in %[1]s/*.log %[1]s/log/*.log %[1]s/sync/*.log; do [ -f "$f" ] && { echo "==> $f <=="; tail -c 1048576 "$f"; }; done; true`, Home)
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err = ex.Exec(cctx, kube.ExecOptions{Namespace: ns, Pod: p.Name, Container: p.Spec.Containers[idx].Name,
			Command: []string{"sh", "-c", script}, Stdout: &out, Stderr: &errb})
		cancel()
		if err != nil {
			return fmt.Sprintf("(cannot read the agent's logs in %s: %v)\n", p.Name, err)
		}
		if out.Len() == 0 {
			return "(the agent wrote no log in " + Home + ")\n"
		}
		return out.String()
	}
	return "(no running dev pod)\n"
}
