package logs

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

func TestServiceName(t *testing.T) {
	yes := true
	owner := func(kind, name string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{Kind: kind, Name: name, Controller: &yes}}
	}
	tests := []struct {
		name   string
		labels map[string]string
		owners []metav1.OwnerReference
		pod    string
		want   string
	}{
		{"label wins", map[string]string{"app.kubernetes.io/name": "api"}, owner("ReplicaSet", "x-123"), "x-123-abcde", "api"},
		{"deployment from replicaset", map[string]string{"pod-template-hash": "7d9f8b6c5"}, owner("ReplicaSet", "web-front-7d9f8b6c5"), "web-front-7d9f8b6c5-x2k4p", "web-front"},
		{"bare replicaset", nil, owner("ReplicaSet", "rs1"), "rs1-abcde", "rs1"},
		{"replicaset hash mismatch", map[string]string{"pod-template-hash": "zzz"}, owner("ReplicaSet", "web-abc"), "web-abc-x", "web-abc"},
		{"statefulset", nil, owner("StatefulSet", "db"), "db-0", "db"},
		{"job", nil, owner("Job", "migrate"), "migrate-q8z7w", "migrate"},
		{"not a controller", nil, []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs"}}, "lonely", "lonely"},
		{"bare pod", nil, nil, "debug", "debug"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: tt.pod, Labels: tt.labels, OwnerReferences: tt.owners}}
			if got := ServiceName(p); got != tt.want {
				t.Errorf("ServiceName = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFilterPrefix(t *testing.T) {
	tests := []struct {
		include, exclude string
		service          string
		want             bool
	}{
		{"", "", "anything", true},
		{"api", "", "api", true},
		{"api", "", "api-worker", true},
		{"api", "", "my-api", false}, // prefix, not anywhere
		{"api$", "", "api-worker", false},
		{"a|b", "", "b2", true},  // alternation is anchored as a whole
		{"a|b", "", "cb", false}, // ^(?:a|b), not ^a|b
		{".*db", "", "mydb", true},
		{"", "db", "db-replica", false},
		{"", "db", "mydb", true}, // exclude is a prefix match too
		{"", "a|c", "c1", false},
		{"a", "api", "api", false},
		{"a", "api", "alpha", true},
	}
	for _, tt := range tests {
		inc, err := CompilePrefix(tt.include)
		if err != nil {
			t.Fatal(err)
		}
		exc, err := CompilePrefix(tt.exclude)
		if err != nil {
			t.Fatal(err)
		}
		if got := (Filter{Include: inc, Exclude: exc}).Match(tt.service); got != tt.want {
			t.Errorf("include %q exclude %q: Match(%q) = %v, want %v", tt.include, tt.exclude, tt.service, got, tt.want)
		}
	}
	if _, err := CompilePrefix("a("); err == nil || strings.Contains(err.Error(), "(?:") {
		t.Errorf("invalid expression: err = %v, want an error quoting only the user's text", err)
	}
}

func TestShortPodName(t *testing.T) {
	for _, tt := range []struct{ service, pod, want string }{
		{"api", "api-7d9f8b6c5-x2k4p", "api-x2k4p"},
		{"db", "db-0", "db-0"},
		{"debug", "debug", "debug"},
		{"api", "other-pod", "other-pod"},
		{"web", "web-", "web-"},
	} {
		if got := ShortPodName(tt.service, tt.pod); got != tt.want {
			t.Errorf("ShortPodName(%q, %q) = %q, want %q", tt.service, tt.pod, got, tt.want)
		}
	}
}

func TestTextFormatter(t *testing.T) {
	l := Line{Prefix: "api-x2k4p/api", Text: "hello", RawTime: "2025-01-02T03:04:05.123456789Z"}
	if got := string(TextFormatter{}.Format(l)); got != "[api-x2k4p/api] hello\n" {
		t.Errorf("plain = %q", got)
	}
	if got := string(TextFormatter{Timestamps: true}.Format(l)); got != "[api-x2k4p/api] 2025-01-02T03:04:05.123456789Z hello\n" {
		t.Errorf("timestamps = %q", got)
	}
	code := ColorCode(l.Prefix)
	want := fmt.Sprintf("\x1b[%dm[api-x2k4p/api]\x1b[0m hello\n", code)
	if got := string(TextFormatter{Color: true}.Format(l)); got != want {
		t.Errorf("color = %q, want %q", got, want)
	}
	if ColorCode("api-x2k4p/api") != code {
		t.Error("colour is not stable")
	}
	seen := map[int]bool{}
	for i := range 50 {
		seen[ColorCode(fmt.Sprintf("svc-%d/c", i))] = true
	}
	if len(seen) < 6 {
		t.Errorf("50 prefixes use only %d colours", len(seen))
	}
}

// slowWriter writes each call in two halves with a pause, so interleaved calls would split lines.
type slowWriter struct {
	mu  sync.Mutex // guards buf only; the pause is outside it
	buf bytes.Buffer
}

func (w *slowWriter) Write(p []byte) (int, error) {
	half := len(p) / 2
	w.mu.Lock()
	w.buf.Write(p[:half])
	w.mu.Unlock()
	time.Sleep(50 * time.Microsecond)
	w.mu.Lock()
	w.buf.Write(p[half:])
	w.mu.Unlock()
	return len(p), nil
}

func TestLineWriterWholeLines(t *testing.T) {
	w := &slowWriter{}
	lw := &lineWriter{w: w, fmt: TextFormatter{}}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				_ = lw.write(Line{Prefix: fmt.Sprintf("p%d/c", g), Text: fmt.Sprintf("line %d of %d %s", i, g, strings.Repeat("x", 40))})
			}
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(w.buf.String(), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines, want 800", len(lines))
	}
	for _, l := range lines {
		var g, i, g2 int
		var x string
		if n, _ := fmt.Sscanf(l, "[p%d/c] line %d of %d %s", &g, &i, &g2, &x); n != 4 || g != g2 || len(x) != 40 {
			t.Fatalf("broken line %q", l)
		}
	}
}

func TestEmitSkipsLinesAlreadyWritten(t *testing.T) {
	var out bytes.Buffer
	f := &follower{o: Options{Namespace: "ns"}, lw: &lineWriter{w: &out, fmt: TextFormatter{}}}
	tl := &tailer{prefix: "a/c"}
	for _, l := range []string{
		"2025-01-01T00:00:01.000000001Z one\n",
		"2025-01-01T00:00:01.000000002Z two\n",
		"2025-01-01T00:00:01.000000001Z one\n", // a reconnect from the start of the second
		"2025-01-01T00:00:01.000000002Z two\n",
		"2025-01-01T00:00:01.000000003Z three\r\n",
		"2025-01-01T00:00:02Z \n",
		"no timestamp\n",
	} {
		if err := f.emit(tl, []byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	want := "[a/c] one\n[a/c] two\n[a/c] three\n[a/c] \n[a/c] no timestamp\n"
	if out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}

func runningPod(name, service string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name),
			Labels: map[string]string{"dev.devtool/deployed-by": "env", "app.kubernetes.io/name": service}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main"}}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name: "main", ContainerID: "containerd://1", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		}}},
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and a polling reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func TestFollowFakeClient(t *testing.T) {
	// The fake clientset answers every log request with "fake logs"; enough to check selection,
	// prefixes and that cancellation ends Follow with no error.
	client := fake.NewClientset(
		runningPod("api-5f6d-abcde", "api"),
		runningPod("db-0", "db"),
	)
	out := &syncBuffer{}
	var notes []string
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		inc, _ := CompilePrefix("a")
		done <- Follow(ctx, Options{Client: client, Namespace: "ns", Environment: "env", Filter: Filter{Include: inc},
			Tail: 10, Out: out, Notify: func(s string) { notes = append(notes, s) }})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "[api-abcde/main] fake logs") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Follow after cancel: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Follow did not return within 2s of cancel")
	}
	if !strings.Contains(out.String(), "[api-abcde/main] fake logs\n") || strings.Contains(out.String(), "db-0") {
		t.Errorf("output %q: want api lines only", out.String())
	}
	if len(notes) != 0 {
		t.Errorf("notes %q, want none", notes)
	}
}

func TestFollowNoPodsSaysSoOnce(t *testing.T) {
	client := fake.NewClientset()
	var mu sync.Mutex
	var notes []string
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Follow(ctx, Options{Client: client, Namespace: "ns", Environment: "env", Out: &bytes.Buffer{},
			Notify: func(s string) { mu.Lock(); notes = append(notes, s); mu.Unlock() }})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		n := len(notes)
		mu.Unlock()
		if n > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "dev.devtool/deployed-by=env") || !strings.Contains(notes[0], "namespace ns") {
		t.Errorf("notes = %q, want one naming the selector and namespace", notes)
	}
}

