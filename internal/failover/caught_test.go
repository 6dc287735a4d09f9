package failover

import (
	"context"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCaughtUpAgainstTheWaitsEnds: a record appended to a database's
// topic after the wait read its end (a heartbeat, an event past the
// tailer's checkpoint) does not make the database look behind when the
// failover measures it; measured against the end now, it does.
func TestCaughtUpAgainstTheWaitsEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topics := kafka.Topics{Prefix: "p"}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topics.Events("sales")))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.DefaultProduceTopic(topics.Events("sales")))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	produce := func(n int) {
		for range n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	const group = "applier"
	produce(3)
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: topics.Events("sales"), Partition: 0, At: 3, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, group, offs); err != nil {
		t.Fatal(err)
	}

	caught, committed, ends := map[string]bool{}, map[string]int64{}, map[string]int64{}
	all, err := groupCaughtUp(ctx, adm, group, topics, []string{"sales", "crm"}, caught, committed, ends)
	if err != nil {
		t.Fatal(err)
	}
	if all || !caught["sales"] || caught["crm"] || committed["sales"] != 3 || ends["sales"] != 3 {
		t.Fatalf("at the wait: all %v caught %v committed %v ends %v; want sales caught at 3, crm (no topic) not", all, caught, committed, ends)
	}
	if _, ok := ends["crm"]; ok {
		t.Errorf("ends %v hold a topic that does not exist", ends)
	}

	produce(1) // a heartbeat after the wait
	if _, err := groupCaughtUp(ctx, adm, group, topics, []string{"sales"}, caught, committed, ends); err != nil || !caught["sales"] {
		t.Errorf("against the wait's ends: caught %v (%v), want sales caught up", caught, err)
	}
	if _, err := groupCaughtUp(ctx, adm, group, topics, []string{"sales"}, caught, committed, map[string]int64{}); err != nil || caught["sales"] {
		t.Errorf("against the end now: caught %v (%v), want sales behind", caught, err)
	}
}
