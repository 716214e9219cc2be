package kube

import (
	"os"
	"path/filepath"
)

func splitPathList(s string) []string {
	var out []string
	for _, p := range filepath.SplitList(s) {
		if p != "" {
			out = append(out, os.ExpandEnv(p))
		}
	}
	return out
}
