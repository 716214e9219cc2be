package deploy

import (
	"context"
	"strings"
	"testing"

	"github.com/devtool/devtool/internal/manifest"
)

// TestDestroyTimedOut: a destroy command stopped by --timeout says the destroy timed out, not
// the deploy.
func TestDestroyTimedOut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-ctx.Done()
	for phase, want := range map[string]string{"destroy": "the destroy timed out", "": "the deploy timed out"} {
		r := &CommandRunner{Shell: "sh", Dir: t.TempDir(), Phase: phase}
		err := r.Run(ctx, []manifest.Command{{Name: "cleanup", Command: "true"}})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("phase %q: err %v, want %q", phase, err, want)
		}
	}
}