// TestTailFakeClient: Tail reads each selected running container once and returns (no follow);
// the filter and --all apply as in Follow. (The fake answers "fake logs" to every request; the
// real cluster's tail and order are tested through the web UI's integration test.)
func TestTailFakeClient(t *testing.T) {
	client := fake.NewClientset(runningPod("api-5f6d-abcde", "api"), runningPod("db-0", "db"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := Tail(ctx, Options{Client: client, Namespace: "ns", Environment: "env", Tail: 5, Out: &out}); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); strings.Count(got, "fake logs") != 2 || !strings.Contains(got, "[api-abcde/main] fake logs\n") || !strings.Contains(got, "[db-0/main] fake logs\n") {
		t.Errorf("Tail output %q", got)
	}
	inc, _ := CompilePrefix("db")
	lines, err := TailLines(ctx, Options{Client: client, Namespace: "ns", All: true, Filter: Filter{Include: inc}, Tail: -1})
	if err != nil || len(lines) != 1 || lines[0].Service != "db" || lines[0].Prefix != "db-0/main" {
		t.Errorf("TailLines with a filter: %+v %v", lines, err)
	}
	if _, err := TailLines(ctx, Options{Client: client, Namespace: "ns"}); err == nil {
		t.Error("TailLines without an environment or All: no error")
	}
}
