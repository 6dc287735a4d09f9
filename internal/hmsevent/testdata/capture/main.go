// Command capture drives a real Hive Metastore through its Thrift API so
// that it logs every notification event hivedr decodes, then writes each
// logged event as one JSON fixture for the producer's decode tests.
//
//	go run ./internal/hmsevent/testdata/capture -hms 127.0.0.1:19083 -out internal/hmsevent/testdata/events
//	go run ./internal/hmsevent/testdata/capture -acid -hms 127.0.0.1:19083 -out internal/hmsevent/testdata/acid
//
// It works only on databases it owns (cap_sales and cap_archive), which it
// drops first if a previous run left them behind. Steps the metastore
// refuses are logged and skipped, so one unsupported call does not cost
// the whole capture. Fixtures hold the notification exactly as
// get_next_notification returned it, message undecoded.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/hms"
)

const (
	salesDB   = "cap_sales"
	archiveDB = "cap_archive"
)

// fixture is the on-disk form of one captured notification.
type fixture struct {
	EventID       int64  `json:"eventId"`
	EventTime     int64  `json:"eventTime"`
	EventType     string `json:"eventType"`
	CatName       string `json:"catName"`
	DBName        string `json:"dbName"`
	TableName     string `json:"tableName"`
	MessageFormat string `json:"messageFormat"`
	Message       string `json:"message"`
}

func main() {
	addr := flag.String("hms", "127.0.0.1:19083", "source metastore host:port")
	out := flag.String("out", "internal/hmsevent/testdata/events", "directory for the fixtures")
	warehouse := flag.String("warehouse", "hdfs://127.0.0.1:18020/warehouse", "managed warehouse root")
	external := flag.String("external", "hdfs://127.0.0.1:18020/external", "root for external tables; must lie outside the managed warehouse")
	acid := flag.Bool("acid", false, "capture the transactional script (acid.go) instead, into -out (use internal/hmsevent/testdata/acid)")
	flag.Parse()
	if err := run(*addr, *out, *warehouse, *external, *acid); err != nil {
		log.Fatal(err)
	}
}

func run(addr, out, warehouse, external string, acid bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := hms.Dial(ctx, addr, hms.Options{})
	if err != nil {
		return err
	}
	defer c.Close()

	// Leftovers of an earlier run are dropped before the capture starts,
	// so their events fall before the starting event ID.
	for _, db := range []string{salesDB, archiveDB, acidDB, acidOtherDB} {
		_ = c.DropDatabase(ctx, db, true, true)
	}
	cur, err := c.GetCurrentNotificationEventId(ctx)
	if err != nil {
		return fmt.Errorf("get current event id: %w", err)
	}
	start := cur.EventId
	log.Printf("capturing after event %d", start)

	s := &steps{ctx: ctx, c: c, addr: addr, warehouse: warehouse, external: external}
	if acid {
		defer s.acidCleanup()
		s.acidScript()
	} else {
		s.script()
	}

	var events []*hive_metastore.NotificationEvent
	s.do("read notifications", func() error {
		var err error
		events, err = readEvents(ctx, s.c, start)
		return err
	})
	if err != nil {
		return err
	}
	if len(events) == 0 {
		return fmt.Errorf("no events after %d", start)
	}
	if err := writeFixtures(out, events); err != nil {
		return err
	}
	counts := map[string]int{}
	for _, e := range events {
		counts[e.EventType]++
	}
	log.Printf("wrote %d fixtures to %s: %v", len(events), out, counts)
	if s.failed > 0 {
		log.Printf("%d steps failed (see above)", s.failed)
	}
	return nil
}

// steps runs the capture script; each step logs its own failure. A step
// that loses the connection is retried once on a new one, since the
// metastore may be restarted while the stack is being set up.
type steps struct {
	ctx       context.Context
	c         *hms.Client
	addr      string
	warehouse string
	external  string
	failed    int
	// openTxn is a transaction the script left open (acid.go).
	openTxn int64
}

