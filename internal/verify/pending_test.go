package verify

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/schemas"
)

// fakeTailer is a tailer's checkpoint and a source log. Each Head call
// takes the next of heads (the last one stays).
type fakeTailer struct {
	cp    *schemas.TailerCheckpoint
	heads []int64
	log   []*schemas.Event // in ID order
	read  []int64          // the events handed out, in order
}

func (f *fakeTailer) Checkpoint(context.Context) (*schemas.TailerCheckpoint, error) { return f.cp, nil }

func (f *fakeTailer) Head(context.Context) (int64, error) {
	h := f.heads[0]
	if len(f.heads) > 1 {
		f.heads = f.heads[1:]
	}
	return h, nil
}

func (f *fakeTailer) Events(_ context.Context, after, to int64, fn func(*schemas.Event)) error {
	for _, ev := range f.log {
		if ev.EventID > after && ev.EventID <= to {
			f.read = append(f.read, ev.EventID)
			fn(ev)
		}
	}
	return nil
}

func addPartition(id int64, db, table string) *schemas.Event {
	return &schemas.Event{EventID: id, EventType: schemas.EventAddPartition, Database: db, Table: table, Databases: []string{db},
		Payload: &schemas.PartitionChange{Table: &schemas.Table{Database: db, Name: table}, After: []schemas.Partition{{Values: []string{"x"}}}}}
}

// tailerLagSites are a source and a replica that differ in both tables:
// p lacks a partition on DR, f has another column type.
func tailerLagSites() (src, dr *fakeMS, sf, df fakeFiles) {
	src, sf = site("hdfs://src", 5)
	dr, df = site("hdfs://dr", 5)
	dr.parts["db.p"] = slices.Delete(dr.parts["db.p"], 2, 3)
	dr.tables["db.f"].Sd.Cols = []*hive_metastore.FieldSchema{{Name: "id", Type: "int"}}
	return src, dr, sf, df
}

// classes are the findings as table -> class, each with its reason.
func classes(t *testing.T, got []Finding) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range got {
		c := string(f.Class)
		if f.Class == InFlight {
			c += ": " + f.Reason
		} else if f.Reason != "" {
			t.Errorf("%v: diverged with a reason", f)
		}
		if prev, ok := out[f.Table]; ok && prev != c {
			t.Errorf("table %s: findings %q and %q", f.Table, prev, c)
		}
		out[f.Table] = c
	}
	return out
}

