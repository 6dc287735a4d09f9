// Package drill is `hivedr drill`: a rehearsal of failover and failback
// end to end on a scratch database the drill creates, writes data files
// to, replicates, fails over, verifies, writes to on DR, fails back,
// verifies again and drops on both sites (Run); and a readiness check of
// a real database that changes nothing (DryRun). Report says how each
// step went, with the RPO and RTO achieved.
//
// A drill leaves production as it found it: its scratch database is
// dropped on both sites when it is done (and the leftovers of a drill
// that was killed, at the next drill's start), the appliers are asked to
// plan the database again and waited for until they have gone past its
// last events, so none stays halted on it. Only its topics stay.
package drill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/beltran/gohive/hive_metastore"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/connect"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/failover"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/status"
	"github.com/hivedr/hivedr/internal/verify"
	"github.com/hivedr/hivedr/schemas"
)

// OwnerParam, on a drill's scratch database on the source, names the
// pipeline (source.name) whose drill created it: a later drill of the
// same pipeline drops it if it is left over; other pipelines' are not
// touched.
const OwnerParam = drparam.OwnPrefix + "drill.source"

// Options are what a drill was asked.
type Options struct {
	// Conf is the forward pipeline's configuration; Rev the reverse
	// pipeline's (nil: failback is not run, and the drill is Incomplete).
	Conf, Rev *config.Config
	// Timeout bounds each step that waits.
	Timeout time.Duration
	// Sample is the fraction of files DryRun's verify checksums.
	Sample float64
	// By names who runs the drill, for the control requests.
	By  string
	Log *slog.Logger
}

// Name is the scratch database of a drill started at t: prefix (which
// must begin with failover.DrillPrefix; "" is that), its time, and four
// random hex digits so that two drills started in the same second (of
// two pipelines sharing the metastores) do not collide.
func Name(prefix string, t time.Time) (string, error) {
	if prefix == "" {
		prefix = failover.DrillPrefix
	}
	if !failover.IsDrill(prefix) || strings.ToLower(prefix) != prefix || strings.ContainsAny(prefix, "*?[.") {
		return "", fmt.Errorf("scratch prefix %q: want lower case, no glob or dot, beginning with %s (what every command knows as a drill's)", prefix, failover.DrillPrefix)
	}
	return fmt.Sprintf("%s%s_%04x", prefix, t.UTC().Format("20060102t150405"), rand.IntN(1<<16)), nil
}

// drill is one run.
type drill struct {
	Options
	rep *Report
	// root is where the scratch database lives on the source.
	root string
}

// The scratch tables and what is written to them.
const (
	eventsTable  = "drill_events"
	drTable      = "drill_written_on_dr"
	rowsPerFile  = 100
	firstDays    = 3
	dataLagValue = "2026-01-04"
)

