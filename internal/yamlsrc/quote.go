package yamlsrc

import (
	"strconv"
	"unicode/utf8"
)

// MaxQuoted is how many characters of a value an error quotes; the rest is cut and marked
// with "…", so a message never carries a whole file (or a secret pasted into the wrong field).
const MaxQuoted = 60

// Quote quotes s like %q, cut to its first MaxQuoted characters.
func Quote(s string) string {
	return strconv.Quote(Shorten(s))
}

// Shorten cuts s to its first MaxQuoted characters, marking the cut with "…".
func Shorten(s string) string {
	if utf8.RuneCountInString(s) <= MaxQuoted {
		return s
	}
	n := 0
	for i := range s {
		if n == MaxQuoted {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

// shortenQuoted returns args with every string formatted by a %q verb of format shortened
// (Shorten), so the messages of Errorf and Warnf quote at most a short prefix of a value.
func shortenQuoted(format string, args []any) []any {
	var out []any
	arg := 0
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		// Skip flags, width and precision up to the verb.
		j := i + 1
		for j < len(format) && (format[j] == '+' || format[j] == '-' || format[j] == '#' || format[j] == ' ' ||
			format[j] == '0' || format[j] == '.' || (format[j] >= '1' && format[j] <= '9')) {
			j++
		}
		if j >= len(format) {
			break
		}
		verb := format[j]
		i = j
		if verb == '%' {
			continue
		}
		if arg >= len(args) {
			break
		}
		if s, ok := args[arg].(string); ok && verb == 'q' && utf8.RuneCountInString(s) > MaxQuoted {
			if out == nil {
				out = append([]any(nil), args...)
			}
			out[arg] = Shorten(s)
		}
		arg++
	}
	if out == nil {
		return args
	}
	return out
}
