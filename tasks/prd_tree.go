package tasks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// jnode is a JSON value with the byte span it has in its source, read by
// readTree so that errors can name positions and an edit can replace one
// value's bytes and keep the rest of the file as it was.
type jnode struct {
	kind       byte // '{' object, '[' array, 's' string, 'n' number, 'b' bool, '0' null
	start, end int  // the value's bytes are src[start:end]
	str        string
	num        json.Number
	bool       bool
	members    []jmember // an object's, in order
	elems      []*jnode  // an array's
}

// jmember is one member of an object: its key, where the key starts, its
// value.
type jmember struct {
	key string
	at  int
	val *jnode
}

// what names a node's type for errors.
func (n *jnode) what() string {
	switch n.kind {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 's':
		return "a string"
	case 'n':
		return "a number"
	case 'b':
		return "a boolean"
	}
	return "null"
}

// member is the object's member named key, or nil.
func (n *jnode) member(key string) *jmember {
	for i := range n.members {
		if n.members[i].key == key {
			return &n.members[i]
		}
	}
	return nil
}

// syntaxError is bad JSON at byte offset off.
type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string { return e.msg }

// readTree reads src, one JSON value with nothing after it, into a tree
// of positioned nodes. It checks src with json.Unmarshal first, whose
// SyntaxError.Offset counts from src's start (a Decoder's counts from
// where its current value began), and then tokenises it with a Decoder,
// taking each token's start from the decoder's offset and the bytes after
// it.
func readTree(src []byte) (*jnode, error) {
	var raw json.RawMessage
	if err := json.Unmarshal(src, &raw); err != nil {
		var js *json.SyntaxError
		if !errors.As(err, &js) {
			return nil, &syntaxError{off: 0, msg: err.Error()}
		}
		off := int(js.Offset) - 1 // Offset is just past the byte that is wrong
		if js.Offset >= int64(len(src)) && strings.HasPrefix(js.Error(), "unexpected end") {
			return nil, &syntaxError{off: len(src), msg: "the file ends before its JSON value is complete"}
		}
		return nil, &syntaxError{off: max(off, 0), msg: js.Error()}
	}
	r := &treeReader{src: src, dec: json.NewDecoder(bytes.NewReader(src))}
	r.dec.UseNumber()
	n, err := r.value()
	if err != nil {
		return nil, r.positioned(err)
	}
	return n, nil
}

type treeReader struct {
	src []byte
	dec *json.Decoder
}

// next is where the next token starts: past the whitespace and the
// separators (',' ':') the decoder has not yet consumed.
func (r *treeReader) next() int {
	i := int(r.dec.InputOffset())
	for i < len(r.src) {
		switch r.src[i] {
		case ' ', '\t', '\n', '\r', ',', ':':
			i++
			continue
		}
		break
	}
	return i
}

// value reads one value.
func (r *treeReader) value() (*jnode, error) {
	start := r.next()
	tok, err := r.dec.Token()
	if err != nil {
		return nil, err
	}
	n := &jnode{start: start}
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			err = r.object(n)
		case '[':
			err = r.array(n)
		default:
			err = &syntaxError{off: start, msg: fmt.Sprintf("unexpected %q", string(v))}
		}
		if err != nil {
			return nil, err
		}
	case string:
		n.kind, n.str = 's', v
	case json.Number:
		n.kind, n.num = 'n', v
	case bool:
		n.kind, n.bool = 'b', v
	case nil:
		n.kind = '0'
	}
	n.end = int(r.dec.InputOffset())
	return n, nil
}

func (r *treeReader) object(n *jnode) error {
	n.kind = '{'
	for r.dec.More() {
		at := r.next()
		tok, err := r.dec.Token()
		if err != nil {
			return err
		}
		key, ok := tok.(string)
		if !ok {
			return &syntaxError{off: at, msg: "an object key must be a string"}
		}
		val, err := r.value()
		if err != nil {
			return err
		}
		n.members = append(n.members, jmember{key: key, at: at, val: val})
	}
	_, err := r.dec.Token() // '}'
	return err
}

func (r *treeReader) array(n *jnode) error {
	n.kind = '['
	for r.dec.More() {
		e, err := r.value()
		if err != nil {
			return err
		}
		n.elems = append(n.elems, e)
	}
	_, err := r.dec.Token() // ']'
	return err
}

// positioned turns an error of the decoder, which src passed
// json.Unmarshal's check and so should not have, into a *syntaxError at
// the next token.
func (r *treeReader) positioned(err error) error {
	var se *syntaxError
	if errors.As(err, &se) {
		return se
	}
	return &syntaxError{off: r.next(), msg: err.Error()}
}
