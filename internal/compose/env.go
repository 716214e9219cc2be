package compose

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"gopkg.in/yaml.v3"

	"github.com/devtool/devtool/internal/projectpath"
	"github.com/devtool/devtool/internal/yamlsrc"
)

// Lookup finds a variable by name; ok is false when it is not defined.
type Lookup = yamlsrc.Lookup

// readDotEnv reads the .env file beside the compose file. A missing file is not an error.
// Variables inside .env may refer to shell variables (compose-go's dotenv expands them).
func (l *loader) readDotEnv(shell Lookup) Lookup {
	display := filepath.Join(filepath.Dir(l.File), ".env")
	if !l.opts.AllowOutside {
		// A .env that is a link leading out of the project is refused unread, like an env_file.
		root := l.opts.ProjectDir
		if root == "" {
			root = l.dir
		}
		if err := projectpath.Check(root, filepath.Join(l.dir, ".env")); err != nil {
			l.Errs = append(l.Errs, &yamlsrc.Error{Pos: yamlsrc.Position{File: display}, Msg: fmt.Sprintf("the .env file: %v: %s", err, projectpath.Hint)})
			return yamlsrc.MapLookup(nil)
		}
	}
	return yamlsrc.MapLookup(l.ReadDotEnv(filepath.Join(l.dir, ".env"), display, maxEnvFileSize, shell))
}

// readEnvFile reads one env_file entry, relative to the compose file's folder. n is the
// entry's node, for the error position.
func (l *loader) readEnvFile(path string, required bool, n *yaml.Node, field string) map[string]string {
	abs := l.absPath(n, path)
	if !l.opts.AllowOutside {
		// Its values become the service's environment, deployed to the cluster: a file outside
		// the project (or a link in it that leads out, to /etc/shadow say) is refused unread.
		root := l.opts.ProjectDir
		if root == "" {
			root = l.dir
		}
		if err := projectpath.Check(root, abs); err != nil {
			l.Errorf(n, field, "env file %v: %s", err, projectpath.Hint)
			return nil
		}
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
