package compose

import (
	"bytes"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"gopkg.in/yaml.v3"

	"github.com/devtool/devtool/internal/yamlsrc"
)

// Lookup finds a variable by name; ok is false when it is not defined.
type Lookup = yamlsrc.Lookup

// readDotEnv reads the .env file beside the compose file. A missing file is not an error.
// Variables inside .env may refer to shell variables (compose-go's dotenv expands them).
func (l *loader) readDotEnv(shell Lookup) Lookup {
	display := filepath.Join(filepath.Dir(l.File), ".env")
	return yamlsrc.MapLookup(l.ReadDotEnv(filepath.Join(l.dir, ".env"), display, maxEnvFileSize, shell))
}

// readEnvFile reads one env_file entry, relative to the compose file's folder. n is the
// entry's node, for the error position.
func (l *loader) readEnvFile(path string, required bool, n *yaml.Node, field string) map[string]string {
	abs := l.absPath(n, path)
	if rel, err := filepath.Rel(l.dir, abs); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		l.Warnf("%s: %s: env file %s is outside the project folder %s", l.Pos(n), field, abs, l.dir)
	}
	data, err := yamlsrc.ReadRegularFile(abs, maxEnvFileSize)
	if err != nil {
		if !required && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		l.Errorf(n, field, "cannot read env file %s: %v", abs, yamlsrc.UnwrapPathError(err))
		return nil
	}
	vars, err := dotenv.ParseWithLookup(bytes.NewReader(data), dotenv.LookupFn(l.Lookup))
	if err != nil {
		l.Errorf(n, field, "invalid env file %s: %s", abs, yamlsrc.DotEnvError(err))
		return nil
	}
	return vars
}

// absPath makes a path written at n absolute: relative to the folder of n's file (the
// compose file, or the extended or included file that set it), ~ to home.
func (l *loader) absPath(n *yaml.Node, p string) string {
	return yamlsrc.AbsPath(p, l.dirOf(n), l.home)
}

// maxEnvFileSize bounds what an env file may hold; a bigger one is a mistake (or a device).
const maxEnvFileSize = 4 << 20
