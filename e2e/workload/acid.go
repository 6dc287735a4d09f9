package workload

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/acid"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/location"
)

// Transactional (ACID) tables, written as Hive's writers write them
// through the metastore: a transaction is opened (open_txns), it gets a
// write ID per table it writes (allocate_table_write_ids), its files go
// into a delta_<w>_<w>_<stmt> directory named after the write ID (a
// base_<w> directory for a write that replaces everything before it),
// each write is logged with add_write_notification_log (file names,
// checksums, sub-directory), and commit_txn or abort_txn ends it. Readers
// see a write once its write ID is valid (get_valid_write_ids).

// acidCapabilities are the processor capabilities Hive's own clients
// announce; the metastore refuses transactional tables to clients without
// them.
var acidCapabilities = []string{"HIVEFULLACIDREAD", "HIVEFULLACIDWRITE", "HIVEMANAGEDINSERTREAD", "HIVEMANAGEDINSERTWRITE", "HIVEMANAGESTATS", "HIVECACHEINVALIDATE"}

// ACIDTableSpec describes a transactional table.
type ACIDTableSpec struct {
	// Columns are "name type"; PartitionKeys "name type" or bare names.
	Columns, PartitionKeys []string
	// InsertOnly makes an insert-only table (transactional_properties=
	// insert_only, text files); otherwise it is full ACID (ORC).
	InsertOnly bool
}

