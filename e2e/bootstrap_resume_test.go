package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/schemas"
)

// Checks of a bootstrap resumed after kill -9: what the restarted process
// did again, counted, against what was left at the kill.

// checkpointBefore is the source's newest committed checkpoint written
// before at (nil when none); with a zero at, the newest. A tailer killed
// before at wrote every checkpoint it committed before at, and its
// restart writes none before at: so it is the state the kill left, even
// if the broker completed the killed tailer's last commit after the kill.
func checkpointBefore(t *testing.T, p *pipeline, s *schemas.Serde, source string, at time.Time) *schemas.TailerCheckpoint {
	t.Helper()
	var cp *schemas.TailerCheckpoint
	for _, d := range readTopic(t, p.env, s, kafka.Topics{Prefix: p.prefix}.Checkpoints()) {
		if c, ok := d.value.(*schemas.TailerCheckpoint); ok && c.Source == source && (at.IsZero() || c.Written.Before(at)) {
			cp = c
		}
	}
	return cp
}

// publishedAfter counts the records of bootstrap id past seq in a
// database topic's events: TABLE records and partitions (what a tailer
// restarted at seq published).
func publishedAfter(evs []*schemas.Event, id string, seq int64) (tables, parts int64) {
	for _, e := range evs {
		if e.Snapshot == nil || e.Snapshot.BootstrapID != id || e.Snapshot.Seq <= seq {
			continue
		}
		switch e.EventType {
		case schemas.EventSnapshotTable:
			tables++
		case schemas.EventSnapshotPartition:
			if pc, ok := e.Payload.(*schemas.PartitionChange); ok {
				parts += int64(len(pc.After))
			}
		}
	}
	return tables, parts
}

// checkResumeReads checks what a tailer restarted inside db's snapshot
// read from the source metastore (m, its metrics once the snapshot's END
// is published) against what the killed tailer had left (k, its
// bootstrap in the last checkpoint it committed; evs, the topic's
// events). Every table it read is one it published after k or the table
// in progress at k: no finished table is read again. Every partition it
// read it published after k (the page in flight at the kill is among
// them). It listed a table's partition names once at most, and started
// the listing of at most the table in progress at k again. (A transient
// error the tailer retried from its checkpoint may have it read a page,
// of at most page partitions, and list its table, once more: allowed
// for.)
func checkResumeReads(t *testing.T, m map[string]float64, k *schemas.BootstrapState, evs []*schemas.Event, db string, page int) {
	t.Helper()
	if k == nil || k.Phase != schemas.PhaseSnapshot || k.Seq == 0 {
		t.Fatalf("the killed tailer's last checkpoint holds %s's bootstrap as %+v: want it inside the snapshot", db, k)
	}
	inProgress := int64(0)
	if k.TableInProgress != "" {
		inProgress = 1
	}
	leftTables, leftParts := publishedAfter(evs, k.BootstrapID, k.Seq)
	if leftTables+leftParts == 0 {
		t.Fatalf("nothing of bootstrap %s published after record %d: the kill left nothing to resume", k.BootstrapID, k.Seq)
	}
	series := func(name string) int64 {
		v, ok := m[fmt.Sprintf("%s{db=%q}", name, db)]
		if !ok {
			t.Errorf("the restarted tailer exposes no %s of %s", name, db)
		}
		return int64(v)
	}
	tables := series("hivedr_tailer_bootstrap_tables_read_total")
	parts := series("hivedr_tailer_bootstrap_partitions_read_total")
	listings := series("hivedr_tailer_bootstrap_partition_listings_total")
	relisted := int64(metricSum(m, "hivedr_tailer_bootstrap_relisted_tables_total"))
	retries := int64(metricSum(m, "hivedr_tailer_retried_errors_total"))
	t.Logf("killed at record %d (%d tables published, in progress %q after %q); after it %d tables and %d partitions were published; "+
		"the restarted tailer read %d tables and %d partitions, listed partition names %d times, %d of them again (retried errors: %d)",
		k.Seq, len(k.PublishedTables), k.TableInProgress, k.DonePartition, leftTables, leftParts, tables, parts, listings, relisted, retries)
	if tables > leftTables+inProgress {
		t.Errorf("the restarted tailer read %d tables; want at most the %d it published plus %d in progress at the kill: it read finished tables again",
			tables, leftTables, inProgress)
	}
	if parts > leftParts+retries*int64(page) {
		t.Errorf("the restarted tailer read %d partitions; want at most the %d it published (and a page of %d per retried error)", parts, leftParts, page)
	}
	if listings > tables+retries {
		t.Errorf("the restarted tailer listed partition names %d times for %d tables read: want once a table at most", listings, tables)
	}
	if relisted > inProgress {
		t.Errorf("the restarted tailer listed %d tables' partitions again, want at most %d (the table in progress at the kill)", relisted, inProgress)
	}
}

