package applier

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/acid"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/location"
)

// WriteIDStates is the part of the DR metastore's API that reads and sets
// tables' write-ID states (acid_bootstrap.go); *hms.Client implements it.
type WriteIDStates interface {
	Transactions
	acid.Metastore
	GetMaxAllocatedTableWriteID(ctx context.Context, req *hive_metastore.MaxAllocatedTableWriteIdRequest) (*hive_metastore.MaxAllocatedTableWriteIdResponse, error)
	ReplTblWriteidState(ctx context.Context, req *hive_metastore.ReplTblWriteIdStateRequest) error
}

var _ WriteIDStates = (*hms.Client)(nil)

// anchorTxn and tailTxn are the source transaction IDs SetWriteIDs opens
// its DR transactions under (see setWriteIDs): no source transaction has
// them (their IDs are positive). A leftover anchor of a crash is
// committed by the next SetWriteIDs of the database, a leftover tail
// transaction aborted by the next that has a tail, or either found again
// by its re-drive.
const (
	anchorTxn = -1
	tailTxn   = -2
)

func (x *executor) writeIDStates(op string) (WriteIDStates, error) {
	ms, ok := x.ms.(WriteIDStates)
	if !ok {
		return nil, &RefusedError{Op: op, Err: fmt.Errorf("the DR metastore client (%T) cannot read or set write-ID states", x.ms)}
	}
	return ms, nil
}

// writeIDs reads what WriteIDScope names: each table's highest allocated
// write ID, and the state of those marked so (one get_open_txns and one
// get_valid_write_ids for all of them).
func (x *executor) writeIDs(ctx context.Context, scope map[TableKey]bool) (map[TableKey]TableWriteIDs, error) {
	if len(scope) == 0 {
		return nil, nil
	}
	ms, err := x.writeIDStates("read write ids")
	if err != nil {
		return nil, err
	}
	out := make(map[TableKey]TableWriteIDs, len(scope))
	var full []string
	for tk, state := range scope {
		m, err := maxAllocated(ctx, ms, tk)
		if err != nil {
			return nil, err
		}
		out[tk] = TableWriteIDs{MaxAllocated: m}
		if state {
			full = append(full, tk.String())
		}
	}
	if len(full) == 0 {
		return out, nil
	}
	slices.Sort(full)
	states, err := acid.ReadWriteIDs(ctx, ms, full)
	if err != nil {
		return nil, classify(fmt.Sprintf("read the write ids of %v", full), err)
	}
	for tk, state := range scope {
		if !state {
			continue
		}
		w, ok := states[tk.String()]
		if !ok {
			return nil, &RefusedError{Op: "read the write ids of " + tk.String(), Err: errors.New("get_valid_write_ids answered without it")}
		}
		tw := out[tk]
		tw.State = &w
		out[tk] = tw
	}
	return out, nil
}

// maxAllocated is the highest write ID allocated under tk's name on DR
// (0: none, or no NEXT_WRITE_ID row).
func maxAllocated(ctx context.Context, ms WriteIDStates, tk TableKey) (int64, error) {
	r, err := ms.GetMaxAllocatedTableWriteID(ctx, &hive_metastore.MaxAllocatedTableWriteIdRequest{DbName: tk.DB, TableName: tk.Name})
	if err != nil {
		return 0, classify("get_max_allocated_table_write_id of "+tk.String(), err)
	}
	return r.MaxWriteId, nil
}

