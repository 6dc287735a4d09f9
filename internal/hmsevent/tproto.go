package hmsevent

import (
	"context"
	"encoding/base64"
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/apache/thrift/lib/go/thrift"
)

// ReadThriftJSON reads text, a Thrift struct serialized with
// TJSONProtocol as the notification log embeds it, into obj (a generated
// Thrift struct such as *hive_metastore.Table). It drives obj's own
// generated Read with a protocol over this package's reader, which reads
// a text several times faster than Thrift's TJSONProtocol and with a
// fraction of its allocations; where that reader refuses something
// (a form it does not take, a value Thrift's reader would still accept),
// obj is reset and read again with Thrift's TJSONProtocol, so the result
// is always Thrift's own. TestReadThriftJSONAsThrift compares both on
// every captured object.
//
// reset must make obj as new again (e.g. *t = *hive_metastore.NewTable()),
// for the second reading.
func ReadThriftJSON(text string, obj thrift.TStruct, reset func()) error {
	if readThriftJSONFast(text, obj) == nil {
		return nil
	}
	reset()
	return readThriftJSONSlow(text, obj)
}

// readThriftJSONFast reads text into obj with tjsonProto alone.
func readThriftJSONFast(text string, obj thrift.TStruct) error {
	p := newTJSONProto(text)
	if err := obj.Read(context.Background(), p); err != nil {
		return err
	}
	return p.finish()
}

// readThriftJSONSlow is Thrift's own TJSONProtocol reader.
func readThriftJSONSlow(text string, obj thrift.TStruct) error {
	buf := thrift.NewTMemoryBufferLen(len(text))
	buf.WriteString(text)
	if err := obj.Read(context.Background(), thrift.NewTJSONProtocol(buf)); err != nil {
		return err
	}
	return nil
}

// errTProtoUnsupported is a form tjsonProto leaves to Thrift's reader.
var errTProtoUnsupported = errors.New("not read by the fast reader")

// tjsonProto is a read-only thrift.TProtocol over a tjsonReader. It
// keeps a stack of the containers it is in, to know which separators
// come before a value and whether the value is a map key (quoted, then a
// colon).
//
// It embeds a TBinaryProtocol over a buffer for one method only:
// ReadByte, whose Thrift signature `go vet` refuses to see declared
// (stdmethods: it is not io.ByteReader's). The i8 value of a field is
// read from the text when ReadFieldBegin meets it and put in the buffer,
// from which the embedded protocol's ReadByte takes it; i8 elements of a
// list or map are left to Thrift's reader. Every other method is this
// type's; the embedded protocol's writers are never called.
type tjsonProto struct {
	thrift.TProtocol
	byteBuf *thrift.TMemoryBuffer
	r       tjsonReader
	stack   []tprotoFrame
}

func newTJSONProto(text string) *tjsonProto {
	buf := thrift.NewTMemoryBufferLen(1)
	return &tjsonProto{TProtocol: thrift.NewTBinaryProtocolConf(buf, nil), byteBuf: buf, r: tjsonReader{s: text}}
}

type tprotoFrame struct {
	kind byte // 's' struct, 'l' list or set, 'm' map
	n    int  // fields, elements or keys read so far
	key  bool // in a map: the next value read is a key
	done bool // in a struct: its closing "}" was read
}

// finish checks that the top-level struct was read whole.
func (p *tjsonProto) finish() error {
	if len(p.stack) != 0 {
		return p.r.errorf("unclosed container")
	}
	return p.r.end()
}

// pre reads what comes before a value and reports whether it is a map
// key.
func (p *tjsonProto) pre() (key bool, err error) {
	if len(p.stack) == 0 {
		return false, nil
	}
	f := &p.stack[len(p.stack)-1]
	switch f.kind {
	case 'l':
		f.n++
		return false, p.r.expect(',')
	case 'm':
		if !f.key {
			f.key = true
			return false, nil
		}
		f.key = false
		f.n++
		if f.n > 1 {
			return true, p.r.expect(',')
		}
		return true, nil
	}
	return false, nil
}

// post reads the colon after a map key.
func (p *tjsonProto) post(key bool) error {
	if key {
		return p.r.expect(':')
	}
	return nil
}

// container starts a container value; a container cannot be a map key
// in JSON.
func (p *tjsonProto) container() error {
	key, err := p.pre()
	if err == nil && key {
		err = errTProtoUnsupported
	}
	return err
}

func (p *tjsonProto) pop(kind byte) error {
	if len(p.stack) == 0 || p.stack[len(p.stack)-1].kind != kind {
		return p.r.errorf("container end out of place")
	}
	p.stack = p.stack[:len(p.stack)-1]
	return nil
}

func (p *tjsonProto) ReadStructBegin(context.Context) (string, error) {
	if err := p.container(); err != nil {
		return "", err
	}
	if err := p.r.structBegin(); err != nil {
		return "", err
	}
	p.stack = append(p.stack, tprotoFrame{kind: 's'})
	return "", nil
}

func (p *tjsonProto) ReadStructEnd(context.Context) error {
	if len(p.stack) == 0 || !p.stack[len(p.stack)-1].done {
		return p.r.errorf("struct end before its last field")
	}
	return p.pop('s')
}

func (p *tjsonProto) ReadFieldBegin(context.Context) (string, thrift.TType, int16, error) {
	if len(p.stack) == 0 || p.stack[len(p.stack)-1].kind != 's' {
		return "", 0, 0, p.r.errorf("field outside a struct")
	}
	f := &p.stack[len(p.stack)-1]
	id, t, ok, err := p.r.field(f.n)
	if err != nil {
		return "", 0, 0, err
	}
	f.n++
	if !ok {
		f.done = true
		return "", thrift.STOP, 0, nil
	}
	p.byteBuf.Reset()
	if t == tjsonByte {
		v, err := p.r.integer(8)
		if err != nil {
			return "", 0, 0, err
		}
		p.byteBuf.WriteByte(byte(int8(v)))
	}
	return "", thrift.TType(t), id, nil
}

