package testcluster

import (
	"regexp"
	"testing"
)

func TestNamespaceNameIsValidDNSLabel(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	for _, in := range []string{"TestX", "TestDeploy/sub_test#01", "Test" + string(make([]byte, 100)), "Ünïcode/Name"} {
		got := namespaceName(in)
		if len(got) > 63 || !valid.MatchString(got) {
			t.Errorf("namespaceName(%q) = %q: not a DNS label", in, got)
		}
	}
	if namespaceName("TestA") == namespaceName("TestA") {
		t.Error("two namespaces for the same test name must differ")
	}
}