// copydKill is what a test saw of a copy daemon killed with -9 and
// restarted.
type copydKill struct {
	killed    map[string]float64 // its metrics just before the kill
	restarted time.Time          // just before the new daemon started
	newLog    string             // the new daemon's output
	newM      map[string]float64 // the new daemon's metrics at the end
}

// checkCopydResume checks a copy daemon's kill -9 and restart against the
// committed completions (comps) and the manifests topic's tasks (tasks,
// in offset order by partition): the kill landed inside the bootstrap's
// copies (tasks of bootstrap id completed before it and after it); the
// tasks completed before the restart are a prefix of each manifest
// partition (the committed offset never passed an unfinished task); a
// finished file was found in place after the restart only within the
// killed daemon's windows (the first max_batch tasks past each
// partition's committed offset); the tasks it had finished without
// committing were not copied again; and the copies it had in progress
// (at most copyd.workers) are the only writes the new daemon discarded.
//
// The killed daemon's hivedr_copyd_files_total (F), read just before the
// kill, counts every task it finished; the completions it committed (C)
// are those finished before the restart. F - C tasks were finished and
// not committed, all in its windows: delivered again, each finds its file
// in place and completes SKIPPED_IDENTICAL, or as before (SOURCE_GONE,
// FAILED), or, when its source was rewritten since (an INSERT OVERWRITE
// writes its file under the same name), COPIED: then another task, the
// rewrite's, names the same target. So the window's completions after the
// restart that are not COPIED, or COPIED to a target another task names,
// are at least F - C. A SKIPPED_IDENTICAL to a target no other task names
// means the task's own file was in place: the killed daemon copied it, so
// it lies in a window. (A completion committed between the scrape and the
// kill only lowers F - C; a commit either daemon aborted itself, or a new
// session, may have had it finish tasks twice: a window each is allowed
// for.)
func checkCopydResume(t *testing.T, cfg *config.Config, comps []*schemas.CopyCompletion, tasks []decoded, id string, k copydKill) {
	t.Helper()
	workers := cfg.Copyd.Workers
	maxBatch := cfg.Copyd.MaxBatch
	if maxBatch <= 0 {
		maxBatch = config.DefaultMaxBatch(workers)
	}
	windows := int64(cfg.Kafka.ManifestPartitions) * int64(maxBatch)
	targets := map[string]int{}
	after := map[string]bool{}
	for _, c := range comps {
		targets[c.TargetURI]++
		if !c.Finished.Before(k.restarted) {
			after[c.TaskID] = true
		}
	}
	// The killed daemon's windows: per partition, the first max_batch tasks
	// completed after the restart; none completed before it may follow.
	inWindow := map[string]bool{}
	taken := map[int32]int{}
	var unordered []string
	for _, d := range tasks {
		task, ok := d.value.(*schemas.CopyTask)
		if !ok {
			continue
		}
		part := d.rec.Partition
		switch {
		case after[task.TaskID]:
			if taken[part] < maxBatch {
				inWindow[task.TaskID] = true
			}
			taken[part]++
		case taken[part] > 0:
			unordered = append(unordered, fmt.Sprintf("%s (partition %d offset %d)", task.TaskID, part, d.rec.Offset))
		}
	}
	if len(unordered) > 0 {
		t.Errorf("%d tasks completed before the copyd restart follow, in their manifest partition, one completed after it: %s",
			len(unordered), strings.Join(unordered[:min(len(unordered), 10)], ", "))
	}

	var bootBefore, bootAfter, committedBefore, accounted int64
	byStatus := map[schemas.CopyStatus]int64{}
	var afterBytes int64
	var outside []string
	windowed := map[string]int{} // the windows' completions after the restart, by status (and "shared")
	for _, c := range comps {
		boot := strings.HasPrefix(c.TaskID, id+"-s")
		if c.Finished.Before(k.restarted) {
			committedBefore++
			if boot {
				bootBefore++
			}
			continue
		}
		if boot {
			bootAfter++
		}
		byStatus[c.Status]++
		if c.Status == schemas.StatusCopied {
			afterBytes += max(c.Length, 0)
		}
		shared := targets[c.TargetURI] > 1
		if inWindow[c.TaskID] {
			key := string(c.Status)
			if shared {
				key += " shared"
			}
			windowed[key]++
		}
		switch {
		case inWindow[c.TaskID] && (c.Status != schemas.StatusCopied || shared):
			accounted++
		case c.Status == schemas.StatusSkippedIdentical && !shared:
			outside = append(outside, c.TaskID)
		}
	}
	t.Logf("copy tasks of bootstrap %s completed before the copyd kill: %d, after it: %d; every completion after the restart by status: %v (%d bytes copied)",
		id, bootBefore, bootAfter, byStatus, afterBytes)
	if bootBefore == 0 || bootAfter == 0 {
		t.Errorf("the copyd kill did not land inside the bootstrap's copies: %d of its tasks completed before, %d after", bootBefore, bootAfter)
	}
	redoneOld := int64(k.killed[`hivedr_copyd_transactions_total{outcome="aborted"}`] + k.killed["hivedr_copyd_session_restarts_total"])
	redoneNew := int64(k.newM[`hivedr_copyd_transactions_total{outcome="aborted"}`] + k.newM["hivedr_copyd_session_restarts_total"])
	finished := int64(metricSum(k.killed, "hivedr_copyd_files_total"))
	uncommitted := finished - committedBefore - redoneOld*windows
	t.Logf("the killed copyd had finished %d tasks and committed %d (aborted commits and new sessions: %d, the new daemon's %d): %d finished and not committed; "+
		"its windows held %d tasks (at most %d), completed after the restart as %v (target another task names: shared): %d not COPIED or shared; "+
		"SKIPPED_IDENTICAL outside them to a target no other task names: %d",
		finished, committedBefore, redoneOld, redoneNew, finished-committedBefore, len(inWindow), windows, windowed, accounted, len(outside))
	if uncommitted > int64(len(inWindow)) {
		t.Errorf("the killed copyd held %d finished tasks it had not committed, more than its windows held (%d)", uncommitted, len(inWindow))
	}
	if accounted < uncommitted {
		t.Errorf("%d tasks were finished before the kill and not committed, but only %d of the windows' completions after the restart were not copies of their own: finished files were copied again",
			uncommitted, accounted)
	}
	if int64(len(outside)) > redoneNew*windows {
		t.Errorf("%d tasks outside the killed copyd's windows found their own file in place after the restart (copied before, not committed): %s",
			len(outside), strings.Join(outside[:min(len(outside), 10)], ", "))
	}
	discarded := int64(strings.Count(k.newLog, "discarded an interrupted write"))
	t.Logf("the restarted copyd discarded %d interrupted writes (copies in progress at the kill, copied again)", discarded)
	if discarded > int64(workers) {
		t.Errorf("the restarted copyd discarded %d interrupted writes, more than the %d copies (copyd.workers) in progress at once", discarded, workers)
	}
}