// setWriteIDs gives a.DB.Table the write-ID state a (SetWriteIDs). Every
// step is idempotent and skipped once done, so a crash anywhere is
// re-driven from the start; how far the last run got is read off the
// highest write ID allocated under the name (m):
//
//  1. With no write ID allocated under the name, repl_tbl_writeid_state
//     (Hive's REPL bootstrap call) sets the state below the anchor (see
//     anchorOf): one DR transaction per invalid write ID, opened and
//     aborted, and NEXT_WRITE_ID at the anchor. A no-op where the name
//     has a NEXT_WRITE_ID already.
//  2. The anchor, the highest valid write ID, gets a DR transaction of
//     its own, allocated (in the replication flow, at exactly DR's next
//     write ID, so nothing else is touched) and committed. Hive 4 reads a
//     table's high-water mark off its highest TXN_TO_WRITE_ID row, and
//     when none of its rows is a committed transaction's (as step 1
//     leaves them: aborted ones only) it takes the lowest invalid write
//     ID for the mark (get_valid_write_ids' rule for compacted tables):
//     readers would miss every valid write above it. Its source
//     transaction is anchorTxn; a leftover anchor is committed before a
//     new one.
//  3. The invalid write IDs above the anchor (the tail), one DR
//     transaction each under tailTxn, allocated at DR's next write ID and
//     aborted. A tail transaction left open by a crash holds the highest
//     write ID allocated, or none: it is aborted first either way.
//  4. The highest allocated write ID must then be the mark; otherwise the
//     name held another state (the plan reads DR before it decides, so
//     only a change behind its back gets here) and the metastore refuses.
func (x *executor) setWriteIDs(ctx context.Context, a SetWriteIDs) error {
	op := a.String()
	ms, err := x.writeIDStates(op)
	if err != nil {
		return err
	}
	tk := tableKey(a.DB, a.Table)
	m, err := maxAllocated(ctx, ms, tk)
	if err != nil {
		return err
	}
	anchor := anchorOf(a.HighWaterMark, a.Invalid)
	first := acid.WriteIDs{HighWaterMark: a.HighWaterMark, Aborted: a.Invalid}
	if anchor > 0 {
		first = acid.WriteIDs{HighWaterMark: anchor - 1}
		for _, id := range a.Invalid {
			if id < anchor {
				first.Aborted = append(first.Aborted, id)
			}
		}
	}
	agent := drparam.ReplTxnAgent(a.Policy)
	policy := a.Policy
	if m == 0 && first.HighWaterMark > 0 {
		err := ms.ReplTblWriteidState(ctx, &hive_metastore.ReplTblWriteIdStateRequest{
			ValidWriteIdlist: acid.FormatValidWriteIDList(tk.String(), first), User: "hivedr", HostName: agent, DbName: tk.DB, TableName: tk.Name,
		})
		if err != nil {
			return classify(op+": repl_tbl_writeid_state", err)
		}
		if m, err = maxAllocated(ctx, ms, tk); err != nil {
			return err
		}
	}
	// allocate gives write ID id, DR's next, to a new DR transaction
	// standing for source transaction src.
	allocate := func(what string, src, id int64) error {
		_, err := ms.OpenTxns(ctx, &hive_metastore.OpenTxnRequest{
			NumTxns: 1, User: "hivedr", Hostname: agent, AgentInfo: agent,
			ReplPolicy: &policy, ReplSrcTxnIds: []int64{src}, TxnType: hive_metastore.TxnType_REPL_CREATED,
		})
		if err != nil {
			return classify(fmt.Sprintf("%s: open the transaction of %s", op, what), err)
		}
		_, err = ms.AllocateTableWriteIds(ctx, &hive_metastore.AllocateTableWriteIdsRequest{
			DbName: tk.DB, TableName: tk.Name, ReplPolicy: &policy,
			SrcTxnToWriteIdList: []*hive_metastore.TxnToWriteId{{TxnId: src, WriteId: id}},
		})
		if err != nil {
			return classify(fmt.Sprintf("%s: allocate %s", op, what), err)
		}
		return nil
	}
	if anchor > 0 && m == anchor-1 {
		if err := ms.CommitReplTxn(ctx, policy, anchorTxn, nil, nil); err != nil { // a leftover, if any
			return classify(op+": commit a leftover anchor", err)
		}
		if err := allocate(fmt.Sprintf("the anchor, write id %d", anchor), anchorTxn, anchor); err != nil {
			return err
		}
		if m, err = maxAllocated(ctx, ms, tk); err != nil {
			return err
		}
	}
	if anchor > 0 {
		if err := ms.CommitReplTxn(ctx, policy, anchorTxn, nil, nil); err != nil {
			return classify(op+": commit the anchor transaction", err)
		}
	}
	if anchor > 0 && anchor < a.HighWaterMark {
		for {
			if err := ms.AbortReplTxn(ctx, policy, tailTxn); err != nil {
				return classify(op+": abort a tail transaction", err)
			}
			if m < anchor || m >= a.HighWaterMark {
				break
			}
			if err := allocate(fmt.Sprintf("aborted write id %d", m+1), tailTxn, m+1); err != nil {
				return err
			}
			next, err := maxAllocated(ctx, ms, tk)
			if err != nil {
				return err
			}
			if next != m+1 {
				return &RefusedError{Op: op, Err: fmt.Errorf("allocating write id %d under %s on DR left %d the highest allocated", m+1, tk, next)}
			}
			m = next
		}
	}
	if m != a.HighWaterMark {
		return &RefusedError{Op: op, Err: fmt.Errorf("the highest write id allocated under %s on DR is %d, not %d: the name holds another write-ID state", tk, m, a.HighWaterMark)}
	}
	return nil
}

