package deploy

import (
	"context"
	"os/exec"
	"testing"
)

// TestGitInfo: branch and commit of a repository; nothing outside one or once ctx has ended.
func TestGitInfo(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	repo := t.TempDir()
	for _, args := range [][]string{{"init", "-q", "-b", "feature"}, {"-c", "user.name=t", "-c", "user.email=t@example.test",
		"commit", "-q", "--allow-empty", "-m", "x"}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name       string
		ctx        context.Context
		dir        string
		wantBranch string
		wantCommit bool
	}{
		{"repository", context.Background(), repo, "feature", true},
		{"not a repository", context.Background(), t.TempDir(), "", false},
		{"ctx ended", cancelled, repo, "", false},
	} {
		branch, commit := GitInfo(c.ctx, c.dir)
		if branch != c.wantBranch || (len(commit) == 40) != c.wantCommit {
			t.Errorf("%s: GitInfo = %q, %q", c.name, branch, commit)
		}
	}
}
