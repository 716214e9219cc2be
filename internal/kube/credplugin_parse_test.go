package kube

import (
	"testing"
	"time"
)

// TestParseCredentialPluginTimeout: the variable's "0" must mean "no deadline" wherever the
// parsed value goes (LoadOptions treats 0 as the default, BoundCredentialPlugin <= 0 as none).
func TestParseCredentialPluginTimeout(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"", DefaultCredentialPluginTimeout, false},
		{"  ", DefaultCredentialPluginTimeout, false},
		{"45s", 45 * time.Second, false},
		{"0", -1, false},
		{"0s", -1, false},
		{"-5s", 0, true},
		{"soon", 0, true},
	} {
		got, err := ParseCredentialPluginTimeout(c.in)
		if (err != nil) != c.wantErr || got != c.want {
			t.Errorf("ParseCredentialPluginTimeout(%q) = %v, %v; want %v (error %v)", c.in, got, err, c.want, c.wantErr)
		}
		if c.in == "0" && (got >= 0) {
			t.Errorf("0 must read as no deadline (negative), got %v", got)
		}
	}
}
