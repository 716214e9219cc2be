package client

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/devtool/devtool/internal/errs"
	"github.com/devtool/devtool/internal/platform/api"
)

// MinServerVersion is the lowest platform version this CLI works with: the first that serves the
// routes the client uses.
const MinServerVersion = "0.1.0"

// CheckVersions compares, once per login, the CLI's version with what the server serves and the
// server's version with what the CLI needs. A version that is not a release (a "dev" build, a bare
// commit hash) is not compared: builds from source are trusted to match.
func CheckVersions(info *api.Info, cliVersion, url string) error {
	if info.APIServer == "" && info.Version == "" {
		return fmt.Errorf("platform %s: GET %s/info answered no version and no cluster address: is it a devtool platform?", url, api.Prefix)
	}
	if less(cliVersion, info.MinCLIVersion) {
		return errs.WithHint(fmt.Errorf("this devtool (%s) is too old for the platform %s, which serves devtool %s and newer", cliVersion, url, info.MinCLIVersion),
			"install a newer devtool (the platform's administrator can say which)")
	}
	if less(info.Version, MinServerVersion) {
		return errs.WithHint(fmt.Errorf("the platform %s is too old (version %s): this devtool needs platform %s or newer", url, info.Version, MinServerVersion),
			"ask the platform's administrator to upgrade it, or use an older devtool")
	}
	return nil
}

// less reports a < b when both are release versions ([v]MAJOR.MINOR.PATCH[-pre]); false otherwise.
func less(a, b string) bool {
	va, erra := parseVersion(a)
	vb, errb := parseVersion(b)
	if erra != nil || errb != nil {
		return false
	}
	for i := range 3 {
		if va.n[i] != vb.n[i] {
			return va.n[i] < vb.n[i]
		}
	}
	// A pre-release comes before its release.
	return va.pre != "" && vb.pre == "" || va.pre != "" && vb.pre != "" && va.pre < vb.pre
}

type version struct {
	n   [3]int
	pre string
}

func parseVersion(s string) (version, error) {
	var v version
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	if i := strings.IndexByte(s, '+'); i >= 0 {
		s = s[:i]
	}
	if i := strings.IndexByte(s, '-'); i >= 0 {
		s, v.pre = s[:i], s[i+1:]
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return v, errors.New("not a release version")
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return v, errors.New("not a release version")
		}
		v.n[i] = n
	}
	return v, nil
}

// TokenID is the id part of an API token dvt_<id>_<secret>; ok is false for another shape.
func TokenID(token string) (id string, ok bool) {
	rest, found := strings.CutPrefix(token, api.TokenPrefix)
	if !found {
		return "", false
	}
	id, secret, found := strings.Cut(rest, "_")
	if !found || len(id) != 16 || secret == "" {
		return "", false
	}
	for _, r := range id {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return "", false
		}
	}
	return id, true
}
