package schemas

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/linkedin/goavro/v2"
)

// The Confluent wire format: a magic byte 0, the writer's schema ID as 4
// big-endian bytes, then the Avro binary body.
const (
	magicByte  = 0
	headerSize = 5
)

// ErrUnknownSchemaID is returned (wrapped) by a Registry that does not know
// a schema ID.
var ErrUnknownSchemaID = errors.New("unknown schema ID")

// Registry is the part of a Confluent-compatible schema registry a Serde
// needs. Implementations must be safe for concurrent use.
type Registry interface {
	// Register registers schema under subject, or finds it there, and
	// returns its global ID.
	Register(ctx context.Context, subject, schema string) (id int, err error)
	SchemaFetcher
}

// SchemaFetcher is the read-only part of a Registry: what a Decoder
// needs. Implementations must be safe for concurrent use.
type SchemaFetcher interface {
	// SchemaByID returns the text of the schema with the given ID, or an
	// error wrapping ErrUnknownSchemaID.
	SchemaByID(ctx context.Context, id int) (schema string, err error)
}

// CompatibilitySetter is a Registry that can set a subject's
// compatibility level. A registry without the config endpoint returns an
// error wrapping errors.ErrUnsupported.
type CompatibilitySetter interface {
	SetCompatibility(ctx context.Context, subject, level string) error
}

// Compatibility is the level NewSerde sets on every subject: a new schema
// must read every record written with the previous one.
const Compatibility = "BACKWARD"

// Serde encodes hivedr records in the Confluent wire format with the
// current schemas, and decodes records with the schema that wrote them.
// It is safe for concurrent use.
type Serde struct {
	compat string

	// enc is indexed by record full name; it is fixed by NewSerde.
	enc map[string]*encoder

	// dec decodes; NewSerde seeds it with the current schemas' IDs.
	dec *Decoder
}

// Decoder decodes records in the Confluent wire format with the schema
// that wrote them, fetched from the registry by ID. It never writes to
// the registry: no schema is registered and no compatibility level
// changed, so read-only tools (hivedr status, hivedr cat) use it. It is
// safe for concurrent use.
type Decoder struct {
	reg SchemaFetcher

	mu      sync.RWMutex
	writers map[int]*writer // writer schemas by ID; entries never change
}

// NewDecoder returns a Decoder that fetches writer schemas from reg (by
// ID only) and caches them.
func NewDecoder(reg SchemaFetcher) *Decoder {
	return &Decoder{reg: reg, writers: map[int]*writer{}}
}

type encoder struct {
	id     int
	header [headerSize]byte
	codec  *goavro.Codec
	// size is the size of the last record encoded, so the next buffer is
	// allocated once at the right capacity.
	size atomic.Int64
}

type writer struct {
	id    int
	name  string
	codec *goavro.Codec
}

// NewSerde registers the current schemas with reg, each under its record
// full name as subject (see NameMetastoreEvent), and caches their IDs.
// When reg is a CompatibilitySetter it first sets each subject's
// compatibility to BACKWARD, so the registry refuses a schema change that
// would leave old records unreadable; Compatibility reports whether it
// could.
func NewSerde(ctx context.Context, reg Registry) (*Serde, error) {
	all, err := Schemas()
	if err != nil {
		return nil, err
	}
	s := &Serde{
		enc: make(map[string]*encoder, len(all)),
		dec: NewDecoder(reg),
	}
	cs, canSet := reg.(CompatibilitySetter)
	s.compat = Compatibility
	for _, sc := range all {
		var setErr error
		if canSet && s.compat != "" {
			setErr = cs.SetCompatibility(ctx, sc.Name, Compatibility)
			if errors.Is(setErr, errors.ErrUnsupported) {
				s.compat, setErr = "", nil
			}
		}
		id, err := reg.Register(ctx, sc.Name, sc.Text)
		if err != nil {
			return nil, fmt.Errorf("register schema %s: %w", sc.Name, err)
		}
		if setErr != nil {
			// Some registries only configure subjects that exist: try
			// again now that it does.
			if err := cs.SetCompatibility(ctx, sc.Name, Compatibility); err != nil {
				return nil, fmt.Errorf("set compatibility of subject %s to %s: %w (before registering: %v)", sc.Name, Compatibility, err, setErr)
			}
		}
		if id < 0 || id > 1<<31-1 {
			return nil, fmt.Errorf("register schema %s: registry returned ID %d, which does not fit the wire format", sc.Name, id)
		}
		e := &encoder{id: id, codec: sc.Codec}
		e.header[0] = magicByte
		binary.BigEndian.PutUint32(e.header[1:], uint32(id))
		s.enc[sc.Name] = e
		s.dec.writers[id] = &writer{id: id, name: sc.Name, codec: sc.Codec}
	}
	if !canSet {
		s.compat = ""
	}
	return s, nil
}

// Compatibility returns the compatibility level NewSerde set on the
// subjects, or "" when the registry could not set one (it then applies its
// global level).
func (s *Serde) Compatibility() string { return s.compat }

// SchemaID returns the registry ID of the current schema of the record
// with the given full name.
func (s *Serde) SchemaID(name string) (int, bool) {
	e, ok := s.enc[name]
	if !ok {
		return 0, false
	}
	return e.id, true
}

