package hmsevent

import (
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/hivedr/hivedr/schemas"
)

// This file reads the metastore objects embedded in notification messages
// (tableObjJson, partitionListJson, dbJson, colStatsJson, ...). The
// metastore writes them with Thrift's TJSONProtocol:
//
//	struct  {"<field id>":{"<type>":<value>},...}
//	list    ["<elem type>",<count>,<elem>,...]        (set likewise)
//	map     ["<key type>","<value type>",<count>,{"<key>":<value>,...}]
//	string  a JSON string; binary is base64 in a JSON string
//	bool    1 or 0; i8, i16, i32, i64 JSON integers; double a JSON number,
//	        or "NaN", "Infinity", "-Infinity"; map keys are always quoted
//
// with type names tf, i8, i16, i32, i64, dbl, str, rec, map, set, lst and
// uid. It reads exactly the fields Decode uses, with the field IDs of the
// metastore IDL (as in gohive's hive_metastore package), straight into
// schemas types, and skips every other field after checking it is well
// formed, at any nesting up to tjsonMaxDepth.
//
// Equivalence with Thrift's own reader (TDeserializer with TJSONProtocol
// into gohive's types, which is what Decode used before) is kept, and
// tested in tjson_test.go: whatever this reader accepts, Thrift accepts,
// and the values Decode uses are the same. The reader is stricter than
// Thrift where Thrift silently makes up a value, and rejects:
//   - integers that overflow their type (Thrift truncates i8/i16/i32 and
//     clamps i64), numbers that are not JSON integers where one is due
//     ("1.5", "+1", quoted numbers outside map keys: Thrift reads 0 or
//     guesses), bools other than 0 and 1;
//   - null anywhere, and data after the top-level struct;
//   - a list or map whose declared element types are not those of the
//     field it fills (Thrift ignores the declared types of fields it
//     knows);
//   - whitespace straight after a struct's "{" (Thrift rejects it too).
// It is laxer in one way only: the sub-objects Decode does not use
// (privileges, skewed info, creation metadata, column statistics data,
// ...) are checked to be well-formed TJSON, not checked against the
// metastore schema, so a required field missing deep inside them is not
// an error here (the applier, which sends the kept ThriftJSON on, will
// meet it).
//
// Strings without escapes are substrings of the input, not copies: a
// Table or Partition keeps its ThriftJSON anyway.

// tjsonType is a Thrift type ID, as thrift.TType.
type tjsonType byte

const (
	tjsonBool   tjsonType = 2
	tjsonByte   tjsonType = 3
	tjsonDouble tjsonType = 4
	tjsonI16    tjsonType = 6
	tjsonI32    tjsonType = 8
	tjsonI64    tjsonType = 10
	tjsonString tjsonType = 11
	tjsonStruct tjsonType = 12
	tjsonMap    tjsonType = 13
	tjsonSet    tjsonType = 14
	tjsonList   tjsonType = 15
	tjsonUUID   tjsonType = 16
)

// tjsonMaxDepth bounds the nesting of a skipped value, counted from the
// skipped field, as thrift.DefaultRecursionDepth does for Thrift's Skip:
// hostile input cannot exhaust the stack, and anything Thrift skips is
// skipped here too.
const tjsonMaxDepth = 64

func tjsonTypeOf(name string) (tjsonType, bool) {
	switch name {
	case "tf":
		return tjsonBool, true
	case "i8":
		return tjsonByte, true
	case "i16":
		return tjsonI16, true
	case "i32":
		return tjsonI32, true
	case "i64":
		return tjsonI64, true
	case "dbl":
		return tjsonDouble, true
	case "str":
		return tjsonString, true
	case "rec":
		return tjsonStruct, true
	case "map":
		return tjsonMap, true
	case "set":
		return tjsonSet, true
	case "lst":
		return tjsonList, true
	case "uid":
		return tjsonUUID, true
	}
	return 0, false
}

