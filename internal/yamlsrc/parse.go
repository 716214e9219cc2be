package yamlsrc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"gopkg.in/yaml.v3"
)

// Parse decodes data as one YAML document. An empty input gives an empty document node (Kind
// 0). A second document (after "---") that holds anything is an error naming its line, since
// everything in it would otherwise be dropped silently; an empty trailing document is fine.
// Errors are recorded in r.Errs and ok is false.
func (r *Reader) Parse(data []byte) (doc *yaml.Node, ok bool) {
	return r.parse(data, r.File)
}

// ParseFile is Parse for another file than r.File (a file merged into it, extended or
// included): errors and the positions of its nodes name file.
func (r *Reader) ParseFile(data []byte, file string) (doc *yaml.Node, ok bool) {
	doc, ok = r.parse(data, file)
	if ok && file != r.File {
		r.SetFile(doc, file)
	}
	return doc, ok
}

func (r *Reader) parse(data []byte, file string) (doc *yaml.Node, ok bool) {
	main := r.File
	r.File = file
	defer func() { r.File = main }()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	doc = &yaml.Node{}
	if err := dec.Decode(doc); err != nil {
		if errors.Is(err, io.EOF) {
			return &yaml.Node{}, true
		}
		r.Errs = append(r.Errs, longKey(r.SyntaxError(err), data))
		return nil, false
	}
	for {
		var next yaml.Node
		err := dec.Decode(&next)
		if errors.Is(err, io.EOF) {
			return doc, true
		}
		if err != nil {
			r.Errs = append(r.Errs, longKey(r.SyntaxError(err), data))
			return nil, false
		}
		if !IsNull(&next) && !(len(next.Content) == 1 && IsNull(next.Content[0])) {
			r.Errs = append(r.Errs, &Error{Pos: Position{File: r.File, Line: next.Line, Column: 1},
				Msg: "a second YAML document starts here (after ---); the file must hold one document: merge them, or split them into files"})
			return nil, false
		}
	}
}

// maxPlainKey is yaml.v3's limit on a key written without '?': the scanner gives up looking for
// its ':' after 1024 characters.
const maxPlainKey = 1024

// longKey rewrites the parser's obscure message for a key over maxPlainKey ("mapping values are
// not allowed in this context", "could not find expected ':'") into one that says so.
func longKey(e *Error, data []byte) *Error {
	if e.Pos.Line < 1 || !strings.Contains(e.Msg, "mapping values are not allowed") && !strings.Contains(e.Msg, "could not find expected ':'") {
		return e
	}
	for i, line := range bytes.SplitN(data, []byte("\n"), e.Pos.Line+1) {
		if i+1 < e.Pos.Line-1 {
			continue
		}
		if i+1 > e.Pos.Line {
			break
		}
		key := strings.TrimLeft(string(line), " \t-")
		if j := strings.Index(key, ":"); j > maxPlainKey {
			return &Error{Pos: Position{File: e.Pos.File, Line: i + 1, Column: len(line) - len(key) + 1},
				Msg: fmt.Sprintf("invalid YAML: a key of %d characters is longer than the YAML parser's limit of %d", j, maxPlainKey)}
		}
	}
	return e
}
