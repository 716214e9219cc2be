package kube

import (
	"errors"
	"fmt"
	"io/fs"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/devtool/devtool/internal/safefile"
)

// MaxKubeconfigBytes caps every kubeconfig file and every file a kubeconfig names (certificate
// authority, client certificate and key, token file).
const MaxKubeconfigBytes = safefile.DefaultMax

// CheckKubeconfigFiles reads every file of a kubeconfig path list through safefile before
// client-go reads them: a FIFO, a device or a folder is refused at once (client-go would block on
// it or read /dev/zero until memory runs out), and a file over MaxKubeconfigBytes is an error
// naming the file and the cap. Missing files are skipped, as client-go skips them when it merges
// the list. client-go then loads the list itself, so its merge rules stay exactly kubectl's.
func CheckKubeconfigFiles(paths []string) error {
	for _, p := range paths {
		if p == "" {
			continue
		}
		if _, err := safefile.Read(p, MaxKubeconfigBytes); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return fmt.Errorf("reading kubeconfig: %w", err)
		}
	}
	return nil
}

// CheckReferencedFiles reads through safefile the files that the kubeconfig context names
// (its cluster's certificate-authority, its user's client-certificate, client-key and tokenFile)
// before client-go turns the context into a client configuration: client-go reads a token file
// at that moment. Missing files are left to client-go's own error.
func CheckReferencedFiles(raw *clientcmdapi.Config, context string) error {
	kctx := raw.Contexts[context]
	if kctx == nil {
		return nil
	}
	type named struct{ what, path string }
	var files []named
	if c := raw.Clusters[kctx.Cluster]; c != nil {
		files = append(files, named{"certificate-authority", c.CertificateAuthority})
	}
	if u := raw.AuthInfos[kctx.AuthInfo]; u != nil {
		files = append(files, named{"client-certificate", u.ClientCertificate}, named{"client-key", u.ClientKey},
			named{"tokenFile", u.TokenFile})
	}
	for _, f := range files {
		if f.path == "" {
			continue
		}
		if _, err := safefile.Read(f.path, MaxKubeconfigBytes); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("Kubernetes context %q: reading its %s: %w", context, f.what, err)
		}
	}
	return nil
}

// InlineCAFile reads the certificate-authority file a client configuration names through
// safefile and puts its content into cfg, so client-go never opens it itself (it reads it once
// anyway). The client certificate, key and tokenFile were checked by CheckReferencedFiles and
// stay files: client-go re-reads a token file every minute and reloads a certificate and key
// when they change, which long commands (up, logs -f) need for projected ServiceAccount tokens
// and short-lived certificates. context names the kubeconfig context for messages.
func InlineCAFile(cfg *rest.Config, context string) error {
	tls := &cfg.TLSClientConfig
	if tls.CAFile == "" || len(tls.CAData) > 0 {
		return nil
	}
	data, err := safefile.Read(tls.CAFile, MaxKubeconfigBytes)
	if err != nil {
		return fmt.Errorf("Kubernetes context %q: reading its certificate-authority: %w", context, err)
	}
	tls.CAData, tls.CAFile = data, ""
	return nil
}
