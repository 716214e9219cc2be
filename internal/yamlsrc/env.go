package yamlsrc

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/compose-spec/compose-go/v2/dotenv"

	"github.com/devtool/devtool/internal/safefile"
)

// Lookup finds a variable by name; ok is false when it is not defined.
type Lookup func(name string) (value string, ok bool)

// ChainLookups asks each source in turn (nil ones are passed over); the first that defines
// the name wins.
func ChainLookups(sources ...Lookup) Lookup {
	return func(name string) (string, bool) {
		for _, src := range sources {
			if src == nil {
				continue
			}
			if v, ok := src(name); ok {
				return v, true
			}
		}
		return "", false
	}
}

// MapLookup looks names up in m (which may be nil).
func MapLookup(m map[string]string) Lookup {
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

// ReadDotEnv reads the .env file at path; a missing file gives nil and no error. Variables
// inside it may refer to shell variables (compose-go's dotenv expands them). A file that
// cannot be read (or is larger than maxSize bytes) or does not parse is recorded in r.Errs,
// positioned at display (how the file is named to the user), and gives nil.
func (r *Reader) ReadDotEnv(path, display string, maxSize int64, shell Lookup) map[string]string {
	data, err := ReadRegularFile(path, maxSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		r.Errs = append(r.Errs, &Error{Pos: Position{File: display}, Msg: "cannot read the .env file: " + err.Error()})
		return nil
	}
	vars, err := dotenv.ParseWithLookup(bytes.NewReader(data), dotenv.LookupFn(shell))
	if err != nil {
		r.Errs = append(r.Errs, &Error{Pos: Position{File: display}, Msg: "invalid .env file: " + DotEnvError(err)})
		return nil
	}
	return vars
}

// ReadRegularFile reads a file that must be a regular file of at most maxSize bytes, so a
// path like /dev/zero, a FIFO or a folder gives an error instead of hanging or failing
// obscurely. It is safefile.Read.
func ReadRegularFile(path string, maxSize int64) ([]byte, error) {
	return safefile.Read(path, maxSize)
}

// UnwrapPathError drops the operation and path from an *fs.PathError, for messages that
// already name the file.
func UnwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// AbsPath makes a path written in a file absolute: "~" and "~/..." relative to home, a
// relative path relative to dir.
func AbsPath(p, dir, home string) string {
	switch {
	case p == "~" || strings.HasPrefix(p, "~/"):
		return filepath.Join(home, p[1:])
	case filepath.IsAbs(p):
		return filepath.Clean(p)
	default:
		return filepath.Join(dir, p)
	}
}

// HomeDir is the folder "~" stands for: explicit when set, else environ["HOME"], else the
// user's home directory.
func HomeDir(explicit string, environ map[string]string) string {
	if explicit != "" {
		return explicit
	}
	if h := environ["HOME"]; h != "" {
		return h
	}
	h, _ := os.UserHomeDir()
	return h
}

// DotEnvError is the message of a dotenv parse error without the text it quotes: compose-go
// quotes the rest of the line (a value that may be a secret, or a whole one-line file), so only
// the line number and what is wrong are kept.
func DotEnvError(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "unterminated quoted value"); i >= 0 {
		msg = msg[:i+len("unterminated quoted value")]
	}
	if i := strings.Index(msg, " in variable name "); i >= 0 {
		msg = msg[:i]
	}
	return Shorten(msg)
}