// CreateACIDTable creates the managed transactional table db.table in the
// database's managed location, as CREATE TABLE ... STORED AS ORC (or with
// 'transactional_properties'='insert_only') does in Hive 4.
func (s *Source) CreateACIDTable(ctx context.Context, db, table string, spec ACIDTableSpec) error {
	what := fmt.Sprintf("create transactional table %s.%s", db, table)
	cols, err := parseColumns(spec.Columns)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	keys, err := parseColumns(spec.PartitionKeys)
	if err != nil {
		return fmt.Errorf("%s: partition keys: %w", what, err)
	}
	sd := &hive_metastore.StorageDescriptor{
		Cols: cols, NumBuckets: -1, Parameters: map[string]string{},
		InputFormat:  "org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
		OutputFormat: "org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
		SerdeInfo:    &hive_metastore.SerDeInfo{SerializationLib: "org.apache.hadoop.hive.ql.io.orc.OrcSerde", Parameters: map[string]string{}},
	}
	props := "default"
	if spec.InsertOnly {
		props = "insert_only"
		sd.InputFormat = "org.apache.hadoop.mapred.TextInputFormat"
		sd.OutputFormat = "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat"
		sd.SerdeInfo = &hive_metastore.SerDeInfo{SerializationLib: "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
			Parameters: map[string]string{"serialization.format": "1"}}
	}
	id := "hivedr-workload"
	err = s.HMS.CreateTableReq(ctx, &hive_metastore.CreateTableRequest{
		Table: &hive_metastore.Table{
			DbName: db, TableName: table, Owner: "hivedr", TableType: "MANAGED_TABLE", Sd: sd, PartitionKeys: keys,
			Parameters: map[string]string{"transactional": "true", "transactional_properties": props},
		},
		ProcessorCapabilities: acidCapabilities, ProcessorIdentifier: &id,
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// AddACIDPartitions adds empty partitions to a transactional table, as a
// dynamic-partition write does before its files are committed.
func (s *Source) AddACIDPartitions(ctx context.Context, db, table string, values [][]string) error {
	_, err := s.AddPartitions(ctx, db, table, values, 0)
	return err
}

// Txn is an open source transaction.
type Txn struct {
	s  *Source
	ID int64
	// writeIDs are the write IDs allocated so far, by "db.table".
	writeIDs map[string]int64
	stmt     map[string]int
	files    []File
}

// OpenTxn opens a transaction (open_txns).
func (s *Source) OpenTxn(ctx context.Context) (*Txn, error) {
	r, err := s.HMS.OpenTxns(ctx, &hive_metastore.OpenTxnRequest{NumTxns: 1, User: "hivedr", Hostname: "workload", AgentInfo: "hivedr-workload"})
	if err != nil {
		return nil, fmt.Errorf("open_txns: %w", err)
	}
	if len(r.TxnIds) != 1 {
		return nil, fmt.Errorf("open_txns: %d transactions, want 1", len(r.TxnIds))
	}
	return &Txn{s: s, ID: r.TxnIds[0], writeIDs: map[string]int64{}, stmt: map[string]int{}}, nil
}

// WriteID returns the transaction's write ID for db.table, allocating it
// on first use (allocate_table_write_ids).
func (tx *Txn) WriteID(ctx context.Context, db, table string) (int64, error) {
	k := strings.ToLower(db + "." + table)
	if w, ok := tx.writeIDs[k]; ok {
		return w, nil
	}
	r, err := tx.s.HMS.AllocateTableWriteIds(ctx, &hive_metastore.AllocateTableWriteIdsRequest{DbName: db, TableName: table, TxnIds: []int64{tx.ID}})
	if err != nil {
		return 0, fmt.Errorf("allocate write id of %s in transaction %d: %w", k, tx.ID, err)
	}
	if len(r.TxnToWriteIds) != 1 {
		return 0, fmt.Errorf("allocate write id of %s: %d answers", k, len(r.TxnToWriteIds))
	}
	tx.writeIDs[k] = r.TxnToWriteIds[0].WriteId
	return tx.writeIDs[k], nil
}

// Files are the data files the transaction wrote.
func (tx *Txn) Files() []File { return append([]File(nil), tx.files...) }

// Insert writes rows rows into db.table (partition vals, nil for an
// unpartitioned table) in a new delta directory of the transaction's
// write ID, one statement ID per insert, and logs the write.
func (tx *Txn) Insert(ctx context.Context, db, table string, vals []string, rows int) (File, error) {
	return tx.write(ctx, db, table, vals, rows, false)
}

// Overwrite writes rows rows into a base directory of the transaction's
// write ID, which replaces every delta and base below it once committed:
// what INSERT OVERWRITE, and a major compaction, leave behind.
func (tx *Txn) Overwrite(ctx context.Context, db, table string, vals []string, rows int) (File, error) {
	return tx.write(ctx, db, table, vals, rows, true)
}

func (tx *Txn) write(ctx context.Context, db, table string, vals []string, rows int, base bool) (File, error) {
	what := fmt.Sprintf("transaction %d writes %s.%s %v", tx.ID, db, table, vals)
	t, err := tx.s.table(ctx, db, table)
	if err != nil {
		return File{}, fmt.Errorf("%s: %w", what, err)
	}
	dir := strings.TrimSuffix(t.Sd.Location, "/")
	if len(vals) > 0 {
		name, err := partitionName(t.PartitionKeys, vals)
		if err != nil {
			return File{}, fmt.Errorf("%s: %w", what, err)
		}
		dir += "/" + name
	}
	w, err := tx.WriteID(ctx, db, table)
	if err != nil {
		return File{}, err
	}
	k := strings.ToLower(db + "." + table + "/" + strings.Join(vals, "/"))
	st := tx.stmt[k]
	tx.stmt[k]++
	sub := fmt.Sprintf("delta_%07d_%07d_%04d", w, w, st)
	if base {
		sub = fmt.Sprintf("base_%07d", w)
	}
	name := "bucket_00000"
	if strings.EqualFold(t.Parameters["transactional_properties"], "insert_only") {
		name = "000000_0"
	}
	if st > 0 && base {
		name = fmt.Sprintf("%s_copy_%d", name, st)
	}
	f, err := tx.s.writeFile(ctx, dir+"/"+sub+"/"+name, textRows(tx.s.rng, t.Sd.Cols, rows))
	if err != nil {
		return File{}, fmt.Errorf("%s: %w", what, err)
	}
	tx.files = append(tx.files, f)
	data := &hive_metastore.InsertEventRequestData{FilesAdded: []string{f.Location}, SubDirectoryList: []string{sub}}
	if c, ok := tx.s.FS.(checksummer); ok && !tx.s.NoChecksums {
		sum, _, err := c.FileChecksum(ctx, f.Location)
		if err != nil {
			return f, fmt.Errorf("%s: %w", what, err)
		}
		data.FilesAddedChecksum = []string{sum}
	}
	_, err = tx.s.HMS.AddWriteNotificationLog(ctx, &hive_metastore.WriteNotificationLogRequest{
		TxnId: tx.ID, WriteId: w, Db: t.DbName, Table: t.TableName, PartitionVals: vals, FileInfo: data,
	})
	if err != nil {
		return f, fmt.Errorf("%s: add_write_notification_log: %w", what, err)
	}
	return f, nil
}

// Commit commits the transaction (commit_txn).
func (tx *Txn) Commit(ctx context.Context) error {
	if err := tx.s.HMS.CommitTxn(ctx, &hive_metastore.CommitTxnRequest{Txnid: tx.ID}); err != nil {
		return fmt.Errorf("commit_txn %d: %w", tx.ID, err)
	}
	return nil
}

// Abort aborts the transaction (abort_txns). Its files stay where they
// are, invisible, as Hive leaves them for the cleaner.
func (tx *Txn) Abort(ctx context.Context) error {
	if err := tx.s.HMS.AbortTxns(ctx, &hive_metastore.AbortTxnsRequest{TxnIds: []int64{tx.ID}}); err != nil {
		return fmt.Errorf("abort_txns %d: %w", tx.ID, err)
	}
	return nil
}

// CleanObsolete removes, under db.table's directory (partition vals), the
// files of the deltas and bases that its newest base covers, as Hive's
// compaction cleaner does once no reader needs them. The metastore logs
// nothing for it.
func (s *Source) CleanObsolete(ctx context.Context, db, table string, vals []string) error {
	t, err := s.table(ctx, db, table)
	if err != nil {
		return err
	}
	dir := strings.TrimSuffix(t.Sd.Location, "/")
	if len(vals) > 0 {
		name, err := partitionName(t.PartitionKeys, vals)
		if err != nil {
			return err
		}
		dir += "/" + name
	}
	byDir := map[string][]string{}
	var newest int64 = -1
	err = s.FS.Walk(ctx, dir, func(loc string, _ int64) error {
		rel, ok := location.Below(dir, loc)
		if !ok {
			return nil
		}
		top, _, nested := strings.Cut(rel, "/")
		if !nested {
			return nil
		}
		byDir[top] = append(byDir[top], loc)
		if d, ok := acid.ParseDir(top); ok && d.Kind == acid.Base && d.Max > newest {
			newest = d.Max
		}
		return nil
	})
	if err != nil || newest < 0 {
		return err
	}
	for top, locs := range byDir {
		if !acid.Obsolete(top, newest) {
			continue
		}
		for _, loc := range locs {
			if err := s.FS.Remove(ctx, loc); err != nil {
				return err
			}
			s.markRemoved(loc)
		}
	}
	return nil
}

// WriteIDs is a table's write-ID state (acid.WriteIDs).
type WriteIDs = acid.WriteIDs

// ValidWriteIDs asks the metastore c for the write-ID state of the tables
// ("db.table") as a reader starting now would see it.
func ValidWriteIDs(ctx context.Context, c *hms.Client, tables []string) (map[string]WriteIDs, error) {
	return acid.ReadWriteIDs(ctx, c, tables)
}

// VisibleFiles returns the files a reader with write-ID state w sees under
// the transactional table or partition directory dir, by their path below
// it: those of the newest valid base and of the valid deltas above it, as
// Hive's readers choose them, with a compactor's metadata file among
// them. Directories are named as DR names them (acid.ReplicaName: no
// compactor visibility suffix), so the two sides compare by name. A
// missing dir holds none.
func VisibleFiles(ctx context.Context, files Files, dir string, w WriteIDs) (map[string]FileSum, error) {
	dir = strings.TrimSuffix(dir, "/")
	byDir := map[string][]string{}
	var rels []string
	err := files.Walk(ctx, dir, func(loc string, _ int64) error {
		rel, ok := location.Below(dir, loc)
		if !ok || location.Hidden(path.Base(rel)) && !acid.IsMetadata(rel) {
			return nil
		}
		top, _, nested := strings.Cut(rel, "/")
		if nested {
			byDir[top] = append(byDir[top], loc)
			rels = append(rels, rel)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]FileSum{}, nil
	}
	if err != nil {
		return nil, err
	}
	chosen := acid.VisibleIn(slices.Collect(maps.Keys(byDir)), w, acid.View{Compacted: acid.Compacted(rels)})
	out := map[string]FileSum{}
	for _, top := range chosen {
		for _, loc := range byDir[top] {
			sum, err := fileSum(ctx, files, loc)
			if err != nil {
				return nil, err
			}
			rel, _ := location.Below(dir, loc)
			_, rest, _ := strings.Cut(rel, "/")
			out[acid.ReplicaName(top)+"/"+rest] = sum
		}
	}
	return out, nil
}
