// Package filesync is devtool's two-way file synchronization engine: the local
// end (Client) and the remote end (Serve), which talk over one byte stream (an
// SSH subsystem channel in production).
//
// Reconciliation is three-way: the client keeps, per folder, the base index of
// the last state both sides agreed on, so an edit on one side is told apart
// from an edit on the other, a delete from a file never seen, and a conflict
// from an update. Conflicts keep both versions. Every write on either side is
// conditional on the state the decision was made from, so a concurrent edit is
// never overwritten.
package filesync

import (
	"errors"
	"log/slog"
)

// Folder is one synchronized pair of folders.
type Folder struct {
	// Local is the folder on this machine.
	Local string
	// Remote is the absolute folder inside the dev container.
	Remote string
}

// ClientOptions configures the local end.
type ClientOptions struct {
	Folders []Folder
	// Excludes are extra ignore patterns in gitignore syntax, relative to
	// every folder's root.
	Excludes []string
	// StateDir holds the persisted indexes (one file per folder).
	StateDir string
	// Reset drops both sides' indexes on the first Run: everything is
	// compared anew and every difference becomes a conflict (both kept).
	Reset  bool
	Logger *slog.Logger
}

// ServerOptions configures the remote end.
type ServerOptions struct {
	// StateDir holds the remote indexes (on the dev container's volume).
	StateDir string
	Logger   *slog.Logger
}

// ErrVersion is returned (wrapped) when the two ends speak different protocol
// versions.
var ErrVersion = errors.New("filesync: protocol version mismatch")
