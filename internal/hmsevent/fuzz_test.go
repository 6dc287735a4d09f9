package hmsevent

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/hmslog"
	"github.com/hivedr/hivedr/schemas"
)

// The fuzz targets below feed untrusted input (a notification-log row is
// written by whoever can write to the source metastore) to the decoders.
// Their seed corpora are the captured fixtures in testdata/events, and the
// crashers found are kept under testdata/fuzz/<target>; both run in every
// `go test`. `make fuzz` explores further.

// FuzzDecode decodes a notification in either message format. Decode must
// neither panic nor hide a decoder panic as an ordinary decode error (its
// recover is for production; here a panic is a bug to fix).
func FuzzDecode(f *testing.F) {
	for _, fx := range loadDecodeFixtures(f) {
		f.Add(string(fx.raw.EventType), fx.raw.MessageFormat, fx.raw.Message)
		if m, err := hms.DecodeMessage(fx.raw.MessageFormat, fx.raw.Message); err == nil {
			// The same message as plain JSON, so the fuzzer mutates its
			// text rather than its gzip stream.
			f.Add(string(fx.raw.EventType), "json-2.0", string(m.JSON))
			m.Release()
		}
	}
	f.Fuzz(func(t *testing.T, eventType, format, message string) {
		ev := Decode(hmslog.RawEvent{EventID: 7, EventTime: 1, EventType: schemas.EventType(eventType),
			Database: "db", Table: "t", MessageFormat: format, Message: message})
		if ev.Message != message || ev.MessageFormat != format {
			t.Fatal("Decode changed the message it keeps")
		}
		for _, e := range ev.Errors {
			if strings.Contains(e.Message, "panic while decoding") {
				t.Fatalf("decoder panicked: %s", e.Message)
			}
		}
		if len(ev.Errors) > 0 && (ev.Payload != nil || len(ev.Files) > 0) {
			t.Fatalf("an event with a decode error has a payload or files: %+v", ev)
		}
	})
}

// thriftJSONSeeds returns the Thrift JSON objects embedded in the fixtures'
// messages (tableObjJson, partitionListJson, ...).
func thriftJSONSeeds(tb testing.TB) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			if strings.HasPrefix(v, "{\"") {
				out = append(out, v)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	for _, fx := range loadDecodeFixtures(tb) {
		m, err := hms.DecodeMessage(fx.raw.MessageFormat, fx.raw.Message)
		if err != nil {
			continue
		}
		var v any
		if json.Unmarshal(m.JSON, &v) == nil {
			walk(v)
		}
		m.Release()
	}
	return out
}

// FuzzThriftJSON reads text as each metastore object the TJSON reader
// knows. It must not panic, and an object it accepts must read the same
// twice (the reader keeps no state between calls).
func FuzzThriftJSON(f *testing.F) {
	for _, s := range thriftJSONSeeds(f) {
		f.Add(s)
	}
	f.Add(`{"1":{"str":"a"},"2":{"lst":["str",2,"x","y"]},"3":{"map":["str","str",1,{"k":"v"}]}}`)
	f.Fuzz(func(t *testing.T, text string) {
		if _, err := tjsonTable(text); err == nil {
			if _, err := tjsonTable(text); err != nil {
				t.Fatalf("table read once, then failed: %v", err)
			}
		}
		_, _ = tjsonPartition(text)
		_, _ = tjsonDatabase(text)
		_, _ = tjsonColumnStatistics(text)
	})
}
