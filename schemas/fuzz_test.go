package schemas

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzDecode decodes a record off a topic (the Confluent wire format: a
// schema ID, then an Avro body) with the current and the previous schemas
// registered. Topics are read by other teams' producers too, so a record
// can be anything. Decode must not panic, and a record it accepts must
// encode again and decode to the same value.
func FuzzDecode(f *testing.F) {
	s, reg := newSerde(f)
	prev, err := filepath.Glob(filepath.Join("testdata", "previous", "*.avsc"))
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range prev {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		sc, err := ParseSchema(string(b))
		if err != nil {
			f.Fatalf("%s: %v", p, err)
		}
		if _, err := reg.Register(context.Background(), sc.Name, string(b)); err != nil {
			f.Fatal(err)
		}
	}
	for _, rec := range testRecords() {
		b, err := s.Encode(rec)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0, 0, 0, 0, 99, 2})
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := s.Decode(ctx, b)
		if err != nil {
			return
		}
		again, err := s.Encode(v)
		if err != nil {
			t.Fatalf("decoded %T does not encode again: %v", v, err)
		}
		w, err := s.Decode(ctx, again)
		if err != nil {
			t.Fatalf("re-encoded %T does not decode: %v", v, err)
		}
		if !reflect.DeepEqual(v, w) {
			t.Fatalf("round trip changed the record:\n got  %+v\n want %+v", w, v)
		}
	})
}
