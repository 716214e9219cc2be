//go:build integration

package e2e

import (
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

// BenchmarkUpHundredThousandFiles: 100,000 files of 1 KiB (1,000 folders of 100) appear at once
// (a folder moved in) in the synced folder of a running `devtool up`; the time until all of them
// are in the pod (counted there every second), against a tar stream of the same tree into the
// same pod (`tar c | devtool exec -- tar x`, through the same port-forward and agent), measured
// in the same run before and after (the mean: the machine's load drifts). Then `up`'s RSS and
// CPU over 10 s of idleness. Targets (issue 17): sync/tar ≤ 1.5, RSS < 100 MB, CPU < 1 %.
//
//	go test -tags integration -run '^$' -bench UpHundredThousandFiles -benchtime 1x -timeout 30m ./test/e2e/
func BenchmarkUpHundredThousandFiles(b *testing.B) {
	if b.N != 1 {
		b.Fatal("run with -benchtime=1x: the tree appears once")
	}
	const folders, per = 1000, 100
	c := testcluster.Connect(b)
	ns := c.Namespace(b)
	u := newUser(b, c)
	benchApp(u, freePortTB(b))
	withAgentTB(b, u)
	stage := filepath.Join(b.TempDir(), "stage")
	content := strings.Repeat("x", 1023) + "\n"
	for i := 0; i < folders; i++ {
		d := filepath.Join(stage, fmt.Sprintf("d%04d", i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		for j := 0; j < per; j++ {
			if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%03d", j)), []byte(content), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	up := u.start("up", "web", "--namespace", ns)
	defer stopUp(b, up)
	up.waitLine(b, "ready:", 4*time.Minute)

	inPod := func(dir string) int {
		out, _, err := u.run("exec", "web", "--namespace", ns, "--", "sh", "-c", "find "+dir+" -type f 2>/dev/null | wc -l")
		if err != nil {
			return -1
		}
		n, _ := strconv.Atoi(strings.TrimSpace(out))
		return n
	}
	tarRun := func(src, dest string) time.Duration {
		start := time.Now()
		sh := exec.Command("sh", "-c", `tar -C "$SRC" -cf - . | "$DEVTOOL" exec web --namespace "$NS" -- sh -c 'mkdir -p "$1" && tar -C "$1" -xf -' sh "$DEST"`)
		sh.Dir = u.dir
		sh.Env = append([]string{
			"HOME=" + u.home, "DEVTOOL_HOME=" + u.home, "KUBECONFIG=" + u.c.Kubeconfig,
			"PATH=" + os.Getenv("PATH"), "NO_COLOR=1",
			"SRC=" + src, "DEST=" + dest, "DEVTOOL=" + devtoolBin, "NS=" + ns,
		}, u.extra...)
		if out, err := sh.CombinedOutput(); err != nil {
			b.Fatalf("tar into the pod: %v\n%s", err, out)
		}
		took := time.Since(start)
		if n := inPod(dest); n != folders*per {
			b.Fatalf("tar: %d files in %s, want %d", n, dest, folders*per)
		}
		return took
	}

	tar1 := tarRun(stage, "/tmp/tar1")
	pid := up.cmd.Process.Pid
	cpu0 := procCPU(pid)
	b.ResetTimer()
	start := time.Now()
	if err := os.Rename(stage, filepath.Join(u.dir, "src", "new")); err != nil {
		b.Fatal(err)
	}
	for n := 0; n != folders*per; n = inPod("/app/new") {
		if time.Since(start) > 15*time.Minute {
			b.Fatalf("%d of %d files in the pod after 15 min", n, folders*per)
		}
		time.Sleep(time.Second)
	}
	syncT := time.Since(start)
	b.StopTimer()
	syncCPU := procCPU(pid) - cpu0
	tar2 := tarRun(filepath.Join(u.dir, "src", "new"), "/tmp/tar2")
	tarT := (tar1 + tar2) / 2
	time.Sleep(5 * time.Second)
	idle0, t0 := procCPU(pid), time.Now()
	time.Sleep(10 * time.Second)
	idleCPU := float64(procCPU(pid)-idle0) / float64(time.Since(t0)) * 100
	rss, anon, file := procRSS(pid), procStatus(pid, "RssAnon"), procStatus(pid, "RssFile")
	b.ReportMetric(syncT.Seconds(), "sync-s")
	b.ReportMetric(tarT.Seconds(), "tar-s")
	b.ReportMetric(syncT.Seconds()/tarT.Seconds(), "sync/tar")
	b.ReportMetric(syncCPU.Seconds(), "up-cpu-s")
	b.ReportMetric(float64(rss)/(1<<20), "up-idle-rss-MiB")
	b.ReportMetric(idleCPU, "up-idle-cpu-%")
	// RssFile is clean pages of the devtool binary (the kernel may drop them); RssAnon is the heap.
	report(b, "100,000 files: sync %s, tar %s and %s (ratio %.2f vs the mean); up: %s CPU while syncing, idle %.2f %% CPU, %.1f MiB RSS (%.1f MB; anon %.1f MiB, file %.1f MiB)",
		syncT.Round(time.Millisecond), tar1.Round(time.Millisecond), tar2.Round(time.Millisecond), syncT.Seconds()/tarT.Seconds(),
		syncCPU, idleCPU, float64(rss)/(1<<20), float64(rss)/1e6, float64(anon)/(1<<20), float64(file)/(1<<20))
}

// procCPU is process pid's user+system time (/proc/<pid>/stat, ticks of 10 ms).
func procCPU(pid int) time.Duration {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// procRSS is process pid's resident set size in bytes (/proc/<pid>/status).
func procRSS(pid int) int64 { return procStatus(pid, "VmRSS") }

// procStatus is a size field of /proc/<pid>/status in bytes (0 when absent).
func procStatus(pid int, field string) int64 {
	raw, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(l, field+":") {
			kb, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