// anchorOf is the write ID that setting a state of high-water mark hwm
// with write IDs invalid gives a committed DR transaction: the highest
// valid one. 0 when none needs it: nothing invalid (a table without
// TXN_TO_WRITE_ID rows reads its mark off NEXT_WRITE_ID), or nothing
// valid (a reader sees no write either way).
func anchorOf(hwm int64, invalid []int64) int64 {
	if len(invalid) == 0 {
		return 0
	}
	for id := hwm; id > 0; id-- {
		if !slices.Contains(invalid, id) {
			return id
		}
	}
	return 0
}

// resetWriteIDs removes a.DB.Table with the write-ID bookkeeping the
// metastore keeps under its name (ResetWriteIDs). The metastore keeps
// NEXT_WRITE_ID and TXN_TO_WRITE_ID when a transactional table is dropped
// with its data kept, and moves them with the table when it is renamed;
// so the table is renamed to a scratch name, with a scratch location so
// that no data moves (data stays where copies put it), and the renamed
// table dropped, its data kept. The scratch name's bookkeeping stays in
// the metastore (a NEXT_WRITE_ID row of no table). Without a table under
// the name, a.Def is created first to carry the bookkeeping away (nil:
// nothing to do). cur is the DR table when the caller read it.
func (x *executor) resetWriteIDs(ctx context.Context, a ResetWriteIDs, cur *hive_metastore.Table) error {
	op := a.String()
	var err error
	if cur == nil {
		if cur, err = x.drTable(ctx, a.DB, a.Table); err != nil {
			return err
		}
	}
	if cur == nil {
		if a.Def == nil {
			return nil
		}
		def := *a.Def
		if err := x.ms.CreateTable(ctx, &def); err != nil {
			var ae *hive_metastore.AlreadyExistsException
			if !errors.As(err, &ae) {
				return classify(op+": create it to carry its write ids away", err)
			}
		}
		if cur, err = x.drTable(ctx, a.DB, a.Table); err != nil {
			return err
		}
		if cur == nil {
			return &RefusedError{Op: op, Err: errors.New("created, then not found")}
		}
	}
	scratch := scratchName(a.Table, time.Now())
	moved := *cur
	moved.TableName = scratch
	if cur.Sd != nil {
		l, err := location.Parse(cur.Sd.Location)
		if err != nil {
			return &RefusedError{Op: op, Err: fmt.Errorf("its location: %w", err)}
		}
		sd := *cur.Sd
		sd.Location = location.Append(l.Dir().String(), scratch) // beside it: not a path the table's data is under
		moved.Sd = &sd
	}
	env := &hive_metastore.EnvironmentContext{Properties: map[string]string{"DO_NOT_UPDATE_STATS": "true"}}
	if err := x.ms.AlterTableWithEnvironmentContext(ctx, a.DB, a.Table, &moved, env); err != nil {
		x.sweepAgain()
		return classify(fmt.Sprintf("%s: rename it to %s", op, scratch), err)
	}
	fault(FaultResetRenamed)
	if err := x.ms.DropTable(ctx, a.DB, scratch, false); err != nil && !isNoSuchObject(err) {
		x.sweepAgain()
		return classify(fmt.Sprintf("%s: drop %s.%s, its renamed self", op, a.DB, scratch), err)
	}
	return nil
}

// sweepAgain makes the worker's next action drop the scratch tables of
// its database (dropScratch) after a reset's rename or drop failed: the
// rename may have committed with its reply lost, or the drop not run,
// and the retry plans the event over a table gone from its name, so
// nothing else would drop the scratch table before the worker restarts.
// A rename the metastore died in between its two commits (Hive 4.0.1
// moves the write-ID bookkeeping on its own connection first) left the
// table under its name without bookkeeping: the retry's rename moves
// none and drops it.
func (x *executor) sweepAgain() {
	if x.cache != nil {
		x.cache.scratchSwept = false
	}
}