func (s *steps) do(name string, f func() error) {
	err := f()
	if err != nil && isConnError(err) {
		log.Printf("step %q lost the connection (%v); reconnecting", name, err)
		if rerr := s.reconnect(); rerr != nil {
			err = rerr
		} else {
			err = f()
		}
	}
	if err != nil {
		s.failed++
		log.Printf("step %q failed: %v", name, err)
		return
	}
	log.Printf("step %q ok", name)
}

func isConnError(err error) bool {
	msg := err.Error()
	for _, m := range []string{"EOF", "broken pipe", "connection reset", "connection refused", "i/o timeout"} {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

func (s *steps) reconnect() error {
	s.c.Close()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		c, err := hms.Dial(s.ctx, s.addr, hms.Options{})
		if err == nil {
			if _, err = c.GetCurrentNotificationEventId(s.ctx); err == nil {
				s.c = c
				return nil
			}
			c.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("reconnect to %s: %w", s.addr, err)
		}
		time.Sleep(3 * time.Second)
	}
}

func strp(s string) *string { return &s }
func boolp(b bool) *bool    { return &b }
func i64p(v int64) *int64   { return &v }

func cols(pairs ...string) []*hive_metastore.FieldSchema {
	var out []*hive_metastore.FieldSchema
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, &hive_metastore.FieldSchema{Name: pairs[i], Type: pairs[i+1], Comment: "captured " + pairs[i]})
	}
	return out
}

func textSD(location string, c []*hive_metastore.FieldSchema) *hive_metastore.StorageDescriptor {
	return &hive_metastore.StorageDescriptor{
		Cols:         c,
		Location:     location,
		InputFormat:  "org.apache.hadoop.mapred.TextInputFormat",
		OutputFormat: "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
		NumBuckets:   -1,
		SerdeInfo: &hive_metastore.SerDeInfo{
			Name:             "text",
			SerializationLib: "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
			Parameters:       map[string]string{"field.delim": ",", "serialization.format": ","},
		},
		Parameters: map[string]string{},
	}
}

func orcSD(location string, c []*hive_metastore.FieldSchema) *hive_metastore.StorageDescriptor {
	return &hive_metastore.StorageDescriptor{
		Cols:         c,
		Location:     location,
		InputFormat:  "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
		OutputFormat: "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
		NumBuckets:   -1,
		SerdeInfo: &hive_metastore.SerDeInfo{
			Name:             "orc",
			SerializationLib: "org.apache.hadoop.hive.ql.io.orc.OrcSerde",
			Parameters:       map[string]string{},
		},
		Parameters: map[string]string{},
	}
}

// acidCapabilities are the processor capabilities Hive's own clients
// announce; the metastore refuses to create ACID tables for a client
// without them.
var acidCapabilities = []string{"HIVEFULLACIDREAD", "HIVEFULLACIDWRITE", "HIVEMANAGEDINSERTREAD", "HIVEMANAGEDINSERTWRITE", "HIVEMANAGESTATS", "HIVECACHEINVALIDATE", "CONNECTORWRITE"}

// table reads a table with get_table_req (Hive 4 removed get_table).
func (s *steps) table(db, name string) (*hive_metastore.Table, error) {
	r, err := s.c.GetTableReq(s.ctx, &hive_metastore.GetTableRequest{
		DbName: db, TblName: name, Capabilities: hms.TableRequest(db, name).Capabilities, ProcessorCapabilities: acidCapabilities, ProcessorIdentifier: strp("hivedr-capture"),
	})
	if err != nil {
		return nil, err
	}
	return r.Table, nil
}

