package build

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// ValidateBuilderAddress checks a context's builder can be dialled by this build of devtool:
// "docker" (the local daemon), tcp://HOST:PORT (or HOST:PORT) or unix:///absolute/path.
// Schemes that need connection helpers this build does not carry (docker-container://,
// kube-pod://, ssh://, ...) are refused here, when the context is saved, not at the first build.
func ValidateBuilderAddress(b string) error {
	if b == "docker" {
		return nil
	}
	if !strings.Contains(b, "://") {
		b = NormalizeBuildKitHost(b)
	}
	u, err := url.Parse(b)
	if err != nil {
		return fmt.Errorf("builder %q is not an address: %v", b, err)
	}
	switch u.Scheme {
	case "tcp":
		host, port, err := net.SplitHostPort(u.Host)
		if err != nil || host == "" || port == "" || u.Path != "" && u.Path != "/" {
			return fmt.Errorf("builder %q: tcp addresses are tcp://HOST:PORT", b)
		}
		return nil
	case "unix":
		if u.Host != "" || !strings.HasPrefix(u.Path, "/") || len(u.Path) < 2 {
			return fmt.Errorf("builder %q: unix sockets are unix:///absolute/path", b)
		}
		return nil
	default:
		return fmt.Errorf("builder %q: scheme %q cannot be dialled by devtool (use docker, tcp://HOST:PORT or unix:///path)", b, u.Scheme)
	}
}
