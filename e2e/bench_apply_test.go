//go:build benchapply

package e2e

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/hmsevent"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/schemas"
)

// TestBenchApply is `make bench-apply`, built only with the benchapply
// tag: the applier's rate on a burst of incremental ADD_PARTITION events
// of one table, beside the DR metastore's own rate in the same run.
//
//   - The raw peer: one Thrift client creates the table in a fresh DR
//     database and adds BENCH_APPLY_PARTITIONS partitions (default 20,000)
//     with add_partitions_req, 1000 per call, one call after the other;
//     once before the applier and once after it, the rate compared being
//     both runs' (the load of a shared machine moves).
//   - The applier (`hivedr apply`, applier.batch_partitions 1000): the same
//     table and partitions as a CREATE_DATABASE, a CREATE_TABLE and one
//     ADD_PARTITION event per partition, published on the database's topic
//     as the tailer publishes them (transactions of 1000, chained, Avro
//     through the registry, the Thrift objects as TJSON in the payload as
//     the notification log carries them), before the applier starts. The
//     table is external and its partitions hold no files, so there is
//     nothing to copy: the figure is the applier's and the DR metastore's.
//     Timed from the DR table's creation to the DR database's
//     repl.last.id at the last event.
//   - The same with applier.batch_partitions 1 (every event a plan of its
//     own, as before runs) on BENCH_APPLY_UNBATCHED events (default 1000).
//
// The events are not read from a source metastore: no source metastore
// here writes ADD_PARTITION events faster than the applier applies them.
func TestBenchApply(t *testing.T) {
	n := benchEnvInt(t, "BENCH_APPLY_PARTITIONS", 20_000)
	unbatched := benchEnvInt(t, "BENCH_APPLY_UNBATCHED", 1000)
	env := testenv.Require(t)
	ctx := ctxFor(t, 90*time.Minute)
	dr := env.HMS(t, testenv.DR)
	u := uniq(t)
	loadStart := loadAverage()

	// The raw peer runs before the applier and after it (the machine's
	// load moves; the rate compared is the two runs' together).
	raw := func(db string) time.Duration {
		took := rawAddPartitionsOne(t, ctx, env, dr, db, n)
		t.Logf("raw peer: %d partitions in %s: %.0f partitions/s", n, took.Round(time.Millisecond), float64(n)/took.Seconds())
		dropDB(t, ctx, dr, db)
		return took
	}
	rawBefore := raw("bapply_raw_" + u)

	run := func(db string, parts, batch int) (time.Duration, int64) {
		p := newPipeline(t, env, []string{db}, 0)
		p.withBatch(t, batch)
		f := newBootstrapFeed(t, env, p, db)
		evs := burstEvents(t, f, db, parts)
		for len(evs) > 0 {
			k := min(1000, len(evs))
			f.publish(evs[:k]...)
			evs = evs[k:]
		}
		last := int64(2 + parts)
		p.startApply()
		var created time.Time
		poll(t, 80*time.Minute, 50*time.Millisecond, fmt.Sprintf("%s applied to event %d", db, last), func() bool {
			p.checkAlive()
			if created.IsZero() {
				if _, err := dr.GetTableReq(ctx, &hive_metastore.GetTableRequest{DbName: db, TblName: "t"}); err == nil {
					created = time.Now()
				}
			}
			d, err := dr.GetDatabase(ctx, db)
			return err == nil && d.Parameters[drparam.LastID] == fmt.Sprint(last)
		})
		took := time.Since(created)
		hwm := vmHWM(p.apply.cmd.Process.Pid)
		p.apply.stop(t)
		rss := max(hwm, p.apply.peakRSS())
		names, err := dr.GetPartitionNames(ctx, db, "t", -1)
		if err != nil || len(names) != parts {
			t.Errorf("%d partitions of %s.t on DR (%v), want %d", len(names), db, err, parts)
		}
		dropDB(t, ctx, dr, db)
		return took, rss
	}
	took, rss := run("bapply_"+u, n, 1000)
	rate := float64(n) / took.Seconds()
	t.Logf("applier: %d ADD_PARTITION events in %s: %.0f partitions/s", n, took.Round(time.Millisecond), rate)
	oneTook, _ := run("bapply1_"+u, unbatched, 1)
	oneRate := float64(unbatched) / oneTook.Seconds()
	rawAfter := raw("bapply_raw2_" + u)
	rawTook := (rawBefore + rawAfter) / 2
	rawRate := float64(n) / rawTook.Seconds()
	loadEnd := loadAverage()

	var b strings.Builder
	pf := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	pf("")
	pf("=== make bench-apply: ADD_PARTITION events of one table, one partition each ===")
	pf("conditions  %d CPUs; load average %s before, %s after", runtime.NumCPU(), loadStart, loadEnd)
	pf("%-52s %8s %10s %14s", "", "events", "wall", "partitions/s")
	pf("%-52s %8d %9.1fs %14.0f", "raw peer: add_partitions x1000, one client, before", n, rawBefore.Seconds(), float64(n)/rawBefore.Seconds())
	pf("%-52s %8d %9.1fs %14.0f", "raw peer, after", n, rawAfter.Seconds(), float64(n)/rawAfter.Seconds())
	pf("%-52s %8d %9.1fs %14.0f", "raw peer, both runs", 2*n, 2*rawTook.Seconds(), rawRate)
	pf("%-52s %8d %9.1fs %14.0f", "applier, batch_partitions 1000 (runs)", n, took.Seconds(), rate)
	pf("%-52s %8d %9.1fs %14.0f", "applier, batch_partitions 1 (one plan per event)", unbatched, oneTook.Seconds(), oneRate)
	verdict := "MET"
	if rate < 0.8*rawRate {
		verdict = "MISSED"
	}
	pf("target      applier >= 80%% of the raw rate: %.0f%% of it: %s; runs %.1fx one plan per event", 100*rate/rawRate, verdict, rate/oneRate)
	pf("peak RSS    apply %.1f MiB (runs)", mib(rss))
	pf("===")
	fmt.Print(b.String())
}

