//go:build integration

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/devtool/devtool/internal/testcluster"
)

// inputApp is a one-service app (web: busybox httpd) deployed from a devtool.yml whose dev entry
// web is entry (its lines, indented under "  web:").
func inputApp(u *user, entry string) {
	u.write("compose.yml", `services:
  web:
    image: docker.io/library/busybox:local
    command: ["sh", "-c", "exec httpd -f -p 8080 -h /tmp"]
    stop_grace_period: 1s
`)
	u.write("devtool.yml", "deploy:\n  compose: compose.yml\ndev:\n  web:\n"+entry)
}

// namespaceObjects names every object of the namespace that up could create or change, with its
// resourceVersion: any write shows as a changed version or a new name.
func namespaceObjects(t *testing.T, cs kubernetes.Interface, ns string) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	add := func(kind string, items []metav1.ObjectMeta) {
		for _, m := range items {
			out = append(out, kind+"/"+m.Name+"@"+m.ResourceVersion)
		}
	}
	deps, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var metas []metav1.ObjectMeta
	for _, d := range deps.Items {
		metas = append(metas, d.ObjectMeta)
	}
	add("Deployment", metas)
	sts, err := cs.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	metas = nil
	for _, s := range sts.Items {
		metas = append(metas, s.ObjectMeta)
	}
	add("StatefulSet", metas)
	pvcs, err := cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	metas = nil
	for _, p := range pvcs.Items {
		metas = append(metas, p.ObjectMeta)
	}
	add("PersistentVolumeClaim", metas)
	svcs, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	metas = nil
	for _, s := range svcs.Items {
		metas = append(metas, s.ObjectMeta)
	}
	add("Service", metas)
	cms, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	metas = nil
	for _, c := range cms.Items {
		metas = append(metas, c.ObjectMeta)
	}
	add("ConfigMap", metas)
	secrets, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	metas = nil
	for _, s := range secrets.Items {
		metas = append(metas, s.ObjectMeta)
	}
	add("Secret", metas)
	sort.Strings(out)
	return out
}