func (p *tjsonProto) ReadFieldEnd(context.Context) error {
	if p.byteBuf.Len() > 0 {
		return p.r.errorf("an i8 field not read")
	}
	return p.r.fieldEnd()
}

func (p *tjsonProto) ReadMapBegin(context.Context) (thrift.TType, thrift.TType, int, error) {
	if err := p.container(); err != nil {
		return 0, 0, 0, err
	}
	kt, vt, n, err := p.r.mapBegin()
	if err != nil {
		return 0, 0, 0, err
	}
	if kt == tjsonByte || vt == tjsonByte {
		return 0, 0, 0, errTProtoUnsupported
	}
	p.stack = append(p.stack, tprotoFrame{kind: 'm', key: true})
	return thrift.TType(kt), thrift.TType(vt), n, nil
}

func (p *tjsonProto) ReadMapEnd(context.Context) error {
	if err := p.r.mapEnd(); err != nil {
		return err
	}
	return p.pop('m')
}

func (p *tjsonProto) ReadListBegin(context.Context) (thrift.TType, int, error) {
	if err := p.container(); err != nil {
		return 0, 0, err
	}
	t, n, err := p.r.listBegin()
	if err != nil {
		return 0, 0, err
	}
	if t == tjsonByte {
		return 0, 0, errTProtoUnsupported
	}
	p.stack = append(p.stack, tprotoFrame{kind: 'l'})
	return thrift.TType(t), n, nil
}

func (p *tjsonProto) ReadListEnd(context.Context) error {
	if err := p.r.expect(']'); err != nil {
		return err
	}
	return p.pop('l')
}

func (p *tjsonProto) ReadSetBegin(ctx context.Context) (thrift.TType, int, error) {
	return p.ReadListBegin(ctx)
}

func (p *tjsonProto) ReadSetEnd(ctx context.Context) error { return p.ReadListEnd(ctx) }

// integer reads an integer of bits, quoted as a map key.
func (p *tjsonProto) integer(bits uint) (int64, error) {
	key, err := p.pre()
	if err != nil {
		return 0, err
	}
	var v int64
	if key {
		v, err = p.r.quotedInteger(bits)
	} else {
		v, err = p.r.integer(bits)
	}
	if err != nil {
		return 0, err
	}
	return v, p.post(key)
}

func (p *tjsonProto) ReadBool(context.Context) (bool, error) {
	key, err := p.pre()
	if err != nil {
		return false, err
	}
	if key {
		return false, errTProtoUnsupported
	}
	return p.r.boolean()
}

func (p *tjsonProto) ReadI16(context.Context) (int16, error) {
	v, err := p.integer(16)
	return int16(v), err
}

func (p *tjsonProto) ReadI32(context.Context) (int32, error) {
	v, err := p.integer(32)
	return int32(v), err
}

func (p *tjsonProto) ReadI64(context.Context) (int64, error) { return p.integer(64) }

// ReadDouble reads a bare JSON number or one of the quoted special
// values; a double as a map key is left to Thrift's reader.
func (p *tjsonProto) ReadDouble(context.Context) (float64, error) {
	key, err := p.pre()
	if err != nil {
		return 0, err
	}
	if key {
		return 0, errTProtoUnsupported
	}
	p.r.ws()
	if p.r.i < len(p.r.s) && p.r.s[p.r.i] == '"' {
		s, err := p.r.str()
		if err != nil {
			return 0, err
		}
		switch s {
		case "NaN":
			return math.NaN(), nil
		case "Infinity":
			return math.Inf(1), nil
		case "-Infinity":
			return math.Inf(-1), nil
		}
		return 0, errTProtoUnsupported
	}
	start := p.r.i
	if err := p.r.number(); err != nil {
		return 0, err
	}
	return strconv.ParseFloat(p.r.s[start:p.r.i], 64)
}

func (p *tjsonProto) ReadString(context.Context) (string, error) {
	key, err := p.pre()
	if err != nil {
		return "", err
	}
	s, err := p.r.str()
	if err != nil {
		return "", err
	}
	return s, p.post(key)
}

// ReadBinary reads base64 in a JSON string, padded or not; anything
// else is left to Thrift's reader.
func (p *tjsonProto) ReadBinary(context.Context) ([]byte, error) {
	key, err := p.pre()
	if err != nil {
		return nil, err
	}
	if key {
		return nil, errTProtoUnsupported
	}
	s, err := p.r.str()
	if err != nil {
		return nil, err
	}
	b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return nil, errTProtoUnsupported
	}
	return b, nil
}

// ReadUUID is left to Thrift's reader (no metastore struct holds one).

func (p *tjsonProto) ReadUUID(context.Context) (thrift.Tuuid, error) {
	return thrift.Tuuid{}, errTProtoUnsupported
}

// Skip drops a value of type t that the struct being read does not know
// (or knows with another type).
func (p *tjsonProto) Skip(_ context.Context, t thrift.TType) error {
	if t == thrift.BYTE && p.byteBuf.Len() > 0 {
		p.byteBuf.Reset() // a field's i8, read already
		return nil
	}
	key, err := p.pre()
	if err != nil {
		return err
	}
	if key {
		return errTProtoUnsupported
	}
	return p.r.skip(tjsonType(t), tjsonMaxDepth)
}

var _ thrift.TProtocol = (*tjsonProto)(nil)