func (s *steps) script() {
	ctx, wh := s.ctx, s.warehouse

	s.do("create database "+salesDB, func() error {
		return s.c.CreateDatabase(ctx, &hive_metastore.Database{
			Name: salesDB, Description: "hivedr capture: sales",
			// Thrift sends an unset location as "", which the metastore
			// rejects: name both locations.
			LocationUri:        s.external + "/" + salesDB + ".db",
			ManagedLocationUri: strp(wh + "/" + salesDB + ".db"),
			Parameters:         map[string]string{"owner.team": "sales"},
			OwnerName:          strp("hivedr"), OwnerType: hive_metastore.PrincipalTypePtr(hive_metastore.PrincipalType_USER),
		})
	})
	s.do("create database "+archiveDB, func() error {
		return s.c.CreateDatabase(ctx, &hive_metastore.Database{
			Name: archiveDB, Description: "hivedr capture: archive",
			LocationUri:        s.external + "/" + archiveDB + ".db",
			ManagedLocationUri: strp(wh + "/" + archiveDB + ".db"),
			Parameters:         map[string]string{},
		})
	})
	s.do("alter database "+salesDB, func() error {
		db, err := s.c.GetDatabase(ctx, salesDB)
		if err != nil {
			return err
		}
		db.Parameters["retention.days"] = "30"
		return s.c.AlterDatabase(ctx, salesDB, db)
	})

	// Table locations follow the databases' own: external tables under
	// the database location (the external warehouse), managed ones under
	// its managed location.
	extLoc := map[string]string{}
	managedLoc := map[string]string{}
	for _, name := range []string{salesDB, archiveDB} {
		extLoc[name] = s.external + "/" + name + ".db"
		managedLoc[name] = wh + "/" + name + ".db"
		if db, err := s.c.GetDatabase(ctx, name); err == nil {
			if db.LocationUri != "" {
				extLoc[name] = db.LocationUri
			}
			if m := db.GetManagedLocationUri(); m != "" {
				managedLoc[name] = m
			}
		}
	}

	// A partitioned external table and an unpartitioned one.
	ordersLoc := extLoc[salesDB] + "/orders"
	s.do("create partitioned table orders", func() error {
		return s.c.CreateTable(ctx, &hive_metastore.Table{
			DbName: salesDB, TableName: "orders", Owner: "hivedr",
			Sd:            textSD(ordersLoc, cols("id", "bigint", "amount", "decimal(10,2)", "note", "string")),
			PartitionKeys: cols("dt", "string", "region", "string"),
			Parameters:    map[string]string{"EXTERNAL": "TRUE", "comment": "orders by day and region"},
			TableType:     "EXTERNAL_TABLE",
		})
	})
	custLoc := extLoc[salesDB] + "/customers"
	s.do("create unpartitioned table customers", func() error {
		return s.c.CreateTable(ctx, &hive_metastore.Table{
			DbName: salesDB, TableName: "customers", Owner: "hivedr",
			Sd:         textSD(custLoc, cols("id", "bigint", "name", "string")),
			Parameters: map[string]string{"EXTERNAL": "TRUE"},
			TableType:  "EXTERNAL_TABLE",
		})
	})
	// Transactional tables for the write-ID and ACID events, one per
	// database so that one transaction can touch both.
	for _, db := range []string{salesDB, archiveDB} {
		s.do("create transactional table "+db+".events_acid", func() error {
			return s.c.CreateTableReq(ctx, &hive_metastore.CreateTableRequest{
				Table: &hive_metastore.Table{
					DbName: db, TableName: "events_acid", Owner: "hivedr",
					Sd:         orcSD(managedLoc[db]+"/events_acid", cols("id", "bigint", "payload", "string")),
					Parameters: map[string]string{"transactional": "true", "transactional_properties": "default"},
					TableType:  "MANAGED_TABLE",
				},
				ProcessorCapabilities: acidCapabilities,
				ProcessorIdentifier:   strp("hivedr-capture"),
			})
		})
	}

	partLoc := func(dt, region string) string {
		return fmt.Sprintf("%s/dt=%s/region=%s", ordersLoc, dt, region)
	}
	s.do("add partitions to orders", func() error {
		t, err := s.table(salesDB, "orders")
		if err != nil {
			return err
		}
		var parts []*hive_metastore.Partition
		for _, v := range [][2]string{{"2024-01-01", "eu"}, {"2024-01-02", "us"}} {
			parts = append(parts, &hive_metastore.Partition{
				Values: []string{v[0], v[1]}, DbName: salesDB, TableName: "orders",
				Sd:         textSD(partLoc(v[0], v[1]), t.Sd.Cols),
				Parameters: map[string]string{},
			})
		}
		_, err = s.c.AddPartitions(ctx, parts)
		return err
	})
	s.do("alter table orders add column", func() error {
		t, err := s.table(salesDB, "orders")
		if err != nil {
			return err
		}
		t.Sd.Cols = append(t.Sd.Cols, &hive_metastore.FieldSchema{Name: "channel", Type: "string", Comment: "added later"})
		return s.c.AlterTable(ctx, salesDB, "orders", t)
	})
	s.do("alter partition orders/2024-01-01/eu", func() error {
		p, err := s.c.GetPartition(ctx, salesDB, "orders", []string{"2024-01-01", "eu"})
		if err != nil {
			return err
		}
		p.Parameters["hivedr.note"] = "altered"
		return s.c.AlterPartition(ctx, salesDB, "orders", p)
	})

	// INSERT events through fire_listener_event: into the unpartitioned
	// table, then an overwrite of a partition, with checksums.
	s.do("insert into customers", func() error {
		_, err := s.c.FireListenerEvent(ctx, &hive_metastore.FireEventRequest{
			Successful: true,
			DbName:     strp(salesDB), TableName: strp("customers"),
			Data: &hive_metastore.FireEventRequestData{InsertData: &hive_metastore.InsertEventRequestData{
				Replace:            boolp(false),
				FilesAdded:         []string{custLoc + "/000000_0", custLoc + "/000001_0"},
				FilesAddedChecksum: []string{"0000020000000000000000003f7c5b1a0000000000000000", "00000200000000000000000011aa22bb0000000000000000"},
			}},
		})
		return err
	})
	s.do("insert overwrite orders/2024-01-02/us", func() error {
		_, err := s.c.FireListenerEvent(ctx, &hive_metastore.FireEventRequest{
			Successful: true,
			DbName:     strp(salesDB), TableName: strp("orders"),
			PartitionVals: []string{"2024-01-02", "us"},
			Data: &hive_metastore.FireEventRequestData{InsertData: &hive_metastore.InsertEventRequestData{
				Replace:      boolp(true),
				FilesAdded:   []string{partLoc("2024-01-02", "us") + "/000000_0"},
				PartitionVal: []string{"2024-01-02", "us"},
			}},
		})
		return err
	})

	// Column statistics: table level, partition level, then deletes.
	s.do("update table column stats customers.id", func() error {
		_, err := s.c.UpdateTableColumnStatistics(ctx, &hive_metastore.ColumnStatistics{
			StatsDesc: &hive_metastore.ColumnStatisticsDesc{IsTblLevel: true, DbName: salesDB, TableName: "customers", LastAnalyzed: i64p(time.Now().Unix())},
			StatsObj: []*hive_metastore.ColumnStatisticsObj{{
				ColName: "id", ColType: "bigint",
				StatsData: &hive_metastore.ColumnStatisticsData{LongStats: &hive_metastore.LongColumnStatsData{LowValue: i64p(1), HighValue: i64p(1000), NumNulls: 0, NumDVs: 998}},
			}},
			Engine: strp("hive"),
		})
		return err
	})
	s.do("update partition column stats orders/2024-01-01/eu.id", func() error {
		_, err := s.c.UpdatePartitionColumnStatistics(ctx, &hive_metastore.ColumnStatistics{
			StatsDesc: &hive_metastore.ColumnStatisticsDesc{IsTblLevel: false, DbName: salesDB, TableName: "orders", PartName: strp("dt=2024-01-01/region=eu"), LastAnalyzed: i64p(time.Now().Unix())},
			StatsObj: []*hive_metastore.ColumnStatisticsObj{{
				ColName: "id", ColType: "bigint",
				StatsData: &hive_metastore.ColumnStatisticsData{LongStats: &hive_metastore.LongColumnStatsData{LowValue: i64p(5), HighValue: i64p(50), NumNulls: 1, NumDVs: 40}},
			}},
			Engine: strp("hive"),
		})
		return err
	})
	s.do("delete table column stats customers.id", func() error {
		_, err := s.c.DeleteTableColumnStatistics(ctx, salesDB, "customers", "id", "hive")
		return err
	})
	s.do("delete partition column stats orders/2024-01-01/eu.id", func() error {
		_, err := s.c.DeletePartitionColumnStatistics(ctx, salesDB, "orders", "dt=2024-01-01/region=eu", "id", "hive")
		return err
	})

	// Truncation: the unpartitioned table (ALTER_TABLE isTruncateOp) and
	// one partition (ALTER_PARTITION isTruncateOp).
	s.do("truncate customers", func() error { return s.c.TruncateTable(ctx, salesDB, "customers", nil) })
	s.do("truncate orders/2024-01-02/us", func() error {
		return s.c.TruncateTable(ctx, salesDB, "orders", []string{"dt=2024-01-02/region=us"})
	})

	// Renames within and across databases.
	s.do("rename customers to clients", func() error {
		t, err := s.table(salesDB, "customers")
		if err != nil {
			return err
		}
		t.TableName = "clients"
		return s.c.AlterTable(ctx, salesDB, "customers", t)
	})
	s.do("move clients to "+archiveDB, func() error {
		t, err := s.table(salesDB, "clients")
		if err != nil {
			return err
		}
		t.DbName = archiveDB
		return s.c.AlterTable(ctx, salesDB, "clients", t)
	})

	// Transactions: one commits writes to both databases, one aborts.
	s.transactions()

	// Constraints and functions: logged, not modelled by hivedr.
	s.do("add primary key orders.id", func() error {
		return s.c.AddPrimaryKey(ctx, &hive_metastore.AddPrimaryKeyRequest{PrimaryKeyCols: []*hive_metastore.SQLPrimaryKey{{
			TableDb: salesDB, TableName: "orders", ColumnName: "id", KeySeq: 1, PkName: "orders_pk", RelyCstr: true,
		}}})
	})
	s.do("drop constraint orders_pk", func() error {
		return s.c.DropConstraint(ctx, &hive_metastore.DropConstraintRequest{Dbname: salesDB, Tablename: "orders", Constraintname: "orders_pk"})
	})
	s.do("create function", func() error {
		return s.c.CreateFunction(ctx, &hive_metastore.Function{
			FunctionName: "mask", DbName: salesDB, ClassName: "com.example.hive.Mask",
			OwnerName: "hivedr", OwnerType: hive_metastore.PrincipalType_USER,
			CreateTime: int32(time.Now().Unix()), FunctionType: hive_metastore.FunctionType_JAVA,
			ResourceUris: []*hive_metastore.ResourceUri{{ResourceType: hive_metastore.ResourceType_JAR, URI: wh + "/lib/mask.jar"}},
		})
	})
	s.do("drop function", func() error { return s.c.DropFunction(ctx, salesDB, "mask") })

	s.do("drop partition orders/2024-01-01/eu", func() error {
		_, err := s.c.DropPartition(ctx, salesDB, "orders", []string{"2024-01-01", "eu"}, false)
		return err
	})
	s.do("drop table orders", func() error { return s.c.DropTable(ctx, salesDB, "orders", false) })
	s.do("drop database "+archiveDB, func() error { return s.c.DropDatabase(ctx, archiveDB, true, true) })
	s.do("drop database "+salesDB, func() error { return s.c.DropDatabase(ctx, salesDB, true, true) })
}

