package compose

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"gopkg.in/yaml.v3"
)

// Lookup finds a variable by name; ok is false when it is not defined.
type Lookup func(name string) (value string, ok bool)

// chainLookups asks each source in turn; the first that defines the name wins. Order is the
// spec's precedence (A6): shell, then .env, then stored platform secrets.
func chainLookups(sources ...Lookup) Lookup {
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

func mapLookup(m map[string]string) Lookup {
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

// readDotEnv reads the .env file beside the compose file. A missing file is not an error.
// Variables inside .env may refer to shell variables (compose-go's dotenv expands them).
func (l *loader) readDotEnv(shell Lookup) Lookup {
	path := filepath.Join(l.dir, ".env")
	data, err := readRegularFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	display := filepath.Join(filepath.Dir(l.file), ".env")
	if err != nil {
		l.errs = append(l.errs, &Error{Pos: Position{File: display}, Msg: "cannot read the .env file: " + err.Error()})
		return nil
	}
	vars, err := dotenv.ParseWithLookup(bytes.NewReader(data), dotenv.LookupFn(shell))
	if err != nil {
		l.errs = append(l.errs, &Error{Pos: Position{File: display}, Msg: "invalid .env file: " + err.Error()})
		return nil
	}
	return mapLookup(vars)
}

// readEnvFile reads one env_file entry, relative to the compose file's folder. n is the
// entry's node, for the error position.
func (l *loader) readEnvFile(path string, required bool, n *yaml.Node, field string) map[string]string {
	abs := l.absPath(path)
	data, err := readRegularFile(abs)
	if err != nil {
		if !required && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		l.errorf(n, field, "cannot read env file %s: %v", abs, unwrapPathError(err))
		return nil
	}
	vars, err := dotenv.ParseWithLookup(bytes.NewReader(data), dotenv.LookupFn(l.lookup))
	if err != nil {
		l.errorf(n, field, "invalid env file %s: %v", abs, err)
		return nil
	}
	return vars
}

// unwrapPathError drops the path from *fs.PathError: the message already names the file.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// absPath makes a path from the compose file absolute: relative to its folder, ~ to home.
func (l *loader) absPath(p string) string {
	switch {
	case p == "~" || len(p) > 1 && p[:2] == "~/":
		return filepath.Join(l.home, p[1:])
	case filepath.IsAbs(p):
		return filepath.Clean(p)
	default:
		return filepath.Join(l.dir, p)
	}
}

// maxEnvFileSize bounds what an env file may hold; a bigger one is a mistake (or a device).
const maxEnvFileSize = 4 << 20

// readRegularFile reads a file that must be a regular file of sane size, so a path like
// /dev/zero or a folder gives an error instead of hanging or failing obscurely.
func readRegularFile(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	if st.Size() > maxEnvFileSize {
		return nil, fmt.Errorf("larger than %d bytes", maxEnvFileSize)
	}
	return os.ReadFile(path)
}
