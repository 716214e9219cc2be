package cmdutil

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// EndpointFormats are the values of the endpoints commands' --output ("" is the default list).
var EndpointFormats = []string{"json", "md"}

// CheckEndpointFormat checks an endpoints command's --output.
func CheckEndpointFormat(format string) error {
	switch format {
	case "", "json", "md":
		return nil
	}
	return FlagErrorf("--output must be json or md, not %q", format)
}

// Endpoint is one row of an endpoints list: its URL, and the Service and port behind it where known.
type Endpoint struct {
	URL     string
	Service string
	Port    int32
}

// EndpointList is what `devtool endpoints` and `devtool preview endpoints` print.
type EndpointList struct {
	Of    string // whose endpoints they are: "Available endpoints for <Of>:"
	None  string // the sentence printed when there are none, without its final period
	Items []Endpoint
	// Table makes the default format a table of URL, Service and port; else it is one URL a line.
	Table bool
}

// Write prints l in format: "json" a JSON list of the URLs (for scripts), "md" a Markdown list
// (for a pull request's comment), "" the default.
func (l EndpointList) Write(w io.Writer, format string) error {
	switch format {
	case "json":
		urls := make([]string, 0, len(l.Items))
		for _, e := range l.Items {
			urls = append(urls, e.URL)
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(urls)
	case "md":
		if len(l.Items) == 0 {
			_, err := fmt.Fprintf(w, "%s.\n", l.None)
			return err
		}
		fmt.Fprintf(w, "Available endpoints for %s:\n\n", l.Of)
		for _, e := range l.Items {
			if _, err := fmt.Fprintf(w, " - %s\n", e.URL); err != nil {
				return err
			}
		}
		return nil
	}
	if len(l.Items) == 0 {
		_, err := fmt.Fprintln(w, l.None)
		return err
	}
	if !l.Table {
		for _, e := range l.Items {
			if _, err := fmt.Fprintln(w, e.URL); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "URL\tSERVICE\tPORT")
	for _, e := range l.Items {
		fmt.Fprintf(tw, "%s\t%s\t%d\n", e.URL, e.Service, e.Port)
	}
	return tw.Flush()
}
