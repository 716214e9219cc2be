// Package filesync is devtool's two-way file synchronization engine: the local
// end (Client, in `up`) and the remote end (Serve, in devtool-agent), which talk
// over one byte stream (the SSH subsystem channel "devtool-sync").
//
// Reconciliation is three-way and decided by the client alone. Per folder it
// keeps the base (the last state both sides agreed on), its local index and a
// mirror of the agent's index. For each changed path: equal sides update the
// base; a side that differs from the base while the other does not is
// propagated; when both changed, an edit wins over a delete, a folder wins over
// a file or link (which is moved aside), and of two file versions the local one
// keeps the name while the remote one is kept beside it as
// name.conflict-remote-YYYYMMDD-HHMMSS.ext. A file removed and a file of the
// same content created on one side in one round (a rename, a folder moved) are
// moved on the other side, not sent again; a move that cannot apply falls back
// to a removal and a transfer. Every operation on either side carries the state it was decided from
// and is refused if the path changed meanwhile (then reconciled again), so a
// concurrent edit is never overwritten. Files are received into a temporary
// file (".devtool-tmp-*") beside their path and renamed over it, under an
// os.Root, after checking that every parent is a real folder: no peer path
// leaves the folder (.., absolute, through a symlink). On Linux a new file
// takes a shorter path with the same guarantees: its folder is opened with
// openat2 beneath the root without following any symlink, and the temporary
// file is put in place with renameat2(RENAME_NOREPLACE), which fails if
// anything appeared at the path meanwhile. A folder that vanished under an
// operation (a local delete racing a transfer) is a change, not an error: the
// side rescans the path's folders and reconciles again.
//
// Indexes persist: the client's (base and local) under ClientOptions.StateDir,
// the agent's (a content-hash cache) under ServerOptions.StateDir. A file is
// rehashed only when its size or mtime changed, or when its mtime was too close
// to the moment it was hashed to be trusted. A session starts with the agent
// sending its whole index, so a warm session moves only what changed. The
// client keeps the rules files of its last scan beside its index and sends
// them before scanning, so both sides scan at once; rules found different
// follow, and only the agent's index answering the newest rules is taken.
// Each watcher watches a folder before the first scan reads it. A session
// that changed nothing writes no index.
//
// Remote state identity: the agent keeps a random 128-bit ID in each remote
// index, new whenever that index is new (a fresh volume), unreadable, reset,
// or its folder is found empty while the index lists files; it sends the IDs
// in its hello answer. The client saves, with its base, the ID the base was
// agreed with; when the agent sends another, the base says nothing about the
// agent's files (a missing one there is no deletion), so the client drops it
// for that folder, as a reset does: differences become conflicts, a file on
// one side only is copied to the other, nothing is deleted, and one line is
// logged. The agent never deletes on its own decision (it applies the
// client's operations, each checked against the state it was decided from),
// so this check on the client is the whole guard.
//
// The stream: the client sends "DTSY" and the newest protocol version it
// speaks; the agent answers with min(that, its newest) and both go on in it
// (version 2 agents required equality: the client then opens a second stream
// offering 2; below MinProtocolVersion it fails with ErrVersion naming both,
// see wire.go); then blocks of at most 1 MiB of frames,
// zstd-compressed when that shrinks them by an eighth, sent when the outgoing
// queue runs dry: at once on a quiet stream (an edit), after a few
// milliseconds more on a busy one, so thousands of small messages share a
// block. The decoder bounds every length. File data goes in
// 128 KiB chunks, so memory follows the index, not file sizes. In protocol 3
// a large file replacing another travels as a delta against the receiver's
// copy (rsync.go).
//
// Safety (see docs/sync.md): a path a scan cannot read is unknown, kept in
// the index as it was, never taken for deleted; a folder whose root is
// emptied, replaced or gone, or whose removals would take most of a side's
// files, halts (halt.go) before anything is deleted, and Status says why;
// a symlink leaving the folder is never created on the other side; each
// root's capabilities (exec bits, case, Unicode form, symlinks) are probed
// once per session (caps.go) and the decision takes both sides' into
// account; received files get the receiver's clock. The decision for one
// path is the pure function decide (decide.go). A path that failed is
// retried with backoff (retry.go); a file still being written is sent once
// it settles (settle.go); after a burst the engine gives its memory back
// (compact.go).
//
// Ignore rules: .gitignore and .devtoolignore at every level (see package
// ignore) and ClientOptions.Excludes; .git, temporary files and a state folder
// inside a synced folder are never synced. The client's rules are sent to the
// agent, so both sides ignore the same paths; a path that becomes ignored is
// forgotten, never deleted.
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
	Reset bool
	// AcceptDeletions turns the safety rails off for this client: an
	// emptied or replaced local folder, or a round deleting most of a side's
	// files, is carried over instead of halting the folder (see halt.go).
	AcceptDeletions bool
	Logger          *slog.Logger

	// newest is the newest protocol offered (0: ProtocolVersion); tests
	// set it to play an older CLI. noDelta sends every file whole (the
	// baseline of the delta benchmark).
	newest  uint16
	noDelta bool
	// localCaps, when set, changes what the local folder is taken to keep
	// (tests play a macOS folder on Linux with it).
	localCaps func(caps) caps
}

// ServerOptions configures the remote end.
type ServerOptions struct {
	// StateDir holds the remote indexes (on the dev container's volume).
	StateDir string
	Logger   *slog.Logger

	// newest (0: ProtocolVersion) and strict let tests play an older agent:
	// strict answers as version 2 agents did (equality or nothing).
	newest uint16
	strict bool
}

// ErrVersion is returned (wrapped) when the two ends speak different protocol
// versions.
var ErrVersion = errors.New("filesync: protocol version mismatch")
