package cmdutil

import (
	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/environment"
)

// EnvFlags is the --file/--name flag group of every command that acts on an environment.
type EnvFlags struct {
	Files []string
	Name  string
}

// AddFlags registers --file (-f, repeatable) and --name on cmd. fileUsage overrides the --file help.
func (e *EnvFlags) AddFlags(cmd *cobra.Command, fileUsage string) {
	if fileUsage == "" {
		fileUsage = "path to the devtool.yml or Compose file (default: devtool.yml, then compose.yaml, compose.yml, docker-compose.yaml or docker-compose.yml)"
	}
	cmd.Flags().StringArrayVarP(&e.Files, "file", "f", nil, fileUsage)
	cmd.Flags().StringVar(&e.Name, "name", "", "environment name (default: the file's name key, else the repository's name from its git origin, else the folder name)")
}

// Options are the environment.Load options for these flags.
func (e EnvFlags) Options(dir string, environ map[string]string) environment.Options {
	return environment.Options{Dir: dir, Files: e.Files, Name: e.Name, Environ: environ}
}
