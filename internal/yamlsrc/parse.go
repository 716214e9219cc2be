package yamlsrc

import (
	"bytes"
	"errors"
	"io"

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
		r.Errs = append(r.Errs, r.SyntaxError(err))
		return nil, false
	}
	for {
		var next yaml.Node
		err := dec.Decode(&next)
		if errors.Is(err, io.EOF) {
			return doc, true
		}
		if err != nil {
			r.Errs = append(r.Errs, r.SyntaxError(err))
			return nil, false
		}
		if !IsNull(&next) && !(len(next.Content) == 1 && IsNull(next.Content[0])) {
			r.Errs = append(r.Errs, &Error{Pos: Position{File: r.File, Line: next.Line, Column: 1},
				Msg: "a second YAML document starts here (after ---); the file must hold one document: merge them, or split them into files"})
			return nil, false
		}
	}
}
