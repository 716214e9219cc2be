package build

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"

	"github.com/devtool/devtool/internal/safefile"
)

// ignorePatterns reads the ignore rules of a build: "<Dockerfile>.dockerignore" next to the Dockerfile
// when it exists (as BuildKit does), else "<context>/.dockerignore". No file: no patterns.
func ignorePatterns(contextDir, dockerfile string) ([]string, error) {
	for _, p := range []string{dockerfile + ".dockerignore", filepath.Join(contextDir, ".dockerignore")} {
		data, err := safefile.Read(p, MaxIgnoreFileBytes)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		pats, err := ignorefile.ReadAll(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		return pats, nil
	}
	return nil, nil
}

// walkContext calls fn for every file, folder and symlink of the build context that the ignore
// patterns keep, in lexical order, with its slash-separated path relative to dir.
func walkContext(dir string, patterns []string, fn func(rel, abs string, d fs.DirEntry) error) error {
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		return fmt.Errorf(".dockerignore: %w", err)
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == dir {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		//nolint:staticcheck // MatchesOrParentMatches is what docker's own context walker uses.
		skip, err := pm.MatchesOrParentMatches(rel)
		if err != nil {
			return err
		}
		if skip {
			if d.IsDir() && !pm.Exclusions() {
				return filepath.SkipDir
			}
			return nil
		}
		return fn(rel, path, d)
	})
}
