package contexts

import (
	"crypto/rand"
	"encoding/hex"
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
	// InstallID is a random UUID made the first time an event is sent (api.AnalyticsEvent).
	InstallID string `json:"installId,omitempty"`
}

func (s *Store) analyticsPath() string { return filepath.Join(s.Dir, "analytics.json") }

// AnalyticsEnabled reports whether analytics collection is on. It is on until the user disables it.
// (Nothing is sent anywhere unless the current context is a platform; see docs/analytics.md.)
func (s *Store) AnalyticsEnabled() (bool, error) {
	a, err := s.readAnalytics()
	return a.Enabled, err
}

func (s *Store) readAnalytics() (analyticsSettings, error) {
	path := s.analyticsPath()
	data, err := safefile.Read(path, maxStoreBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return analyticsSettings{Enabled: true}, nil
	}
	if err != nil {
		return analyticsSettings{}, fmt.Errorf("cannot read the analytics setting %s: %w", path, err)
	}
	var a analyticsSettings
	if err := json.Unmarshal(data, &a); err != nil {
		return analyticsSettings{}, fmt.Errorf("the analytics setting %s is corrupt: %s (run 'devtool analytics --enable' or '--disable' to rewrite it)",
			path, describeJSONError(data, err))
	}
	return a, nil
}

// InstallID is the random id analytics events carry, made (a UUID v4 from crypto/rand, saved
// beside the setting) the first time it is asked for.
func (s *Store) InstallID() (string, error) {
	if a, err := s.readAnalytics(); err == nil && a.InstallID != "" {
		return a.InstallID, nil
	}
	if err := s.ensureDir(s.Dir); err != nil {
		return "", err
	}
	unlock, err := lockFile(s.analyticsPath() + ".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	a, err := s.readAnalytics()
	if err != nil {
		return "", err
	}
	if a.InstallID != "" { // made by another devtool meanwhile
		return a.InstallID, nil
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	h := hex.EncodeToString(b[:])
	a.InstallID = h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
	data, _ := json.MarshalIndent(a, "", "  ")
	return a.InstallID, s.writeAtomic(s.analyticsPath(), append(data, '\n'))
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
	a, _ := s.readAnalytics() // the install id is kept; a corrupt file is replaced
	a.Enabled = enabled
	data, _ := json.MarshalIndent(a, "", "  ")
	return s.writeAtomic(s.analyticsPath(), append(data, '\n'))
}
