package producer

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"io"
	"strings"
	"sync"
	"unsafe"

	"github.com/hivedr/hivedr/internal/hms"
)

// decodeMaxMessageJSON bounds the decompressed size of one message, as
// hms.MessageJSON does, so a gzip bomb cannot exhaust memory.
const decodeMaxMessageJSON = 512 << 20

// decodeMaxPooledBuffer is the largest buffer put back in the pool: a rare
// huge message must not stay pinned in memory.
const decodeMaxPooledBuffer = 1 << 20

// decodeMessage is the JSON text of one message in a pooled buffer. Its
// bytes are valid only until release: nothing decoded from them may keep
// them (encoding/json and the TJSON reader copy what they keep from it).
type decodeMessage struct {
	json []byte
	buf  *decodeBuffers
}

func (m *decodeMessage) release() {
	if m.buf != nil {
		m.buf.put()
		m.buf = nil
	}
	m.json = nil
}

// decodeBuffers is the reusable state of one gunzip: the base64-decoded
// bytes, a reader over them, the gzip reader (its inflater tables are most
// of what a fresh one allocates) and the output buffer. The pool keeps
// Decode free of shared mutable state: each call owns the buffers it took.
type decodeBuffers struct {
	raw []byte
	br  bytes.Reader
	zr  *gzip.Reader
	out bytes.Buffer
}

var decodeBufferPool = sync.Pool{New: func() any { return new(decodeBuffers) }}

// decodeMessageJSON returns the JSON text of a notification message,
// exactly as hms.MessageJSON does (same formats, same errors, same size
// limit), reusing pooled buffers and gzip readers. The caller must
// release the result.
func decodeMessageJSON(format, message string) (decodeMessage, error) {
	switch {
	case format == hms.FormatJSON || format == "" || strings.HasPrefix(format, "json-"):
		return decodeMessage{json: []byte(message)}, nil
	case strings.HasPrefix(format, "gzip(json-"):
		b := decodeBufferPool.Get().(*decodeBuffers)
		out, err := b.gunzip(format, message)
		if err != nil {
			b.put()
			return decodeMessage{}, err
		}
		return decodeMessage{json: out, buf: b}, nil
	default:
		return decodeMessage{}, fmt.Errorf("unknown message format %q", format)
	}
}

func (b *decodeBuffers) put() {
	if cap(b.raw) > decodeMaxPooledBuffer || b.out.Cap() > decodeMaxPooledBuffer {
		return
	}
	decodeBufferPool.Put(b)
}

func (b *decodeBuffers) gunzip(format, message string) ([]byte, error) {
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
	if _, err := b.out.ReadFrom(io.LimitReader(b.zr, decodeMaxMessageJSON+1)); err != nil {
		return nil, fmt.Errorf("message format %q: gunzip: %w", format, err)
	}
	if b.out.Len() > decodeMaxMessageJSON {
		return nil, fmt.Errorf("message format %q: decompressed message exceeds %d bytes", format, decodeMaxMessageJSON)
	}
	return b.out.Bytes(), nil
}
