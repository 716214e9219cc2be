package filesync

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"time"
)

// Status is a snapshot of the client's synchronization.
type Status struct {
	// Connected is true while a Run is exchanging with the agent.
	Connected bool `json:"connected"`
	// Synced is true once every folder finished its initial synchronization.
	Synced  bool           `json:"synced"`
	Folders []FolderStatus `json:"folders"`
}

// FolderStatus is the state of one synchronized folder.
type FolderStatus struct {
	Local  string `json:"local"`
	Remote string `json:"remote"`
	// Percent of the known paths that are equal on both sides (0 before the
	// remote index arrived).
	Percent float64 `json:"percent"`
	// Files is the number of paths known on either side; Pending how many of
	// them still differ or wait for a transfer.
	Files   int `json:"files"`
	Pending int `json:"pending"`
	// Halted, when not empty, says why this folder's synchronization
	// stopped before deleting anything (an emptied, replaced or missing
	// root, or a mass deletion) and how to go on.
	Halted string `json:"halted,omitempty"`
	// Conflicts lists the conflicts resolved so far (both versions kept).
	Conflicts []Conflict `json:"conflicts,omitempty"`
	// Errors lists paths that could not be synchronized, most recent last.
	Errors []PathError `json:"errors,omitempty"`
}

// Conflict is a path both sides changed: the other version was kept as Copy.
type Conflict struct {
	Path string    `json:"path"`
	Copy string    `json:"copy"`
	Time time.Time `json:"time"`
}

// PathError is a path that could not be synchronized.
type PathError struct {
	Path string    `json:"path"`
	Err  string    `json:"error"`
	Time time.Time `json:"time"`
}

// Percent is the completion over every folder, weighted by their number of
// paths, 0..100. A folder whose remote index has not arrived yet counts as
// 0 %.
func (s Status) Percent() float64 {
	files, done := 0, 0.0
	for _, f := range s.Folders {
		if f.Files == 0 {
			if f.Percent < 100 {
				return 0
			}
			continue
		}
		files += f.Files
		done += f.Percent / 100 * float64(f.Files)
	}
	if files == 0 {
		if len(s.Folders) > 0 {
			return 100
		}
		return 0
	}
	return 100 * done / float64(files)
}

// StatusHandler serves the client's Status as JSON behind HTTP basic auth.
func StatusHandler(user, password string, c *Client) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		uok := subtle.ConstantTimeCompare([]byte(u), []byte(user))
		pok := subtle.ConstantTimeCompare([]byte(p), []byte(password))
		if !ok || uok&pok != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="devtool sync"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		st := c.Status()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(struct {
			Status
			Percent float64 `json:"percent"`
		}{st, st.Percent()})
	})
}

// ServeStatus serves StatusHandler on ln (the caller's listener, on
// 127.0.0.1) until ln is closed; it then returns nil.
func ServeStatus(ln net.Listener, user, password string, c *Client) error {
	srv := &http.Server{Handler: StatusHandler(user, password, c), ReadHeaderTimeout: 10 * time.Second}
	err := srv.Serve(ln)
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
