package hms

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"strings"
	"testing"
)

func gzipBase64(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

func TestMessageJSON(t *testing.T) {
	const doc = `{"server":"","db":"sales"}`
	tests := []struct {
		name, format, message string
		want                  string
		wantErr               string
	}{
		{name: "json-0.2", format: FormatJSON, message: doc, want: doc},
		{name: "gzip json-2.0", format: FormatGzipJSON, message: gzipBase64(t, doc), want: doc},
		{name: "bad base64", format: FormatGzipJSON, message: "!!!", wantErr: "base64"},
		{name: "not gzip", format: FormatGzipJSON, message: base64.StdEncoding.EncodeToString([]byte("plain")), wantErr: "gzip"},
		{name: "unknown format", format: "avro-1", message: doc, wantErr: `unknown message format "avro-1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MessageJSON(tt.format, tt.message)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestDecodeMessageReusesBuffers alternates good and bad messages so pooled
// readers are reused after errors, and checks each result.
func TestDecodeMessageReusesBuffers(t *testing.T) {
	docs := []string{`{"a":1}`, strings.Repeat(`{"b":"xyz"}`, 1000), `{}`}
	for i := 0; i < 300; i++ {
		doc := docs[i%len(docs)]
		m, err := DecodeMessage(FormatGzipJSON, gzipBase64(t, doc))
		if err != nil || string(m.JSON) != doc {
			t.Fatalf("round %d: %q, %v", i, m.JSON, err)
		}
		m.Release()
		if _, err := DecodeMessage(FormatGzipJSON, base64.StdEncoding.EncodeToString([]byte("not gzip"))); err == nil {
			t.Fatalf("round %d: a non-gzip message decoded", i)
		}
	}
}
