package compose

import (
	"reflect"
	"strings"
	"testing"
)

// Issue 11: Compose files that Docker Compose accepts. Each table maps an input to the model it
// must give, or the warning or error it must report.

func TestHostPathRule(t *testing.T) {
	for _, tc := range []struct {
		volume string
		want   VolumeMount
	}{
		{".psqlrc:/root/.psqlrc:ro", VolumeMount{Kind: VolumeHost, Source: "DIR/.psqlrc", Target: "/root/.psqlrc", ReadOnly: true}},
		{".:/app:cached", VolumeMount{Kind: VolumeHost, Source: "DIR", Target: "/app"}},
		{".:/app:delegated", VolumeMount{Kind: VolumeHost, Source: "DIR", Target: "/app"}},
		{"./src:/src:rw", VolumeMount{Kind: VolumeHost, Source: "DIR/src", Target: "/src"}},
		{"~/x:/x", VolumeMount{Kind: VolumeHost, Source: "/home/dev/x", Target: "/x"}},
		{"~:/h:z", VolumeMount{Kind: VolumeHost, Source: "/home/dev", Target: "/h"}},
		{"../x:/x:Z", VolumeMount{Kind: VolumeHost, Source: "PARENT/x", Target: "/x"}},
		{"/etc/hosts:/h:ro,z", VolumeMount{Kind: VolumeHost, Source: "/etc/hosts", Target: "/h", ReadOnly: true}},
		{".env.local:/app/.env", VolumeMount{Kind: VolumeHost, Source: "DIR/.env.local", Target: "/app/.env"}},
		{"data:/data:ro", VolumeMount{Kind: VolumeNamed, Source: "data", Target: "/data", ReadOnly: true}},
		{"data:/data:nocopy", VolumeMount{Kind: VolumeNamed, Source: "data", Target: "/data"}},
		{"/scratch", VolumeMount{Kind: VolumeAnonymous, Target: "/scratch"}},
		{"{type: bind, source: ., target: /app, read_only: true, consistency: cached, bind: {create_host_path: true}}",
			VolumeMount{Kind: VolumeHost, Source: "DIR", Target: "/app", ReadOnly: true}},
		{"{type: volume, source: data, target: /d, volume: {nocopy: true}}", VolumeMount{Kind: VolumeNamed, Source: "data", Target: "/d"}},
		{"{type: volume, target: /anon}", VolumeMount{Kind: VolumeAnonymous, Target: "/anon"}},
		{"{type: tmpfs, target: /run, tmpfs: {size: 64m}}", VolumeMount{Kind: VolumeTmpfs, Target: "/run", Size: "64Mi"}},
	} {
		t.Run(tc.volume, func(t *testing.T) {
			item := `"` + tc.volume + `"`
			if strings.HasPrefix(tc.volume, "{") {
				item = tc.volume
			}
			p, err := loadYAML(t, "services:\n  web:\n    image: x\n    volumes:\n      - "+item+"\nvolumes:\n  data: {}\n", nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Warnings) > 0 {
				t.Errorf("warnings: %q", p.Warnings)
			}
			got := p.Service("web").Volumes[0]
			got.Pos = Position{}
			want := tc.want
			want.Source = strings.NewReplacer("PARENT", parentDir(p.WorkingDir), "DIR", p.WorkingDir).Replace(want.Source)
			if got != want {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
}

func parentDir(dir string) string { return dir[:strings.LastIndex(dir, "/")] }

func TestTmpfsField(t *testing.T) {
	s := mustService(t, "services:\n  web:\n    image: x\n    tmpfs: [/run, \"/tmp:size=100m,mode=1777\"]\n")
	var got []VolumeMount
	for _, v := range s.Volumes {
		v.Pos = Position{}
		got = append(got, v)
	}
	want := []VolumeMount{{Kind: VolumeTmpfs, Target: "/run"}, {Kind: VolumeTmpfs, Target: "/tmp", Size: "100Mi"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v", got)
	}
}
