package producer

import (
	"hash/fnv"
	"math"
	"strings"
	"time"

	"github.com/hivedr/hivedr/internal/config"
)

// Heartbeats at scale. Every heartbeat round (tailer.heartbeat_interval)
// each in-scope database used to get a heartbeat record: at thousands of
// databases, hundreds of records a second that every applier fetches,
// decodes, plans and commits while nothing happens (docs/benchmarks.md,
// thousands of databases). With tailer.heartbeat_rate, once more
// databases are in scope than the rate allows per round, a database's
// heartbeats go every k rounds, k just large enough to keep all of them
// near the rate, and staggered by a hash of the name so each round
// carries a k-th of them. k never spaces a database's heartbeats more
// than a tenth of its rpo apart: its replica age, which the heartbeats
// move on while it is idle, must not near the RPO from the spacing alone.
// A database's events move its replica age on by themselves; its
// heartbeats carry the chain (previous_event_id) wherever they fall.

// heartbeatEvery is k for n in-scope databases at rate heartbeat records a
// second, heartbeat rounds interval apart, for a database of RPO rpo.
func heartbeatEvery(n, rate int, interval, rpo time.Duration) int64 {
	if rate <= 0 || n <= 0 || interval <= 0 {
		return 1
	}
	k := int64(math.Ceil(float64(n) / (float64(rate) * interval.Seconds())))
	return max(1, min(k, int64(rpo/10/interval)))
}

// heartbeatDue reports whether db gets a heartbeat in round when its
// heartbeats go every k rounds: in the rounds its name's hash picks.
func heartbeatDue(db string, round, k int64) bool {
	if k <= 1 {
		return true
	}
	h := fnv.New32a()
	h.Write([]byte(strings.ToLower(db)))
	return (round+int64(h.Sum32()%uint32(k)))%k == 0
}

// dueHeartbeats returns the databases of dbs (the in-scope ones) that get
// a heartbeat in round.
func dueHeartbeats(dbs []string, round int64, r *config.Replication, t config.Tailer) []string {
	var out []string
	for _, db := range dbs {
		rpo := config.DefaultRPO
		if pol, ok := r.Scope(db); ok && pol.RPO.Duration > 0 {
			rpo = pol.RPO.Duration
		}
		if heartbeatDue(db, round, heartbeatEvery(len(dbs), t.HeartbeatRate, t.HeartbeatInterval.Duration, rpo)) {
			out = append(out, db)
		}
	}
	return out
}
