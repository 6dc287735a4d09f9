package cdc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/linkedin/goavro/v2"

	"github.com/hivedr/hivedr/schemas"
)

const (
	nameValue = "io.hivedr.cdc.Value"
	// wire is the Confluent wire format's header: a magic byte 0 and the
	// schema ID as 4 big-endian bytes.
	wire = 5
)

// Source is the source block of the records one event gives.
type Source struct {
	Name, Version string
	EventID       int64
	EventTime     time.Time
	// Snapshot and BootstrapID are set on a bootstrap's records.
	Snapshot    bool
	BootstrapID string
}

// Codec encodes the view's records in the Confluent wire format with
// their schemas registered under each topic's subjects (<topic>-key,
// <topic>-value: the topic-name strategy, at BACKWARD compatibility), and
// decodes the view's own records by the schema that wrote them. It is
// safe for concurrent use.
type Codec struct {
	reg                schemas.Registry
	key, value, beat   *goavro.Codec
	keyText, valueText string
	beatText           string
	mu                 sync.Mutex
	ids                map[string]int        // by subject
	writers            map[int]*goavro.Codec // by schema ID
}

// NewCodec parses the view's schemas; it registers them with reg on
// first use of each topic.
func NewCodec(reg schemas.Registry) (*Codec, error) {
	c := &Codec{reg: reg, ids: map[string]int{}, writers: map[int]*goavro.Codec{}}
	for _, s := range []struct {
		file  string
		text  *string
		codec **goavro.Codec
	}{
		{schemas.CDCKeyFile, &c.keyText, &c.key},
		{schemas.CDCEnvelopeFile, &c.valueText, &c.value},
		{schemas.CDCHeartbeatFile, &c.beatText, &c.beat},
	} {
		text, err := schemas.CDCSchema(s.file)
		if err != nil {
			return nil, err
		}
		codec, err := goavro.NewCodec(text)
		if err != nil {
			return nil, fmt.Errorf("change view schema %s: %w", s.file, err)
		}
		*s.text, *s.codec = text, codec
	}
	return c, nil
}

// id registers text under subject (once per process) and sets the
// subject's compatibility to BACKWARD where the registry can.
func (c *Codec) id(ctx context.Context, subject, text string) (int, error) {
	c.mu.Lock()
	id, ok := c.ids[subject]
	c.mu.Unlock()
	if ok {
		return id, nil
	}
	id, err := c.reg.Register(ctx, subject, text)
	if err != nil {
		return 0, fmt.Errorf("register the change view's schema under subject %s: %w", subject, err)
	}
	if cs, ok := c.reg.(schemas.CompatibilitySetter); ok {
		if err := cs.SetCompatibility(ctx, subject, schemas.Compatibility); err != nil && !errors.Is(err, errors.ErrUnsupported) {
			return 0, fmt.Errorf("set compatibility %s on subject %s: %w", schemas.Compatibility, subject, err)
		}
	}
	c.mu.Lock()
	c.ids[subject] = id
	c.mu.Unlock()
	return id, nil
}

func (c *Codec) encode(ctx context.Context, subject, text string, codec *goavro.Codec, native any) ([]byte, error) {
	id, err := c.id(ctx, subject, text)
	if err != nil {
		return nil, err
	}
	b := make([]byte, wire, 256)
	binary.BigEndian.PutUint32(b[1:], uint32(id))
	b, err = codec.BinaryFromNative(b, native)
	if err != nil {
		return nil, fmt.Errorf("encode for subject %s: %w", subject, err)
	}
	return b, nil
}

// Key encodes k for topic.
func (c *Codec) Key(ctx context.Context, topic string, k Key) ([]byte, error) {
	return c.encode(ctx, topic+"-key", c.keyText, c.key, map[string]any{
		"database": k.Database, "table": k.Table, "partition": k.Partition,
	})
}

// Value encodes ch, from the event src describes, for topic.
func (c *Codec) Value(ctx context.Context, topic string, ch Change, src Source) ([]byte, error) {
	var table any
	if ch.Key.Table != "" {
		table = goavro.Union("string", ch.Key.Table)
	}
	var boot any
	if src.BootstrapID != "" {
		boot = goavro.Union("string", src.BootstrapID)
	}
	ms := src.EventTime.UnixMilli()
	return c.encode(ctx, topic+"-value", c.valueText, c.value, map[string]any{
		"before": imageNative(ch.Before),
		"after":  imageNative(ch.After),
		"op":     string(ch.Op),
		"ts_ms":  goavro.Union("long", ms),
		"source": map[string]any{
			"connector": "hivedr", "version": src.Version, "name": src.Name,
			"db": ch.Key.Database, "table": table, "event_id": src.EventID, "ts_ms": ms,
			"snapshot": src.Snapshot, "bootstrap_id": boot,
		},
	})
}

