package translate

import (
	"github.com/devtool/devtool/internal/compose"
)

// Issue 22: a Compose file written for Okteto goes through the loader and translation whole
// (testdata/okteto.compose.yaml), so the golden files show what each extension becomes: a curl
// healthcheck as an httpGet probe, user as a mapping, the short resources form with a storage
// class for the anonymous volumes' claims, Okteto's spellings, a volume's labels and annotations
// on its claim, and the pods sharing that claim on one node.
func init() {
	goldenCases = append(goldenCases, testCase{
		name: "okteto",
		opts: defaultOpts,
		project: func() *compose.Project {
			p, err := compose.Load(compose.LoadOptions{File: "testdata/okteto.compose.yaml", Environ: map[string]string{}, HomeDir: "/home/dev"})
			if err != nil {
				panic(err)
			}
			return p
		},
	})
}
