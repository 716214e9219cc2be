package analytics

import (
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/devtool/devtool/internal/platform/api"
)

// TestAnalyticsDocumented: docs/analytics.md's table of what is sent lists exactly the JSON fields
// of api.AnalyticsEvent, and Event fills every one of them.
func TestAnalyticsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/analytics.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(doc), "## What is sent")
	table, _, _ = strings.Cut(table, "Never sent")
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Za-z]+)` \\|").FindAllStringSubmatch(table, -1) {
		documented = append(documented, m[1])
	}
	typ := reflect.TypeFor[api.AnalyticsEvent]()
	var fields []string
	for i := range typ.NumField() {
		fields = append(fields, strings.Split(typ.Field(i).Tag.Get("json"), ",")[0])
	}
	sort.Strings(documented)
	sort.Strings(fields)
	if !reflect.DeepEqual(documented, fields) {
		t.Errorf("docs/analytics.md lists %v, api.AnalyticsEvent sends %v", documented, fields)
	}
	ev := reflect.ValueOf(Event(Run{Command: "deploy", Duration: 1500 * time.Millisecond, Success: true}, "id"))
	for i := range ev.NumField() {
		if ev.Field(i).IsZero() {
			t.Errorf("Event leaves %s empty", typ.Field(i).Name)
		}
	}
}
