package main

import (
	"fmt"

	"github.com/beltran/gohive/hive_metastore"
)

// The transactional script (-acid): what Hive's writers do to ACID tables,
// through the metastore's Thrift API, in two databases of their own.
const (
	acidDB      = "cap_acid"
	acidOtherDB = "cap_acid_other"
)

// acidTable is one transactional table of the script.
type acidTable struct {
	db, name string
	// insertOnly: transactional_properties=insert_only (text files);
	// otherwise full ACID (ORC).
	insertOnly bool
	// partition is the value of its one partition key dt ("" unpartitioned).
	partition string
}

var acidTables = []acidTable{
	{db: acidDB, name: "orders"},
	{db: acidDB, name: "events", insertOnly: true, partition: "2024-01-01"},
	{db: acidOtherDB, name: "ledger", partition: "2024-01-01"},
}

// acidScript: create the tables (a partition each where partitioned);
// a transaction writing all three (two databases) that commits; one that
// writes orders and aborts; one that writes a base over orders'
// deltas (as INSERT OVERWRITE leaves it) and commits; a major compaction
// of events' partition; one that writes ledger and is still open when the
// log is read.
func (s *steps) acidScript() {
	ctx := s.ctx
	loc := map[string]string{}
	for _, db := range []string{acidDB, acidOtherDB} {
		s.do("create database "+db, func() error {
			return s.c.CreateDatabase(ctx, &hive_metastore.Database{
				Name: db, Description: "hivedr capture: transactional tables",
				LocationUri:        s.external + "/" + db + ".db",
				ManagedLocationUri: strp(s.warehouse + "/" + db + ".db"),
				Parameters:         map[string]string{},
			})
		})
	}
	for _, t := range acidTables {
		dir := s.warehouse + "/" + t.db + ".db/" + t.name
		loc[t.db+"."+t.name] = dir
		sd := orcSD(dir, cols("id", "bigint", "payload", "string"))
		props := "default"
		if t.insertOnly {
			sd, props = textSD(dir, cols("id", "bigint", "payload", "string")), "insert_only"
		}
		var keys []*hive_metastore.FieldSchema
		if t.partition != "" {
			keys = cols("dt", "string")
		}
		s.do("create transactional table "+t.db+"."+t.name, func() error {
			return s.c.CreateTableReq(ctx, &hive_metastore.CreateTableRequest{
				Table: &hive_metastore.Table{
					DbName: t.db, TableName: t.name, Owner: "hivedr", Sd: sd, PartitionKeys: keys,
					Parameters: map[string]string{"transactional": "true", "transactional_properties": props},
					TableType:  "MANAGED_TABLE",
				},
				ProcessorCapabilities: acidCapabilities,
				ProcessorIdentifier:   strp("hivedr-capture"),
			})
		})
		if t.partition == "" {
			continue
		}
		s.do("add partition to "+t.db+"."+t.name, func() error {
			tb, err := s.table(t.db, t.name)
			if err != nil {
				return err
			}
			psd := *tb.Sd
			psd.Location = dir + "/dt=" + t.partition
			_, err = s.c.AddPartitions(ctx, []*hive_metastore.Partition{{
				Values: []string{t.partition}, DbName: t.db, TableName: t.name, Sd: &psd, Parameters: map[string]string{},
			}})
			return err
		})
	}

	// write allocates t's write ID in txn and logs one file under dir
	// (a delta_ or base_ directory named after the write ID).
	write := func(txn int64, t acidTable, base bool) {
		s.do(fmt.Sprintf("transaction %d writes %s.%s", txn, t.db, t.name), func() error {
			r, err := s.c.AllocateTableWriteIds(ctx, &hive_metastore.AllocateTableWriteIdsRequest{DbName: t.db, TableName: t.name, TxnIds: []int64{txn}})
			if err != nil {
				return err
			}
			if len(r.TxnToWriteIds) != 1 {
				return fmt.Errorf("%d write ids allocated, want 1", len(r.TxnToWriteIds))
			}
			wid := r.TxnToWriteIds[0].WriteId
			sub := fmt.Sprintf("delta_%07d_%07d_0000", wid, wid)
			if base {
				sub = fmt.Sprintf("base_%07d", wid)
			}
			dir := loc[t.db+"."+t.name]
			var vals []string
			if t.partition != "" {
				dir += "/dt=" + t.partition
				vals = []string{t.partition}
			}
			file := "bucket_00000_0"
			if t.insertOnly {
				file = "000000_0"
			}
			_, err = s.c.AddWriteNotificationLog(ctx, &hive_metastore.WriteNotificationLogRequest{
				TxnId: txn, WriteId: wid, Db: t.db, Table: t.name, PartitionVals: vals,
				FileInfo: &hive_metastore.InsertEventRequestData{
					FilesAdded:       []string{dir + "/" + sub + "/" + file},
					SubDirectoryList: []string{sub},
				},
			})
			return err
		})
	}
	open := func() int64 {
		var id int64
		s.do("open a transaction", func() error {
			r, err := s.c.OpenTxns(ctx, &hive_metastore.OpenTxnRequest{NumTxns: 1, User: "hivedr", Hostname: "capture", AgentInfo: "hivedr-capture"})
			if err != nil {
				return err
			}
			if len(r.TxnIds) != 1 {
				return fmt.Errorf("%d transactions opened, want 1", len(r.TxnIds))
			}
			id = r.TxnIds[0]
			return nil
		})
		return id
	}
	commit := func(txn int64) {
		s.do(fmt.Sprintf("commit transaction %d", txn), func() error {
			return s.c.CommitTxn(ctx, &hive_metastore.CommitTxnRequest{Txnid: txn})
		})
	}

	if txn := open(); txn != 0 {
		for _, t := range acidTables {
			write(txn, t, false)
		}
		commit(txn)
	}
	if txn := open(); txn != 0 {
		write(txn, acidTables[0], false)
		s.do(fmt.Sprintf("abort transaction %d", txn), func() error {
			return s.c.AbortTxns(ctx, &hive_metastore.AbortTxnsRequest{TxnIds: []int64{txn}})
		})
	}
	if txn := open(); txn != 0 {
		write(txn, acidTables[0], true)
		commit(txn)
	}
	// A major compaction of events' partition, as Hive's compactor runs
	// one: queued, taken by a worker, run in a COMPACTION transaction whose
	// commit the metastore logs as COMMIT_TXN and COMMIT_COMPACTION (no
	// file is written: the tailer lists what the compactor wrote when it
	// publishes the event).
	s.do("compact "+acidDB+".events", func() error {
		part := "dt=" + acidTables[1].partition
		req, err := s.c.Compact2(ctx, &hive_metastore.CompactionRequest{Dbname: acidDB, Tablename: "events", Partitionname: &part,
			Type: hive_metastore.CompactionType_MAJOR})
		if err != nil {
			return err
		}
		var ci *hive_metastore.CompactionInfoStruct
		for range 100 {
			o, err := s.c.FindNextCompact(ctx, "hivedr-capture", "hivedr")
			if err != nil {
				return err
			}
			if o == nil || o.Ci == nil {
				return fmt.Errorf("compaction %d not in the queue", req.ID)
			}
			if o.Ci.ID == req.ID {
				ci = o.Ci
				break
			}
			if err := s.c.MarkFailed(ctx, o.Ci); err != nil {
				return err
			}
		}
		if ci == nil {
			return fmt.Errorf("compaction %d not handed out", req.ID)
		}
		r, err := s.c.OpenTxns(ctx, &hive_metastore.OpenTxnRequest{NumTxns: 1, User: "hivedr", Hostname: "capture",
			AgentInfo: "hivedr-capture", TxnType: hive_metastore.TxnType_COMPACTION})
		if err != nil {
			return err
		}
		highest := int64(1)
		ci.HighestWriteId = &highest
		if err := s.c.UpdateCompactorState(ctx, ci, r.TxnIds[0]); err != nil {
			return err
		}
		if err := s.c.MarkCompacted(ctx, ci); err != nil {
			return err
		}
		return s.c.CommitTxn(ctx, &hive_metastore.CommitTxnRequest{Txnid: r.TxnIds[0]})
	})
	if txn := open(); txn != 0 {
		write(txn, acidTables[2], false)
		s.openTxn = txn
	}
}

// acidCleanup aborts the transaction the script left open, once the log
// has been read (its abort is not captured).
func (s *steps) acidCleanup() {
	if s.openTxn == 0 {
		return
	}
	s.do(fmt.Sprintf("abort transaction %d left open", s.openTxn), func() error {
		return s.c.AbortTxns(s.ctx, &hive_metastore.AbortTxnsRequest{TxnIds: []int64{s.openTxn}})
	})
}