// Run rehearses a failover and failback on the scratch database name:
// clean up earlier drills' leftovers, create it on the source (a
// partitioned table, partitions each with a data file), wait until verify
// is clean on DR with every file checksummed, write one more partition
// with a file and fail over at once (planned: the wait covers the copy
// and the apply of that last change), verify, write a table with a file on
// DR, fail back through the reverse pipeline (its daemons run before or
// after: failback asks its applier to plan the database again), verify
// the old primary, and drop the database on both sites (always, even
// after a failed step).
func Run(ctx context.Context, opts Options, name string) *Report {
	start := time.Now()
	d := &drill{Options: opts, rep: &Report{Database: name, RPOEvents: -1}}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	defer d.rep.Finish(start)
	if _, ok := d.Conf.Replication.Scope(name); !ok {
		d.rep.Run("scope", func() (string, error) {
			return "", fmt.Errorf("replication.databases does not hold %s: add {name: \"%s*\"}", name, failover.DrillPrefix)
		})
		return d.rep
	}
	if len(d.Conf.Replication.SourceRoots) == 0 {
		d.rep.Run("scope", func() (string, error) {
			return "", errors.New("replication.source_roots is empty: nowhere to create the scratch database")
		})
		return d.rep
	}
	d.root = d.rootOf(name)
	files, err := fs.NewRouter(d.Conf.Filesystems)
	if err != nil {
		d.rep.Run("filesystems", func() (string, error) { return "", err })
		return d.rep
	}
	defer files.Close()

	d.rep.Run("clean up leftovers", func() (string, error) {
		left, err := d.leftovers(ctx, name)
		if err != nil {
			return "", err
		}
		for _, l := range left {
			if _, err := d.cleanup(ctx, files, l); err != nil {
				return "", fmt.Errorf("leftover %s: %w", l, err)
			}
		}
		d.rep.Leftovers = left
		if len(left) == 0 {
			return "none", nil
		}
		return "dropped " + strings.Join(left, ", "), nil
	})
	d.rep.Run("create on source", func() (string, error) { return d.create(ctx, files, name) })
	d.rep.Run("replicate and verify", func() (string, error) { return d.verified(ctx, d.Conf, name, firstDays) })
	d.rep.Run("failover (planned)", func() (string, error) { return d.failover(ctx, files, name) })
	d.rep.Run("verify after failover", func() (string, error) { return d.verified(ctx, d.Conf, name, firstDays+1) })
	d.rep.Run("write on DR", func() (string, error) { return d.writeOnDR(ctx, files, name) })
	if d.Rev == nil {
		d.rep.Skip("failback", "no -reverse-config")
		d.rep.Skip("verify after failback", "no -reverse-config")
	} else {
		d.rep.Run("failback", func() (string, error) {
			back, err := failover.Failback(ctx, d.Conf, d.Rev, failover.BackOptions{Databases: []string{name}, Log: d.Log})
			if err != nil {
				return "", err
			}
			d.rep.MovedTables = back.MovedTables
			return fmt.Sprintf("%d table(s) moved: %s", back.MovedTables, strings.Join(back.Databases[0].Moved, ", ")), nil
		})
		d.rep.Run("verify after failback", func() (string, error) { return d.verified(ctx, d.Rev, name, firstDays+2) })
	}
	d.rep.Always("clean up", func() (string, error) { return d.cleanup(ctx, files, name) })
	return d.rep
}

// create makes the scratch database on the source, as Hive's client
// would: the database (marked with OwnerParam), a managed table
// partitioned by day, its partitions, then into each partition a data
// file and the INSERT event that names it.
func (d *drill) create(ctx context.Context, files *fs.Router, name string) (string, error) {
	src, err := hms.Dial(ctx, d.Conf.Source.Metastore, d.Conf.SourceMetastoreOptions())
	if err != nil {
		return "", err
	}
	defer src.Close()
	if err := src.CreateDatabase(ctx, &hive_metastore.Database{Name: name, LocationUri: d.root,
		Description: "hivedr drill scratch database", Parameters: map[string]string{OwnerParam: d.Conf.Source.Name}}); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	tbl := table(name, eventsTable, d.root+"/"+eventsTable)
	if err := src.CreateTable(ctx, tbl); err != nil {
		return "", fmt.Errorf("create table %s.%s: %w", name, eventsTable, err)
	}
	var days []string
	for i := 1; i <= firstDays; i++ {
		days = append(days, fmt.Sprintf("2026-01-%02d", i))
	}
	n, err := loadPartitions(ctx, src, files, tbl, days)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("1 table, %d partitions, %d files (%d bytes)", len(days), len(days), n), nil
}

// loadPartitions adds partitions for days to tbl (empty directories),
// then loads each: a data file written into it and an INSERT event naming
// the file, as INSERT INTO ... PARTITION does. It returns the bytes
// written.
func loadPartitions(ctx context.Context, ms *hms.Client, files *fs.Router, tbl *hive_metastore.Table, days []string) (int64, error) {
	var parts []*hive_metastore.Partition
	for _, day := range days {
		sd := *tbl.Sd
		sd.Location = tbl.Sd.Location + "/dt=" + day
		parts = append(parts, &hive_metastore.Partition{DbName: tbl.DbName, TableName: tbl.TableName, Values: []string{day}, Sd: &sd, Parameters: map[string]string{}})
	}
	if _, err := ms.AddPartitions(ctx, parts); err != nil {
		return 0, fmt.Errorf("add partitions to %s.%s: %w", tbl.DbName, tbl.TableName, err)
	}
	var total int64
	for _, p := range parts {
		loc := p.Sd.Location + "/000000_0"
		data := rows(p.Values[0])
		f, path, err := files.Split(loc)
		if err != nil {
			return total, err
		}
		if _, err := fs.WriteFile(ctx, f, path, data); err != nil {
			return total, fmt.Errorf("write %s: %w", loc, err)
		}
		total += int64(len(data))
		replace := false
		req := &hive_metastore.FireEventRequest{Successful: true, DbName: &tbl.DbName, TableName: &tbl.TableName, PartitionVals: p.Values,
			Data: &hive_metastore.FireEventRequestData{InsertData: &hive_metastore.InsertEventRequestData{Replace: &replace, FilesAdded: []string{loc}}}}
		if _, err := ms.FireListenerEvent(ctx, req); err != nil {
			return total, fmt.Errorf("INSERT event of %s: %w", loc, err)
		}
	}
	return total, nil
}

