package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/devtool/devtool/internal/safefile"
)

// MaxDockerfileBytes caps a Dockerfile; MaxIgnoreFileBytes caps a .dockerignore.
const (
	MaxDockerfileBytes = 4 << 20
	MaxIgnoreFileBytes = 4 << 20
)

// ContentTagContext computes the content-hash tag of a build: a digest of every file of the context
// that .dockerignore keeps (path, type, permissions, content), the Dockerfile, the target, the build
// args and the secret ids (not the secrets' content). Two builds with the same tag produce the same
// image as far as devtool can tell, so a registry that already has the tag needs no build. It stops
// with ctx's error when ctx ends (between files, and within a large file): hashing a context of
// gigabytes must not outlive a Ctrl-C.
func ContentTagContext(ctx context.Context, req Request) (string, error) {
	dockerfile := req.dockerfilePath()
	patterns, err := ignorePatterns(req.Context, dockerfile)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	field := func(kind, s string) { fmt.Fprintf(h, "%s %d %s\n", kind, len(s), s) }
	field("v", "devtool-build-1")
	if err := hashTree(ctx, h, req.Context, patterns); err != nil {
		return "", err
	}
	df, err := safefile.Read(dockerfile, MaxDockerfileBytes)
	if err != nil {
		return "", fmt.Errorf("dockerfile: %w", err)
	}
	field("dockerfile", string(df))
	field("target", req.Target)
	for _, k := range sortedKeys(req.Args) {
		field("arg", k+"="+req.Args[k])
	}
	ids := make([]string, 0, len(req.Secrets))
	for _, s := range req.Secrets {
		ids = append(ids, s.ID)
	}
	sort.Strings(ids)
	for _, id := range ids {
		field("secret", id)
	}
	return hex.EncodeToString(h.Sum(nil))[:24], nil
}

// hashTree writes to h every file, folder and symlink of dir that patterns keep: path, type,
// permissions and content digest.
func hashTree(ctx context.Context, h io.Writer, dir string, patterns []string) error {
	field := func(kind, s string) { fmt.Fprintf(h, "%s %d %s\n", kind, len(s), s) }
	err := walkContext(dir, patterns, func(rel, abs string, d fs.DirEntry) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := info.Mode()
		switch {
		case mode.IsDir():
			field("dir", rel)
			field("mode", mode.String())
		case mode&fs.ModeSymlink != 0:
			target, err := os.Readlink(abs)
			if err != nil {
				return err
			}
			field("link", rel)
			field("target", target)
		case mode.IsRegular():
			field("file", rel)
			field("mode", mode.String())
			sum, err := fileDigest(ctx, abs)
			if err != nil {
				return err
			}
			field("sha256", sum)
		default: // sockets, devices: not sent by any builder
		}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("reading build context %s: %w", dir, err)
	}
	return nil
}

func fileDigest(ctx context.Context, path string) (string, error) {
	// safefile.Open: a file swapped for a FIFO after the walk saw it is refused, not waited on.
	f, err := safefile.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, ctxReader{ctx, f}); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ctxReader fails with ctx's error once ctx ends: hashing a file of gigabytes stops at once.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

var invalidNameChars = regexp.MustCompile(`[^a-z0-9]+`)

// sanitizeName makes s usable as one path component of an image repository.
func sanitizeName(s string) string {
	s = invalidNameChars.ReplaceAllString(strings.ToLower(s), "-")
	return strings.Trim(s, "-")
}

// ImageName is the name devtool gives the image of a service that has a build section and no image:
// <registry>/<namespace>/<name>-<service>:<tag>. name is the deployment's name (repository or folder name).
func ImageName(registry, namespace, name, service, tag string) (string, error) {
	if registry == "" || registry == "-" {
		return "", fmt.Errorf("service %s has a build section and no image, and there is no registry to push it to: "+
			"set DEVTOOL_REGISTRY=HOST[:PORT] or the context's registry", service)
	}
	if namespace == "" {
		return "", fmt.Errorf("service %s: no namespace for its image name", service)
	}
	repo := sanitizeName(name)
	if s := sanitizeName(service); s != "" && repo != "" {
		repo += "-" + s
	} else if s != "" {
		repo = s
	}
	if repo == "" {
		return "", fmt.Errorf("service %s: no name for its image", service)
	}
	ref := strings.TrimSuffix(registry, "/") + "/" + sanitizeName(namespace) + "/" + repo
	if tag != "" {
		ref += ":" + tag
	}
	return ref, nil
}