// tjsonError is a malformed TJSON text: what was wrong, and where.
type tjsonError struct {
	off int
	msg string
}

func (e *tjsonError) Error() string { return fmt.Sprintf("at offset %d: %s", e.off, e.msg) }

// tjsonReader reads one TJSON text. It holds no state beyond its
// position, so readers on different texts are independent.
type tjsonReader struct {
	s string
	i int
}

func (r *tjsonReader) errorf(format string, args ...any) error {
	return &tjsonError{off: r.i, msg: fmt.Sprintf(format, args...)}
}

func (r *tjsonReader) ws() {
	for r.i < len(r.s) {
		switch r.s[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// expect skips whitespace and then c.
func (r *tjsonReader) expect(c byte) error {
	r.ws()
	if r.i >= len(r.s) {
		return r.errorf("want %q, got end of text", c)
	}
	if r.s[r.i] != c {
		return r.errorf("want %q, got %q", c, r.s[r.i])
	}
	r.i++
	return nil
}

// end checks that nothing but whitespace follows the top-level value.
func (r *tjsonReader) end() error {
	r.ws()
	if r.i != len(r.s) {
		return r.errorf("data after the top-level struct")
	}
	return nil
}

// str reads a JSON string. It decodes exactly as encoding/json does
// (Thrift unquotes with json.Unmarshal): invalid UTF-8 and lone
// surrogates become U+FFFD.
func (r *tjsonReader) str() (string, error) {
	if err := r.expect('"'); err != nil {
		return "", err
	}
	start := r.i
	high := false
	for j := start; j < len(r.s); j++ {
		c := r.s[j]
		switch {
		case c == '"':
			v := r.s[start:j]
			if high && !utf8.ValidString(v) {
				return r.unquote(start)
			}
			r.i = j + 1
			return v, nil
		case c == '\\' || c < 0x20:
			return r.unquote(start)
		case c >= utf8.RuneSelf:
			high = true
		}
	}
	return "", r.errorf("unterminated string")
}

// unquote is str's slow path, for strings with escapes or invalid UTF-8.
func (r *tjsonReader) unquote(start int) (string, error) {
	b := make([]byte, 0, 64)
	j := start
	for j < len(r.s) {
		c := r.s[j]
		switch {
		case c == '"':
			r.i = j + 1
			return string(b), nil
		case c < 0x20:
			r.i = j
			return "", r.errorf("control character %#x in string", c)
		case c == '\\':
			if j+1 >= len(r.s) {
				r.i = j
				return "", r.errorf("unterminated string")
			}
			e := r.s[j+1]
			j += 2
			switch e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				rr := tjsonHex4(r.s, j)
				if rr < 0 {
					r.i = j - 2
					return "", r.errorf("bad \\u escape")
				}
				j += 4
				if utf16.IsSurrogate(rr) {
					rr2 := rune(-1)
					if j+1 < len(r.s) && r.s[j] == '\\' && r.s[j+1] == 'u' {
						rr2 = tjsonHex4(r.s, j+2)
					}
					if dec := utf16.DecodeRune(rr, rr2); dec != utf8.RuneError {
						j += 6
						b = utf8.AppendRune(b, dec)
						break
					}
					rr = utf8.RuneError
				}
				b = utf8.AppendRune(b, rr)
			default:
				r.i = j - 2
				return "", r.errorf("bad escape \\%c", e)
			}
		case c < utf8.RuneSelf:
			b = append(b, c)
			j++
		default:
			rr, size := utf8.DecodeRuneInString(r.s[j:])
			if rr == utf8.RuneError && size == 1 {
				b = utf8.AppendRune(b, utf8.RuneError)
			} else {
				b = append(b, r.s[j:j+size]...)
			}
			j += size
		}
	}
	r.i = j
	return "", r.errorf("unterminated string")
}

// tjsonHex4 returns the rune of the four hex digits at s[i:], or -1.
func tjsonHex4(s string, i int) rune {
	if i+4 > len(s) {
		return -1
	}
	var v rune
	for _, c := range []byte(s[i : i+4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		v = v<<4 | rune(c)
	}
	return v
}

// digits reads a JSON integer, -?(0|[1-9][0-9]*), in [-2^(bits-1), 2^(bits-1)).
func (r *tjsonReader) digits(bits uint) (int64, error) {
	start := r.i
	neg := false
	if r.i < len(r.s) && r.s[r.i] == '-' {
		neg = true
		r.i++
	}
	d := r.i
	var u uint64
	limit := uint64(1) << (bits - 1) // the magnitude of the minimum
	for r.i < len(r.s) && '0' <= r.s[r.i] && r.s[r.i] <= '9' {
		if u > limit/10 {
			r.i = start
			return 0, r.errorf("integer overflows i%d", bits)
		}
		u = u*10 + uint64(r.s[r.i]-'0')
		if u > limit {
			r.i = start
			return 0, r.errorf("integer overflows i%d", bits)
		}
		r.i++
	}
	n := r.i - d
	switch {
	case n == 0:
		r.i = start
		return 0, r.errorf("want an integer")
	case n > 1 && r.s[d] == '0':
		r.i = start
		return 0, r.errorf("integer with a leading zero")
	case r.i < len(r.s) && (r.s[r.i] == '.' || r.s[r.i] == 'e' || r.s[r.i] == 'E'):
		r.i = start
		return 0, r.errorf("want an integer, got a fraction or exponent")
	}
	if neg {
		return -int64(u), nil // -2^63 included: -int64(1<<63) wraps to itself
	}
	if u == limit {
		r.i = start
		return 0, r.errorf("integer overflows i%d", bits)
	}
	return int64(u), nil
}

// integer reads a bare JSON integer in the range of a bits-wide type.
func (r *tjsonReader) integer(bits uint) (int64, error) {
	r.ws()
	return r.digits(bits)
}

// quotedInteger reads a JSON integer in quotes, as in a field ID or map key.
func (r *tjsonReader) quotedInteger(bits uint) (int64, error) {
	if err := r.expect('"'); err != nil {
		return 0, err
	}
	v, err := r.digits(bits)
	if err != nil {
		return 0, err
	}
	if r.i >= len(r.s) || r.s[r.i] != '"' {
		return 0, r.errorf("want '\"' after a quoted integer")
	}
	r.i++
	return v, nil
}

func (r *tjsonReader) i32() (int32, error) {
	v, err := r.integer(32)
	return int32(v), err
}

func (r *tjsonReader) i64() (int64, error) { return r.integer(64) }

func (r *tjsonReader) boolean() (bool, error) {
	v, err := r.integer(8)
	if err != nil {
		return false, err
	}
	if v != 0 && v != 1 {
		return false, r.errorf("bool %d is neither 0 nor 1", v)
	}
	return v == 1, nil
}

// number checks a JSON number, -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?,
// as a double is written outside quotes.
func (r *tjsonReader) number() error {
	start := r.i
	if r.i < len(r.s) && r.s[r.i] == '-' {
		r.i++
	}
	d := r.i
	r.skipDigits()
	if r.i == d || (r.i-d > 1 && r.s[d] == '0') {
		r.i = start
		return r.errorf("want a number")
	}
	if r.i < len(r.s) && r.s[r.i] == '.' {
		r.i++
		d = r.i
		if r.skipDigits(); r.i == d {
			r.i = start
			return r.errorf("want digits after '.'")
		}
	}
	if r.i < len(r.s) && (r.s[r.i] == 'e' || r.s[r.i] == 'E') {
		r.i++
		if r.i < len(r.s) && (r.s[r.i] == '+' || r.s[r.i] == '-') {
			r.i++
		}
		d = r.i
		if r.skipDigits(); r.i == d {
			r.i = start
			return r.errorf("want digits in exponent")
		}
	}
	return nil
}

func (r *tjsonReader) skipDigits() {
	for r.i < len(r.s) && '0' <= r.s[r.i] && r.s[r.i] <= '9' {
		r.i++
	}
}

// double checks a double: a bare JSON number, or one of the quoted
// special values; in a map key (quoted) any of them in quotes.
func (r *tjsonReader) double(quoted bool) error {
	r.ws()
	if r.i < len(r.s) && r.s[r.i] == '"' {
		save := r.i
		s, err := r.str()
		if err != nil {
			return err
		}
		switch s {
		case "NaN", "Infinity", "-Infinity":
			return nil
		}
		if quoted {
			sub := tjsonReader{s: s}
			if sub.number() == nil && sub.i == len(s) {
				return nil
			}
		}
		r.i = save
		return r.errorf("want a double, got %q", s)
	}
	if quoted {
		return r.errorf("want a quoted double")
	}
	return r.number()
}

// uuid checks a UUID, 8-4-4-4-12 hex digits, as thrift.ParseTuuid does.
func (r *tjsonReader) uuid() error {
	save := r.i
	s, err := r.str()
	if err != nil {
		return err
	}
	ok := len(s) == 36
	for k := 0; ok && k < 36; k++ {
		switch k {
		case 8, 13, 18, 23:
			ok = s[k] == '-'
		default:
			c := s[k]
			ok = '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
		}
	}
	if !ok {
		r.i = save
		return r.errorf("malformed uuid %q", s)
	}
	return nil
}

// typeName reads a quoted type name.
func (r *tjsonReader) typeName() (tjsonType, error) {
	save := r.i
	s, err := r.str()
	if err != nil {
		return 0, err
	}
	t, ok := tjsonTypeOf(s)
	if !ok {
		r.i = save
		return 0, r.errorf("unknown type %q", s)
	}
	return t, nil
}

// structBegin reads the "{" of a struct.
func (r *tjsonReader) structBegin() error { return r.expect('{') }

// field reads the head of the n-th field of a struct, up to its value:
// "<id>":{"<type>":. ok is false at the struct's closing "}" (consumed).
// As with Thrift, no whitespace may come straight after the struct's "{".
func (r *tjsonReader) field(n int) (id int16, t tjsonType, ok bool, err error) {
	if n == 0 {
		if r.i < len(r.s) && r.s[r.i] == '}' {
			r.i++
			return 0, 0, false, nil
		}
		if r.i < len(r.s) && r.s[r.i] != '"' {
			return 0, 0, false, r.errorf("want a field ID or '}'")
		}
	} else {
		r.ws()
		if r.i < len(r.s) && r.s[r.i] == '}' {
			r.i++
			return 0, 0, false, nil
		}
		if err := r.expect(','); err != nil {
			return 0, 0, false, err
		}
	}
	v, err := r.quotedInteger(16)
	if err != nil {
		return 0, 0, false, err
	}
	if err := r.expect(':'); err != nil {
		return 0, 0, false, err
	}
	if err := r.expect('{'); err != nil {
		return 0, 0, false, err
	}
	if t, err = r.typeName(); err != nil {
		return 0, 0, false, err
	}
	if err := r.expect(':'); err != nil {
		return 0, 0, false, err
	}
	return int16(v), t, true, nil
}

// fieldEnd reads the "}" that closes a field's type object.
func (r *tjsonReader) fieldEnd() error { return r.expect('}') }

// readStruct reads a struct, calling fn for each field to read (or skip)
// its value.
func (r *tjsonReader) readStruct(fn func(id int16, t tjsonType) error) error {
	if err := r.structBegin(); err != nil {
		return err
	}
	for n := 0; ; n++ {
		id, t, ok, err := r.field(n)
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		if err := fn(id, t); err != nil {
			return err
		}
		if err := r.fieldEnd(); err != nil {
			return err
		}
	}
}

// count reads a list or map's element count and checks it is not more
// than the text could hold, returning a safe capacity hint.
func (r *tjsonReader) count() (int, error) {
	v, err := r.integer(32)
	if err != nil {
		return 0, err
	}
	if v < 0 {
		return 0, r.errorf("negative count %d", v)
	}
	return int(v), nil
}

// capHint bounds a preallocation by what the rest of the text can hold
// (every element takes at least two bytes).
func (r *tjsonReader) capHint(n int) int {
	return min(n, (len(r.s)-r.i)/2)
}

// listBegin reads ["<elem type>",<count>.
func (r *tjsonReader) listBegin() (tjsonType, int, error) {
	if err := r.expect('['); err != nil {
		return 0, 0, err
	}
	t, err := r.typeName()
	if err != nil {
		return 0, 0, err
	}
	if err := r.expect(','); err != nil {
		return 0, 0, err
	}
	n, err := r.count()
	return t, n, err
}

// mapBegin reads ["<key type>","<value type>",<count>,{.
func (r *tjsonReader) mapBegin() (kt, vt tjsonType, n int, err error) {
	if err = r.expect('['); err != nil {
		return
	}
	if kt, err = r.typeName(); err != nil {
		return
	}
	if err = r.expect(','); err != nil {
		return
	}
	if vt, err = r.typeName(); err != nil {
		return
	}
	if err = r.expect(','); err != nil {
		return
	}
	if n, err = r.count(); err != nil {
		return
	}
	err = r.expect(',')
	if err == nil {
		err = r.expect('{')
	}
	return
}

func (r *tjsonReader) mapEnd() error {
	if err := r.expect('}'); err != nil {
		return err
	}
	return r.expect(']')
}

// strings reads a list<string>. An empty list is an empty, non-nil slice,
// as Thrift gives.
func (r *tjsonReader) strings() ([]string, error) {
	t, n, err := r.listBegin()
	if err != nil {
		return nil, err
	}
	if t != tjsonString {
		return nil, r.errorf("want a list of str")
	}
	out := make([]string, 0, r.capHint(n))
	for range n {
		if err := r.expect(','); err != nil {
			return nil, err
		}
		s, err := r.str()
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, r.expect(']')
}

// stringMap reads a map<string,string>. An empty map is an empty, non-nil
// map, as Thrift gives; a repeated key keeps its last value.
func (r *tjsonReader) stringMap() (map[string]string, error) {
	kt, vt, n, err := r.mapBegin()
	if err != nil {
		return nil, err
	}
	if kt != tjsonString || vt != tjsonString {
		return nil, r.errorf("want a map of str to str")
	}
	out := make(map[string]string, r.capHint(n))
	for k := range n {
		if k > 0 {
			if err := r.expect(','); err != nil {
				return nil, err
			}
		}
		key, err := r.str()
		if err != nil {
			return nil, err
		}
		if err := r.expect(':'); err != nil {
			return nil, err
		}
		val, err := r.str()
		if err != nil {
			return nil, err
		}
		out[key] = val
	}
	return out, r.mapEnd()
}

// structs reads a list of structs, calling elem to read each.
func (r *tjsonReader) structs(elem func() error) (int, error) {
	t, n, err := r.listBegin()
	if err != nil {
		return 0, err
	}
	if t != tjsonStruct {
		return 0, r.errorf("want a list of rec")
	}
	for range n {
		if err := r.expect(','); err != nil {
			return 0, err
		}
		if err := elem(); err != nil {
			return 0, err
		}
	}
	return n, r.expect(']')
}

// skip reads a value of type t and drops it, failing as Thrift's Skip
// does when the nesting passes depth.
func (r *tjsonReader) skip(t tjsonType, depth int) error {
	if depth <= 0 {
		return r.errorf("nesting deeper than %d", tjsonMaxDepth)
	}
	switch t {
	case tjsonBool:
		_, err := r.boolean()
		return err
	case tjsonByte:
		_, err := r.integer(8)
		return err
	case tjsonI16:
		_, err := r.integer(16)
		return err
	case tjsonI32:
		_, err := r.integer(32)
		return err
	case tjsonI64:
		_, err := r.integer(64)
		return err
	case tjsonDouble:
		return r.double(false)
	case tjsonString:
		_, err := r.str()
		return err
	case tjsonUUID:
		return r.uuid()
	case tjsonStruct:
		return r.readStruct(func(_ int16, ft tjsonType) error { return r.skip(ft, depth-1) })
	case tjsonList, tjsonSet:
		et, n, err := r.listBegin()
		if err != nil {
			return err
		}
		for range n {
			if err := r.expect(','); err != nil {
				return err
			}
			if err := r.skip(et, depth-1); err != nil {
				return err
			}
		}
		return r.expect(']')
	case tjsonMap:
		kt, vt, n, err := r.mapBegin()
		if err != nil {
			return err
		}
		for k := range n {
			if k > 0 {
				if err := r.expect(','); err != nil {
					return err
				}
			}
			if err := r.skipKey(kt, depth-1); err != nil {
				return err
			}
			if err := r.expect(':'); err != nil {
				return err
			}
			if err := r.skip(vt, depth-1); err != nil {
				return err
			}
		}
		return r.mapEnd()
	}
	return r.errorf("cannot skip type %d", t)
}

// skipKey reads a map key of type t: JSON object keys are strings, so
// numbers are quoted; containers cannot be keys.
func (r *tjsonReader) skipKey(t tjsonType, depth int) error {
	if depth <= 0 {
		return r.errorf("nesting deeper than %d", tjsonMaxDepth)
	}
	var err error
	switch t {
	case tjsonString:
		_, err = r.str()
	case tjsonUUID:
		err = r.uuid()
	case tjsonBool:
		var v int64
		if v, err = r.quotedInteger(8); err == nil && v != 0 && v != 1 {
			err = r.errorf("bool %d is neither 0 nor 1", v)
		}
	case tjsonByte:
		_, err = r.quotedInteger(8)
	case tjsonI16:
		_, err = r.quotedInteger(16)
	case tjsonI32:
		_, err = r.quotedInteger(32)
	case tjsonI64:
		_, err = r.quotedInteger(64)
	case tjsonDouble:
		err = r.double(true)
	default:
		err = r.errorf("map key of type %d", t)
	}
	return err
}

// tjsonParse reads text as one top-level struct.
func tjsonParse(text string, fn func(r *tjsonReader, id int16, t tjsonType) error) error {
	r := tjsonReader{s: text}
	if err := r.readStruct(func(id int16, t tjsonType) error { return fn(&r, id, t) }); err != nil {
		return err
	}
	return r.end()
}

// The metastore structs, by the field IDs of hive_metastore.thrift. A
// field Decode uses is read when its type is the IDL's; any other field,
// or a used field with another type, is skipped, as Thrift's generated
// readers do.

// tjsonColumn reads a FieldSchema.
func (r *tjsonReader) column() (schemas.Column, error) {
	var c schemas.Column
	err := r.readStruct(func(id int16, t tjsonType) (err error) {
		switch {
		case id == 1 && t == tjsonString:
			c.Name, err = r.str()
		case id == 2 && t == tjsonString:
			c.Type, err = r.str()
		case id == 3 && t == tjsonString:
			c.Comment, err = r.str()
		default:
			err = r.skip(t, tjsonMaxDepth)
		}
		return err
	})
	return c, err
}

// columns reads a list<FieldSchema>; none is nil, as decodeColumns gave.
func (r *tjsonReader) columns() ([]schemas.Column, error) {
	var out []schemas.Column
	_, err := r.structs(func() error {
		c, err := r.column()
		out = append(out, c)
		return err
	})
	return out, err
}

// tjsonStorage is what Decode uses of a StorageDescriptor.
type tjsonStorage struct {
	storage  schemas.Storage
	location string
	columns  []schemas.Column
}

// storage reads a StorageDescriptor.
func (r *tjsonReader) storage() (*tjsonStorage, error) {
	sd := &tjsonStorage{}
	s := &sd.storage
	err := r.readStruct(func(id int16, t tjsonType) (err error) {
		switch {
		case id == 1 && t == tjsonList:
			sd.columns, err = r.columns()
		case id == 2 && t == tjsonString:
			sd.location, err = r.str()
		case id == 3 && t == tjsonString:
			s.InputFormat, err = r.str()
		case id == 4 && t == tjsonString:
			s.OutputFormat, err = r.str()
		case id == 5 && t == tjsonBool:
			s.Compressed, err = r.boolean()
		case id == 6 && t == tjsonI32:
			s.NumBuckets, err = r.i32()
		case id == 7 && t == tjsonStruct:
			// SerDeInfo: a repeated field replaces the whole struct.
			s.SerdeLib, s.SerdeParameters = "", nil
			err = r.readStruct(func(id int16, t tjsonType) (err error) {
				switch {
				case id == 2 && t == tjsonString:
					s.SerdeLib, err = r.str()
				case id == 3 && t == tjsonMap:
					s.SerdeParameters, err = r.stringMap()
				default:
					err = r.skip(t, tjsonMaxDepth)
				}
				return err
			})
		case id == 8 && t == tjsonList:
			s.BucketColumns, err = r.strings()
		case id == 10 && t == tjsonMap:
			s.Parameters, err = r.stringMap()
		default:
			err = r.skip(t, tjsonMaxDepth)
		}
		return err
	})
	return sd, err
}

// tjsonTable reads a Table; text is kept as its ThriftJSON.
func tjsonTable(text string) (*schemas.Table, error) {
	t := &schemas.Table{ThriftJSON: text}
	var sd *tjsonStorage
	err := tjsonParse(text, func(r *tjsonReader, id int16, typ tjsonType) (err error) {
		switch {
		case id == 1 && typ == tjsonString:
			t.Name, err = r.str()
		case id == 2 && typ == tjsonString:
			t.Database, err = r.str()
		case id == 3 && typ == tjsonString:
			t.Owner, err = r.str()
		case id == 4 && typ == tjsonI32:
			var v int32
			v, err = r.i32()
			t.CreateTime = int64(v)
		case id == 7 && typ == tjsonStruct:
			sd, err = r.storage()
		case id == 8 && typ == tjsonList:
			t.PartitionKeys, err = r.columns()
		case id == 9 && typ == tjsonMap:
			t.Parameters, err = r.stringMap()
		case id == 10 && typ == tjsonString:
			t.ViewOriginalText, err = r.str()
		case id == 11 && typ == tjsonString:
			t.ViewExpandedText, err = r.str()
		case id == 12 && typ == tjsonString:
			t.TableType, err = r.str()
		case id == 19 && typ == tjsonI64:
			t.WriteID, err = r.i64()
		default:
			err = r.skip(typ, tjsonMaxDepth)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if sd != nil {
		t.Storage = sd.storage
		t.Location = sd.location
		t.Columns = sd.columns
	} else {
		t.Storage = schemas.Storage{NumBuckets: -1}
	}
	return t, nil
}

// tjsonPartition reads a Partition; text is kept as its ThriftJSON.
func tjsonPartition(text string) (*schemas.Partition, error) {
	p := &schemas.Partition{ThriftJSON: text}
	var sd *tjsonStorage
	err := tjsonParse(text, func(r *tjsonReader, id int16, typ tjsonType) (err error) {
		switch {
		case id == 1 && typ == tjsonList:
			p.Values, err = r.strings()
		case id == 4 && typ == tjsonI32:
			var v int32
			v, err = r.i32()
			p.CreateTime = int64(v)
		case id == 6 && typ == tjsonStruct:
			sd, err = r.storage()
		case id == 7 && typ == tjsonMap:
			p.Parameters, err = r.stringMap()
		case id == 10 && typ == tjsonI64:
			p.WriteID, err = r.i64()
		default:
			err = r.skip(typ, tjsonMaxDepth)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if sd != nil {
		p.Location = sd.location
		p.Columns = sd.columns
		p.Storage = &sd.storage
	}
	return p, nil
}

// tjsonDatabase reads a Database.
func tjsonDatabase(text string) (*schemas.Database, error) {
	db := &schemas.Database{}
	err := tjsonParse(text, func(r *tjsonReader, id int16, typ tjsonType) (err error) {
		switch {
		case id == 1 && typ == tjsonString:
			db.Name, err = r.str()
		case id == 2 && typ == tjsonString:
			db.Description, err = r.str()
		case id == 3 && typ == tjsonString:
			db.Location, err = r.str()
		case id == 4 && typ == tjsonMap:
			db.Parameters, err = r.stringMap()
		case id == 6 && typ == tjsonString:
			db.Owner, err = r.str()
		case id == 10 && typ == tjsonString:
			db.ManagedLocation, err = r.str()
		default:
			err = r.skip(typ, tjsonMaxDepth)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return db, nil
}

// tjsonColumnStats is what Decode uses of a ColumnStatistics.
type tjsonColumnStats struct {
	database, table string
	columns         []string
}

var errTJSONRequired = errors.New("required field missing")

// tjsonColumnStatistics reads a ColumnStatistics, checking the required
// fields of it, its ColumnStatisticsDesc and its ColumnStatisticsObjs as
// Thrift does (the statistics data itself is skipped).
func tjsonColumnStatistics(text string) (*tjsonColumnStats, error) {
	cs := &tjsonColumnStats{}
	var hasDesc, hasObj bool
	err := tjsonParse(text, func(r *tjsonReader, id int16, typ tjsonType) (err error) {
		switch {
		case id == 1 && typ == tjsonStruct:
			cs.database, cs.table = "", ""
			var tbl, db, name bool
			err = r.readStruct(func(id int16, t tjsonType) (err error) {
				switch {
				case id == 1 && t == tjsonBool:
					_, err = r.boolean()
					tbl = true
				case id == 2 && t == tjsonString:
					cs.database, err = r.str()
					db = true
				case id == 3 && t == tjsonString:
					cs.table, err = r.str()
					name = true
				default:
					err = r.skip(t, tjsonMaxDepth)
				}
				return err
			})
			if err == nil && !(tbl && db && name) {
				err = fmt.Errorf("ColumnStatisticsDesc: %w", errTJSONRequired)
			}
			hasDesc = true
		case id == 2 && typ == tjsonList:
			cs.columns = nil
			_, err = r.structs(func() error {
				var colName string
				var name, typ, data bool
				err := r.readStruct(func(id int16, t tjsonType) (err error) {
					switch {
					case id == 1 && t == tjsonString:
						colName, err = r.str()
						name = true
					case id == 2 && t == tjsonString:
						_, err = r.str()
						typ = true
					case id == 3 && t == tjsonStruct:
						err = r.skip(t, tjsonMaxDepth)
						data = true
					default:
						err = r.skip(t, tjsonMaxDepth)
					}
					return err
				})
				if err == nil && !(name && typ && data) {
					err = fmt.Errorf("ColumnStatisticsObj: %w", errTJSONRequired)
				}
				cs.columns = append(cs.columns, colName)
				return err
			})
			hasObj = true
		default:
			err = r.skip(typ, tjsonMaxDepth)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if !hasDesc || !hasObj {
		return nil, fmt.Errorf("ColumnStatistics: %w", errTJSONRequired)
	}
	return cs, nil
}