// rows is the text data of one partition's file.
func rows(day string) []byte {
	var b strings.Builder
	for i := range rowsPerFile {
		fmt.Fprintf(&b, "%d\t%s drill row %d\n", i, day, i)
	}
	return []byte(b.String())
}

// failover writes one more partition with a file, then fails the scratch
// database over at once (planned): the wait covers copying that file and
// applying the event, so the RPO of 0 includes the data.
func (d *drill) failover(ctx context.Context, files *fs.Router, name string) (string, error) {
	src, err := hms.Dial(ctx, d.Conf.Source.Metastore, d.Conf.SourceMetastoreOptions())
	if err != nil {
		return "", err
	}
	defer src.Close()
	res, err := src.GetTableReq(ctx, &hive_metastore.GetTableRequest{DbName: name, TblName: eventsTable})
	if err != nil {
		return "", fmt.Errorf("get %s.%s: %w", name, eventsTable, err)
	}
	tbl := res.Table
	if _, err := loadPartitions(ctx, src, files, tbl, []string{dataLagValue}); err != nil {
		return "", err
	}
	fo, err := failover.Run(ctx, d.Conf, failover.Options{Databases: []string{name}, Mode: failover.Planned, Timeout: d.Timeout, Log: d.Log})
	if err != nil {
		return "", err
	}
	x := fo.Databases[0]
	d.rep.RPOEvents, d.rep.RPOSeconds, d.rep.RTOSeconds = x.LostEvents, x.RPOSeconds, fo.Seconds
	return fmt.Sprintf("at event %d, cut %d, waited %.1fs for the partition and file written just before", x.Reached, fo.Cut, fo.WaitSeconds), nil
}

// writeOnDR writes on the failed-over database on DR: a table with a
// partition holding a data file, loaded as on the source.
func (d *drill) writeOnDR(ctx context.Context, files *fs.Router, name string) (string, error) {
	dr, err := hms.Dial(ctx, d.Conf.Applier.Metastore, d.Conf.DRMetastoreOptions())
	if err != nil {
		return "", err
	}
	defer dr.Close()
	loc, err := d.Conf.Replication.MapPath(d.root + "/" + drTable)
	if err != nil {
		return "", err
	}
	tbl := table(name, drTable, loc)
	if err := dr.CreateTable(ctx, tbl); err != nil {
		return "", fmt.Errorf("create a table on the failed-over DR database: %w", err)
	}
	n, err := loadPartitions(ctx, dr, files, tbl, []string{"2026-02-01"})
	if err != nil {
		return "", fmt.Errorf("on DR: %w", err)
	}
	return fmt.Sprintf("created %s.%s with 1 partition, 1 file (%d bytes)", name, drTable, n), nil
}

