package hmsevent

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/beltran/gohive/hive_metastore"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// These tests hold ReadThriftJSON to Thrift's own TJSONProtocol reading
// the same generated struct: same value, or an error from both.

// tprotoNew returns a new generated struct of kind and its reset.
func tprotoNew(kind tjsonKind) (thrift.TStruct, func()) {
	switch kind {
	case tjsonKindTable:
		t := hive_metastore.NewTable()
		return t, func() { *t = *hive_metastore.NewTable() }
	case tjsonKindPartition:
		p := hive_metastore.NewPartition()
		return p, func() { *p = *hive_metastore.NewPartition() }
	case tjsonKindDatabase:
		d := hive_metastore.NewDatabase()
		return d, func() { *d = *hive_metastore.NewDatabase() }
	default:
		c := hive_metastore.NewColumnStatistics()
		return c, func() { *c = *hive_metastore.NewColumnStatistics() }
	}
}

// tprotoCompare reads text both ways; fast reports whether the fast
// reader alone read it.
func tprotoCompare(tb testing.TB, name string, kind tjsonKind, text string) (fast bool) {
	tb.Helper()
	ref, _ := tprotoNew(kind)
	refErr := tjsonRefRead(text, ref)
	got, reset := tprotoNew(kind)
	err := ReadThriftJSON(text, got, reset)
	if (err == nil) != (refErr == nil) {
		tb.Fatalf("%s (%s): ReadThriftJSON error %v, Thrift's %v\n%q", name, kind, err, refErr, text)
	}
	if err == nil && !tprotoEqual(got, ref) {
		tb.Fatalf("%s (%s): ReadThriftJSON read\n%+v\nThrift\n%+v\n%q", name, kind, got, ref, text)
	}
	alone, _ := tprotoNew(kind)
	if readThriftJSONFast(text, alone) != nil {
		return false
	}
	if refErr != nil || !tprotoEqual(alone, ref) {
		tb.Fatalf("%s (%s): the fast reader read %+v where Thrift gives %+v (%v)\n%q", name, kind, alone, ref, refErr, text)
	}
	return true
}

// tprotoEqual compares two read structs, a NaN equal to a NaN.
func tprotoEqual(a, b thrift.TStruct) bool { return cmp.Equal(a, b, cmpopts.EquateNaNs()) }

// TestReadThriftJSONAsThrift reads every embedded object of the fixtures
// and random objects Thrift wrote: the same values as Thrift's, and the
// fast reader reads every one of them itself (the fallback is for what
// Thrift alone accepts).
func TestReadThriftJSONAsThrift(t *testing.T) {
	texts := tjsonFixtureTexts(t)
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 1000 {
		kind := tjsonKind(i % int(tjsonKinds))
		texts = append(texts, tjsonText{fmt.Sprintf("random %d", i), kind, tjsonRandom(t, r, kind)})
	}
	for _, x := range texts {
		if !tprotoCompare(t, x.name, x.kind, x.text) {
			t.Errorf("%s (%s): left to Thrift's reader", x.name, x.kind)
		}
	}
}

// TestReadThriftJSONUnknownFields: fields the struct does not know, of
// every type, are skipped as Thrift skips them.
func TestReadThriftJSONUnknownFields(t *testing.T) {
	base := tjsonOf(t, &hive_metastore.Table{TableName: "t", DbName: "d", Parameters: map[string]string{"a": "b"}})
	for _, field := range tjsonUnknownFields {
		for _, first := range []bool{true, false} {
			tprotoCompare(t, field, tjsonKindTable, tjsonInsertField(base, field, first))
		}
	}
}

// TestReadThriftJSONMutated: whatever the fast reader accepts of mutated
// fixtures, Thrift reads the same; ReadThriftJSON always agrees with
// Thrift.
func TestReadThriftJSONMutated(t *testing.T) {
	texts := tjsonFixtureTexts(t)
	r := rand.New(rand.NewPCG(7, 8))
	n, fast := 0, 0
	for _, x := range texts {
		for range 100 {
			text := tjsonMutate(r, x.text)
			n++
			if tprotoCompare(t, x.name+" mutated", x.kind, text) {
				fast++
			}
		}
	}
	t.Logf("%d mutations, %d read by the fast reader", n, fast)
}

// TestReadThriftJSONKeys: map keys of every scalar type are read from
// their quoted form, and a container key is left to Thrift.
func TestReadThriftJSONKeys(t *testing.T) {
	stats := hive_metastore.NewColumnStatistics()
	stats.StatsDesc = &hive_metastore.ColumnStatisticsDesc{IsTblLevel: true, DbName: "d", TableName: "t"}
	tprotoCompare(t, "column statistics", tjsonKindColStats, tjsonOf(t, stats))
	p := newTJSONProto(`["lst","str",1,{["str",0]:"x"}]`)
	if _, _, _, err := p.ReadMapBegin(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.ReadListBegin(t.Context()); !errors.Is(err, errTProtoUnsupported) {
		t.Errorf("a list as a map key: %v, want it left to Thrift", err)
	}
}

// FuzzReadThriftJSON: on any input ReadThriftJSON agrees with Thrift and
// the fast reader never panics.
//
//	go test ./internal/hmsevent/ -run '^$' -fuzz FuzzReadThriftJSON -fuzztime 60s
func FuzzReadThriftJSON(f *testing.F) {
	for _, x := range tjsonFixtureTexts(f) {
		f.Add(byte(x.kind), x.text)
	}
	f.Fuzz(func(t *testing.T, k byte, text string) {
		tprotoCompare(t, "fuzz", tjsonKind(k%byte(tjsonKinds)), text)
	})
}

// BenchmarkReadThriftJSON reads the fixtures' tables and partitions into
// gohive's structs: ReadThriftJSON against Thrift's TJSONProtocol (the
// peer), in the same run.
func BenchmarkReadThriftJSON(b *testing.B) {
	var texts []tjsonText
	for _, x := range tjsonFixtureTexts(b) {
		if x.kind == tjsonKindTable || x.kind == tjsonKindPartition {
			texts = append(texts, x)
		}
	}
	bytes := 0
	for _, x := range texts {
		bytes += len(x.text)
	}
	for _, impl := range []struct {
		name string
		read func(text string, obj thrift.TStruct, reset func()) error
	}{
		{"hivedr", ReadThriftJSON},
		{"thrift", func(text string, obj thrift.TStruct, _ func()) error { return readThriftJSONSlow(text, obj) }},
	} {
		b.Run(impl.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(bytes))
			for b.Loop() {
				for _, x := range texts {
					obj, reset := tprotoNew(x.kind)
					if err := impl.read(x.text, obj, reset); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
