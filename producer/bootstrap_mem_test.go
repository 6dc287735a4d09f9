package producer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/hivedr/hivedr/schemas"
)

// genSnaps is a source metastore of one table whose partitions are made
// up on the fly (ids 0..parts-1), holding none of them: what the test
// measures is the tailer's memory, not the fake's.
type genSnaps struct {
	parts int
	lists int // PartitionNames calls
	most  int // the most names one call returned
}

const genPrefix = "dt=2024-01-01/hour=00/id="

func genName(i int) string { return fmt.Sprintf("%s%09d", genPrefix, i) }

func (g *genSnaps) Database(context.Context, string) (*schemas.Database, error) {
	return &schemas.Database{Name: "sales"}, nil
}
func (g *genSnaps) Tables(context.Context, string) ([]string, error) { return []string{"big"}, nil }
func (g *genSnaps) Table(context.Context, string, string) (*schemas.Table, error) {
	return genTable(), nil
}

func genTable() *schemas.Table {
	return &schemas.Table{Database: "sales", Name: "big", TableType: "EXTERNAL_TABLE", Location: "hdfs://src/warehouse/sales.db/big",
		PartitionKeys: []schemas.Column{{Name: "dt", Type: "string"}, {Name: "hour", Type: "string"}, {Name: "id", Type: "string"}}}
}

func (g *genSnaps) PartitionNames(_ context.Context, _, _, after string, limit int) ([]string, bool, error) {
	g.lists++
	from := 0
	if after != "" {
		i, err := strconv.Atoi(strings.TrimPrefix(after, genPrefix))
		if err != nil {
			return nil, false, err
		}
		from = i + 1
	}
	to := min(from+limit, g.parts)
	var names []string
	for i := from; i < to; i++ {
		names = append(names, genName(i))
	}
	g.most = max(g.most, len(names))
	return names, to < g.parts, nil
}

func (g *genSnaps) Partitions(_ context.Context, _, _ string, names []string) ([]schemas.Partition, error) {
	out := make([]schemas.Partition, len(names))
	for i, n := range names {
		out[i] = schemas.Partition{Values: []string{"2024-01-01", "00", strings.TrimPrefix(n, genPrefix)},
			Location: "hdfs://src/warehouse/sales.db/big/" + n}
	}
	return out, nil
}

// publishPartitions runs a bootstrap's partition pages of the generated
// table of parts partitions through the tailer (read, stamp, make and
// encode the records), dropping each page's records as a commit would,
// and returns the most heap in use after any page (after a GC) above the
// heap in use before the first: what the process held before (an earlier
// run's fixture, other tests' leftovers) is not counted.
func publishPartitions(t *testing.T, parts int) (peak int64, g *genSnaps) {
	t.Helper()
	f := newBootFixture(t)
	g = &genSnaps{parts: parts}
	tl, err := New(withConf(f.conf, Config{Source: f.src, Codec: f.serde, Snapshots: g,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	if err != nil {
		t.Fatal(err)
	}
	defer tl.prod.Close()
	b := &schemas.BootstrapState{Database: "sales", BootstrapID: "sales-1-1", CutEventID: 1, TableInProgress: "big"}
	tb := genTable()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := int64(ms.HeapInuse)
	for more := true; more; {
		pg := &snapPage{t: tl, b: b}
		if more, err = tl.partitionPage(context.Background(), pg, tb, 1000); err != nil {
			t.Fatal(err)
		}
		pg = nil
		runtime.GC()
		runtime.ReadMemStats(&ms)
		peak = max(peak, int64(ms.HeapInuse)-base)
	}
	if b.PartitionsDone != int64(parts) {
		t.Fatalf("%d partitions published, want %d", b.PartitionsDone, parts)
	}
	return peak, g
}

// TestBootstrapPartitionMemoryFlat: the tailer's heap while it publishes
// a table's partitions does not grow with the table's size. 20,000 and
// 200,000 partitions are published a page (1000) at a time; the peak heap
// in use after a page may differ by less than a quarter of what the
// extra 180,000 names alone take in memory (which the tailer held, and
// sorted, before it read them in windows).
func TestBootstrapPartitionMemoryFlat(t *testing.T) {
	small, gs := publishPartitions(t, 20_000)
	big, gb := publishPartitions(t, 200_000)
	// What holding the extra names costs, measured the same way.
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	names := make([]string, 0, 180_000)
	for i := range 180_000 {
		names = append(names, genName(i))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	namesCost := int64(after.HeapInuse) - int64(before.HeapInuse)
	runtime.KeepAlive(names)
	growth := big - small
	t.Logf("peak heap in use above the start: %.1f MiB at 20k partitions, %.1f MiB at 200k (growth %.2f MiB); 180k names alone: %.1f MiB; "+
		"name listings: %d and %d, at most %d and %d names each",
		mib(small), mib(big), float64(growth)/(1<<20), float64(namesCost)/(1<<20), gs.lists, gb.lists, gs.most, gb.most)
	if namesCost < 4<<20 {
		t.Fatalf("180k names take %d bytes: the measurement cannot tell growth from noise", namesCost)
	}
	if growth > namesCost/4 {
		t.Errorf("the heap grew by %d bytes from 20k to 200k partitions, more than a quarter of the %d the extra names take", growth, namesCost)
	}
	if gb.most > partitionWindow {
		t.Errorf("a listing of %d names, more than the window of %d", gb.most, partitionWindow)
	}
	if want := 200_000 / partitionWindow; gb.lists != want {
		t.Errorf("%d listings of 200k partitions, want %d (one per window)", gb.lists, want)
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
