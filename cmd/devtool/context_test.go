package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/devtool/devtool/internal/cli/root"
	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/iostreams"
)

// TestContextTypoRefusedEverywhere: an explicit --context that names nothing is an error in every
// command that takes it, dry runs and builds included, before anything else happens.
func TestContextTypoRefusedEverywhere(t *testing.T) {
	home := t.TempDir()
	kc := filepath.Join(home, "kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	cfg.AuthInfos["me"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.Contexts["real"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "me"}
	cfg.CurrentContext = "real"
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	for name, content := range map[string]string{
		"compose.yml": "services:\n  web:\n    image: busybox\n", "Dockerfile": "FROM scratch\n",
	} {
		if err := os.WriteFile(filepath.Join(work, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"KUBECONFIG": kc, "DEVTOOL_HOME": home, "HOME": home}
	getenv := func(k string) string { return env[k] }
	for _, args := range [][]string{
		{"deploy"}, {"deploy", "--dry-run"}, {"destroy"}, {"destroy", "--all"}, {"endpoints"}, {"logs"},
		{"build"}, {"build", "-f", "Dockerfile", "--tag", "127.0.0.1:25000/x:1"},
		{"init", "--file", "new.yml"}, {"init", "--v1", "--file", "new1.yml"},
		{"up", "web"}, {"down", "web"}, {"status", "web"}, {"restart", "web"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			ios, _, _, errOut := iostreams.Test()
			f := &cmdutil.Factory{IOStreams: ios, Logger: slog.New(slog.DiscardHandler), Getenv: getenv, WorkDir: work,
				Target: cmdutil.TargetFunc(&contexts.Resolver{Getenv: getenv})}
			cmd := root.NewCmd(f, new(slog.LevelVar))
			cmd.SetArgs(append(args, "--context", "typo"))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := root.Execute(ctx, cmd)
			if err == nil || !strings.Contains(err.Error(), "typo") {
				t.Fatalf("err %v; stderr %s", err, errOut)
			}
			if _, err := os.Stat(filepath.Join(work, "new.yml")); err == nil {
				t.Fatal("init wrote its file despite the bad --context")
			}
		})
	}
}
