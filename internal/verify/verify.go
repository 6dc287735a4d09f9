package verify

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/acid"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/iceberg"
	"github.com/hivedr/hivedr/internal/location"
)

// Metastore is the part of a metastore's Thrift API verify reads
// (*hms.Client).
type Metastore interface {
	GetAllDatabases(ctx context.Context) ([]string, error)
	GetDatabase(ctx context.Context, name string) (*hive_metastore.Database, error)
	GetAllTables(ctx context.Context, db string) ([]string, error)
	GetTableReq(ctx context.Context, req *hive_metastore.GetTableRequest) (*hive_metastore.GetTableResult_, error)
	GetPartitionNames(ctx context.Context, db, table string, max int16) ([]string, error)
	GetPartitionsByNamesReq(ctx context.Context, req *hive_metastore.GetPartitionsByNamesRequest) (*hive_metastore.GetPartitionsByNamesResult_, error)
	GetPartitionsByFilter(ctx context.Context, db, table, filter string, max int16) ([]*hive_metastore.Partition, error)
	GetNumPartitionsByFilter(ctx context.Context, db, table, filter string) (int32, error)
	// Write-ID states of transactional tables.
	acid.Metastore
}

// Files lists data files and reports their checksums (FileStore adapts an
// fs.Router).
type Files interface {
	// Walk calls fn with the location and size of every file under dir,
	// recursively; a missing dir is an error wrapping fs.ErrNotExist.
	Walk(ctx context.Context, dir string, fn func(location string, size int64) error) error
	// CRC32C returns the file's CRC32C as its store reports it (HDFS
	// COMPOSITE-CRC, S3 full-object CRC32C), reading the file only where
	// the store cannot say.
	CRC32C(ctx context.Context, location string) (crc uint32, how string, err error)
	// ReadFile reads a whole file of up to limit bytes (Iceberg tables'
	// metadata); a missing file is an error wrapping fs.ErrNotExist.
	ReadFile(ctx context.Context, location string, limit int64) ([]byte, error)
}

// Config is what Run compares and how it reaches it.
type Config struct {
	Source, DR Metastore
	// SourceFiles and DRFiles read the two sites' data files; they may be
	// the same router.
	SourceFiles, DRFiles Files
	// MapLocation rewrites a source location to its DR location.
	MapLocation func(src string) (string, error)
	// Replicated reports whether db.table is in the replication scope
	// (table "" asks about the database).
	Replicated func(db, table string) bool
	// Target is the value of repl.target.for on this pipeline's DR
	// databases (drparam.TargetMark of the source name): a DR database
	// with it is compared even when the source has no such database.
	Target string
	// Log reads what of a database's topic the applier has not committed;
	// nil: no event on the topics is pending.
	Log Log
	// Tailer reads what of the source log the tailer has not published;
	// nil: no source event is pending. With neither, every difference
	// is diverged.
	Tailer Tailer
}

// Options select what Run compares.
type Options struct {
	// Databases are glob patterns (path.Match) of database names; none
	// means every replicated database.
	Databases []string
	// Tables, when set, restricts the tables compared to the names it
	// matches whole.
	Tables *regexp.Regexp
	// Sample is the fraction of data files (0 to 1) whose checksums are
	// compared besides their names and lengths.
	Sample float64
	// Seed picks the sample: the same seed picks the same files.
	Seed uint64
	// PageSize is how many partitions are read per metastore call.
	// Default 500; at most 32767 (the metastore's limit).
	PageSize int
	// Progress, when set, is called after each table and after each page
	// of a partitioned table's partitions.
	Progress func(Progress)
}

// Class says whether a difference is lag or divergence.
type Class string

// The classes of a Finding.
const (
	// InFlight: an event not yet applied on DR touches the object.
	InFlight Class = "in_flight"
	// Diverged: nothing in flight explains the difference.
	Diverged Class = "diverged"
)

// Finding is one difference between a source object and its replica.
type Finding struct {
	Class Class `json:"class"`
	// Database and Table name the object's database and table ("" for
	// the database itself).
	Database string `json:"database"`
	Table    string `json:"table,omitempty"`
	// Object names what differs: "db", "db.table", "db.table partition
	// k=v", each possibly followed by " file <relative name>".
	Object string `json:"object"`
	// Detail says how it differs.
	Detail string `json:"detail"`
	// Reason says, of a difference in flight, which event explains it:
	// one on the database's topic the applier has not applied, one of
	// the source log the tailer has not published, or a bootstrap holding
	// the database's events back.
	Reason string `json:"reason,omitempty"`
}

