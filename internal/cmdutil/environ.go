package cmdutil

import "strings"

// EnvironMap turns os.Environ-style "NAME=value" entries into a map.
func EnvironMap(environ []string) map[string]string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			m[k] = v
		}
	}
	return m
}
