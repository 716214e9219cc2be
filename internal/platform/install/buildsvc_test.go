package install

import (
	"archive/tar"
	"context"
	"io"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// A dynamically linked binary comes with its interpreter and libraries (read from its ELF
// dynamic section); a static one alone.
func TestBinaryWithLibs(t *testing.T) {
	runc := "/usr/sbin/runc"
	if _, err := os.Stat(runc); err != nil {
		t.Skip("runc not installed")
	}
	files, err := BinaryWithLibs(runc, "usr/bin/runc")
	if err != nil {
		t.Fatal(err)
	}
	paths := map[string]bool{}
	for _, f := range files {
		paths[f.Path] = true
	}
	if !paths["usr/bin/runc"] || !paths["/lib64/ld-linux-x86-64.so.2"] {
		t.Errorf("runc's files: %v", paths)
	}
	found := 0
	for p := range paths {
		if strings.Contains(p, "libseccomp.so") || strings.Contains(p, "libc.so") {
			found++
		}
	}
	if found != 2 {
		t.Errorf("runc's libraries (libseccomp, libc) missing: %v", paths)
	}
	self, _ := os.Executable() // a Go test binary: static here (CGO off) or dynamic; never an error
	if _, err := BinaryWithLibs(self, "x"); err != nil {
		t.Errorf("the test binary: %v", err)
	}
	if _, err := BinaryWithLibs("/nonexistent", "x"); err == nil {
		t.Error("a missing binary")
	}
}

func TestPushFilesMakesFolders(t *testing.T) {
	reg := httptest.NewServer(registry.New())
	defer reg.Close()
	repo := strings.TrimPrefix(reg.URL, "http://") + "/ns/img"
	ref, err := PushFiles(context.Background(), repo, []ImageFile{
		{Path: "usr/bin/a", Mode: 0o755, Data: []byte("a")}, {Path: "/usr/bin/b", Mode: 0o755, Data: []byte("b")}, {Path: "etc/x", Mode: 0o644, Data: []byte("x")},
	}, v1.Config{Entrypoint: []string{"/usr/bin/a"}})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := name.ParseReference(ref, name.Insecure)
	img, err := remote.Image(r)
	if err != nil {
		t.Fatal(err)
	}
	ls, _ := img.Layers()
	rc, _ := ls[0].Uncompressed()
	defer rc.Close()
	tr := tar.NewReader(rc)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	if got := strings.Join(names, " "); got != "etc/ etc/x usr/ usr/bin/ usr/bin/a usr/bin/b" {
		t.Errorf("layer: %s", got)
	}
}

func TestBuildServiceWorkloads(t *testing.T) {
	objs := buildServiceWorkloads("devtool-system", BuildService{}, "bk:1", "reg:1", "platform:1", "127.0.0.1:31500")
	var bk, reg *appsv1.StatefulSet
	var toml string
	for _, o := range objs {
		switch x := o.(type) {
		case *appsv1.StatefulSet:
			if x.Name == BuildKitName {
				bk = x
			} else {
				reg = x
			}
		case *corev1.ConfigMap:
			if x.Name == BuildKitName {
				toml = x.Data["buildkitd.toml"]
			}
		}
	}
	if bk == nil || reg == nil {
		t.Fatal("missing StatefulSets")
	}
	for _, want := range []string{`[registry."127.0.0.1:31500"]`, `ca = "/tls/ca.crt"`, `networkMode = "host"`} {
		if !strings.Contains(toml, want) {
			t.Errorf("buildkitd.toml lacks %s:\n%s", want, toml)
		}
	}
	ps := bk.Spec.Template.Spec
	if *ps.AutomountServiceAccountToken || len(ps.Containers) != 2 || ps.Containers[1].Args[1] != "127.0.0.1:31500=devtool-registry.devtool-system.svc.cluster.local:5000" {
		t.Errorf("BuildKit pod: token %v, containers %d, forward %v", *ps.AutomountServiceAccountToken, len(ps.Containers), ps.Containers[len(ps.Containers)-1].Args)
	}
	if len(bk.Spec.VolumeClaimTemplates) != 1 || len(reg.Spec.VolumeClaimTemplates) != 1 {
		t.Error("BuildKit's cache and the registry's data must be on claims")
	}
	rs := reg.Spec.Template.Spec
	if *rs.AutomountServiceAccountToken {
		t.Error("the registry pod mounts a token in every container")
	}
	for _, c := range rs.Containers {
		hasToken := false
		for _, m := range c.VolumeMounts {
			hasToken = hasToken || m.Name == "token"
		}
		if hasToken != (c.Name == "proxy") {
			t.Errorf("container %s: token mounted %v", c.Name, hasToken)
		}
		if c.SecurityContext == nil || c.SecurityContext.RunAsNonRoot == nil || !*c.SecurityContext.RunAsNonRoot {
			t.Errorf("registry container %s runs as root", c.Name)
		}
	}
	// A registry with a real name needs no forwarder.
	objs = buildServiceWorkloads("devtool-system", BuildService{}, "bk:1", "reg:1", "platform:1", "registry.example.com")
	for _, o := range objs {
		if s, ok := o.(*appsv1.StatefulSet); ok && s.Name == BuildKitName && len(s.Spec.Template.Spec.Containers) != 1 {
			t.Error("a forwarder for a registry that is not on loopback")
		}
	}
}

func TestMembershipRolesGrantPushes(t *testing.T) {
	for _, r := range membershipRoles() {
		if r.Name != "devtool-aggregate-images" {
			continue
		}
		if r.Labels["devtool.dev/aggregate-to-owner"] != "true" || r.Labels["devtool.dev/aggregate-to-editor"] != "true" || r.Labels["devtool.dev/aggregate-to-viewer"] != "" {
			t.Errorf("labels %v", r.Labels)
		}
		if len(r.Rules) != 1 || r.Rules[0].Resources[0] != "images" || strings.Join(r.Rules[0].Verbs, ",") != "create,delete" {
			t.Errorf("rules %+v", r.Rules)
		}
		return
	}
	t.Fatal("no role grants pushes")
}

func TestLoopbackForwards(t *testing.T) {
	got := strings.Join(LoopbackForwards("devtool-system", "tcp://127.0.0.1:31234", "127.0.0.1:31500"), " ")
	if got != "127.0.0.1:31234=devtool-buildkit.devtool-system.svc.cluster.local:1234 127.0.0.1:31500=devtool-registry.devtool-system.svc.cluster.local:5000" {
		t.Errorf("%s", got)
	}
	if r := LoopbackForwards("ns", "tcp://buildkit.example.com:443", "registry.example.com"); len(r) != 0 {
		t.Errorf("rules for addresses off loopback: %v", r)
	}
}

func TestBuildKitHosts(t *testing.T) {
	h := buildKitHosts("ns", "tcp://buildkit.example.com:443")
	if strings.Join(h, " ") != "127.0.0.1 localhost devtool-buildkit devtool-buildkit.ns devtool-buildkit.ns.svc devtool-buildkit.ns.svc.cluster.local buildkit.example.com" {
		t.Errorf("%v", h)
	}
	if len(buildKitHosts("ns", "tcp://127.0.0.1:31234")) != 6 {
		t.Error("127.0.0.1 twice")
	}
}
