package hms

import (
	"context"
	"fmt"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/beltran/gohive/hive_metastore"
)

// Replicated transactions. A replica replays a source transaction the way
// Hive's REPL LOAD does: open_txns with the replication policy and the
// source's transaction IDs (the metastore opens transactions of its own,
// of type REPL_CREATED, and records which source transaction each stands
// for), allocate_table_write_ids with the source's write IDs, and
// commit_txn / abort_txn naming the source transaction again.
//
// Hive 4 looks the source transaction up only when the commit or abort
// request also says its type is REPL_CREATED (field txn_type, which
// gohive's generated CommitTxnRequest and AbortTxnRequest predate);
// without it the metastore takes the source's ID for one of its own and
// answers NoSuchTxnException. CommitReplTxn and AbortReplTxn write the
// requests with that field.

// CommitReplTxn commits the replica's transaction standing for the source
// transaction srcTxn under policy, with the writes it made (write IDs and
// files, as the replica names them) and, when last is set, moving the
// replica's repl.last.id in the same metastore transaction. A source
// transaction the replica no longer has open (committed before) is a
// no-op: the metastore finds no transaction for it and rolls back.
func (c *Client) CommitReplTxn(ctx context.Context, policy string, srcTxn int64, writes []*hive_metastore.WriteEventInfo, last *hive_metastore.ReplLastIdInfo) error {
	args := replTxnArgs{name: "commit_txn_args", req: &replTxnRequest{
		name: "CommitTxnRequest", txnID: srcTxn, policy: policy, writes: writes, last: last, typeField: 7,
	}}
	var res hive_metastore.ThriftHiveMetastoreCommitTxnResult
	meta, err := c.Client_().Call(ctx, "commit_txn", &args, &res)
	c.SetLastResponseMeta_(meta)
	switch {
	case err != nil:
		return fmt.Errorf("commit_txn of source transaction %d (policy %s): %w", srcTxn, policy, err)
	case res.O1 != nil:
		return fmt.Errorf("commit_txn of source transaction %d (policy %s): %w", srcTxn, policy, res.O1)
	case res.O2 != nil:
		return fmt.Errorf("commit_txn of source transaction %d (policy %s): %w", srcTxn, policy, res.O2)
	}
	return nil
}

// AbortReplTxn aborts the replica's transaction standing for the source
// transaction srcTxn under policy; its write IDs become aborted ones. A
// source transaction the replica has no transaction for is a no-op.
func (c *Client) AbortReplTxn(ctx context.Context, policy string, srcTxn int64) error {
	args := replTxnArgs{name: "abort_txn_args", req: &replTxnRequest{
		name: "AbortTxnRequest", txnID: srcTxn, policy: policy, typeField: 3,
	}}
	var res hive_metastore.ThriftHiveMetastoreAbortTxnResult
	meta, err := c.Client_().Call(ctx, "abort_txn", &args, &res)
	c.SetLastResponseMeta_(meta)
	switch {
	case err != nil:
		return fmt.Errorf("abort_txn of source transaction %d (policy %s): %w", srcTxn, policy, err)
	case res.O1 != nil:
		return fmt.Errorf("abort_txn of source transaction %d (policy %s): %w", srcTxn, policy, res.O1)
	}
	return nil
}

// replTxnArgs is a commit_txn / abort_txn argument list: the request as
// field 1.
type replTxnArgs struct {
	name string
	req  *replTxnRequest
}

func (a *replTxnArgs) Write(ctx context.Context, p thrift.TProtocol) error {
	if err := p.WriteStructBegin(ctx, a.name); err != nil {
		return err
	}
	if err := p.WriteFieldBegin(ctx, "rqst", thrift.STRUCT, 1); err != nil {
		return err
	}
	if err := a.req.Write(ctx, p); err != nil {
		return err
	}
	if err := p.WriteFieldEnd(ctx); err != nil {
		return err
	}
	if err := p.WriteFieldStop(ctx); err != nil {
		return err
	}
	return p.WriteStructEnd(ctx)
}

func (a *replTxnArgs) Read(context.Context, thrift.TProtocol) error {
	return fmt.Errorf("%s: write-only", a.name)
}

// replTxnRequest is CommitTxnRequest (txn_type is field 7) or
// AbortTxnRequest (field 3) of a replicated transaction: txnid, replPolicy,
// for a commit writeEventInfos and replLastIdInfo, and txn_type
// REPL_CREATED.
type replTxnRequest struct {
	name      string
	txnID     int64
	policy    string
	writes    []*hive_metastore.WriteEventInfo
	last      *hive_metastore.ReplLastIdInfo
	typeField int16
}

func (r *replTxnRequest) Write(ctx context.Context, p thrift.TProtocol) error {
	if err := p.WriteStructBegin(ctx, r.name); err != nil {
		return err
	}
	field := func(name string, typ thrift.TType, id int16, body func() error) error {
		if err := p.WriteFieldBegin(ctx, name, typ, id); err != nil {
			return err
		}
		if err := body(); err != nil {
			return err
		}
		return p.WriteFieldEnd(ctx)
	}
	if err := field("txnid", thrift.I64, 1, func() error { return p.WriteI64(ctx, r.txnID) }); err != nil {
		return err
	}
	if err := field("replPolicy", thrift.STRING, 2, func() error { return p.WriteString(ctx, r.policy) }); err != nil {
		return err
	}
	if len(r.writes) > 0 {
		err := field("writeEventInfos", thrift.LIST, 3, func() error {
			if err := p.WriteListBegin(ctx, thrift.STRUCT, len(r.writes)); err != nil {
				return err
			}
			for _, w := range r.writes {
				if err := w.Write(ctx, p); err != nil {
					return err
				}
			}
			return p.WriteListEnd(ctx)
		})
		if err != nil {
			return err
		}
	}
	if r.last != nil {
		if err := field("replLastIdInfo", thrift.STRUCT, 4, func() error { return r.last.Write(ctx, p) }); err != nil {
			return err
		}
	}
	err := field("txn_type", thrift.I32, r.typeField, func() error {
		return p.WriteI32(ctx, int32(hive_metastore.TxnType_REPL_CREATED))
	})
	if err != nil {
		return err
	}
	if err := p.WriteFieldStop(ctx); err != nil {
		return err
	}
	return p.WriteStructEnd(ctx)
}

func (r *replTxnRequest) Read(context.Context, thrift.TProtocol) error {
	return fmt.Errorf("%s: write-only", r.name)
}