// verified runs verify over db (every file checksummed) until it is clean
// with nothing in flight and at least wantParts partitions, for up to
// the drill's timeout.
func (d *drill) verified(ctx context.Context, conf *config.Config, db string, wantParts int) (string, error) {
	deadline := time.Now().Add(d.Timeout)
	for {
		var first string
		sum, err := verifyOnce(ctx, conf, verify.Options{Databases: []string{db}, Sample: 1}, func(f verify.Finding) {
			if first == "" {
				first = f.String()
			}
		})
		if err == nil && sum.Clean() && sum.InFlight == 0 && sum.Partitions >= wantParts && sum.Sampled >= wantParts {
			d.rep.Checksummed += sum.Sampled
			return fmt.Sprintf("%d tables, %d partitions, %d files (%d bytes, %d checksummed) equal", sum.Tables, sum.Partitions, sum.Files, sum.Bytes, sum.Sampled), nil
		}
		if !time.Now().Before(deadline) {
			if err != nil {
				return "", err
			}
			return "", fmt.Errorf("not clean after %s: %d partitions, %d files checksummed (want %d), %d diverged, %d in flight; first: %s",
				d.Timeout, sum.Partitions, sum.Sampled, wantParts, sum.Diverged, sum.InFlight, first)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func verifyOnce(ctx context.Context, conf *config.Config, opts verify.Options, sink verify.Sink) (verify.Summary, error) {
	cfg, closeAll, err := verify.Open(ctx, conf)
	if err != nil {
		return verify.Summary{}, err
	}
	defer closeAll()
	return verify.Run(ctx, cfg, opts, sink)
}

// leftovers are the scratch databases of this pipeline's earlier drills
// (on the source, marked with OwnerParam naming this source; on DR, this
// pipeline's replicas or failed over from it), but the one of this drill.
func (d *drill) leftovers(ctx context.Context, current string) ([]string, error) {
	mark := drparam.TargetMark(d.Conf.Source.Name)
	var out []string
	for _, side := range []struct {
		addr string
		opts hms.Options
		ours func(map[string]string) bool
	}{
		{d.Conf.Source.Metastore, d.Conf.SourceMetastoreOptions(), func(p map[string]string) bool { return p[OwnerParam] == d.Conf.Source.Name }},
		{d.Conf.Applier.Metastore, d.Conf.DRMetastoreOptions(), func(p map[string]string) bool {
			return p[drparam.Target] == mark || p[drparam.FailoverTarget] == mark
		}},
	} {
		ms, err := hms.Dial(ctx, side.addr, side.opts)
		if err != nil {
			return nil, err
		}
		names, err := ms.GetDatabases(ctx, failover.DrillPrefix+"*")
		if err != nil {
			ms.Close()
			return nil, fmt.Errorf("list %s* on %s: %w", failover.DrillPrefix, side.addr, err)
		}
		for _, n := range names {
			n = strings.ToLower(n)
			if n == current || !failover.IsDrill(n) || slices.Contains(out, n) {
				continue
			}
			db, err := ms.GetDatabase(ctx, n)
			if isNotFound(err) {
				continue
			}
			if err != nil {
				ms.Close()
				return nil, fmt.Errorf("get database %s on %s: %w", n, side.addr, err)
			}
			if side.ours(db.Parameters) {
				out = append(out, n)
			}
		}
		ms.Close()
	}
	slices.Sort(out)
	return out, nil
}

// cleanup drops a scratch database on DR and on the source (with its
// data: what the metastores leave is removed through the filesystems),
// asks the appliers of both pipelines to plan it again (a forward
// applier halted it failed_over when failback wrote on the old primary)
// and waits until each has gone past its last events: the drop published
// by its tailer and applied (a no-op), so no applier stays halted on it.
//
// One pass is not always enough: the reverse applier may still hold
// events of the database it had not applied when the drop came (it
// writes them on the source), and the forward pipeline then carries
// them back to DR. So each pass waits for the forward applier again past
// whatever the reverse one wrote, and the passes repeat, for up to the
// drill's timeout, until a pass's drop finds the database on neither
// site.
func (d *drill) cleanup(ctx context.Context, files *fs.Router, name string) (string, error) {
	deadline := time.Now().Add(d.Timeout)
	var dropped []string
	removed := 0
	for pass := 1; ; pass++ {
		sides, n, err := d.drop(ctx, files, name)
		if err != nil {
			return "", err
		}
		removed += n
		if pass > 1 && len(sides) == 0 {
			// Nothing came back since the last pass's waits.
			what := "dropped on " + strings.Join(dropped, " and ")
			if len(dropped) == 0 {
				what = "on neither site"
			}
			if pass > 2 {
				what += fmt.Sprintf(" (in %d passes: an applier brought it back meanwhile)", pass-1)
			}
			return fmt.Sprintf("%s; %d file(s) left by the metastores removed; the appliers went past its last events", what, removed), nil
		}
		for _, s := range sides {
			if !slices.Contains(dropped, s) {
				dropped = append(dropped, s)
			}
		}
		if pass > 1 {
			if !time.Now().Before(deadline) {
				return "", fmt.Errorf("after %d passes in %s, %s was still on %v: an applier keeps bringing it back", pass, d.Timeout, name, sides)
			}
			d.Log.Info("drill clean-up: an applier brought the scratch database back; dropped it again", "db", name, "pass", pass, "on", sides)
		}
		if err := d.pastDrops(ctx, name); err != nil {
			return "", err
		}
	}
}

// drop drops name on DR and on the source where it exists, and removes
// the files the metastores leave; it returns the sides it dropped it on
// and the number of files removed.
func (d *drill) drop(ctx context.Context, files *fs.Router, name string) ([]string, int, error) {
	var dirs []string
	var dropped []string
	for _, side := range d.sites() {
		ms, err := hms.Dial(ctx, side.addr, side.opts)
		if err != nil {
			return nil, 0, fmt.Errorf("%s metastore: %w", side.what, err)
		}
		db, err := ms.GetDatabase(ctx, name)
		switch {
		case isNotFound(err):
		case err != nil:
			ms.Close()
			return nil, 0, fmt.Errorf("get %s database %s: %w", side.what, name, err)
		default:
			dirs = append(dirs, db.LocationUri)
			if err := ms.DropDatabase(ctx, name, true, true); err != nil && !isNotFound(err) {
				ms.Close()
				return nil, 0, fmt.Errorf("drop %s database %s: %w", side.what, name, err)
			}
			dropped = append(dropped, side.what)
		}
		ms.Close()
	}
	// The files a metastore left (an applier dropped the database first,
	// keeping its data, or a table's data lay elsewhere).
	root := d.rootOf(name)
	dirs = append(dirs, root)
	if loc, err := d.Conf.Replication.MapPath(root); err == nil {
		dirs = append(dirs, loc)
	}
	removed, err := removeFiles(ctx, files, dirs)
	return dropped, removed, err
}

// pastDrops waits for the forward applier, then the reverse one, to go
// past their sources' heads, then for the forward one again past the
// source's head as it is then: whatever the reverse applier wrote on the
// source while it went past the drop has reached DR when it returns.
func (d *drill) pastDrops(ctx context.Context, name string) error {
	past := func(conf *config.Config) error {
		head, err := failover.SourceHead(ctx, conf.Source, conf.SourceMetastoreOptions())
		if err != nil {
			return err
		}
		if err := d.pastDrop(ctx, conf, name, head); err != nil {
			return fmt.Errorf("the applier of %s going past the drop: %w", conf.Source.Name, err)
		}
		return nil
	}
	if err := past(d.Conf); err != nil || d.Rev == nil {
		return err
	}
	if err := past(d.Rev); err != nil {
		return err
	}
	return past(d.Conf)
}

// site is one of a drill's two metastores.
type site struct {
	what, addr string
	opts       hms.Options
}

// sites are DR's metastore and the source's, in the order a clean-up
// drops a scratch database.
func (d *drill) sites() []site {
	return []site{{"DR", d.Conf.Applier.Metastore, d.Conf.DRMetastoreOptions()}, {"source", d.Conf.Source.Metastore, d.Conf.SourceMetastoreOptions()}}
}

// replanEvery is how often pastDrop asks the applier again: a request
// reaches only an applier reading its control topic then (one starting
// meanwhile reads it from its end).
const replanEvery = 10 * time.Second

// pastDrop asks conf's applier to plan db again, and again every
// replanEvery, until its tailer has published the source log up to head
// and its group has consumed db's topic to the end, for up to the
// drill's timeout.
func (d *drill) pastDrop(ctx context.Context, conf *config.Config, db string, head int64) error {
	deadline := time.Now().Add(d.Timeout)
	for {
		if err := replan(ctx, conf, db, d.By); err != nil {
			return err
		}
		err := failover.WaitApplied(ctx, conf, []string{db}, head, min(replanEvery, time.Until(deadline)))
		if err == nil || !errors.Is(err, failover.ErrTimeout) || !time.Now().Before(deadline) {
			return err
		}
	}
}

// rootOf is where a drill creates its scratch database name on the
// source: under the first source root.
func (d *drill) rootOf(name string) string {
	return strings.TrimSuffix(d.Conf.Replication.SourceRoots[0], "/") + "/" + name + ".db"
}

// removeFiles removes the files under dirs; missing directories hold none.
func removeFiles(ctx context.Context, files *fs.Router, dirs []string) (int, error) {
	n := 0
	for _, dir := range dirs {
		var locs []string
		err := files.Walk(ctx, strings.TrimSuffix(dir, "/"), func(loc string, _ int64) error {
			locs = append(locs, loc)
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, fmt.Errorf("list %s: %w", dir, err)
		}
		for _, loc := range locs {
			if err := files.Remove(ctx, loc); err != nil {
				return n, fmt.Errorf("remove %s: %w", loc, err)
			}
			n++
		}
	}
	return n, nil
}

// replan asks conf's running applier to plan db again from the head of
// its queue.
func replan(ctx context.Context, conf *config.Config, db, by string) error {
	kopts, err := connect.Kafka(conf.Kafka)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return fmt.Errorf("kafka %s: %w", strings.Join(conf.Kafka.Brokers, ","), err)
	}
	defer cl.Close()
	c := schemas.ApplierControl{Kind: schemas.ControlReplan, Database: db, By: by, At: time.Now().UTC()}
	return kafka.SendApplierControl(ctx, cl, kafka.Topics{Prefix: conf.Kafka.TopicPrefix, Site: conf.TopicSite()}, conf.Kafka.ReplicationFactor, conf.Kafka.PrecreatedTopics, c)
}

// table is a drill's scratch table: managed, text, partitioned by day.
func table(db, name, loc string) *hive_metastore.Table {
	return &hive_metastore.Table{DbName: db, TableName: name, TableType: "MANAGED_TABLE",
		Parameters:    map[string]string{},
		PartitionKeys: []*hive_metastore.FieldSchema{{Name: "dt", Type: "string"}},
		Sd: &hive_metastore.StorageDescriptor{Location: loc,
			Cols:         []*hive_metastore.FieldSchema{{Name: "id", Type: "bigint"}, {Name: "note", Type: "string"}},
			InputFormat:  "org.apache.hadoop.mapred.TextInputFormat",
			OutputFormat: "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
			SerdeInfo: &hive_metastore.SerDeInfo{SerializationLib: "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
				Parameters: map[string]string{"field.delim": "\t"}}}}
}

func isNotFound(err error) bool {
	var nso *hive_metastore.NoSuchObjectException
	return errors.As(err, &nso)
}

// DryRun checks a real database's readiness for a failover and changes
// nothing: the DR database reachable and this pipeline's replica, no
// halt, the replica's age within the database's RPO, verify clean on a
// sample of files.
func DryRun(ctx context.Context, opts Options, db string) *Report {
	start := time.Now()
	rep := &Report{Database: db, DryRun: true, RPOEvents: -1}
	defer rep.Finish(start)
	conf := opts.Conf
	rep.Run("DR reachable", func() (string, error) {
		dr, err := hms.Dial(ctx, conf.Applier.Metastore, conf.DRMetastoreOptions())
		if err != nil {
			return "", err
		}
		defer dr.Close()
		x, err := dr.GetDatabase(ctx, db)
		if err != nil {
			return "", fmt.Errorf("get DR database %s: %w", db, err)
		}
		return "repl.last.id " + x.Parameters[drparam.LastID], failover.Check(db, conf.Source.Name, x.Parameters)
	})
	rep.Run("lag within RPO, no halt", func() (string, error) {
		st := status.Gather(ctx, conf, []string{db}, 5*time.Second)
		if len(st.Errors) > 0 {
			return "", errors.New(strings.Join(st.Errors, "; "))
		}
		if len(st.Databases) != 1 {
			return "", fmt.Errorf("status knows no database %s", db)
		}
		s := st.Databases[0]
		if s.Halted != "" {
			return "", fmt.Errorf("halted: %s", s.Halted)
		}
		if s.Age == nil || *s.Age > s.RPO {
			age := "unknown"
			if s.Age != nil {
				age = fmt.Sprintf("%.1fs", *s.Age)
			}
			return "", fmt.Errorf("replica age %s, RPO %.0fs", age, s.RPO)
		}
		return fmt.Sprintf("age %.1fs within RPO %.0fs, %d events behind", *s.Age, s.RPO, s.LagEvents), nil
	})
	rep.Run("verify a sample", func() (string, error) {
		var first string
		sum, err := verifyOnce(ctx, conf, verify.Options{Databases: []string{db}, Sample: opts.Sample}, func(f verify.Finding) {
			if first == "" && f.Class == verify.Diverged {
				first = f.String()
			}
		})
		if err != nil {
			return "", err
		}
		if !sum.Clean() {
			return "", fmt.Errorf("%d diverged; first: %s", sum.Diverged, first)
		}
		rep.Checksummed = sum.Sampled
		return fmt.Sprintf("%d tables, %d partitions, %d files (%d checksummed), %d in flight", sum.Tables, sum.Partitions, sum.Files, sum.Sampled, sum.InFlight), nil
	})
	return rep
}
