package install

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// RunnerFiles are the files the pipeline runner's image is made of, all from the machine that
// installs (nothing is pulled): static Linux binaries of devtool, kubectl, helm (optional) and
// busybox (the shell and the usual tools of deploy commands), and the system's CA bundle (optional).
type RunnerFiles struct {
	Devtool, Kubectl, Helm, Busybox, CACerts string
}

// busyboxApplets get a link to /bin/busybox in the runner image: what deploy commands commonly use.
var busyboxApplets = []string{
	"sh", "ash", "awk", "base64", "basename", "cat", "chmod", "cp", "cut", "date", "dirname", "echo", "env",
	"expr", "false", "find", "grep", "gunzip", "gzip", "head", "hostname", "id", "ln", "ls", "md5sum", "mkdir",
	"mktemp", "mv", "nc", "nslookup", "printf", "ps", "pwd", "readlink", "realpath", "rm", "rmdir", "sed", "seq",
	"sha256sum", "sleep", "sort", "stat", "tail", "tar", "tee", "test", "[", "timeout", "touch", "tr", "true",
	"uname", "uniq", "wc", "wget", "which", "xargs", "yes",
}

type imageFile struct {
	path, src string // src: a file to copy, or "" with data
	data      []byte
	mode      int64
	link      string // a symbolic link's target
}

// Scripts of the runner image. bash is busybox's ash (deploy commands run with bash -c by default):
// Debian's bash would need its shared libraries. git is devtool's go-git (clone and rev-parse).
const (
	bashScript = "#!/bin/sh\n# bash in devtool's pipeline runner is busybox ash (bash's common extensions, not all of them)\nexec /bin/busybox ash \"$@\"\n"
	gitScript  = "#!/bin/sh\n# git in devtool's pipeline runner: go-git inside devtool, clone and rev-parse only\nexec /usr/local/bin/devtool pipeline git \"$@\"\n"
	passwd     = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/work:/bin/sh\n"
	group      = "root:x:0:\nnogroup:x:65534:\n"
)

// PushRunnerImage makes the runner image — three layers: busybox and the system files, the tools
// (kubectl, helm), devtool — and pushes it as <repo>:<hash of every file> unless the registry has
// it. Every binary must be a static Linux executable of this machine's architecture.
func PushRunnerImage(ctx context.Context, f RunnerFiles, repo string) (string, error) {
	if f.Devtool == "" || f.Kubectl == "" || f.Busybox == "" {
		return "", errors.New("the runner image needs devtool, kubectl and busybox (static Linux binaries)")
	}
	for what, p := range map[string]string{"devtool": f.Devtool, "kubectl": f.Kubectl, "busybox": f.Busybox, "helm": f.Helm} {
		if p == "" {
			continue
		}
		if err := checkStatic(p); err != nil {
			return "", fmt.Errorf("runner image: %s %s: %w", what, p, err)
		}
	}
	base := []imageFile{
		{path: "bin/busybox", src: f.Busybox, mode: 0o755},
		{path: "bin/bash", data: []byte(bashScript), mode: 0o755},
		{path: "etc/passwd", data: []byte(passwd), mode: 0o644},
		{path: "etc/group", data: []byte(group), mode: 0o644},
		{path: "work/", mode: 0o1777},
		{path: "tmp/", mode: 0o1777},
	}
	for _, a := range busyboxApplets {
		base = append(base, imageFile{path: "bin/" + a, link: "busybox"})
	}
	if f.CACerts != "" {
		base = append(base, imageFile{path: "etc/ssl/certs/ca-certificates.crt", src: f.CACerts, mode: 0o644})
	}
	tools := []imageFile{{path: "usr/local/bin/kubectl", src: f.Kubectl, mode: 0o755}}
	if f.Helm != "" {
		tools = append(tools, imageFile{path: "usr/local/bin/helm", src: f.Helm, mode: 0o755})
	}
	own := []imageFile{
		{path: "usr/local/bin/devtool", src: f.Devtool, mode: 0o755},
		{path: "usr/local/bin/git", data: []byte(gitScript), mode: 0o755},
	}
	h := sha256.New()
	for _, l := range [][]imageFile{base, tools, own} {
		for _, e := range l {
			fmt.Fprintf(h, "%s %o %s\n", e.path, e.mode, e.link)
			h.Write(e.data)
			if e.src != "" {
				if err := hashFile(h, e.src); err != nil {
					return "", err
				}
			}
		}
	}
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
	tmp, err := os.MkdirTemp("", "devtool-runner-image-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	img := empty.Image
	for i, l := range [][]imageFile{base, tools, own} {
		p := filepath.Join(tmp, fmt.Sprintf("layer%d.tar", i))
		if err := writeLayer(p, l); err != nil {
			return "", err
		}
		layer, err := tarball.LayerFromFile(p, tarball.WithCompressionLevel(gzip.BestSpeed))
		if err != nil {
			return "", err
		}
		if img, err = mutate.AppendLayers(img, layer); err != nil {
			return "", err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return "", err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = runtime.GOARCH, "linux"
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cf.Config = v1.Config{
		Entrypoint: []string{"/usr/local/bin/devtool"}, Cmd: []string{"pipeline", "runner"},
		Env: []string{"PATH=/usr/local/bin:/bin", "HOME=/work"}, User: "65534:65534", WorkingDir: "/work",
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return "", err
	}
	if err := remote.Write(tag, img, remote.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("pushing %s: %w", ref, err)
	}
	return ref, nil
}

func hashFile(h io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(h, f)
	return err
}

// writeLayer writes a layer's tar (files sorted, times zero, root-owned) to path.
func writeLayer(path string, files []imageFile) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	defer out.Close()
	tw := tar.NewWriter(out)
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
	dirs := map[string]bool{}
	mkdirs := func(p string) error {
		var parts []string
		for d := filepath.Dir(strings.TrimSuffix(p, "/")); d != "." && d != "/"; d = filepath.Dir(d) {
			parts = append([]string{d}, parts...)
		}
		for _, d := range parts {
			if dirs[d] {
				continue
			}
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Name: d + "/", Mode: 0o755, Typeflag: tar.TypeDir, ModTime: time.Unix(0, 0)}); err != nil {
				return err
			}
		}
		return nil
	}
	for _, e := range files {
		if err := mkdirs(e.path); err != nil {
			return err
		}
		hdr := &tar.Header{Name: e.path, Mode: e.mode, ModTime: time.Unix(0, 0)}
		switch {
		case strings.HasSuffix(e.path, "/"):
			hdr.Typeflag = tar.TypeDir
			dirs[strings.TrimSuffix(e.path, "/")] = true
		case e.link != "":
			hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, e.link, 0o777
		case e.src != "":
			st, err := os.Stat(e.src)
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size()
		default:
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		if e.src == "" {
			if _, err := tw.Write(e.data); err != nil {
				return err
			}
			continue
		}
		src, err := os.Open(e.src)
		if err != nil {
			return err
		}
		_, err = io.CopyN(tw, src, hdr.Size)
		src.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", e.src, err)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return out.Close()
}

var elfMachine = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// checkStatic refuses a file that is not a static Linux executable of this architecture: the
// runner image has no shared libraries.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("not a Linux executable: %v", err)
	}
	defer f.Close()
	if want, ok := elfMachine[runtime.GOARCH]; ok && f.Machine != want {
		return fmt.Errorf("built for %s, the cluster runs %s", f.Machine, runtime.GOARCH)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("dynamically linked: the runner image has no shared libraries (build it with CGO_ENABLED=0, or install busybox-static)")
		}
	}
	return nil
}
