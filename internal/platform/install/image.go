package install

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// PushImage makes the platform's image — the static binary at binPath as /devtool-platform on an
// empty base, run as nobody — and pushes it as <repo>:<hash of the binary> unless the registry has
// it. No builder is needed. A registry on loopback is spoken to over plain HTTP.
func PushImage(ctx context.Context, binPath, repo string) (string, error) {
	bin, err := os.ReadFile(binPath)
	if err != nil {
		return "", fmt.Errorf("reading the platform binary: %w", err)
	}
	return PushFiles(ctx, repo, []ImageFile{{Path: "devtool-platform", Mode: 0o755, Data: bin}},
		v1.Config{Entrypoint: []string{"/devtool-platform"}, Cmd: []string{"serve"}, User: "65534:65534"})
}

// ImageFile is one file of an image made by PushFiles: its path in the image (relative to /) and
// its content. Folders are made as needed (0755, owned by root); of two files with one path, the
// first given is kept.
type ImageFile struct {
	Path string
	Mode int64
	Data []byte
}

// PushFiles makes an image of one layer holding files on an empty base, with config, and pushes it
// as <repo>:<hash of the layer and config> unless the registry has that tag already. No builder is
// needed. A registry on loopback is spoken to over plain HTTP.
func PushFiles(ctx context.Context, repo string, files []ImageFile, config v1.Config) (string, error) {
	files = append([]ImageFile(nil), files...)
	for i := range files {
		files[i].Path = path.Clean(strings.TrimPrefix(files[i].Path, "/"))
	}
	sort.SliceStable(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	var uniq []ImageFile
	for _, f := range files {
		if len(uniq) == 0 || f.Path != uniq[len(uniq)-1].Path { // the first of a path wins
			uniq = append(uniq, f)
		}
	}
	files = uniq
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range files {
		p := f.Path
		var parents []string
		for d := path.Dir(p); d != "." && !dirs[d]; d = path.Dir(d) {
			parents = append(parents, d)
		}
		for i := len(parents) - 1; i >= 0; i-- {
			dirs[parents[i]] = true
			if err := tw.WriteHeader(&tar.Header{Name: parents[i] + "/", Mode: 0o755, Typeflag: tar.TypeDir}); err != nil {
				return "", err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Name: p, Mode: f.Mode, Size: int64(len(f.Data)), Typeflag: tar.TypeReg}); err != nil {
			return "", err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write(buf.Bytes())
	fmt.Fprintf(h, "\n%q %q %q %q %q", config.Entrypoint, config.Cmd, config.User, config.Env, config.WorkingDir)
	ref := repo + ":" + hex.EncodeToString(h.Sum(nil))[:24]
	var opts []name.Option
	if loopbackRegistry(repo) {
		opts = append(opts, name.Insecure)
	}
	tag, err := name.ParseReference(ref, opts...)
	if err != nil {
		return "", fmt.Errorf("image name %s: %w", ref, err)
	}
	if _, err := remote.Head(tag, remote.WithContext(ctx)); err == nil {
		return ref, nil
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		return "", err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return "", err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return "", err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = runtime.GOARCH, "linux"
	cf.Config = config
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return "", err
	}
	if err := remote.Write(tag, img, remote.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("pushing %s: %w", ref, err)
	}
	return ref, nil
}

// libDirs are where the shared libraries of a dynamically linked binary are looked up (Debian's
// multiarch folders first), as ld.so does without an ld.so.cache.
var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
	"/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}

// BinaryWithLibs returns the ELF binary at src as the image file dst, with, when it is dynamically
// linked, its program interpreter and every shared library it needs (transitively, read from the
// ELF dynamic section, never by running ldd) at the paths the interpreter looks for them. A static
// binary comes alone.
func BinaryWithLibs(src, dst string) ([]ImageFile, error) {
	data, err := os.ReadFile(src)
	if err != nil {
		return nil, err
	}
	out := []ImageFile{{Path: dst, Mode: 0o755, Data: data}}
	seen := map[string]bool{}
	var walk func(file string) error
	walk = func(file string) error {
		f, err := elf.Open(file)
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		defer f.Close()
		for _, p := range f.Progs {
			if p.Type != elf.PT_INTERP {
				continue
			}
			b, err := io.ReadAll(p.Open())
			if err != nil {
				return fmt.Errorf("%s: reading its interpreter: %w", file, err)
			}
			interp := strings.TrimRight(string(b), "\x00")
			if !seen[interp] {
				seen[interp] = true
				d, err := os.ReadFile(interp)
				if err != nil {
					return fmt.Errorf("%s needs its interpreter %s: %w", file, interp, err)
				}
				out = append(out, ImageFile{Path: interp, Mode: 0o755, Data: d})
			}
		}
		libs, err := f.ImportedLibraries()
		if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
			return fmt.Errorf("%s: %w", file, err)
		}
		for _, lib := range libs {
			if seen[lib] {
				continue
			}
			seen[lib] = true
			found := ""
			for _, d := range libDirs {
				if _, err := os.Stat(filepath.Join(d, lib)); err == nil {
					found = filepath.Join(d, lib)
					break
				}
			}
			if found == "" {
				return fmt.Errorf("%s needs %s, found in none of %s", file, lib, strings.Join(libDirs, ", "))
			}
			d, err := os.ReadFile(found) // follows the link: the image holds the file at the name asked for
			if err != nil {
				return err
			}
			out = append(out, ImageFile{Path: found, Mode: 0o755, Data: d})
			if err := walk(found); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(src); err != nil {
		return nil, err
	}
	return out, nil
}

func loopbackRegistry(repo string) bool {
	host, _, _ := strings.Cut(repo, "/")
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
