package producer

import (
	"fmt"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/config"
)

func TestHeartbeatEvery(t *testing.T) {
	const iv = 5 * time.Second
	for _, c := range []struct {
		n, rate int
		rpo     time.Duration
		want    int64
	}{
		{n: 300, rate: 100, rpo: 5 * time.Minute, want: 1},   // 60 a second: every round
		{n: 500, rate: 100, rpo: 5 * time.Minute, want: 1},   // exactly the rate
		{n: 501, rate: 100, rpo: 5 * time.Minute, want: 2},   // just over
		{n: 2000, rate: 100, rpo: 5 * time.Minute, want: 4},  // 20 s apart
		{n: 2000, rate: 10, rpo: 5 * time.Minute, want: 6},   // 200 s wanted, a tenth of the RPO is 30 s
		{n: 2000, rate: 100, rpo: 20 * time.Second, want: 1}, // a tenth of the RPO is less than a round
		{n: 2000, rate: 0, rpo: 5 * time.Minute, want: 1},    // no bound
	} {
		if got := heartbeatEvery(c.n, c.rate, iv, c.rpo); got != c.want {
			t.Errorf("heartbeatEvery(%d databases, rate %d, rpo %s) = %d, want %d", c.n, c.rate, c.rpo, got, c.want)
		}
	}
}

// TestDueHeartbeatsSpread: over k consecutive rounds every database gets
// exactly one heartbeat, each round about a k-th of them; a database with
// a short RPO gets one every round.
func TestDueHeartbeatsSpread(t *testing.T) {
	var dbs []string
	for i := range 1999 {
		dbs = append(dbs, fmt.Sprintf("db%04d", i))
	}
	r := &config.Replication{Databases: []config.DatabasePolicy{{Name: "urgent", RPO: config.Duration{Duration: 20 * time.Second}},
		{Name: "db*", RPO: config.Duration{Duration: 5 * time.Minute}}}}
	dbs = append(dbs, "urgent")
	tc := config.Tailer{HeartbeatInterval: config.Duration{Duration: 5 * time.Second}, HeartbeatRate: 100}
	const k = 4 // 2,000 databases at 100 a second, 5 s rounds
	seen := map[string]int{}
	for round := int64(17); round < 17+k; round++ {
		due := dueHeartbeats(dbs, round, r, tc)
		if len(due) < 2000/k/2 || len(due) > 2000/k*2 {
			t.Errorf("round %d: %d heartbeats, want about %d", round, len(due), 2000/k)
		}
		for _, db := range due {
			seen[db]++
		}
	}
	for _, db := range dbs {
		want := 1
		if db == "urgent" {
			want = k
		}
		if seen[db] != want {
			t.Errorf("%s: %d heartbeats in %d rounds, want %d", db, seen[db], k, want)
		}
	}
}
