package cmdutil

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/environment"
	"github.com/devtool/devtool/internal/projectpath"
)

// EnvFlags is the --file/--name flag group of every command that acts on an environment.
type EnvFlags struct {
	Files []string
	Name  string
	// AllowOutside is --allow-outside-volumes: the project file may name paths outside the
	// project folder (host volumes, build contexts, Dockerfiles, build secrets, env files, dev
	// sync folders); see internal/projectpath.
	AllowOutside bool
}

// AddFlags registers --file (-f, repeatable) and --name on cmd. fileUsage overrides the --file help.
func (e *EnvFlags) AddFlags(cmd *cobra.Command, fileUsage string) {
	if fileUsage == "" {
		fileUsage = "path to the devtool.yml or Compose file (default: devtool.yml, then compose.yaml, compose.yml, docker-compose.yaml or docker-compose.yml)"
	}
	cmd.Flags().StringArrayVarP(&e.Files, "file", "f", nil, fileUsage)
	cmd.Flags().StringVar(&e.Name, "name", "", "environment name (default: the file's name key, else the repository's name from its git origin, else the folder name)")
	cmd.Flags().BoolVar(&e.AllowOutside, strings.TrimPrefix(projectpath.AllowFlag, "--"), false,
		"allow the file to name paths outside the project folder: host volumes (copied into the deployed images, which are pushed to the registry), build contexts, Dockerfiles, build secrets, env files and dev sync folders")
}

// Options are the environment.Load options for these flags.
func (e EnvFlags) Options(dir string, environ map[string]string) environment.Options {
	return environment.Options{Dir: dir, Files: e.Files, Name: e.Name, Environ: environ, AllowOutside: e.AllowOutside}
}
