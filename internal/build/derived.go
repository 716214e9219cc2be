package build

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// HostFolder is a Compose host volume: the host folder Source (absolute) added to the image at the
// container path Target (absolute). Source may also be a single regular file (a bind mount of one
// configuration file, as supabase's vector.yml): it is added at Target itself. A link is followed;
// the caller has checked where it leads (internal/projectpath).
type HostFolder struct {
	Source, Target string
}

// DerivedImage makes the image a deploy runs for a service with host volumes — the spec's "added at
// deployment time": the base image plus one layer holding each host folder's files at its container
// path. No builder is involved: the base is read from its registry and the result is pushed to repo
// (for example ImageName(registry, namespace, name, service, "")) with a content-hash tag
// "vol-<hash of the base digest and the folders>", so an unchanged folder is not pushed again.
// It returns the derived image's reference.
func DerivedImage(ctx context.Context, base, repo string, folders []HostFolder) (string, error) {
	if len(folders) == 0 {
		return base, nil
	}
	for _, f := range folders {
		if !filepath.IsAbs(f.Source) || !path.IsAbs(f.Target) {
			return "", fmt.Errorf("host volume %s:%s: both paths must be absolute", f.Source, f.Target)
		}
		if st, err := os.Stat(f.Source); err != nil {
			return "", fmt.Errorf("host volume: %w", err)
		} else if !st.IsDir() && !st.Mode().IsRegular() {
			return "", fmt.Errorf("host volume %s is neither a folder nor a regular file (%s)", f.Source, st.Mode().Type())
		}
	}
	baseRef, err := parseRef(base)
	if err != nil {
		return "", err
	}
	ropts := registryOptions(ctx) // credential helpers and registry answers have deadlines
	img, err := remote.Image(baseRef, ropts...)
	if err != nil {
		return "", fmt.Errorf("reading the base image %s: %w", base, err)
	}
	baseDigest, err := img.Digest()
	if err != nil {
		return "", err
	}
	sorted := append([]HostFolder(nil), folders...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Target < sorted[j].Target })
	h := sha256.New()
	fmt.Fprintf(h, "devtool-derived-1\nbase %s\n", baseDigest)
	for _, f := range sorted {
		if err := hashHostVolume(ctx, h, f); err != nil {
			return "", err
		}
	}
	ref := strings.TrimSuffix(repo, "/") + ":vol-" + hex.EncodeToString(h.Sum(nil))[:24]
	if ok, err := RemoteExists(ctx, ref); err == nil && ok {
		return ref, nil
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(writeFoldersTar(pw, sorted)) }()
		return pr, nil
	})
	if err != nil {
		return "", err
	}
	derived, err := mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		CreatedBy: "devtool: host volumes " + describeFolders(sorted), Comment: "devtool deploy"}})
	if err != nil {
		return "", err
	}
	out, err := parseRef(ref)
	if err != nil {
		return "", err
	}
	if err := remote.Write(out, derived, ropts...); err != nil {
		return "", fmt.Errorf("pushing %s: %w", ref, err)
	}
	return ref, nil
}

// hashHostVolume adds one host volume to the derived image's tag: a folder's tree, or a single
// file's mode and content.
func hashHostVolume(ctx context.Context, h io.Writer, f HostFolder) error {
	st, err := os.Stat(f.Source)
	if err != nil {
		return fmt.Errorf("host volume: %w", err)
	}
	if st.IsDir() {
		fmt.Fprintf(h, "folder %q %q\n", f.Source, f.Target)
		return hashTree(ctx, h, f.Source, nil)
	}
	sum, err := fileDigest(ctx, f.Source)
	if err != nil {
		return err
	}
	fmt.Fprintf(h, "file %q %q %s %s\n", f.Source, f.Target, st.Mode(), sum)
	return nil
}

func parseRef(ref string) (name.Reference, error) {
	var opts []name.Option
	if isLoopbackRegistry(registryOf(ref)) {
		opts = append(opts, name.Insecure)
	}
	return name.ParseReference(ref, opts...)
}

func describeFolders(fs []HostFolder) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = f.Source + ":" + f.Target
	}
	return strings.Join(parts, " ")
}

// writeFoldersTar writes each folder's files under its target path (a single file at its target
// path), parents included, owned by root.
func writeFoldersTar(w io.Writer, folders []HostFolder) error {
	tw := tar.NewWriter(w)
	seen := map[string]bool{}
	var parents func(p string) error
	parents = func(p string) error {
		if p == "." || p == "" || seen[p] {
			return nil
		}
		if err := parents(path.Dir(p)); err != nil {
			return err
		}
		seen[p] = true
		return tw.WriteHeader(&tar.Header{Name: p + "/", Typeflag: tar.TypeDir, Mode: 0o755})
	}
	for _, f := range folders {
		target := strings.TrimPrefix(path.Clean(f.Target), "/")
		st, err := os.Stat(f.Source)
		if err != nil {
			return fmt.Errorf("host volume: %w", err)
		}
		if !st.IsDir() {
			if err := parents(path.Dir(target)); err != nil {
				return err
			}
			if err := addFile(tw, f.Source, target, st); err != nil {
				return err
			}
			continue
		}
		if err := parents(target); err != nil {
			return err
		}
		err = walkContext(f.Source, nil, func(rel, abs string, de fs.DirEntry) error {
			hdr, info, err := entryHeader(abs, de)
			if hdr == nil || err != nil {
				return err
			}
			hdr.Name = path.Join(target, rel)
			if hdr.Typeflag == tar.TypeDir {
				if seen[hdr.Name] {
					return nil
				}
				seen[hdr.Name] = true
				hdr.Name += "/"
			}
			return addToTar(tw, hdr, abs, info)
		})
		if err != nil {
			return err
		}
	}
	return tw.Close()
}

// addFile writes the regular file src (st: its os.Stat, links followed) at name, owned by root.
func addFile(tw *tar.Writer, src, name string, st fs.FileInfo) error {
	if !st.Mode().IsRegular() {
		return fmt.Errorf("host volume %s is neither a folder nor a regular file (%s)", src, st.Mode().Type())
	}
	hdr, err := tar.FileInfoHeader(st, "")
	if err != nil {
		return err
	}
	hdr.Name = name
	hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
	return addToTar(tw, hdr, src, st)
}
