package build

import "testing"

func TestValidateBuilderAddress(t *testing.T) {
	for _, ok := range []string{"docker", "tcp://127.0.0.1:1234", "127.0.0.1:1234", "unix:///run/buildkit/buildkitd.sock"} {
		if err := ValidateBuilderAddress(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"docker-container://buildkitd", "kube-pod://p", "ssh://me@h", "tcp://", "tcp://host", "unix://rel", "http://h:1", "ftp://x"} {
		if err := ValidateBuilderAddress(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