// Encode encodes a record (*Event, *CopyTask, *CopyCompletion, *Heartbeat,
// *TailerCheckpoint, or one of those values) with its current schema in
// the Confluent wire format.
func (s *Serde) Encode(v any) ([]byte, error) {
	return s.AppendEncode(nil, v)
}

// AppendEncode is Encode appending to dst, so a caller can reuse buffers.
// The body is written directly from the Go value (see binary.go), not
// through goavro's native form: this is the tailer's hot path.
func (s *Serde) AppendEncode(dst []byte, v any) ([]byte, error) {
	name := RecordName(v)
	e, ok := s.enc[name]
	if !ok {
		if name == "" {
			return dst, fmt.Errorf("encode: no schema for Go type %T", v)
		}
		return dst, fmt.Errorf("encode %s: no registered schema", name)
	}
	if dst == nil {
		dst = make([]byte, 0, e.size.Load()+64)
	}
	start := len(dst)
	out, _, err := appendBinary(append(dst, e.header[:]...), v)
	if err != nil {
		return dst[:start], fmt.Errorf("encode %s: %w", name, err)
	}
	e.size.Store(int64(len(out) - start))
	return out, nil
}

// RecordName returns the full record name of a Go record type (e.g.
// io.hivedr.MetastoreEvent for *Event), or "" for other types.
func RecordName(v any) string {
	switch v.(type) {
	case *Event, Event:
		return NameMetastoreEvent
	case *CopyTask, CopyTask:
		return NameCopyTask
	case *CopyCompletion, CopyCompletion:
		return NameCopyCompletion
	case *Heartbeat, Heartbeat:
		return NameHeartbeat
	case *TailerCheckpoint, TailerCheckpoint:
		return NameTailerCheckpoint
	case *BootstrapRequest, BootstrapRequest:
		return NameBootstrapRequest
	}
	return ""
}

// PayloadName returns the full record name of an event payload's branch
// (e.g. io.hivedr.TableChange), or "" for a nil payload.
func PayloadName(p Payload) string {
	switch p.(type) {
	case *DatabaseChange:
		return branchDatabaseChange
	case *TableChange:
		return branchTableChange
	case *PartitionChange:
		return branchPartitionChange
	case *InsertData:
		return branchInsertData
	case *Transaction:
		return branchTransaction
	case *WriteIDAllocation:
		return branchWriteIDAllocation
	case *ColumnStats:
		return branchColumnStats
	case *Compaction:
		return branchCompaction
	}
	return ""
}

// Decode decodes a record in the Confluent wire format with the schema
// that wrote it (see Decoder.Decode).
func (s *Serde) Decode(ctx context.Context, b []byte) (any, error) {
	return s.dec.Decode(ctx, b)
}

// Decode decodes a record in the Confluent wire format with the schema
// that wrote it, fetched from the registry by ID (and cached), and returns
// it as the Go type of the writer's record: *Event, *CopyTask,
// *CopyCompletion, *Heartbeat or *TailerCheckpoint. Fields the writer did
// not have take their defaults; fields this code does not know are
// ignored.
func (s *Decoder) Decode(ctx context.Context, b []byte) (any, error) {
	if len(b) < headerSize {
		return nil, fmt.Errorf("decode: record too short: %d bytes, the wire format needs at least %d", len(b), headerSize)
	}
	if b[0] != magicByte {
		return nil, fmt.Errorf("decode: bad magic byte 0x%02x (want 0x%02x): not in the Confluent wire format", b[0], magicByte)
	}
	id := int(binary.BigEndian.Uint32(b[1:headerSize]))
	w, err := s.writer(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	native, rest, err := w.codec.NativeFromBinary(b[headerSize:])
	if err != nil {
		return nil, fmt.Errorf("decode: body does not decode with schema %s (ID %d): %w", w.name, id, err)
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("decode: body does not decode with schema %s (ID %d): %d bytes left over", w.name, id, len(rest))
	}
	v, err := FromNative(w.name, native)
	if err != nil {
		return nil, fmt.Errorf("decode with schema ID %d: %w", id, err)
	}
	return v, nil
}

// writer returns the parsed schema with the given ID, fetching it on
// first use. Failures are not cached: a registry outage must not make a
// schema unknown for good.
func (s *Decoder) writer(ctx context.Context, id int) (*writer, error) {
	s.mu.RLock()
	w, ok := s.writers[id]
	s.mu.RUnlock()
	if ok {
		return w, nil
	}
	text, err := s.reg.SchemaByID(ctx, id)
	if err != nil {
		if errors.Is(err, ErrUnknownSchemaID) {
			return nil, fmt.Errorf("unknown schema ID %d: %w", id, err)
		}
		return nil, fmt.Errorf("fetch schema ID %d: %w", id, err)
	}
	sc, err := ParseSchema(text)
	if err != nil {
		return nil, fmt.Errorf("schema ID %d: %w", id, err)
	}
	w = &writer{id: id, name: sc.Name, codec: sc.Codec}
	s.mu.Lock()
	if prev, ok := s.writers[id]; ok {
		w = prev
	} else {
		s.writers[id] = w
	}
	s.mu.Unlock()
	return w, nil
}
