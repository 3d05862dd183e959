package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// An event is one JSON object, read member by member with jsontext. It
// checks the syntax as encoding/json does, but hands out each value as a
// span of the message. Decoding into a map of json.RawMessage copied one
// value per member: a third of the hot path's allocations. jsontext is the
// tokenizer of encoding/json/v2, here until that leaves GOEXPERIMENT.

// scanner is a decoder with its reader, reused across messages.
type scanner struct {
	buf bytes.Buffer
	dec jsontext.Decoder
}

var scanners = sync.Pool{New: func() any { return new(scanner) }}

// Duplicate names are allowed (callers keep the last, as encoding/json
// does), and escaped invalid surrogates become U+FFFD, as encoding/json
// decodes them (unescaped invalid UTF-8 never gets here: Decode refuses it
// first).
var scanOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

var errNotObject = errors.New("not a JSON object")

// MaxDepth is how deep a message's values may nest: jsontext's own bound,
// past which it stops reading (the object itself is the first level).
const MaxDepth = 10000

// errTooDeep is the error jsontext gives past MaxDepth. It does not export
// it, so it is taken from the decoder itself, once: a message nested that
// deep is refused for its depth, not as JSON that is not an object.
var errTooDeep = func() error {
	dec := jsontext.NewDecoder(bytes.NewReader(bytes.Repeat([]byte{'['}, MaxDepth+1)))
	_, err := dec.ReadValue()
	var se *jsontext.SyntacticError
	if errors.As(err, &se) && se.Err != nil {
		return se.Err
	}
	// Never matched: TestDepth fails, and such messages read as malformed.
	return errors.New("event: jsontext gave no depth error")
}()

// eachMember calls fn with the name and the raw value of each member of
// the JSON object data, in order, and the value's offset in data. The
// value is a span of data; so is the
// name, without its quotes, unless it holds escapes: then it is unescaped
// into a copy, the only allocation here. It fails when data is not exactly
// one JSON object.
func eachMember(data []byte, fn func(name []byte, value json.RawMessage, at int)) error {
	if eachFlat(data, fn) {
		return nil
	}
	return eachScanned(data, fn)
}

// eachScanned is eachMember with jsontext, for what eachFlat does not read.
func eachScanned(data []byte, fn func(name []byte, value json.RawMessage, at int)) error {
	s := scanners.Get().(*scanner)
	defer func() {
		s.buf = bytes.Buffer{}
		s.dec.Reset(&s.buf) // let go of data
		scanners.Put(s)
	}()
	// A bytes.Buffer is read in place, without a copy.
	s.buf = *bytes.NewBuffer(data)
	s.dec.Reset(&s.buf, scanOptions...)
	if tok, err := s.dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return errNotObject
	}
	// Spans are taken by offset, so that they are data's whatever the
	// decoder does with its buffer.
	at := func(v jsontext.Value) int { return int(s.dec.InputOffset()) - len(v) }
	span := func(v jsontext.Value) []byte { return data[at(v) : at(v)+len(v)] }
	for s.dec.PeekKind() != '}' {
		v, err := s.dec.ReadValue()
		if err != nil {
			return err
		}
		name := span(v)
		if bytes.IndexByte(name, '\\') < 0 {
			name = name[1 : len(name)-1]
		} else {
			// As encoding/json unescapes it; rare enough to allocate.
			unescaped, err := unquote(name)
			if err != nil {
				return err
			}
			name = []byte(unescaped)
		}
		if v, err = s.dec.ReadValue(); err != nil {
			return err
		}
		fn(name, span(v), at(v))
	}
	if _, err := s.dec.ReadToken(); err != nil {
		return err
	}
	if _, err := s.dec.ReadToken(); err != io.EOF {
		return errNotObject
	}
	return nil
}
