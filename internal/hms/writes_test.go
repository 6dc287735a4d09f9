package hms

import (
	"context"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/beltran/gohive/hive_metastore"
)

// TestAllWriteEventInfoWire: the request carries the transaction ID as
// GetAllWriteEventInfoRequest.txnId (field 1 of field 1), and an answer
// as the metastore writes it (the list as field 0, a MetaException as
// field 1, unknown fields skipped) reads back.
func TestAllWriteEventInfoWire(t *testing.T) {
	ctx := context.Background()
	buf := thrift.NewTMemoryBuffer()
	p := thrift.NewTBinaryProtocolConf(buf, nil)
	if err := (&allWriteEventInfoArgs{txnID: 4242}).Write(ctx, p); err != nil {
		t.Fatal(err)
	}
	var got int64
	if _, err := p.ReadStructBegin(ctx); err != nil {
		t.Fatal(err)
	}
	_, typ, id, _ := p.ReadFieldBegin(ctx)
	if typ != thrift.STRUCT || id != 1 {
		t.Fatalf("args field %d of type %v, want the request as struct field 1", id, typ)
	}
	_, _ = p.ReadStructBegin(ctx)
	_, typ, id, _ = p.ReadFieldBegin(ctx)
	if typ != thrift.I64 || id != 1 {
		t.Fatalf("request field %d of type %v, want txnId as i64 field 1", id, typ)
	}
	got, _ = p.ReadI64(ctx)
	if got != 4242 {
		t.Fatalf("txnId %d, want 4242", got)
	}

	part := "dt=2024-01-01"
	want := []*hive_metastore.WriteEventInfo{
		{WriteId: 3, Database: "sales", Table: "orders", Files: "hdfs://a#c##delta_3_3_0", Partition: &part},
		{WriteId: 1, Database: "hr", Table: "people", Files: ""},
	}
	buf.Reset()
	_ = p.WriteStructBegin(ctx, "get_all_write_event_info_result")
	_ = p.WriteFieldBegin(ctx, "extra", thrift.STRING, 9)
	_ = p.WriteString(ctx, "skipped")
	_ = p.WriteFieldEnd(ctx)
	_ = p.WriteFieldBegin(ctx, "success", thrift.LIST, 0)
	_ = p.WriteListBegin(ctx, thrift.STRUCT, len(want))
	for _, w := range want {
		if err := w.Write(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	_ = p.WriteListEnd(ctx)
	_ = p.WriteFieldEnd(ctx)
	_ = p.WriteFieldStop(ctx)
	_ = p.WriteStructEnd(ctx)
	var res allWriteEventInfoResult
	if err := res.Read(ctx, p); err != nil {
		t.Fatal(err)
	}
	if len(res.success) != 2 || !res.success[0].Equals(want[0]) || !res.success[1].Equals(want[1]) || res.o1 != nil {
		t.Fatalf("read %+v, want %+v", res.success, want)
	}

	buf.Reset()
	_ = p.WriteStructBegin(ctx, "get_all_write_event_info_result")
	_ = p.WriteFieldBegin(ctx, "o1", thrift.STRUCT, 1)
	_ = (&hive_metastore.MetaException{Message: "boom"}).Write(ctx, p)
	_ = p.WriteFieldEnd(ctx)
	_ = p.WriteFieldStop(ctx)
	_ = p.WriteStructEnd(ctx)
	res = allWriteEventInfoResult{}
	if err := res.Read(ctx, p); err != nil {
		t.Fatal(err)
	}
	if res.o1 == nil || res.o1.Message != "boom" {
		t.Fatalf("MetaException not read: %+v", res)
	}
}
