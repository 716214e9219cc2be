//go:build integration

package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/testcluster"
)

// syncFixture is a folder whose devtool.yml develops a sleeping busybox service "app" with ./src
// synced to /src (n files src/f00..), deployed in ns.
func syncFixture(t *testing.T, u *user, ns string, n int) {
	u.write("compose.yml", `services:
  app:
    image: docker.io/library/busybox:local
    command: ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"]
    stop_grace_period: 1s
`)
	u.write("devtool.yml", `name: safety
deploy:
  compose: compose.yml
dev:
  app:
    command: ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"]
    workdir: /src
    sync:
      - src:/src
`)
	writeFiles(t, u, "src", n)
	withAgent(t, u)
	u.mustRun("deploy", "--namespace", ns, "--wait", "--timeout", "4m")
}

func writeFiles(t *testing.T, u *user, dir string, n int) {
	for i := 0; i < n; i++ {
		u.write(fmt.Sprintf("%s/f%02d", dir, i), fmt.Sprintf("file %d\n", i))
	}
}

// podFiles counts the files below dir in the dev container ("find -type f"), -1 when exec fails.
func podFiles(u *user, ns, dev, dir string) int {
	out, _, err := u.run("exec", dev, "--namespace", ns, "--", "sh", "-c", "find "+dir+" -type f | wc -l")
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		return -1
	}
	return n
}

func localFiles(t *testing.T, dir string) int {
	n := 0
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n++
		}
		return nil
	})
	return n
}

// stays checks for a while (not a timing assertion: it only gives a wrong deletion time to
// happen) that f keeps returning nil.
func stays(t *testing.T, d time.Duration, what string, f func() error) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(time.Second)
	}
}

// TestDevUpHaltAcceptDeletions: the sync's halts through the built CLI. rm -rf of the synced
// folder inside the dev container halts the folder (up and status say so and how to go on),
// nothing is deleted on the laptop; up --reset brings the files back to the pod. A local folder
// found empty at the next up halts it too, nothing deleted in the pod; up --accept-deletions
// carries the deletions over.
func TestDevUpHaltAcceptDeletions(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	const n = 30
	syncFixture(t, u, ns, n)
	src := filepath.Join(u.dir, "src")

	up := u.start("up", "app", "--namespace", ns)
	up.waitLine(t, "ready:", 4*time.Minute)
	eventually(t, time.Minute, "the files in the pod", func() error {
		if got := podFiles(u, ns, "app", "/src"); got != n {
			return fmt.Errorf("%d files", got)
		}
		return nil
	})

	// 1. rm -rf of the synced folder in the pod.
	_, _, _ = u.run("exec", "app", "--namespace", ns, "--", "sh", "-c", "rm -rf /src; true")
	up.waitLine(t, "halted:", 2*time.Minute)
	up.waitLine(t, "--accept-deletions", time.Minute)
	if !strings.Contains(up.output(), "/src") || !strings.Contains(up.output(), "devtool up app --accept-deletions") || !strings.Contains(up.output(), "devtool up app --reset") {
		t.Errorf("the halt does not name the folder and how to go on:\n%s", up.output())
	}
	stays(t, 5*time.Second, "local files after rm -rf in the pod", func() error {
		if got := localFiles(t, src); got != n {
			return fmt.Errorf("%d local files left of %d", got, n)
		}
		return nil
	})
	st, _, err := u.run("status", "app")
	if err != nil || !strings.Contains(st, "halted") || !strings.Contains(st, "devtool up app --reset") {
		t.Errorf("status during the halt: %v\n%s", err, st)
	}
	stopUp(t, up)

	// 2. up --reset: each side gets what it lacks (the pod's files back).
	up = u.start("up", "app", "--namespace", ns, "--reset")
	up.waitLine(t, "ready:", 4*time.Minute)
	eventually(t, time.Minute, "the files back in the pod after --reset", func() error {
		if got := podFiles(u, ns, "app", "/src"); got != n {
			return fmt.Errorf("%d files", got)
		}
		return nil
	})
	stopUp(t, up)

	// 3. The local folder found empty (a disk restored empty): halted, nothing deleted in the pod.
	ents, _ := os.ReadDir(src)
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(src, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	up = u.start("up", "app", "--namespace", ns)
	up.waitLine(t, "halted:", 4*time.Minute)
	if strings.Contains(up.output(), "ready:") {
		t.Errorf("up said ready with a halted folder:\n%s", up.output())
	}
	if !strings.Contains(up.output(), src) {
		t.Errorf("the halt does not name the local folder %s:\n%s", src, up.output())
	}
	stays(t, 5*time.Second, "the pod's files while halted", func() error {
		if got := podFiles(u, ns, "app", "/src"); got != n {
			return fmt.Errorf("%d files left in the pod of %d", got, n)
		}
		return nil
	})
	stopUp(t, up)

	// 4. up --accept-deletions: the deletions go over.
	up = u.start("up", "app", "--namespace", ns, "--accept-deletions")
	up.waitLine(t, "ready:", 4*time.Minute)
	if !strings.Contains(up.output(), "Deletions are accepted for this up") {
		t.Errorf("up --accept-deletions does not say so:\n%s", up.output())
	}
	eventually(t, time.Minute, "the deletions carried over", func() error {
		if got := podFiles(u, ns, "app", "/src"); got != 0 {
			return fmt.Errorf("%d files left in the pod", got)
		}
		return nil
	})
	stopUp(t, up)

	// --reset and --accept-deletions together: a usage error.
	_, errOut, err := u.run("up", "app", "--namespace", ns, "--reset", "--accept-deletions")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("--reset with --accept-deletions: %v, want exit 2\n%s", err, errOut)
	}
	u.mustRun("down", "app", "--namespace", ns, "--volumes")
}

