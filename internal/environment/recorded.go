package environment

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/devtool/devtool/internal/deploy"
	"github.com/devtool/devtool/internal/manifest"
)

// recordedManifest is the devtool.yml an environment was last deployed with, as its state record
// keeps it, for destroying an environment whose project is not the current folder (namespace delete,
// destroy --all): its destroy commands run in an empty temporary folder holding only that file.
// nil (and no error) when the record holds no devtool.yml with destroy commands. cleanup removes the
// folder.
func recordedManifest(ctx context.Context, t *Deployer, name string) (*manifest.Manifest, func(), error) {
	st, err := (&deploy.StateStore{Clientset: t.Target.Kube.Clientset, Namespace: t.Target.Namespace}).Get(ctx, name)
	if err != nil || st == nil || st.Manifest == "" {
		return nil, func() {}, err
	}
	base := filepath.Base(st.ManifestFile)
	if base == "." || base == string(filepath.Separator) || base == "" {
		base = "devtool.yml"
	}
	dir, err := os.MkdirTemp("", "devtool-destroy-")
	if err != nil {
		return nil, func() {}, err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	path := filepath.Join(dir, base)
	if err := os.WriteFile(path, []byte(st.Manifest), 0o600); err != nil {
		cleanup()
		return nil, func() {}, err
	}
	m, err := manifest.LoadBytes(manifest.LoadOptions{Dir: dir, File: path, Environ: t.Environ}, []byte(st.Manifest))
	if err != nil || m.Inferred || len(m.Destroy) == 0 {
		// A Compose file (or a manifest this version cannot read) has no destroy commands to run:
		// its objects are removed by label as always.
		cleanup()
		if err != nil {
			t.Warn(fmt.Sprintf("the recorded manifest of %s (%s) could not be read, so its destroy commands do not run: %v", name, st.ManifestFile, err))
		}
		return nil, func() {}, nil
	}
	return m, cleanup, nil
}