// TestRunTailerLag: a difference explained by a source event above the
// tailer's checkpoint is in flight, naming that event; one no such event
// explains stays diverged; and a bootstrap in progress holds back its
// database's events (and, in its SNAPSHOT phase, has its tables' records
// still to publish).
func TestRunTailerLag(t *testing.T) {
	running := func(at int64, boots ...schemas.BootstrapState) *schemas.TailerCheckpoint {
		return &schemas.TailerCheckpoint{LastEventID: at, State: schemas.StateRunning, Bootstraps: boots}
	}
	const diverged = "diverged"
	for _, c := range []struct {
		name        string
		cp          *schemas.TailerCheckpoint
		log         []*schemas.Event
		heads       []int64
		want        map[string]string
		unpublished int
	}{
		{name: "no tailer lag", cp: running(12), log: []*schemas.Event{addPartition(12, "db", "p")}, heads: []int64{12},
			want: map[string]string{"p": diverged, "f": diverged}},
		{name: "an unpublished partition of p", cp: running(10),
			log:   []*schemas.Event{addPartition(10, "db", "p"), addPartition(11, "db", "p"), addPartition(12, "other", "f")},
			heads: []int64{12},
			want: map[string]string{"p": "in_flight: source event 11 (ADD_PARTITION) not yet published by the tailer",
				"f": diverged},
			unpublished: 1},
		{name: "an event written while verify compared", cp: running(10),
			log:   []*schemas.Event{addPartition(11, "db", "f"), addPartition(12, "db", "p")},
			heads: []int64{11, 12}, // at the start; 12 when asked again before a diverged
			want: map[string]string{"f": "in_flight: source event 11 (ADD_PARTITION) not yet published by the tailer",
				"p": "in_flight: source event 12 (ADD_PARTITION) not yet published by the tailer"},
			unpublished: 2},
		{name: "stopped on a gap", cp: &schemas.TailerCheckpoint{LastEventID: 10, State: schemas.StateChainBroken},
			log: []*schemas.Event{addPartition(11, "db", "p")}, heads: []int64{11},
			want: map[string]string{"p": diverged, "f": diverged}},
		{name: "a bootstrap snapshotting the database", cp: running(20, schemas.BootstrapState{Database: "db", BootstrapID: "b1",
			CutEventID: 15, Phase: schemas.PhaseSnapshot}), heads: []int64{20},
			want: map[string]string{"p": "in_flight: bootstrap b1 of db at event 15 has records to publish",
				"f": "in_flight: bootstrap b1 of db at event 15 has records to publish"}},
		{name: "a bootstrap of table f", cp: running(20, schemas.BootstrapState{Database: "db", BootstrapID: "b2",
			CutEventID: 15, Phase: schemas.PhaseSnapshot, Tables: []string{"F"}}), heads: []int64{20},
			want: map[string]string{"p": diverged, "f": "in_flight: bootstrap b2 of db at event 15 has records to publish"}},
		{name: "a bootstrap catching up holds back its events", cp: running(20, schemas.BootstrapState{Database: "db", BootstrapID: "b3",
			CutEventID: 15, CatchupEventID: 17, Phase: schemas.PhaseCatchup}),
			log:   []*schemas.Event{addPartition(16, "db", "f"), addPartition(18, "db", "p")},
			heads: []int64{20},
			want: map[string]string{"p": "in_flight: source event 18 (ADD_PARTITION) not yet published by the tailer: held back by bootstrap b3",
				"f": diverged},
			unpublished: 1},
		{name: "another database's bootstrap", cp: running(20, schemas.BootstrapState{Database: "other", BootstrapID: "b4",
			CutEventID: 15, Phase: schemas.PhaseSnapshot}), log: []*schemas.Event{addPartition(16, "db", "p")}, heads: []int64{20},
			want: map[string]string{"p": diverged, "f": diverged}},
	} {
		t.Run(c.name, func(t *testing.T) {
			src, dr, sf, df := tailerLagSites()
			tl := &fakeTailer{cp: c.cp, log: c.log, heads: c.heads}
			sum, got := runFake(t, src, dr, sf, df, Options{}, nil, func(cfg *Config) { cfg.Tailer = tl })
			if g := classes(t, got); !maps.Equal(g, c.want) {
				t.Errorf("findings by table:\n%v\nwant\n%v", g, c.want)
			}
			if sum.Unpublished != c.unpublished {
				t.Errorf("summary counts %d unpublished events, want %d", sum.Unpublished, c.unpublished)
			}
			if slices.Contains(tl.read, c.cp.LastEventID) && c.cp.Bootstraps == nil {
				t.Errorf("read the source log from event %d; the checkpoint's event is published", c.cp.LastEventID)
			}
			for i := 1; i < len(tl.read); i++ {
				if tl.read[i] <= tl.read[i-1] {
					t.Errorf("source events read %v: one read twice or out of order", tl.read)
				}
			}
		})
	}
}

// TestPendingUnpublishedTxn: a commit whose message names no writes
// explains a transactional table's difference when its transaction may
// have written in the database: held open by the checkpoint with an
// allocation there, or older than the checkpoint tracks, or not decoded.
// One the checkpoint tracks and holds no allocation of allocated nothing
// (an allocation after the checkpoint is an event of its own, naming its
// database); a commit of another database's writes is not the
// database's either. No table is touched by any of them.
func TestPendingUnpublishedTxn(t *testing.T) {
	commit := func(txn int64, dbs ...string) *schemas.Event {
		return &schemas.Event{EventID: 11, EventType: schemas.EventCommitTxn, Databases: dbs, Payload: &schemas.Transaction{TxnIDs: []int64{txn}}}
	}
	cp := &schemas.TailerCheckpoint{LastEventID: 10, TxnsTrackedAbove: 5,
		OpenTxns: []schemas.OpenTxn{{TxnID: 7, Databases: []string{"db"}}, {TxnID: 8, Databases: []string{"other"}}}}
	for _, c := range []struct {
		name string
		ev   *schemas.Event
		want bool
	}{
		{"open with an allocation in db", commit(7), true},
		{"open with an allocation elsewhere", commit(8), false},
		{"tracked, allocated nothing", commit(9), false},
		{"older than tracked", commit(3), true},
		{"naming db's writes", commit(9, "db"), true},
		{"naming another database's writes", commit(7, "other"), false},
		{"not decoded", &schemas.Event{EventID: 11, EventType: schemas.EventCommitTxn}, true},
	} {
		tl := &fakeTailer{cp: cp, heads: []int64{11}, log: []*schemas.Event{c.ev}}
		p, err := newPending(context.Background(), nil, tl, "db")
		if err != nil {
			t.Fatal(err)
		}
		if got := p.txns != ""; got != c.want || p.covers("t") != "" {
			t.Errorf("%s: txns %q, covers(t) %q; want txns %v and no table", c.name, p.txns, p.covers("t"), c.want)
		}
		if c.want && !strings.Contains(p.txns, "source event 11 (COMMIT_TXN) not yet published") {
			t.Errorf("%s: reason %q", c.name, p.txns)
		}
	}
}