// TestDevUpHaltReplacedRoot: the local folder replaced by another (deleted and made again with
// other content) halts the sync, nothing deleted in the pod; up --reset then gives each side
// what it lacks.
func TestDevUpHaltReplacedRoot(t *testing.T) {
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	const n = 30
	syncFixture(t, u, ns, n)
	src := filepath.Join(u.dir, "src")
	up := u.start("up", "app", "--namespace", ns)
	up.waitLine(t, "ready:", 4*time.Minute)
	eventually(t, time.Minute, "the files in the pod", func() error {
		if got := podFiles(u, ns, "app", "/src"); got != n {
			return fmt.Errorf("%d files", got)
		}
		return nil
	})
	stopUp(t, up)

	// Another folder in its place, made right after the old one was removed: on ext4 it gets
	// the freed inode back, and only its birth time tells it from the old one.
	before, err := os.Stat(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(src); err != nil {
		t.Fatal(err)
	}
	u.write("src/other.txt", "another folder\n")
	if after, err := os.Stat(src); err == nil {
		t.Logf("inode reused by the new folder: %v", os.SameFile(before, after))
	}
	up = u.start("up", "app", "--namespace", ns)
	up.waitLine(t, "halted:", 4*time.Minute)
	if strings.Contains(up.output(), "ready:") {
		t.Errorf("up said ready with a halted folder:\n%s", up.output())
	}
	if !strings.Contains(up.output(), "another folder than the one last synchronized") || !strings.Contains(up.output(), src) {
		t.Errorf("the halt does not say the folder was replaced:\n%s", up.output())
	}
	stays(t, 5*time.Second, "the pod's files while halted", func() error {
		if got := podFiles(u, ns, "app", "/src"); got != n {
			return fmt.Errorf("%d files left in the pod of %d", got, n)
		}
		return nil
	})
	stopUp(t, up)

	up = u.start("up", "app", "--namespace", ns, "--reset")
	up.waitLine(t, "ready:", 4*time.Minute)
	eventually(t, time.Minute, "both sides complete after --reset", func() error {
		if got := localFiles(t, src); got != n+1 {
			return fmt.Errorf("%d local files, want %d", got, n+1)
		}
		if got := podFiles(u, ns, "app", "/src"); got != n+1 {
			return fmt.Errorf("%d files in the pod, want %d", got, n+1)
		}
		return nil
	})
	stopUp(t, up)
	u.mustRun("down", "app", "--namespace", ns, "--volumes")
}

// TestDevUpUnreadableAndLinks: a local folder that cannot be read (up runs without the
// capabilities that let root read anything, as a developer's account would) deletes nothing in
// the pod and is reported; a symbolic link to /etc/passwd made in the pod is not created on the
// laptop (one inside the folder is).
func TestDevUpUnreadableAndLinks(t *testing.T) {
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv (util-linux) is needed to run up without CAP_DAC_OVERRIDE")
	}
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	syncFixture(t, u, ns, 5)
	writeFiles(t, u, "src/sub", 25)
	src := filepath.Join(u.dir, "src")
	u.wrap = []string{"setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--"}

	up := u.start("up", "app", "--namespace", ns)
	up.waitLine(t, "ready:", 4*time.Minute)
	eventually(t, time.Minute, "the files in the pod", func() error {
		if got := podFiles(u, ns, "app", "/src"); got != 30 {
			return fmt.Errorf("%d files", got)
		}
		return nil
	})

	// Links made in the pod: one to /etc/passwd, one inside the folder; then a marker file,
	// so the local side has seen both once the marker arrived.
	u.mustRun("exec", "app", "--namespace", ns, "--", "sh", "-c", "ln -s /etc/passwd /src/pw && ln -s f00 /src/inside && sleep 1 && echo m > /src/marker")
	eventually(t, time.Minute, "the marker made after the links", func() error {
		_, err := os.Stat(filepath.Join(src, "marker"))
		return err
	})
	if target, err := os.Readlink(filepath.Join(src, "inside")); err != nil || target != "f00" {
		t.Errorf("the link inside the folder: %q %v", target, err)
	}
	stays(t, 3*time.Second, "the link to /etc/passwd", func() error {
		if _, err := os.Lstat(filepath.Join(src, "pw")); err == nil {
			return fmt.Errorf("%s exists on the laptop", filepath.Join(src, "pw"))
		}
		return nil
	})
	st, _, _ := u.run("status", "app", "-o", "json")
	if !strings.Contains(st, `"pw"`) {
		t.Errorf("status does not report the link left out:\n%s", st)
	}
	stopUp(t, up)

	// The folder sub unreadable at the next up: its files are unknown, not deleted.
	sub := filepath.Join(src, "sub")
	if err := os.Chmod(sub, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(sub, 0o755) })
	up = u.start("up", "app", "--namespace", ns)
	up.waitLine(t, "ready", 4*time.Minute)
	stays(t, 5*time.Second, "the pod's files of the unreadable folder", func() error {
		if got := podFiles(u, ns, "app", "/src/sub"); got != 25 {
			return fmt.Errorf("%d files left in /src/sub of 25", got)
		}
		return nil
	})
	st, _, _ = u.run("status", "app")
	if !strings.Contains(st, "sub") {
		t.Errorf("status does not report the unreadable folder:\n%s", st)
	}
	stopUp(t, up)
	u.wrap = nil
	_ = os.Chmod(sub, 0o755)
	u.mustRun("down", "app", "--namespace", ns, "--volumes")
}
