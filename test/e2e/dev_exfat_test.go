//go:build integration

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/testcluster"
)

// mountExFAT makes a 64 MiB exFAT image, attaches it to a loop device and mounts it through
// Debian's exfat-fuse (this kernel has no exFAT of its own), returning the mount point. It is
// unmounted and detached on every exit path. Without /dev/fuse or the tools it skips, saying
// why, except in CI (CI set), where it fails.
func mountExFAT(t *testing.T) string {
	t.Helper()
	missing := func(why string) {
		t.Helper()
		if os.Getenv("CI") != "" {
			t.Fatalf("exFAT test cannot run in CI: %s", why)
		}
		t.Skipf("exFAT test skipped: %s", why)
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		missing("/dev/fuse is missing (" + err.Error() + ")")
	}
	for _, tool := range []string{"mkfs.exfat", "mount.exfat-fuse", "losetup", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing(tool + " is not installed (apt-get install exfat-fuse exfatprogs fuse3)")
		}
	}
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "exfat.img"), filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	run("mkfs.exfat", img)
	loop := run("losetup", "--find", "--show", img)
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", loop).CombinedOutput(); err != nil {
			t.Errorf("detaching %s: %v %s", loop, err, out)
		}
	})
	run("mount.exfat-fuse", loop, mnt)
	t.Cleanup(func() {
		// A process still in the folder (a dying up) can hold it a moment.
		var err error
		var out []byte
		for i := 0; i < 50; i++ {
			if out, err = exec.Command("umount", mnt).CombinedOutput(); err == nil {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Errorf("unmounting %s: %v %s", mnt, err, out)
	})
	return mnt
}

// conflictCopies lists the conflict copies below dir on this machine.
func conflictCopies(dir string) []string {
	var out []string
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && strings.Contains(fi.Name(), ".conflict-") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// TestDevUpExFAT: the local folder on a real exFAT filesystem (no exec bits: every file shows
// 0777; case-insensitive), through the built CLI on the cluster. A tree with executables and
// mixed-case names syncs without a single conflict; the exec bits in the pod are kept (set
// there, and after local edits of those files); edits go both ways; two names in the pod that
// differ only in case give one file here, the other reported, nothing deleted; a second up
// decides nothing new.
func TestDevUpExFAT(t *testing.T) {
	mnt := mountExFAT(t)
	c := testcluster.Connect(t)
	ns := c.Namespace(t)
	u := newUser(t, c)
	u.dir = filepath.Join(mnt, "project")
	syncFixture(t, u, ns, 3)
	u.write("src/run.sh", "#!/bin/sh\necho run\n")
	u.write("src/bin/Tool", "#!/bin/sh\necho tool\n")
	u.write("src/README.md", "# readme\n")
	u.write("src/lib/Util.go", "package lib\n")
	u.write("src/docs/Guide.MD", "guide\n")
	u.write("src/Makefile", "all:\n")
	src := filepath.Join(u.dir, "src")
	if fi, err := os.Stat(filepath.Join(src, "README.md")); err != nil || fi.Mode().Perm() != 0o777 {
		t.Fatalf("not the exFAT this test expects: README.md %v %v", fi.Mode(), err)
	}

	pod := func(script string) (string, error) {
		out, _, err := u.run("exec", "app", "--namespace", ns, "--", "sh", "-c", script)
		return out, err
	}
	up := u.start("up", "app", "--namespace", ns)
	up.waitLine(t, "ready:", 4*time.Minute)
	eventually(t, time.Minute, "the tree in the pod", func() error {
		out, err := pod("cat /src/lib/Util.go /src/docs/Guide.MD /src/bin/Tool /src/Makefile")
		if err != nil || !strings.Contains(out, "package lib") || !strings.Contains(out, "guide") {
			return fmt.Errorf("%q %v", out, err)
		}
		return nil
	})
	// Exec bits set in the pod, and a new executable made there.
	if _, err := pod("chmod +x /src/run.sh /src/bin/Tool && printf '#!/bin/sh\\necho pod\\n' > /src/made-in-pod.sh && chmod 755 /src/made-in-pod.sh"); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the pod's new file here", func() error {
		_, err := os.Stat(filepath.Join(src, "made-in-pod.sh"))
		return err
	})
	// Edits both ways, the executables' included.
	u.write("src/README.md", "# readme, edited here\n")
	u.write("src/run.sh", "#!/bin/sh\necho run, edited here\n")
	if _, err := pod("echo 'package lib // edited in the pod' > /src/lib/Util.go"); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the local edits in the pod", func() error {
		out, err := pod("cat /src/README.md /src/run.sh")
		if err != nil || !strings.Contains(out, "readme, edited here") || !strings.Contains(out, "run, edited here") {
			return fmt.Errorf("%q %v", out, err)
		}
		return nil
	})
	eventually(t, time.Minute, "the pod's edit here", func() error {
		b, err := os.ReadFile(filepath.Join(src, "lib", "Util.go"))
		if err != nil || !strings.Contains(string(b), "edited in the pod") {
			return fmt.Errorf("%q %v", b, err)
		}
		return nil
	})
	// Two names that differ only in case, made in the pod: one file here, the other reported.
	if _, err := pod("echo upper > /src/Notes.txt && echo lower > /src/notes.txt"); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "one of the case twins here", func() error {
		_, err := os.Stat(filepath.Join(src, "notes.txt")) // either name: exFAT folds case
		return err
	})
	checkAll := func(when string) {
		t.Helper()
		stays(t, 5*time.Second, when+": no conflict copy here", func() error {
			if cc := conflictCopies(src); len(cc) > 0 {
				return fmt.Errorf("conflict copies %v", cc)
			}
			return nil
		})
		out, err := pod("find /src -name '*.conflict-*'; for f in /src/run.sh /src/bin/Tool /src/made-in-pod.sh; do test -x $f || echo NOT-EXEC $f; done; ls /src/Notes.txt /src/notes.txt")
		if err != nil || strings.Contains(out, "conflict-") || strings.Contains(out, "NOT-EXEC") {
			t.Errorf("%s: in the pod: %v\n%s", when, err, out)
		}
		st, _, err := u.run("status", "app", "-o", "json")
		var doc struct {
			Sync struct {
				Folders []struct {
					Conflicts []struct {
						Path, Copy string
					} `json:"conflicts"`
				} `json:"folders"`
			} `json:"sync"`
		}
		if err != nil || json.Unmarshal([]byte(st), &doc) != nil || len(doc.Sync.Folders) != 1 {
			t.Fatalf("%s: status -o json: %v\n%s", when, err, st)
		}
		for _, cf := range doc.Sync.Folders[0].Conflicts {
			if cf.Copy != "" {
				t.Errorf("%s: a conflict copy %s of %s in status", when, cf.Copy, cf.Path)
			}
		}
		if !strings.Contains(st, "otes.txt") {
			t.Errorf("%s: the case twin left out is not reported:\n%s", when, st)
		}
	}
	checkAll("first up")
	stopUp(t, up)

	// A second up over the same exFAT folder: nothing new to decide, still no conflict.
	up = u.start("up", "app", "--namespace", ns)
	up.waitLine(t, "ready:", 4*time.Minute)
	checkAll("second up")
	stopUp(t, up)
	u.mustRun("down", "app", "--namespace", ns, "--volumes")
}
