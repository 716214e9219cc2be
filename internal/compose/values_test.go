package compose

import (
	"reflect"
	"testing"
)

func TestMemoryQuantity(t *testing.T) {
	for in, want := range map[string]string{
		"512M": "512Mi", "512m": "512Mi", "512mb": "512Mi", "1g": "1Gi", "1GB": "1Gi", "1.5g": "1536Mi",
		"1024k": "1Mi", "100": "100", "100b": "100", "2t": "2Ti", "512Mi": "512Mi", "1Gi": "1Gi", "0": "0",
	} {
		got, err := memoryQuantity(in)
		if err != nil || got != want {
			t.Errorf("memoryQuantity(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "lots", "-1g", "1x", "99999999999p"} {
		if got, err := memoryQuantity(in); err == nil {
			t.Errorf("memoryQuantity(%q) = %q, want an error", in, got)
		}
	}
}

func TestCPUQuantity(t *testing.T) {
	for in, want := range map[string]string{"0.5": "500m", "2": "2", "1.0": "1", "0.25": "250m", "1.5": "1500m", "500m": "500m", "0.001": "1m"} {
		got, err := cpuQuantity(in)
		if err != nil || got != want {
			t.Errorf("cpuQuantity(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-1", "half", "0.0001", "NaN", "0m", "1e9"} {
		if got, err := cpuQuantity(in); err == nil {
			t.Errorf("cpuQuantity(%q) = %q, want an error", in, got)
		}
	}
}

func TestSizeQuantity(t *testing.T) {
	for in, want := range map[string]string{"1Gi": "1Gi", "10GiB": "10Gi", "10G": "10Gi", "500Mi": "500Mi", "2gb": "2Gi"} {
		got, err := sizeQuantity(in)
		if err != nil || got != want {
			t.Errorf("sizeQuantity(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "big", "-1Gi"} {
		if got, err := sizeQuantity(in); err == nil {
			t.Errorf("sizeQuantity(%q) = %q, want an error", in, got)
		}
	}
}

func TestParsePort(t *testing.T) {
	tests := []struct {
		in     string
		want   []Port
		hostIP string
	}{
		{"80", []Port{{ContainerPort: 80, Protocol: "TCP"}}, ""},
		{"80:8080", []Port{{ContainerPort: 8080, HostPort: 80, Protocol: "TCP"}}, ""},
		{"8080/udp", []Port{{ContainerPort: 8080, Protocol: "UDP"}}, ""},
		{"80:8080/TCP", []Port{{ContainerPort: 8080, HostPort: 80, Protocol: "TCP"}}, ""},
		{"127.0.0.1:80:8080", []Port{{ContainerPort: 8080, HostPort: 80, Protocol: "TCP"}}, "127.0.0.1"},
		{"[::1]:80:8080", []Port{{ContainerPort: 8080, HostPort: 80, Protocol: "TCP"}}, "::1"},
		{":8080", []Port{{ContainerPort: 8080, Protocol: "TCP"}}, ""},
		{"127.0.0.1::8080", []Port{{ContainerPort: 8080, Protocol: "TCP"}}, "127.0.0.1"},
		{"3000-3002", []Port{{ContainerPort: 3000, Protocol: "TCP"}, {ContainerPort: 3001, Protocol: "TCP"}, {ContainerPort: 3002, Protocol: "TCP"}}, ""},
		{"8000-8001:3000-3001", []Port{{ContainerPort: 3000, HostPort: 8000, Protocol: "TCP"}, {ContainerPort: 3001, HostPort: 8001, Protocol: "TCP"}}, ""},
		{"9090-9091:8080", []Port{{ContainerPort: 8080, HostPort: 9090, Protocol: "TCP"}}, ""},
	}
	for _, tt := range tests {
		got, ip, err := parsePort(tt.in)
		if err != nil || !reflect.DeepEqual(got, tt.want) || ip != tt.hostIP {
			t.Errorf("parsePort(%q) = %+v, %q, %v; want %+v, %q", tt.in, got, ip, err, tt.want, tt.hostIP)
		}
	}
	for _, in := range []string{"", "0", "65536", "http", "80:", "1:2:3:4", "3005-3000", "1-2000", "80/sctp", "[::1:80:80", "a:80"} {
		if got, _, err := parsePort(in); err == nil {
			t.Errorf("parsePort(%q) = %+v, want an error", in, got)
		}
	}
}