// burstTable and burstPartition are the bench's objects: an external
// text table t partitioned by ds, and its partition i (no files).
func burstTable(db, loc string) *hive_metastore.Table {
	return &hive_metastore.Table{TableName: "t", DbName: db, Owner: "etl", TableType: "EXTERNAL_TABLE",
		Parameters:    map[string]string{"EXTERNAL": "TRUE"},
		PartitionKeys: []*hive_metastore.FieldSchema{{Name: "ds", Type: "string"}},
		Sd: &hive_metastore.StorageDescriptor{Cols: []*hive_metastore.FieldSchema{{Name: "id", Type: "bigint"}, {Name: "v", Type: "string"}},
			Location: loc, InputFormat: "org.apache.hadoop.mapred.TextInputFormat",
			OutputFormat: "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
			SerdeInfo: &hive_metastore.SerDeInfo{SerializationLib: "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
				Parameters: map[string]string{"serialization.format": "1"}},
			Parameters: map[string]string{}}}
}

func burstPartition(t *hive_metastore.Table, i int) *hive_metastore.Partition {
	sd := *t.Sd
	v := fmt.Sprintf("%06d", i)
	sd.Location = t.Sd.Location + "/ds=" + v
	return &hive_metastore.Partition{Values: []string{v}, DbName: t.DbName, TableName: t.TableName, Sd: &sd,
		Parameters: map[string]string{"transient_lastDdlTime": "1796300000"}}
}

// rawAddPartitionsOne creates burstTable in a fresh DR database db and
// adds n partitions 1000 per add_partitions_req call from one client,
// returning the time the calls took.
func rawAddPartitionsOne(t *testing.T, ctx context.Context, env *testenv.Env, dr *hms.Client, db string, n int) time.Duration {
	t.Helper()
	dropDB(t, ctx, dr, db)
	ext := env.Get(t, "HIVEDR_HMS_DR_EXTERNAL")
	owner, typ := "hivedr", hive_metastore.PrincipalType_USER
	if err := dr.CreateDatabase(ctx, &hive_metastore.Database{Name: db, LocationUri: ext + "/" + db + ".db",
		Parameters: map[string]string{}, OwnerName: &owner, OwnerType: &typ}); err != nil {
		t.Fatal(err)
	}
	tb := burstTable(db, ext+"/"+db+".db/t")
	if err := dr.CreateTable(ctx, tb); err != nil {
		t.Fatal(err)
	}
	var calls [][]*hive_metastore.Partition
	for from := 0; from < n; from += 1000 {
		var parts []*hive_metastore.Partition
		for i := from; i < min(from+1000, n); i++ {
			parts = append(parts, burstPartition(tb, i))
		}
		calls = append(calls, parts)
	}
	start := time.Now()
	for _, parts := range calls {
		if _, err := dr.AddPartitionsReq(ctx, &hive_metastore.AddPartitionsRequest{DbName: db, TblName: "t", Parts: parts}); err != nil {
			t.Fatalf("add_partitions to %s.t: %v", db, err)
		}
	}
	return time.Since(start)
}

// burstEvents are a CREATE_DATABASE (event 1), a CREATE_TABLE (2) and n
// ADD_PARTITION events (3..) of db's table t on the source, chained, the
// Thrift objects in them as the notification log writes them (TJSON).
func burstEvents(t *testing.T, f *bootstrapFeed, db string, n int) []*schemas.Event {
	t.Helper()
	ctx := context.Background()
	ser := thrift.NewTSerializer()
	ser.Protocol = thrift.NewTJSONProtocolFactory().GetProtocol(ser.Transport)
	tjson := func(v thrift.TStruct) string {
		s, err := ser.WriteString(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	dbLoc := f.src + "/external/" + db + ".db"
	tb := burstTable(db, dbLoc+"/t")
	st, err := hmsevent.TableFromThriftJSON(tjson(tb))
	if err != nil {
		t.Fatal(err)
	}
	var evs []*schemas.Event
	var prev int64
	ev := func(id int64, typ schemas.EventType, table string, payload schemas.Payload) *schemas.Event {
		e := &schemas.Event{EventID: id, EventTime: time.Now().Truncate(time.Second), EventType: typ, Database: db, Table: table,
			Databases: []string{db}, Source: f.p.prefix, MessageFormat: "json-2.0", Payload: payload, PreviousEventID: new(int64)}
		*e.PreviousEventID = prev
		prev = id
		evs = append(evs, e)
		return e
	}
	ev(1, schemas.EventCreateDatabase, "", &schemas.DatabaseChange{After: &schemas.Database{Name: db, Location: dbLoc, Owner: "etl",
		Parameters: map[string]string{}}})
	ev(2, schemas.EventCreateTable, "t", &schemas.TableChange{After: st})
	for i := range n {
		sp, err := hmsevent.PartitionFromThriftJSON(tjson(burstPartition(tb, i)))
		if err != nil {
			t.Fatal(err)
		}
		ev(int64(3+i), schemas.EventAddPartition, "t", &schemas.PartitionChange{Table: st, After: []schemas.Partition{*sp}})
	}
	return evs
}
