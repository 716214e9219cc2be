package runspec

import (
	"strings"
	"testing"
)

func TestCheckSourceURL(t *testing.T) {
	for raw, ok := range map[string]bool{
		"https://github.com/acme/shop/pull/42": true, "http://gitea.local/acme/shop/pulls/3": true,
		"ftp://github.com/x": false, "https:///pull/1": false, "github.com/acme/shop/pull/1": false, "%zz": false,
		"https://github.com/" + strings.Repeat("a", 2048): false,
	} {
		if err := CheckSourceURL(raw); (err == nil) != ok {
			t.Errorf("%.40q: %v, want ok %v", raw, err, ok)
		}
	}
}
