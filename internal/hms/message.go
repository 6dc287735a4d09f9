package hms

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"io"
	"strings"
	"sync"
	"unsafe"
)

// Message formats written by the metastore's message encoders into
// NOTIFICATION_LOG.MESSAGE_FORMAT.
const (
	// FormatJSON is the plain JSON encoder of Hive 2 and 3
	// (JSONMessageEncoder): MESSAGE holds the JSON text.
	FormatJSON = "json-0.2"
	// FormatGzipJSON is Hive 4's default (GzipJSONMessageEncoder): MESSAGE
	// holds base64 of the gzip of the JSON text.
	FormatGzipJSON = "gzip(json-2.0)"
)

// maxMessageJSON bounds the decompressed size of one message, so a
// corrupt or hostile row cannot exhaust memory (a gzip bomb).
const maxMessageJSON = 512 << 20

// maxPooledBuffer is the largest buffer put back in the pool: a rare huge
// message must not stay pinned in memory.
const maxPooledBuffer = 1 << 20

// MessageJSON returns the JSON text of a notification message, whatever
// encoder wrote it. Unknown formats are an error naming the format; a
// message that does not decode is an error naming what failed.
func MessageJSON(format, message string) ([]byte, error) {
	m, err := DecodeMessage(format, message)
	if err != nil {
		return nil, err
	}
	defer m.Release()
	return bytes.Clone(m.JSON), nil
}

// Message is the JSON text of one message, possibly in a pooled buffer.
type Message struct {
	// JSON is valid only until Release: nothing decoded from it may keep
	// a reference to its bytes.
	JSON []byte
	buf  *buffers
}

// Release returns the message's buffer to the pool.
func (m *Message) Release() {
	if m.buf != nil {
		m.buf.put()
		m.buf = nil
	}
	m.JSON = nil
}

// buffers is the reusable state of one gunzip: the base64-decoded bytes, a
// reader over them, the gzip reader (its inflater tables are most of what a
// fresh one allocates) and the output buffer. Each call owns the buffers
// it took from the pool, so decoding shares no mutable state.
type buffers struct {
	raw []byte
	br  bytes.Reader
	zr  *gzip.Reader
	out bytes.Buffer
}

var bufferPool = sync.Pool{New: func() any { return new(buffers) }}

// DecodeMessage is MessageJSON without the copy, for hot paths: it reuses
// pooled buffers and gzip readers. The caller must Release the result.
// A missing format ("") is read as JSON, as Hive 1 wrote it.
func DecodeMessage(format, message string) (Message, error) {
	switch {
	case format == FormatJSON || format == "" || strings.HasPrefix(format, "json-"):
		return Message{JSON: []byte(message)}, nil
	case strings.HasPrefix(format, "gzip(json-"):
		b := bufferPool.Get().(*buffers)
		out, err := b.gunzip(format, message)
		if err != nil {
			b.put()
			return Message{}, err
		}
		return Message{JSON: out, buf: b}, nil
	default:
		return Message{}, fmt.Errorf("unknown message format %q", format)
	}
}

func (b *buffers) put() {
	if cap(b.raw) > maxPooledBuffer || b.out.Cap() > maxPooledBuffer {
		return
	}
	bufferPool.Put(b)
}

func (b *buffers) gunzip(format, message string) ([]byte, error) {
	n := base64.StdEncoding.DecodedLen(len(message))
	if cap(b.raw) < n {
		b.raw = make([]byte, n)
	}
	// Decode only reads its source: viewing the string's bytes saves a
	// copy of every message.
	src := unsafe.Slice(unsafe.StringData(message), len(message))
	n, err := base64.StdEncoding.Decode(b.raw[:n], src)
	if err != nil {
		return nil, fmt.Errorf("message format %q: base64: %w", format, err)
	}
	b.br.Reset(b.raw[:n])
	if b.zr == nil {
		b.zr, err = gzip.NewReader(&b.br)
	} else {
		err = b.zr.Reset(&b.br)
	}
	if err != nil {
		return nil, fmt.Errorf("message format %q: gzip: %w", format, err)
	}
	b.out.Reset()
	if _, err := b.out.ReadFrom(io.LimitReader(b.zr, maxMessageJSON+1)); err != nil {
		return nil, fmt.Errorf("message format %q: gunzip: %w", format, err)
	}
	if b.out.Len() > maxMessageJSON {
		return nil, fmt.Errorf("message format %q: decompressed message exceeds %d bytes", format, maxMessageJSON)
	}
	return b.out.Bytes(), nil
}