func getWeb(t *testing.T, cs kubernetes.Interface, ns string) *appsv1.Deployment {
	t.Helper()
	d, err := cs.AppsV1().Deployments(ns).Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDevUpRefusesBadInput is issue 18 against the local cluster: the built binary with a
// temporary HOME refuses each bad dev entry or flag with its file, line and field and exit
// code 2, and after each refusal the original Deployment (spec, replicas, annotations) and
// every object of the namespace are as before, not one written.
func TestDevUpRefusesBadInput(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	cs := c.Clientset
	u := newUser(t, c)
	inputApp(u, "    sync: [src:/app]\n")
	u.write("src/index.html", "x")
	u.write("afile", "x")
	if err := syscall.Mkfifo(filepath.Join(u.dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A link inside the project leading to a folder outside it, and a device (/dev/null's numbers).
	if err := os.Symlink(t.TempDir(), filepath.Join(u.dir, "outlink")); err != nil {
		t.Fatal(err)
	}
	haveDevice := syscall.Mknod(filepath.Join(u.dir, "null"), syscall.S_IFCHR|0o600, int(unix.Mkdev(1, 3))) == nil
	u.mustRun("deploy", "--namespace", ns, "--wait", "--timeout", "3m")
	before := getWeb(t, cs, ns)
	objects := namespaceObjects(t, cs, ns)

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := busy.Addr().(*net.TCPAddr).Port

	cases := []struct {
		name    string
		entry   string
		args    []string
		want    []string
		notWant []string // not in stderr
		device  bool     // needs the device made above (mknod: root)
	}{
		{name: "unknown dev name", entry: "    sync: [src:/app]\n", args: []string{"up", "nope"}, want: []string{`no dev container "nope" (it has web)`}},
		{name: "local folder missing", entry: "    sync: [nope:/app]\n", want: []string{"devtool.yml:5:12: dev.web.sync[0]", "does not exist"}},
		{name: "local folder is a file", entry: "    sync: [afile:/app]\n", want: []string{"dev.web.sync[0]", "is a file"}},
		{name: "local folder is a FIFO", entry: "    sync: [fifo:/app]\n", want: []string{"dev.web.sync[0]", "named pipe (FIFO)"}},
		{name: "local folder outside the project", entry: "    sync: [..:/app]\n", want: []string{"dev.web.sync[0]", "outside the project folder", "--allow-outside-volumes"}},
		{name: "remote climbs out", entry: "    sync: [src:/app/../etc]\n", want: []string{"dev.web.sync[0]", `(write "/etc")`}},
		{name: "remote root", entry: "    sync: [src:/]\n", want: []string{"root of the container"}},
		{name: "remote with a trailing slash", entry: "    sync: [src:/app/]\n", want: []string{`(write "/app")`}},
		{name: "remote system folder", entry: "    sync: [src:/usr]\n", want: []string{"system folder"}},
		{name: "remote twice", entry: "    sync: [src:/app, .:/app]\n", want: []string{"dev.web.sync[1]", "also the one of sync[0]"}},
		{name: "remote nested", entry: "    sync: [src:/app, .:/app/x]\n", want: []string{"dev.web.sync[1]", "nest"}},
		{name: "newline in the remote", entry: "    sync: [\"src:/a\\npp\"]\n", want: []string{"line break"}},
		{name: "local port twice", entry: "    forward: [18080:8080, 18080:80]\n", want: []string{"dev.web.forward[1]", "local port 18080 is also"}},
		{name: "remote reverse port twice", entry: "    reverse: [9000:9000, 9000:9001]\n", want: []string{"dev.web.reverse[1]", "remote port 9000"}},
		// The holder is this test's process: up names it from /proc.
		{name: "local port in use, its holder named", entry: fmt.Sprintf("    forward: [%d:8080]\n", port),
			want: []string{"dev.web.forward[0]", fmt.Sprintf("local port %d is in use by process %d (%s)", port, os.Getpid(), processName(t))}},
		{name: "env name with =", entry: "    environment: {\"A=B\": x}\n", want: []string{"dev.web.environment.A=B", "not a valid environment variable name"}},
		{name: "env name with a newline", entry: "    environment: [\"X\\nY=1\"]\n", want: []string{"dev.web.environment[0]", "not a valid"}},
		{name: "empty env name", entry: "    environment: {\"\": x}\n", want: []string{"empty"}},
		{name: "--env name with a space", entry: "    sync: [src:/app]\n", args: []string{"up", "web", "--env", "A B=1"}, want: []string{"not a valid environment variable name"}},
		{name: "empty image", entry: "    image: ''\n", want: []string{"dev.web.image", "empty"}},
		{name: "a 1 MB image name", entry: "    image: " + strings.Repeat("a", 1<<20) + "\n", want: []string{"dev.web.image", "a name of 1048576 bytes"}},
		{name: "limit below request", entry: "    resources: {requests: {cpu: '1'}, limits: {cpu: 100m}}\n", want: []string{"dev.web.resources.limits.cpu", "below the request"}},
		{name: "workdir not clean", entry: "    workdir: /app/../x\n", want: []string{"dev.web.workdir", `(write "/x")`}},
		// The opt-in waives the outside rule only: the entry's other problem still refuses it.
		{name: "outside folder with the opt-in, another problem still refused", entry: "    sync: [\"..:/app\", \"src:/\"]\n",
			args: []string{"up", "web", "--allow-outside-volumes"}, want: []string{"dev.web.sync[1]", "root of the container"},
			notWant: []string{"outside the project folder", "sync[0]"}},
		{name: "a link leading outside", entry: "    sync: [outlink:/app]\n", want: []string{"dev.web.sync[0]", "a symbolic link leads to", "--allow-outside-volumes"}},
		{name: "local folder is a device", entry: "    sync: [null:/app]\n", want: []string{"dev.web.sync[0]", "is a device, not a folder"}, device: true},
		{name: "NUL in the local folder", entry: "    sync: [\"sr\\0c:/app\"]\n", want: []string{"dev.web.sync[0]", "NUL byte"}},
		{name: "NUL in an env value", entry: "    environment: {A: \"x\\0y\"}\n", want: []string{"dev.web.environment.A", "the value of A contains a NUL byte"}},
		{name: "relative remote folder", entry: "    sync: [src:app]\n", want: []string{"dev.web.sync[0]", `expected an absolute path in the container, found "app"`}},
		{name: "relative workdir", entry: "    workdir: app\n", want: []string{"dev.web.workdir", `expected an absolute path in the container, found "app"`}},
		{name: "spaced env name", entry: "    environment: {\"A B\": x}\n", want: []string{"dev.web.environment.A B", "not a valid environment variable name"}},
		{name: "two dev containers and none named", entry: "    sync: [src:/app]\n  api:\n    sync: [src:/srv]\n", args: []string{"up"},
			want: []string{"devtool.yml has 2 dev containers (web, api) and none was named: name one", "run 'devtool up NAME' with NAME one of: web, api"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.device && !haveDevice {
				t.Skip("mknod needs root")
			}
			u.t = t
			inputApp(u, tc.entry)
			args := tc.args
			if args == nil {
				args = []string{"up", "web"}
			}
			_, errOut, err := u.run(append(args, "--namespace", ns)...)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Errorf("exit %v, want code 2", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q", w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(errOut, w) {
					t.Errorf("stderr has %q", w)
				}
			}
			if len(errOut) > 3000 {
				t.Errorf("stderr of %d bytes", len(errOut))
			}
			after := getWeb(t, cs, ns)
			if r := after.Spec.Replicas; r == nil || *r != *before.Spec.Replicas {
				t.Errorf("the original's replicas %v, want %d", r, *before.Spec.Replicas)
			}
			if !equality.Semantic.DeepEqual(before.Spec, after.Spec) || !equality.Semantic.DeepEqual(before.Annotations, after.Annotations) || after.ResourceVersion != before.ResourceVersion {
				t.Errorf("the original changed:\nbefore %v %+v\nafter  %v %+v", before.Annotations, before.Spec, after.Annotations, after.Spec)
			}
			if now := namespaceObjects(t, cs, ns); !equality.Semantic.DeepEqual(objects, now) {
				t.Errorf("the namespace's objects changed:\nbefore %v\nafter  %v", objects, now)
			}
		})
	}
}

// processName is this process's name as /proc shows it (the comm field up names a port holder by).
func processName(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestDevUpInterruptedDuringActivation: SIGINT while the dev container is being activated (its
// pod cannot be scheduled: it asks for more memory than any node has) leaves the original at
// zero replicas, and up says so and how to restore it before "Interrupted."; 'devtool down'
// then restores it exactly.
func TestDevUpInterruptedDuringActivation(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	cs := c.Clientset
	u := newUser(t, c)
	withAgent(t, u)
	inputApp(u, "    resources: {requests: {memory: 900Ti}}\n    persistentVolume: {enabled: false}\n")
	u.mustRun("deploy", "--namespace", ns, "--wait", "--timeout", "3m")
	before := getWeb(t, cs, ns)

	up := u.start("up", "web", "--namespace", ns)
	up.waitLine(t, "starting", 2*time.Minute)
	if err := up.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-up.done:
	case <-time.After(time.Minute):
		t.Fatal("up did not end after SIGINT")
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Errorf("exit %v, want 130", err)
	}
	out := up.output()
	if !strings.Contains(out, "Deployment/web may be left at zero replicas") || !strings.Contains(out, "'devtool down web' restores it") || !strings.HasSuffix(strings.TrimSpace(out), "Interrupted.") {
		t.Errorf("stderr does not say what is left and how to restore it:\n%s", out)
	}
	if r := getWeb(t, cs, ns).Spec.Replicas; r == nil || *r != 0 {
		t.Errorf("original replicas %v, want 0 (as up said)", r)
	}
	u.mustRun("down", "web", "--namespace", ns)
	after := getWeb(t, cs, ns)
	sameWorkload(t, before.ObjectMeta, after.ObjectMeta, before.Spec, after.Spec)
}
