package hms

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/beltran/gohive/hive_metastore"
)

// serveEmptyReplies answers every call on one connection with a reply
// whose result struct is empty: no success, no exception.
func serveEmptyReplies(t *testing.T) string {
	return acceptOne(t, func(c net.Conn) {
		ctx := context.Background()
		trans := thrift.NewTBufferedTransport(thrift.NewTSocketFromConnConf(c, nil), 4096)
		p := thrift.NewTBinaryProtocolConf(trans, nil)
		for {
			name, _, seq, err := p.ReadMessageBegin(ctx)
			if err != nil {
				return
			}
			if p.Skip(ctx, thrift.STRUCT) != nil || p.ReadMessageEnd(ctx) != nil {
				return
			}
			if p.WriteMessageBegin(ctx, name, thrift.REPLY, seq) != nil || p.WriteStructBegin(ctx, "result") != nil ||
				p.WriteFieldStop(ctx) != nil || p.WriteStructEnd(ctx) != nil || p.WriteMessageEnd(ctx) != nil || p.Flush(ctx) != nil {
				return
			}
		}
	})
}

// TestNoResultIsAnError: a reply that carries nothing (the generated
// client gives nil, nil for it) is ErrNoResult, never a nil result.
func TestNoResultIsAnError(t *testing.T) {
	ctx := context.Background()
	c, err := Dial(ctx, serveEmptyReplies(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	calls := map[string]func() (any, error){
		"get_database": func() (any, error) { return c.GetDatabase(ctx, "d") },
		"get_table_req": func() (any, error) {
			return c.GetTableReq(ctx, TableRequest("d", "t"))
		},
		"get_partitions_by_names_req": func() (any, error) {
			return c.GetPartitionsByNamesReq(ctx, &hive_metastore.GetPartitionsByNamesRequest{DbName: "d", TblName: "t"})
		},
		"get_current_notificationEventId": func() (any, error) { return c.GetCurrentNotificationEventId(ctx) },
		"get_open_txns":                   func() (any, error) { return c.GetOpenTxns(ctx) },
	}
	for op, call := range calls {
		r, err := call()
		if !errors.Is(err, ErrNoResult) {
			t.Errorf("%s: result %v, error %v; want ErrNoResult", op, r, err)
		}
	}
	// What the generated client alone gives for the same reply.
	r, err := c.ThriftHiveMetastoreClient.GetDatabase(ctx, "d")
	if r != nil || err != nil {
		t.Fatalf("the generated client gave %v, %v for an empty reply; the reason for ErrNoResult is gone", r, err)
	}
}