// drTable reads DR table db.name; nil when it does not exist.
func (x *executor) drTable(ctx context.Context, db, name string) (*hive_metastore.Table, error) {
	res, err := x.ms.GetTableReq(ctx, hms.TableRequest(db, name))
	switch {
	case isNoSuchObject(err):
		return nil, nil
	case err != nil:
		return nil, classify(fmt.Sprintf("get table %s.%s", db, name), err)
	}
	return res.Table, nil
}

// scratchPrefix starts every scratch name (scratchName): a namespace of
// the applier's own in the DR databases it writes.
const scratchPrefix = "hivedr_dropped_"

// scratchName is the name a transactional table is renamed to before it
// is dropped: unique (the time and a random number: the name's
// bookkeeping stays behind, and a second rename onto it would collide),
// short enough for any table name.
func scratchName(table string, now time.Time) string {
	h := fnv.New32a()
	h.Write([]byte(strings.ToLower(table)))
	return fmt.Sprintf("%s%08x_%s_%s", scratchPrefix, h.Sum32(), strconv.FormatInt(now.UnixMilli(), 36), strconv.FormatUint(uint64(rand.Uint32()), 36))
}

// dropScratch finishes, once per worker (the first action it runs, which
// a heartbeat's watermark is too) and again after a reset's call failed
// (sweepAgain), the resets a crash cut short in its database: a table renamed to a scratch name (resetWriteIDs) whose drop
// did not run is dropped now, its data kept (its location is a scratch
// path nothing was written to), so no scratch table outlives a restart.
// Nothing else of such a reset is left undone: the rename moved the
// table away from its name (the event that asked for the reset is
// planned again over that, writing what it still must), and the prune
// of the table's directory, whenever its plan has one, ran before it.
func (x *executor) dropScratch(ctx context.Context) error {
	c := x.cache
	if c == nil || c.scratchSwept {
		return nil
	}
	names, err := x.ms.GetTables(ctx, c.db, scratchPrefix+"*")
	switch {
	case isNoSuchObject(err):
		names = nil
	case err != nil:
		return classify("list the tables of "+c.db+" for scratch tables a crash left", err)
	}
	for _, n := range names {
		if !strings.HasPrefix(strings.ToLower(n), scratchPrefix) {
			continue
		}
		if err := x.unfenced(ctx, c.db); err != nil {
			return err
		}
		if err := x.ms.DropTable(ctx, c.db, n, false); err != nil && !isNoSuchObject(err) {
			return classify(fmt.Sprintf("drop %s.%s, a scratch table a crash left", c.db, n), err)
		}
		if x.log != nil {
			x.log.Info("dropped a scratch table the applier left when it stopped between a reset's rename and its drop", "db", c.db, "table", n)
		}
	}
	c.scratchSwept = true
	return nil
}

// FaultEnv names the environment variable that makes the applier exit
// (status FaultExit, as a crash would: nothing flushed) at the point of
// its work it names, one a crash can fall on: FaultResetRenamed. For the
// e2e tests that must kill it exactly there.
const FaultEnv = "HIVEDR_FAULT"

// FaultExit is the exit status of a fault point reached.
const FaultExit = 86

// FaultResetRenamed is the point between resetWriteIDs' rename of a
// table to its scratch name and the drop of that scratch table.
const FaultResetRenamed = "applier.reset.renamed"

// fault exits the process when FaultEnv names point.
func fault(point string) {
	if os.Getenv(FaultEnv) == point {
		fmt.Fprintf(os.Stderr, "%s=%s: exiting at that point\n", FaultEnv, point)
		os.Exit(FaultExit)
	}
}

// dropTable drops DR table a.DB.Name, keeping its data; a transactional
// one with its write-ID bookkeeping (resetWriteIDs), so that a later
// table of the same name does not inherit its write IDs. A table already
// gone is a no-op. A managed table's files go with the PruneFiles its
// plan runs before (prunes.go), which keeps what later events' copies
// wrote there; the metastore's own delete would not.
func (x *executor) dropTable(ctx context.Context, a DropTable) error {
	cur, err := x.drTable(ctx, a.DB, a.Name)
	if err != nil || cur == nil {
		return err
	}
	if acid.Transactional(cur.Parameters) {
		return x.resetWriteIDs(ctx, ResetWriteIDs{DB: a.DB, Table: a.Name}, cur)
	}
	err = x.ms.DropTable(ctx, a.DB, a.Name, false)
	if isNoSuchObject(err) {
		return nil
	}
	return classify(a.String(), err)
}
