package cmdutil

import (
	"strings"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/errs"
)

func TestCheckRunFlags(t *testing.T) {
	vars, err := CheckRunFlags(time.Minute, []string{"A=1", "B=x=y"}, "feature/x", "devtool.yml")
	if err != nil || len(vars) != 2 || vars[1].Name != "B" || vars[1].Value != "x=y" {
		t.Fatalf("%v %v", vars, err)
	}
	for _, c := range []struct {
		timeout      time.Duration
		vars         []string
		branch, file string
		want         string
	}{
		{0, nil, "", "", "--timeout"},
		{25 * time.Hour, nil, "", "", "--timeout"},
		{time.Minute, []string{"NOEQUALS"}, "", "", "--var"},
		{time.Minute, []string{"1A=x"}, "", "", "--var"},
		{time.Minute, nil, "-x", "", "--branch"},
		{time.Minute, nil, "a..b", "", "--branch"},
		{time.Minute, nil, "", "../x.yml", "--file"},
	} {
		_, err := CheckRunFlags(c.timeout, c.vars, c.branch, c.file)
		if err == nil || !strings.Contains(err.Error(), c.want) || errs.ExitCode(err) != errs.ExitUsage {
			t.Errorf("%+v: %v, want a usage error naming %s", c, err, c.want)
		}
	}
}