func (s *steps) transactions() {
	ctx := s.ctx
	var txns []int64
	s.do("open 2 transactions", func() error {
		r, err := s.c.OpenTxns(ctx, &hive_metastore.OpenTxnRequest{NumTxns: 2, User: "hivedr", Hostname: "capture", AgentInfo: "hivedr-capture"})
		if err != nil {
			return err
		}
		txns = r.TxnIds
		return nil
	})
	if len(txns) != 2 {
		return
	}
	commit, abort := txns[0], txns[1]
	writeIDs := map[string]int64{}
	for _, db := range []string{salesDB, archiveDB} {
		s.do("allocate write id "+db+".events_acid", func() error {
			r, err := s.c.AllocateTableWriteIds(ctx, &hive_metastore.AllocateTableWriteIdsRequest{DbName: db, TableName: "events_acid", TxnIds: []int64{commit}})
			if err != nil {
				return err
			}
			for _, tw := range r.TxnToWriteIds {
				writeIDs[db] = tw.WriteId
			}
			return nil
		})
	}
	for _, db := range []string{salesDB, archiveDB} {
		wid, ok := writeIDs[db]
		if !ok {
			continue
		}
		s.do("acid write "+db+".events_acid", func() error {
			t, err := s.table(db, "events_acid")
			if err != nil {
				return err
			}
			delta := fmt.Sprintf("delta_%07d_%07d_0000", wid, wid)
			_, err = s.c.AddWriteNotificationLog(ctx, &hive_metastore.WriteNotificationLogRequest{
				TxnId: commit, WriteId: wid, Db: db, Table: "events_acid",
				FileInfo: &hive_metastore.InsertEventRequestData{
					FilesAdded:         []string{t.Sd.Location + "/" + delta + "/bucket_00000_0"},
					FilesAddedChecksum: []string{"00000200000000000000000055aa66cc0000000000000000"},
					SubDirectoryList:   []string{delta},
				},
			})
			return err
		})
	}
	s.do("commit transaction", func() error { return s.c.CommitTxn(ctx, &hive_metastore.CommitTxnRequest{Txnid: commit}) })
	s.do("allocate write id for the aborted transaction", func() error {
		_, err := s.c.AllocateTableWriteIds(ctx, &hive_metastore.AllocateTableWriteIdsRequest{DbName: salesDB, TableName: "events_acid", TxnIds: []int64{abort}})
		return err
	})
	s.do("abort transaction", func() error { return s.c.AbortTxns(ctx, &hive_metastore.AbortTxnsRequest{TxnIds: []int64{abort}}) })
}