func (f Finding) String() string {
	s := fmt.Sprintf("%-9s %s: %s", strings.ToUpper(string(f.Class)), f.Object, f.Detail)
	if f.Reason != "" {
		s += " (" + f.Reason + ")"
	}
	return s
}

// Sink receives findings as Run makes them.
type Sink func(Finding)

// Progress is how far Run has come.
type Progress struct {
	Database, Table string
	Summary
}

// Summary counts what Run compared and found.
type Summary struct {
	Databases  int   `json:"databases"`
	Tables     int   `json:"tables"`
	Partitions int   `json:"partitions"`
	Files      int   `json:"files"`
	Bytes      int64 `json:"bytes"`
	// Sampled files had their checksums compared.
	Sampled  int `json:"sampled_files"`
	Diverged int `json:"diverged"`
	InFlight int `json:"in_flight"`
	// PendingEvents are the events after the applier's committed offsets
	// of the databases compared (what in_flight is decided from).
	PendingEvents int `json:"pending_events"`
	// Unpublished are the source log's events of the databases compared
	// that the tailer has not published to their topics yet: above its
	// newest checkpoint, or held back by a bootstrap in progress.
	Unpublished int `json:"unpublished_events"`
	// ListedInFull counts the partitioned tables whose partitions could
	// not be read in pages (a partition key that is not a string, values
	// the metastore's filters cannot quote, an order or a count that did
	// not hold up) and whose partition names were listed in full.
	ListedInFull int     `json:"tables_listed_in_full"`
	Seconds      float64 `json:"seconds"`
}

// Clean reports whether nothing diverged.
func (s Summary) Clean() bool { return s.Diverged == 0 }

// Run compares the selected databases, sending each difference to sink,
// and returns what it compared. An error is returned when a metastore or
// store could not be read; the summary then counts what was compared
// before it.
func Run(ctx context.Context, cfg Config, opts Options, sink Sink) (Summary, error) {
	r := newRun(cfg, opts, sink)
	err := r.all(ctx)
	r.sum.Seconds = time.Since(r.start).Seconds()
	return r.sum, err
}

func newRun(cfg Config, opts Options, sink Sink) *run {
	if opts.PageSize <= 0 {
		opts.PageSize = 500
	}
	opts.PageSize = min(opts.PageSize, math.MaxInt16)
	return &run{cfg: cfg, opts: opts, sink: sink, start: time.Now()}
}

type run struct {
	cfg   Config
	opts  Options
	sink  Sink
	start time.Time
	sum   Summary
	// txn is the write-ID states of the transactional table being
	// compared (acid.go); nil for another table.
	txn *writeIDStates
	// held is the most findings held at once before they were sent:
	// findings go out a page of partitions at a time, so it is bounded
	// by the page (and its partitions' files), not by the table.
	held int
}

