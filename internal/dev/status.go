package dev

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/devtool/devtool/internal/safefile"
)

// SyncStatus is the local sync service's answer (filesync.StatusHandler), decoded by field
// name so this package does not depend on the engine's types.
type SyncStatus struct {
	Connected bool    `json:"connected"`
	Synced    bool    `json:"synced"`
	Percent   float64 `json:"percent"`
	// BytesSent and BytesReceived count the sync stream's bytes since up started.
	BytesSent     int64 `json:"bytesSent"`
	BytesReceived int64 `json:"bytesReceived"`
	Folders       []struct {
		Local   string  `json:"local"`
		Remote  string  `json:"remote"`
		Percent float64 `json:"percent"`
		Files   int     `json:"files"`
		Pending int     `json:"pending"`
		// Waiting names some of the pending paths (at most ten).
		Waiting []string `json:"waiting"`
		// Halted says why the folder's sync stopped before deleting anything, and how to go on.
		Halted    string `json:"halted"`
		Conflicts []struct {
			Path string `json:"path"`
			Copy string `json:"copy"`
			// Reason, for a conflict without a copy: a name the receiving side takes for another.
			Reason string `json:"reason"`
		} `json:"conflicts"`
		Errors []struct {
			Path string `json:"path"`
			Err  string `json:"error"`
			// Failures in a row and when the path is tried again (retried ones only).
			Failures int        `json:"failures"`
			NextTry  *time.Time `json:"next_try"`
		} `json:"errors"`
	} `json:"folders"`
	// Raw is the service's whole answer, fields this package does not decode included.
	Raw json.RawMessage `json:"-"`
}

// FetchStatus asks the local sync service of a running `up`.
func FetchStatus(ctx context.Context, st StatusService) (SyncStatus, error) {
	var s SyncStatus
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+st.Addr+"/", nil)
	if err != nil {
		return s, err
	}
	req.SetBasicAuth(st.User, st.Password)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return s, fmt.Errorf("the sync service at %s does not answer (is 'devtool up' running?): %w", st.Addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("the sync service at %s answered %s", st.Addr, resp.Status)
	}
	// The answer is a few KiB; a service that sends without end is cut off at the cap.
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxStatusAnswer+1))
	if err != nil {
		return s, fmt.Errorf("reading the answer of the sync service at %s: %w", st.Addr, err)
	}
	if len(b) > maxStatusAnswer {
		return s, fmt.Errorf("the sync service at %s answered more than %s: not a devtool sync service?", st.Addr, safefile.FormatSize(maxStatusAnswer))
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("the sync service at %s answered no sync status: %w", st.Addr, err)
	}
	s.Raw = b
	return s, nil
}

// maxStatusAnswer caps the sync service's answer: its JSON lists conflicts and errors per folder,
// a few KiB, far below this even with thousands of them.
const maxStatusAnswer = 8 << 20

// NewCredential is a random user or password for the local sync service.
func NewCredential(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
