package compose

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/devtool/devtool/internal/yamlsrc"
)

// duration reads a Compose duration ("10s", "1m30s", "1h"). A bare number is seconds only
// where the spec allows it (stop_grace_period).
func (l *loader) duration(n *yaml.Node, field string, bareSeconds bool) (time.Duration, bool) {
	s, ok := l.Str(n, field)
	if !ok {
		return 0, false
	}
	s = strings.TrimSpace(s)
	if secs, err := strconv.ParseInt(s, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		switch {
		case secs != 0 && !bareSeconds:
			l.Errorf(n, field, "expected a duration with a unit such as 10s or 1m30s, found %q", s)
			return 0, false
		case strings.HasPrefix(s, "-"):
			l.Errorf(n, field, "expected a positive number of seconds, found %s", s)
			return 0, false
		case err != nil || secs > math.MaxInt32:
			l.Errorf(n, field, "%s seconds is too large (the most is %d)", s, math.MaxInt32)
			return 0, false
		}
		return time.Duration(secs) * time.Second, true
	}
	d, err := time.ParseDuration(s)
	if err != nil && durationSyntax.MatchString(s) {
		// Well written but beyond what a duration holds (about 290 years).
		l.Errorf(n, field, "%s is too large", yamlsrc.Quote(s))
		return 0, false
	}
	if err != nil || d < 0 {
		l.Errorf(n, field, "expected a duration such as 10s, 500ms or 1m30s, found %q", s)
		return 0, false
	}
	return d, true
}

// durationSyntax is what time.ParseDuration accepts when the value fits.
var durationSyntax = regexp.MustCompile(`^\+?([0-9]*(\.[0-9]*)?(ns|us|µs|μs|ms|s|m|h))+$`)

// composeBytes is Docker's memory notation: a number and an optional unit b, k, m, g, t, p
// (with an optional trailing b), case-insensitive, all powers of 1024.
var composeBytes = regexp.MustCompile(`(?i)^([0-9]+(?:\.[0-9]+)?)\s*([kmgtp]?)b?$`)

// memoryQuantity converts a memory value to a Kubernetes quantity. Compose units are binary
// ("512M" and "512m" are 512 MiB, as in docker compose), so they become Ki/Mi/Gi; values
// already written as Kubernetes binary quantities ("512Mi") are kept.
func memoryQuantity(s string) (string, error) {
	s = strings.TrimSpace(s)
	if m := composeBytes.FindStringSubmatch(s); m != nil {
		num, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			return "", err
		}
		shift := strings.Index("kmgtp", strings.ToLower(m[2])) + 1
		if m[2] == "" {
			shift = 0
		}
		bytes := num * math.Pow(1024, float64(shift))
		if bytes >= math.MaxInt64/2 {
			return "", fmt.Errorf("%s is too large", yamlsrc.Quote(s))
		}
		return formatBytes(int64(math.Round(bytes))), nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() < 0 {
		return "", fmt.Errorf("expected a memory size such as 512M, 1g or 512Mi, found %s", yamlsrc.Quote(s))
	}
	return q.String(), nil
}

func formatBytes(b int64) string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if b >= u.size && b%u.size == 0 {
			return strconv.FormatInt(b/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(b, 10)
}

// cpuQuantity converts a CPU value ("0.5", "2", "500m") to a Kubernetes quantity: whole
// CPUs as a number, fractions in millicores.
func cpuQuantity(s string) (string, error) {
	s = strings.TrimSpace(s)
	bad := fmt.Errorf("expected a number of CPUs such as 0.5, 2 or 500m, found %s", yamlsrc.Quote(s))
	if m, ok := strings.CutSuffix(s, "m"); ok {
		if v, err := strconv.ParseUint(m, 10, 32); err == nil && v > 0 {
			return s, nil
		}
		return "", bad
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || f <= 0 || f > 1e6 {
		return "", bad
	}
	millis := int64(math.Round(f * 1000))
	if millis == 0 {
		return "", fmt.Errorf("%s is below the smallest CPU unit (0.001)", yamlsrc.Quote(s))
	}
	if millis%1000 == 0 {
		return strconv.FormatInt(millis/1000, 10), nil
	}
	return strconv.FormatInt(millis, 10) + "m", nil
}