// databases returns the names to compare, sorted: the source's replicated
// databases and this pipeline's DR databases, filtered by the patterns.
func (r *run) databases(ctx context.Context) ([]string, error) {
	src, err := r.cfg.Source.GetAllDatabases(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the source databases: %w", err)
	}
	dr, err := r.cfg.DR.GetAllDatabases(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the DR databases: %w", err)
	}
	var names []string
	for _, n := range src {
		if n = strings.ToLower(n); r.cfg.Replicated(n, "") && r.selected(n) {
			names = append(names, n)
		}
	}
	for _, n := range dr {
		if n = strings.ToLower(n); slices.Contains(names, n) || !r.selected(n) {
			continue
		}
		db, err := r.cfg.DR.GetDatabase(ctx, n)
		if err != nil {
			if isNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("get DR database %s: %w", n, err)
		}
		if db.Parameters[drparam.Target] == r.cfg.Target {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, nil
}

func (r *run) selected(db string) bool {
	if len(r.opts.Databases) == 0 {
		return true
	}
	for _, p := range r.opts.Databases {
		if ok, _ := path.Match(strings.ToLower(p), db); ok {
			return true
		}
	}
	return false
}

func (r *run) all(ctx context.Context) error {
	names, err := r.databases(ctx)
	if err != nil {
		return err
	}
	for _, db := range names {
		if err := r.database(ctx, db); err != nil {
			return err
		}
	}
	return nil
}

// database compares one database and its tables.
func (r *run) database(ctx context.Context, name string) error {
	pend, err := newPending(ctx, r.cfg.Log, r.cfg.Tailer, name)
	if err != nil {
		return err
	}
	defer func() {
		r.sum.PendingEvents += pend.events
		r.sum.Unpublished += pend.unpublished
	}()
	r.sum.Databases++
	a, err := getDatabase(ctx, r.cfg.Source, name)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	b, err := getDatabase(ctx, r.cfg.DR, name)
	if err != nil {
		return fmt.Errorf("DR: %w", err)
	}
	var found Diffs
	if found.Presence(name, a != nil, b != nil) {
		found.Location(name, a.LocationUri, b.LocationUri, r.cfg.MapLocation)
		found.Params(name, a.Parameters, b.Parameters)
	}
	if err := r.emit(ctx, pend, name, "", &found); err != nil {
		return err
	}
	if a == nil || b == nil {
		return nil // the whole database is one finding
	}
	srcTables, err := r.tables(ctx, r.cfg.Source, name)
	if err != nil {
		return fmt.Errorf("source: %w", err)
	}
	drTables, err := r.tables(ctx, r.cfg.DR, name)
	if err != nil {
		return fmt.Errorf("DR: %w", err)
	}
	var ferr error
	merge(srcTables, drTables, func(t string, onSource, onDR bool) bool {
		ferr = r.table(ctx, pend, name, t, onSource, onDR)
		return ferr == nil
	})
	return ferr
}

// tables lists a database's replicated tables the options select, sorted.
func (r *run) tables(ctx context.Context, ms Metastore, db string) ([]string, error) {
	all, err := ms.GetAllTables(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("list the tables of %s: %w", db, err)
	}
	var out []string
	for _, t := range all {
		t = strings.ToLower(t)
		if r.cfg.Replicated(db, t) && (r.opts.Tables == nil || r.opts.Tables.MatchString(t)) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out, nil
}

// table compares one table: its definition, then its files or its
// partitions, page by page. Findings are sent as they are made: the
// table's own first, then a page of partitions' at a time, so what is
// held does not grow with the table's partitions.
func (r *run) table(ctx context.Context, pend *pending, db, name string, onSource, onDR bool) error {
	obj := db + "." + name
	var found Diffs
	defer func() { r.progress(db, name) }()
	r.sum.Tables++
	var a, b *hive_metastore.Table
	var err error
	if onSource {
		if a, err = getTable(ctx, r.cfg.Source, db, name); err != nil {
			return fmt.Errorf("source: %w", err)
		}
	}
	if onDR {
		if b, err = getTable(ctx, r.cfg.DR, db, name); err != nil {
			return fmt.Errorf("DR: %w", err)
		}
	}
	if !found.Presence(obj, a != nil, b != nil) {
		return r.emit(ctx, pend, db, name, &found)
	}
	if iceberg.IsTable(a.Parameters) && iceberg.IsTable(b.Parameters) {
		found.tableDef(obj, withoutPointers(a), withoutPointers(b), r.cfg.MapLocation)
		if err := r.iceberg(ctx, &found, obj, a, b); err != nil {
			return err
		}
		return r.emit(ctx, pend, db, name, &found)
	}
	found.tableDef(obj, a, b, r.cfg.MapLocation)
	if acid.Transactional(a.Parameters) && acid.Transactional(b.Parameters) {
		if r.txn, err = r.writeIDs(ctx, &found, obj, db, name); err != nil {
			return err
		}
		defer func() { r.txn = nil }()
	}
	if len(a.PartitionKeys) == 0 || len(b.PartitionKeys) == 0 {
		if err := r.files(ctx, &found, obj, sdLocation(a.Sd), sdLocation(b.Sd)); err != nil {
			return err
		}
		return r.emit(ctx, pend, db, name, &found)
	}
	if err := r.emit(ctx, pend, db, name, &found); err != nil {
		return err
	}
	return r.partitions(ctx, pend, db, name, a.PartitionKeys, b.PartitionKeys)
}

// partitions compares a table's partitions: in pages when the metastores
// allow it (paged), else from the full lists of names (listed). When the
// pages fail after some were compared (and their findings sent), the
// lists compare only the partitions the pages did not (pagedNames).
func (r *run) partitions(ctx context.Context, pend *pending, db, table string, srcKeys, drKeys []*hive_metastore.FieldSchema) error {
	var done map[string]bool
	if pageable(srcKeys) && sameKeys(srcKeys, drKeys) {
		reach, ok, err := r.paged(ctx, pend, db, table, srcKeys)
		if err != nil || ok {
			return err
		}
		if done, err = r.pagedNames(ctx, db, table, srcKeys, reach); err != nil {
			return err
		}
	}
	r.sum.ListedInFull++
	return r.listed(ctx, pend, db, table, done)
}

// reach is how far paged got before its pages failed: the last partition
// name compared by the source's pages, and the last looked at by DR's
// ("" for none).
type reach struct{ src, dr string }

// paged compares a table's partitions a page at a time, holding one
// page: the source's partitions in name order, each page looked up on
// DR by name; then DR's, each page looked up on the source, for those
// only on DR. Each page's findings are sent before the next page is
// read. Pages follow each other by a filter on the partition keys
// (keysetFilter: the values after the page's last), which the metastore
// answers in name order. ok is false when that did not hold: a page out
// of name order, a value no filter can quote, or fewer (or more)
// partitions read than the metastore counts; a metastore that refuses a
// filter also gives false. The pages compared until then (up to reach)
// stand: their findings are sent and counted.
func (r *run) paged(ctx context.Context, pend *pending, db, table string, keys []*hive_metastore.FieldSchema) (reach, bool, error) {
	obj := db + "." + table
	var at reach
	var found Diffs
	ok, err := r.pages(ctx, r.cfg.Source, db, table, keys, func(page []*hive_metastore.Partition, names []string) error {
		b, err := getPartitions(ctx, r.cfg.DR, db, table, names)
		if err != nil {
			return fmt.Errorf("DR: %w", err)
		}
		for i, pa := range page {
			pb := b[names[i]]
			pobj := obj + " partition " + names[i]
			r.sum.Partitions++
			if !found.Presence(pobj, true, pb != nil) {
				continue
			}
			found.partitionDef(pobj, pa, pb, r.cfg.MapLocation)
			if err := r.files(ctx, &found, pobj, sdLocation(pa.Sd), sdLocation(pb.Sd)); err != nil {
				return err
			}
		}
		at.src = names[len(names)-1]
		r.progress(db, table)
		return r.emit(ctx, pend, db, table, &found)
	})
	if err != nil || !ok {
		return at, ok, err
	}
	ok, err = r.pages(ctx, r.cfg.DR, db, table, keys, func(page []*hive_metastore.Partition, names []string) error {
		a, err := getPartitions(ctx, r.cfg.Source, db, table, names)
		if err != nil {
			return fmt.Errorf("source: %w", err)
		}
		for _, n := range names {
			if a[n] == nil {
				r.sum.Partitions++
				found.Presence(obj+" partition "+n, false, true)
			}
		}
		at.dr = names[len(names)-1]
		return r.emit(ctx, pend, db, table, &found)
	})
	return at, ok, err
}

// errReached stops pagedNames' pages past what paged had compared.
var errReached = errors.New("past the pages compared")

// pagedNames are the partitions paged compared before its pages failed:
// the source's pages again up to reach.src (every one of them was
// compared), and DR's up to reach.dr (those only on DR were sent; the
// others were compared with the source's). Read again the same way, the
// pages hold the same partitions, and miss the same ones, as when they
// were compared (bar changes made meanwhile). Only a table that falls
// back to its full lists after some pages holds this set, as large as
// those lists.
func (r *run) pagedNames(ctx context.Context, db, table string, keys []*hive_metastore.FieldSchema, at reach) (map[string]bool, error) {
	if at.src == "" && at.dr == "" {
		return nil, nil
	}
	done := map[string]bool{}
	for _, side := range []struct {
		ms   Metastore
		upTo string
	}{{r.cfg.Source, at.src}, {r.cfg.DR, at.dr}} {
		if side.upTo == "" {
			continue
		}
		_, err := r.pages(ctx, side.ms, db, table, keys, func(_ []*hive_metastore.Partition, names []string) error {
			for _, n := range names {
				if n > side.upTo {
					return errReached
				}
				done[n] = true
			}
			return nil
		})
		if err != nil && !errors.Is(err, errReached) {
			return nil, err
		}
	}
	return done, nil
}

// pages reads a table's partitions on ms a page at a time, in name
// order, calling fn with each page and its names (see paged); ok is false
// when the pages could not be trusted to cover the table exactly once.
// fn is called only with pages that were in order.
func (r *run) pages(ctx context.Context, ms Metastore, db, table string, keys []*hive_metastore.FieldSchema,
	fn func(page []*hive_metastore.Partition, names []string) error) (bool, error) {
	total, err := ms.GetNumPartitionsByFilter(ctx, db, table, "")
	if err != nil {
		return false, ctx.Err()
	}
	var last []string
	var lastName string
	seen := 0
	for {
		filter, ok := keysetFilter(keys, last)
		if !ok {
			return false, nil
		}
		page, err := ms.GetPartitionsByFilter(ctx, db, table, filter, int16(r.opts.PageSize))
		if err != nil {
			return false, ctx.Err()
		}
		if len(page) == 0 {
			break
		}
		names := make([]string, len(page))
		for i, p := range page {
			names[i] = hms.PartitionName(keys, p.Values)
			if names[i] <= lastName {
				return false, nil // not in name order: the filter may skip some
			}
			lastName = names[i]
		}
		seen += len(page)
		if seen > int(total) {
			return false, nil
		}
		if err := fn(page, names); err != nil {
			return false, err
		}
		last = page[len(page)-1].Values
		if len(page) < r.opts.PageSize {
			break
		}
	}
	return seen == int(total), nil
}

// pageable reports whether a table with these partition keys can be read
// in pages: the metastore filters partitions on keys of type string only
// ("Filtering is supported only on partition keys of type string").
func pageable(keys []*hive_metastore.FieldSchema) bool {
	for _, k := range keys {
		if !strings.EqualFold(k.Type, "string") {
			return false
		}
	}
	return len(keys) > 0
}

func sameKeys(a, b []*hive_metastore.FieldSchema) bool {
	return slices.EqualFunc(a, b, func(x, y *hive_metastore.FieldSchema) bool {
		return strings.EqualFold(x.Name, y.Name) && strings.EqualFold(x.Type, y.Type)
	})
}

// keysetFilter is the metastore filter of the partitions whose values
// come after last in order of the keys ("" for all when last is nil):
// (k1 > v1) or (k1 = v1 and k2 > v2) or ... ok is false when a value
// cannot be written as a filter literal: the metastore's filter grammar
// keeps a backslash and what follows it as they are, so a value with a
// backslash, or with both kinds of quote, cannot be quoted.
func keysetFilter(keys []*hive_metastore.FieldSchema, last []string) (string, bool) {
	if last == nil {
		return "", true
	}
	lits := make([]string, len(last))
	for i, v := range last {
		switch {
		case strings.Contains(v, `\`), strings.Contains(v, `"`) && strings.Contains(v, "'"):
			return "", false
		case strings.Contains(v, `"`):
			lits[i] = "'" + v + "'"
		default:
			lits[i] = `"` + v + `"`
		}
	}
	var or []string
	for i := range last {
		var and []string
		for j := range i {
			and = append(and, keys[j].Name+" = "+lits[j])
		}
		and = append(and, keys[i].Name+" > "+lits[i])
		or = append(or, "("+strings.Join(and, " and ")+")")
	}
	return strings.Join(or, " or "), true
}

// listed compares a table's partitions from the sorted name lists of
// both sides, merged, the partitions on both read a page at a time, the
// findings sent a page at a time (in name order). Partitions in done
// were compared already (pagedNames).
func (r *run) listed(ctx context.Context, pend *pending, db, table string, done map[string]bool) error {
	obj := db + "." + table
	names := func(ms Metastore, side string) ([]string, error) {
		n, err := ms.GetPartitionNames(ctx, db, table, -1)
		if err != nil {
			return nil, fmt.Errorf("%s: list the partitions of %s: %w", side, obj, err)
		}
		slices.Sort(n)
		return n, nil
	}
	srcNames, err := names(r.cfg.Source, "source")
	if err != nil {
		return err
	}
	drNames, err := names(r.cfg.DR, "DR")
	if err != nil {
		return err
	}
	var page []string
	var found Diffs
	// flush compares the page of partitions on both sides, then sends
	// the findings made since the last flush: those of the page and of
	// the partitions on one side only merged in between, all after the
	// last flush's in name order.
	flush := func() error {
		defer func() { page = page[:0] }()
		if len(page) > 0 {
			a, err := getPartitions(ctx, r.cfg.Source, db, table, page)
			if err != nil {
				return fmt.Errorf("source: %w", err)
			}
			b, err := getPartitions(ctx, r.cfg.DR, db, table, page)
			if err != nil {
				return fmt.Errorf("DR: %w", err)
			}
			for _, n := range page {
				pa, pb := a[n], b[n]
				pobj := obj + " partition " + n
				r.sum.Partitions++
				if !found.Presence(pobj, pa != nil, pb != nil) {
					continue // dropped on one side since the listing
				}
				found.partitionDef(pobj, pa, pb, r.cfg.MapLocation)
				if err := r.files(ctx, &found, pobj, sdLocation(pa.Sd), sdLocation(pb.Sd)); err != nil {
					return err
				}
			}
		}
		return r.emit(ctx, pend, db, table, &found)
	}
	var ferr error
	merge(srcNames, drNames, func(n string, onSource, onDR bool) bool {
		switch {
		case done[n]:
			return true
		case !onSource || !onDR:
			r.sum.Partitions++
			found.Presence(obj+" partition "+n, onSource, onDR)
		default:
			page = append(page, n)
		}
		if len(page) >= r.opts.PageSize || len(found) >= r.opts.PageSize {
			ferr = flush()
			r.progress(db, table)
		}
		return ferr == nil
	})
	if ferr != nil {
		return ferr
	}
	return flush()
}

// files compares the data files under a source location and its replica's
// location: names, lengths, and the sampled files' checksums.
func (r *run) files(ctx context.Context, found *Diffs, obj, srcLoc, drLoc string) error {
	if srcLoc == "" || drLoc == "" {
		return nil
	}
	a, err := listFiles(ctx, r.cfg.SourceFiles, srcLoc)
	if err != nil {
		return fmt.Errorf("source files of %s: %w", obj, err)
	}
	b, err := listFiles(ctx, r.cfg.DRFiles, drLoc)
	if err != nil {
		return fmt.Errorf("DR files of %s: %w", obj, err)
	}
	if r.txn != nil { // a reader's files only, on each side
		a, b = visibleFiles(a, r.txn.src), visibleFiles(b, r.txn.dr)
	}
	for _, rel := range UnionKeys(a, b) {
		fa, okA := a[rel]
		fb, okB := b[rel]
		fobj := obj + " file " + rel
		if okA {
			r.sum.Files++
			r.sum.Bytes += fa.size
		}
		switch {
		case !found.Presence(fobj, okA, okB):
		case fa.size != fb.size:
			found.Add(fobj, "%d bytes on source, %d on DR", fa.size, fb.size)
		case r.sampled(fa.loc):
			r.sum.Sampled++
			ca, how, err := r.cfg.SourceFiles.CRC32C(ctx, fa.loc)
			if err != nil {
				return fmt.Errorf("checksum of source file %s: %w", fa.loc, err)
			}
			cb, howB, err := r.cfg.DRFiles.CRC32C(ctx, fb.loc)
			if err != nil {
				return fmt.Errorf("checksum of DR file %s: %w", fb.loc, err)
			}
			if ca != cb {
				found.Add(fobj, "CRC32C %08x on source (%s), %08x on DR (%s), same length %d", ca, how, cb, howB, fa.size)
			}
		}
	}
	return nil
}

// sampled reports whether the file at loc is in the sample: a hash of the
// seed and the location below the fraction, so one seed picks the same
// files every run.
func (r *run) sampled(loc string) bool {
	switch {
	case r.opts.Sample <= 0:
		return false
	case r.opts.Sample >= 1:
		return true
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s", r.opts.Seed, loc)
	return float64(h.Sum64()>>11)/float64(1<<53) < r.opts.Sample
}

// emit classifies findings of a table (or of the database), sends them
// in object order and empties found. Before calling anything diverged it
// reads the topic's records published since it last looked: an event
// published while we compared explains a difference as well as one
// published before. A table's findings go out in parts (its own, then a
// page of partitions at a time), each classified as it goes.
func (r *run) emit(ctx context.Context, pend *pending, db, table string, found *Diffs) error {
	if len(*found) == 0 {
		return nil
	}
	r.held = max(r.held, len(*found))
	defer func() { *found = (*found)[:0] }()
	if pend.covers(table) == "" {
		if err := pend.refresh(ctx, r.cfg.Log, r.cfg.Tailer, db); err != nil {
			return err
		}
	}
	slices.SortStableFunc(*found, func(x, y Diff) int { return strings.Compare(x.Object, y.Object) })
	class, why := Diverged, pend.covers(table)
	if why == "" && r.txn != nil {
		why = pend.txns
	}
	if why != "" {
		class = InFlight
	}
	for _, d := range *found {
		f := Finding{Class: class, Database: db, Table: table, Reason: why, Object: d.Object, Detail: d.Detail}
		if class == InFlight {
			r.sum.InFlight++
		} else {
			r.sum.Diverged++
		}
		if r.sink != nil {
			r.sink(f)
		}
	}
	return nil
}

func (r *run) progress(db, table string) {
	if r.opts.Progress != nil {
		s := r.sum
		s.Seconds = time.Since(r.start).Seconds()
		r.opts.Progress(Progress{Database: db, Table: table, Summary: s})
	}
}

func getDatabase(ctx context.Context, ms Metastore, name string) (*hive_metastore.Database, error) {
	db, err := ms.GetDatabase(ctx, name)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get database %s: %w", name, err)
	}
	return db, nil
}

func getTable(ctx context.Context, ms Metastore, db, name string) (*hive_metastore.Table, error) {
	res, err := ms.GetTableReq(ctx, hms.TableRequest(db, name))
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get table %s.%s: %w", db, name, err)
	}
	return res.Table, nil
}

// getPartitions reads the named partitions of a table, by name.
func getPartitions(ctx context.Context, ms Metastore, db, table string, names []string) (map[string]*hive_metastore.Partition, error) {
	out := make(map[string]*hive_metastore.Partition, len(names))
	res, err := ms.GetPartitionsByNamesReq(ctx, &hive_metastore.GetPartitionsByNamesRequest{DbName: db, TblName: table, Names: names})
	if isNotFound(err) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get %d partitions of %s.%s: %w", len(names), db, table, err)
	}
	byValues := map[string]string{}
	for _, n := range names {
		byValues[valuesKey(partitionValues(n))] = n
	}
	for _, p := range res.Partitions {
		if n, ok := byValues[valuesKey(p.Values)]; ok {
			out[n] = p
		}
	}
	return out, nil
}

func sdLocation(sd *hive_metastore.StorageDescriptor) string {
	if sd == nil {
		return ""
	}
	return sd.Location
}

func isNotFound(err error) bool {
	var nso *hive_metastore.NoSuchObjectException
	return errors.As(err, &nso)
}

// fileInfo is one listed data file.
type fileInfo struct {
	loc  string
	size int64
}

// listFiles returns the data files under dir by name relative to it,
// leaving out hidden and staging names (a component starting with "." or
// "_", which Hive's readers skip) but for a compactor's metadata file in
// an ACID directory, which tells readers how to read it. A missing
// directory holds none.
func listFiles(ctx context.Context, files Files, dir string) (map[string]fileInfo, error) {
	dir = strings.TrimSuffix(dir, "/")
	out := map[string]fileInfo{}
	err := files.Walk(ctx, dir, func(loc string, size int64) error {
		if rel, ok := location.Below(dir, loc); ok && (!location.Hidden(rel) || acid.IsMetadata(rel)) {
			out[rel] = fileInfo{loc, size}
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	return out, err
}
