package contexts

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/devtool/devtool/internal/safefile"
)

// analyticsSettings is <home>/.devtool/analytics.json.
type analyticsSettings struct {
	Enabled bool `json:"enabled"`
}

func (s *Store) analyticsPath() string { return filepath.Join(s.Dir, "analytics.json") }

// AnalyticsEnabled reports whether analytics collection is on. It is on until the user disables it.
// (Nothing is sent anywhere unless the current context is a platform; see docs/analytics.md.)
func (s *Store) AnalyticsEnabled() (bool, error) {
	path := s.analyticsPath()
	data, err := safefile.Read(path, maxStoreBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("cannot read the analytics setting %s: %w", path, err)
	}
	var a analyticsSettings
	if err := json.Unmarshal(data, &a); err != nil {
		return false, fmt.Errorf("the analytics setting %s is corrupt: %s (run 'devtool analytics --enable' or '--disable' to rewrite it)",
			path, describeJSONError(data, err))
	}
	return a.Enabled, nil
}

// SetAnalytics turns analytics collection on or off. A corrupt setting file is replaced: it holds
// nothing but this choice, which the user is making now.
func (s *Store) SetAnalytics(enabled bool) error {
	if err := s.ensureDir(s.Dir); err != nil {
		return err
	}
	unlock, err := lockFile(s.analyticsPath() + ".lock")
	if err != nil {
		return err
	}
	defer unlock()
	data, _ := json.MarshalIndent(analyticsSettings{Enabled: enabled}, "", "  ")
	return s.writeAtomic(s.analyticsPath(), append(data, '\n'))
}
