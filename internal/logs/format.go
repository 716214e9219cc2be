package logs

import (
	"hash/fnv"
	"io"
	"sync"
	"time"
)

// Line is one log line of one container.
type Line struct {
	Namespace string
	Pod       string
	Container string
	Service   string
	Prefix    string    // ShortPodName(Service, Pod) + "/" + Container
	Time      time.Time // from the API's timestamp; zero when the line had none
	RawTime   string    // the timestamp as the API sent it
	Text      string    // without the trailing newline
}

// Formatter turns a line into the bytes written, newline included.
type Formatter interface {
	Format(Line) []byte
}

// TextFormatter writes "[prefix] text", or "[prefix] timestamp text" with Timestamps. With Color the
// prefix is coloured by an ANSI colour chosen from a fixed palette by a hash of the prefix, so a
// container keeps its colour across runs.
type TextFormatter struct {
	Color      bool
	Timestamps bool
}

// palette is the ANSI foreground colours used for prefixes (no black, white or grey).
var palette = []int{32, 33, 34, 35, 36, 31, 92, 93, 94, 95, 96, 91}

// ColorCode is the ANSI colour of a prefix.
func ColorCode(prefix string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(prefix))
	return palette[h.Sum32()%uint32(len(palette))]
}

// Format implements Formatter.
func (f TextFormatter) Format(l Line) []byte {
	b := make([]byte, 0, len(l.Prefix)+len(l.Text)+48)
	if f.Color {
		b = append(b, "\x1b["...)
		b = appendInt(b, ColorCode(l.Prefix))
		b = append(b, 'm', '[')
		b = append(b, l.Prefix...)
		b = append(b, "]\x1b[0m "...)
	} else {
		b = append(b, '[')
		b = append(b, l.Prefix...)
		b = append(b, "] "...)
	}
	if f.Timestamps && l.RawTime != "" {
		b = append(b, l.RawTime...)
		b = append(b, ' ')
	}
	b = append(b, l.Text...)
	return append(b, '\n')
}

func appendInt(b []byte, n int) []byte {
	if n >= 10 {
		b = appendInt(b, n/10)
	}
	return append(b, byte('0'+n%10))
}

// lineWriter writes each formatted line with one Write under a mutex, so lines of concurrent
// streams never interleave mid-line.
type lineWriter struct {
	mu  sync.Mutex
	w   io.Writer
	fmt Formatter
	err error // the first write error; later lines are dropped
}

func (lw *lineWriter) write(l Line) error {
	b := lw.fmt.Format(l)
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.err != nil {
		return lw.err
	}
	_, lw.err = lw.w.Write(b)
	return lw.err
}