// Heartbeat encodes the event topic's heartbeat h for the view's
// heartbeat topic.
func (c *Codec) Heartbeat(ctx context.Context, topic string, h *schemas.Heartbeat) ([]byte, error) {
	return c.encode(ctx, topic+"-value", c.beatText, c.beat, map[string]any{
		"database": h.Database, "scanned_event_id": h.ScannedEventID, "scanned_ts_ms": h.ScannedEventTime.UnixMilli(),
		"source_head_event_id": h.SourceHeadEventID, "sent_ts_ms": h.Sent.UnixMilli(), "source": h.Source,
	})
}

func imageNative(im *Image) any {
	if im == nil {
		return nil
	}
	return goavro.Union(nameValue, map[string]any{
		"kind": im.Kind, "database": im.Database, "table": im.Table, "partition": im.Partition,
		"location": im.Location, "owner": im.Owner, "table_type": im.TableType,
		"columns": im.Columns, "partition_keys": im.PartitionKeys,
		"input_format": im.InputFormat, "serde_lib": im.SerdeLib, "parameters": im.Parameters,
		"create_time": im.CreateTime, "write_id": im.WriteID,
	})
}

// Record is a view record decoded: its key, and for a record with a
// value its op, its after image and the bootstrap that wrote it.
type Record struct {
	Key       Key
	Tombstone bool
	Op        Op
	Before    *Image
	After     *Image
	EventID   int64
	Bootstrap string
}

// Decode decodes a view record's key and value (nil: a tombstone).
func (c *Codec) Decode(ctx context.Context, key, value []byte) (Record, error) {
	var r Record
	kn, err := c.native(ctx, key)
	if err != nil {
		return r, fmt.Errorf("key: %w", err)
	}
	km, _ := kn.(map[string]any)
	r.Key = Key{Database: str(km, "database"), Table: str(km, "table"), Partition: str(km, "partition")}
	if value == nil {
		r.Tombstone = true
		return r, nil
	}
	vn, err := c.native(ctx, value)
	if err != nil {
		return r, fmt.Errorf("value: %w", err)
	}
	vm, _ := vn.(map[string]any)
	r.Op = Op(str(vm, "op"))
	r.Before, r.After = imageFromNative(vm["before"]), imageFromNative(vm["after"])
	if src, ok := vm["source"].(map[string]any); ok {
		r.EventID, _ = src["event_id"].(int64)
		if u, ok := src["bootstrap_id"].(map[string]any); ok {
			r.Bootstrap, _ = u["string"].(string)
		}
	}
	return r, nil
}

// native decodes one wire-format value with the schema that wrote it.
func (c *Codec) native(ctx context.Context, b []byte) (any, error) {
	if len(b) < wire || b[0] != 0 {
		return nil, fmt.Errorf("not in the Confluent wire format (%d bytes)", len(b))
	}
	id := int(binary.BigEndian.Uint32(b[1:wire]))
	c.mu.Lock()
	codec := c.writers[id]
	c.mu.Unlock()
	if codec == nil {
		text, err := c.reg.SchemaByID(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("schema %d: %w", id, err)
		}
		if codec, err = goavro.NewCodec(text); err != nil {
			return nil, fmt.Errorf("schema %d: %w", id, err)
		}
		c.mu.Lock()
		c.writers[id] = codec
		c.mu.Unlock()
	}
	v, rest, err := codec.NativeFromBinary(b[wire:])
	if err != nil {
		return nil, fmt.Errorf("schema %d: %w", id, err)
	}
	if len(rest) > 0 {
		return nil, fmt.Errorf("schema %d: %d bytes left after the record", id, len(rest))
	}
	return v, nil
}

func imageFromNative(v any) *Image {
	u, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	m, ok := u[nameValue].(map[string]any)
	if !ok {
		return nil
	}
	im := &Image{
		Kind: str(m, "kind"), Database: str(m, "database"), Table: str(m, "table"), Partition: str(m, "partition"),
		Location: str(m, "location"), Owner: str(m, "owner"), TableType: str(m, "table_type"),
		Columns: str(m, "columns"), PartitionKeys: str(m, "partition_keys"),
		InputFormat: str(m, "input_format"), SerdeLib: str(m, "serde_lib"), Parameters: str(m, "parameters"),
	}
	im.CreateTime, _ = m["create_time"].(int64)
	im.WriteID, _ = m["write_id"].(int64)
	return im
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}
