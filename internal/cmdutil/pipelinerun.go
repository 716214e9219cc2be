package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/devtool/devtool/internal/deploy"
	"github.com/devtool/devtool/internal/iostreams"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/client"
	"github.com/devtool/devtool/internal/platform/runspec"
)

// FollowRun streams run r's log to out until it ends and turns its result into the command's: nil
// when it succeeded, an error naming the failing step (with its last output) otherwise. A deadline
// beyond the run's timeout ends the wait (the run goes on).
func FollowRun(ctx context.Context, ios *iostreams.IOStreams, pc *client.Client, r *api.PipelineRun, timeout time.Duration) (*api.PipelineRun, error) {
	wctx, cancel := context.WithTimeout(ctx, timeout+2*time.Minute)
	defer cancel()
	fmt.Fprintf(ios.ErrOut, "Run #%d of pipeline %s: waiting for its pod to start...\n", r.Number, r.Name)
	done, err := pc.FollowRun(wctx, r.Namespace, r.Name, r.Number, ios.Out)
	if err != nil {
		howTo := fmt.Sprintf("devtool pipeline logs --name %s --namespace %s --run %d -f", r.Name, r.Namespace, r.Number)
		switch {
		case ctx.Err() != nil:
			fmt.Fprintf(ios.ErrOut, "Stopped following run #%d: it goes on in the cluster (%s).\n", r.Number, howTo)
			return nil, ctx.Err()
		case errors.Is(wctx.Err(), context.DeadlineExceeded):
			return nil, WithHint(fmt.Errorf("run #%d of pipeline %s had not ended %s after its timeout", r.Number, r.Name, 2*time.Minute),
				"it is still recorded as running: "+howTo)
		}
		return nil, err
	}
	return done, nil
}

// RunResult is the command's outcome of a finished run: nil when it succeeded, else an error naming
// the failing step with its last output (or why the run timed out).
func RunResult(r *api.PipelineRun) error {
	took := ""
	if r.Finished != nil {
		took = " in " + r.Finished.Sub(r.Created).Round(time.Second).String()
	}
	msg := strings.TrimSpace(r.Message)
	switch r.Phase {
	case api.PhaseSucceeded:
		return nil
	case api.PhaseTimedOut:
		first, rest, _ := strings.Cut(msg, "\n")
		err := fmt.Sprintf("pipeline %s (run #%d) timed out%s: %s", r.Name, r.Number, took, first)
		if rest = strings.TrimSpace(rest); rest != "" {
			err += "; its last output:\n" + indent(rest)
		}
		return errors.New(err)
	}
	step := r.FailedStep
	if step == "" {
		step = r.Action
	}
	if msg == "" {
		return fmt.Errorf("pipeline %s (run #%d) failed in step %s%s", r.Name, r.Number, step, took)
	}
	return fmt.Errorf("pipeline %s (run #%d) failed in step %s%s; its last output:\n%s", r.Name, r.Number, step, took, indent(msg))
}

func indent(s string) string {
	return "  " + strings.Join(strings.Split(strings.TrimRight(s, "\n"), "\n"), "\n  ")
}

// CheckRunFlags checks the flags of a run that `pipeline deploy` and `preview deploy` share, before
// anything is sent: --timeout between 1s and 24h, every --var NAME=value (returned parsed), and
// --branch and --file when given. Each error is a usage error (exit 2) naming its flag.
func CheckRunFlags(timeout time.Duration, vars []string, branch, file string) ([]api.Var, error) {
	if timeout <= 0 || timeout > 24*time.Hour {
		return nil, FlagErrorf("--timeout must be between 1s and 24h, got %s", timeout)
	}
	var out []api.Var
	for _, v := range vars {
		k, val, err := deploy.ParseVar(v)
		if err != nil {
			return nil, FlagErrorf("%v", err)
		}
		out = append(out, api.Var{Name: k, Value: val})
	}
	if branch != "" {
		if err := runspec.CheckBranch(branch); err != nil {
			return nil, FlagErrorf("--branch: %v", err)
		}
	}
	if file != "" {
		if err := runspec.CheckFile(file); err != nil {
			return nil, FlagErrorf("--file %q: %v", file, err)
		}
	}
	return out, nil
}
