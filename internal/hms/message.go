package hms

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"io"
	"strings"
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

// MessageJSON returns the JSON text of a notification message, whatever
// encoder wrote it. Unknown formats are an error naming the format; a
// message that does not decode is an error naming what failed.
func MessageJSON(format, message string) ([]byte, error) {
	switch {
	case format == FormatJSON || format == "" || strings.HasPrefix(format, "json-"):
		return []byte(message), nil
	case strings.HasPrefix(format, "gzip(json-"):
		raw, err := base64.StdEncoding.DecodeString(message)
		if err != nil {
			return nil, fmt.Errorf("message format %q: base64: %w", format, err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("message format %q: gzip: %w", format, err)
		}
		out, err := io.ReadAll(io.LimitReader(zr, maxMessageJSON+1))
		if err != nil {
			return nil, fmt.Errorf("message format %q: gunzip: %w", format, err)
		}
		if len(out) > maxMessageJSON {
			return nil, fmt.Errorf("message format %q: decompressed message exceeds %d bytes", format, maxMessageJSON)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("unknown message format %q", format)
	}
}