func readEvents(ctx context.Context, c *hms.Client, after int64) ([]*hive_metastore.NotificationEvent, error) {
	var all []*hive_metastore.NotificationEvent
	for {
		max := int32(500)
		r, err := c.GetNextNotification(ctx, &hive_metastore.NotificationEventRequest{LastEvent: after, MaxEvents: &max})
		if err != nil {
			return nil, fmt.Errorf("get_next_notification after %d: %w", after, err)
		}
		if len(r.Events) == 0 {
			return all, nil
		}
		all = append(all, r.Events...)
		after = r.Events[len(r.Events)-1].EventId
	}
}

func writeFixtures(dir string, events []*hive_metastore.NotificationEvent) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return err
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	for i, e := range events {
		f := fixture{
			EventID: e.EventId, EventTime: int64(e.EventTime), EventType: e.EventType,
			CatName: e.GetCatName(), DBName: e.GetDbName(), TableName: e.GetTableName(),
			MessageFormat: e.GetMessageFormat(), Message: e.Message,
		}
		b, err := json.MarshalIndent(f, "", "  ")
		if err != nil {
			return err
		}
		name := fmt.Sprintf("%03d_%s.json", i+1, strings.ToLower(e.EventType))
		if err := os.WriteFile(filepath.Join(dir, name), append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}
