// Package kubeconfig implements `devtool kubeconfig`, which writes a platform context's cluster into
// the user's kubeconfig, and the hidden `devtool kubetoken`, the exec credential plugin that
// kubeconfig entry runs.
package kubeconfig

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientauthv1 "k8s.io/client-go/pkg/apis/clientauthentication/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/iostreams"
	"github.com/devtool/devtool/internal/kube"
	"github.com/devtool/devtool/internal/safefile"
)

// maxKubeconfigBytes caps the kubeconfig file read before it is rewritten.
const maxKubeconfigBytes = 16 << 20

// Options are the inputs of `devtool kubeconfig`.
type Options struct {
	IO     *iostreams.IOStreams
	Getenv func(string) string
	// Executable is the devtool binary the credential plugin entry runs (os.Executable in main).
	Executable func() (string, error)
	Context    string // --context
}

// NewCmd builds `devtool kubeconfig`.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Getenv: f.Getenv, Executable: os.Executable}
	cmd := &cobra.Command{
		Use:   "kubeconfig",
		Short: "Add the platform's cluster to your kubeconfig, with short-lived credentials",
		Long: `Write the cluster of the current platform context into your kubeconfig (the first file of KUBECONFIG,
else ~/.kube/config), merged: a cluster, a user and a context named devtool_<user>_<host>, made the
current context. Other files and other entries are left as they are.

The user's credentials come from devtool itself, an exec credential plugin ('devtool kubetoken'):
it asks the platform for a short-lived token of your ServiceAccount (1 hour) and caches it under
~/.devtool until most of its life is spent. kubectl then works in your namespaces and is refused
everywhere else; losing access on the platform takes effect at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.Context, "context", "c", "", "platform context (default: the current context)")
	return cmd
}

// Names of the kubeconfig entries for a user of a platform.
func entryName(platformURL, user string) string {
	host := platformURL
	if u, err := url.Parse(platformURL); err == nil && u.Host != "" {
		host = u.Host
	}
	return "devtool_" + user + "_" + strings.ReplaceAll(host, ":", "-")
}

func run(ctx context.Context, opts *Options) error {
	sel, err := (&contexts.Resolver{Getenv: opts.Getenv}).Select(contexts.Flags{Context: opts.Context})
	if err != nil {
		return err
	}
	c := sel.Context
	if c == nil || !c.IsDevtool {
		return cmdutil.WithHint(fmt.Errorf("kubeconfig needs a platform context; %s is a Kubernetes context, whose credentials are in your kubeconfig already", sel.Name()),
			"log in to a platform with 'devtool context use https://<platform> --token <token>'")
	}
	pc, err := contexts.PlatformClient(c)
	if err != nil {
		return err
	}
	defer pc.Close()
	me, err := pc.Me(ctx) // also checks the token before anything is written
	if err != nil {
		return err
	}
	info, err := pc.Info(ctx)
	if err != nil {
		return err
	}
	if info.APIServer == "" {
		return fmt.Errorf("platform %s gives no Kubernetes API address (GET /api/v1/info apiServer is empty)", c.Name)
	}
	exe, err := opts.Executable()
	if err != nil {
		return fmt.Errorf("finding the devtool binary for the credential plugin: %w", err)
	}
	if exe, err = filepath.Abs(exe); err != nil {
		return err
	}
	path := contexts.KubeconfigPaths(opts.Getenv)[0]
	if err := kube.CheckKubeconfigFiles([]string{path}); err != nil {
		return err
	}
	cfg, err := load(path)
	if err != nil {
		return err
	}
	name := entryName(c.Name, me.Name)
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: info.APIServer, CertificateAuthorityData: []byte(info.APIServerCA)}
	exec := &clientcmdapi.ExecConfig{
		APIVersion:      clientauthv1.SchemeGroupVersion.String(),
		Command:         exe,
		Args:            []string{"kubetoken", "--context", c.Name},
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
	}
	if h := opts.Getenv("DEVTOOL_HOME"); h != "" {
		exec.Env = append(exec.Env, clientcmdapi.ExecEnvVar{Name: "DEVTOOL_HOME", Value: h})
	}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Exec: exec}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name, Namespace: firstNonEmpty(sel.Namespace, me.Namespace, me.Name)}
	cfg.CurrentContext = name
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	if err := contexts.WriteFileAtomic(path, data); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "Wrote context %s (namespace %s) to %s and made it the current context; its credentials come from 'devtool kubetoken'.\n",
		name, cfg.Contexts[name].Namespace, path)
	return nil
}

// load reads one kubeconfig file as it is (no merging, relative paths untouched); a missing file is an empty config.
func load(path string) (*clientcmdapi.Config, error) {
	data, err := safefile.Read(path, maxKubeconfigBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return clientcmdapi.NewConfig(), nil
	}
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

// TokenOptions are the inputs of `devtool kubetoken`.
type TokenOptions struct {
	IO      *iostreams.IOStreams
	Getenv  func(string) string
	Context string
}

// NewTokenCmd builds the hidden `devtool kubetoken`, the credential plugin `kubeconfig` writes.
func NewTokenCmd(f *cmdutil.Factory, runF func(context.Context, *TokenOptions) error) *cobra.Command {
	opts := &TokenOptions{IO: f.IOStreams, Getenv: f.Getenv}
	cmd := &cobra.Command{
		Use:    "kubetoken --context <platform_url>",
		Short:  "Print a Kubernetes ExecCredential for a platform context (kubectl credential plugin)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Context == "" {
				return cmdutil.FlagErrorf("--context is required: the platform URL")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runToken(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.Context, "context", "c", "", "platform context (its URL)")
	return cmd
}

func runToken(ctx context.Context, opts *TokenOptions) error {
	r := &contexts.Resolver{Getenv: opts.Getenv}
	sel, err := r.Select(contexts.Flags{Context: opts.Context})
	if err != nil {
		return err
	}
	if sel.Context == nil || !sel.Context.IsDevtool {
		return fmt.Errorf("%s is not a platform context", opts.Context)
	}
	store, err := r.Store()
	if err != nil {
		return err
	}
	kt, renewAt, err := (&contexts.KubeTokens{Store: store}).GetRenewAt(ctx, sel.Context)
	if err != nil {
		return err
	}
	exp := metav1.NewTime(renewAt)
	cred := clientauthv1.ExecCredential{
		TypeMeta: metav1.TypeMeta{APIVersion: clientauthv1.SchemeGroupVersion.String(), Kind: "ExecCredential"},
		Status:   &clientauthv1.ExecCredentialStatus{Token: kt.Token, ExpirationTimestamp: &exp},
	}
	return json.NewEncoder(opts.IO.Out).Encode(cred)
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
