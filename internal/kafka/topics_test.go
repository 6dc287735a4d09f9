package kafka

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fakeAdmin is an admin client of a kfake cluster made with opts, and a
// context of a minute; both end with the test.
func fakeAdmin(t *testing.T, opts ...kfake.Opt) (context.Context, *kadm.Client) {
	t.Helper()
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx, kadm.NewClient(cl)
}

// TestProdTopicsPrecreated: topic creation fits a cluster whose platform
// team owns the topics (Strimzi): hivedr can leave creating them to it,
// and the topics it creates itself keep acknowledged writes on more than
// one replica.
func TestProdTopicsPrecreated(t *testing.T) {
	t.Run("min.insync.replicas", testEnsureSetsMinInsync)
	t.Run("precreated", testEnsurePrecreated)
}

// testEnsureSetsMinInsync: the topics Ensure creates carry
// min.insync.replicas, 2 with three replicas and 1 with one, beside the
// settings their Spec asks for; a topic that exists is left as it is.
func testEnsureSetsMinInsync(t *testing.T) {
	ctx, adm := fakeAdmin(t, kfake.NumBrokers(3))
	created, err := Ensure(ctx, adm,
		Spec{Name: "three", Partitions: 1, ReplicationFactor: 3, MaxMessageBytes: 1 << 20},
		Spec{Name: "one", Partitions: 1, ReplicationFactor: 1, Compact: true})
	if err != nil {
		t.Fatal(err)
	}
	if !created["three"] || !created["one"] {
		t.Fatalf("created %v, want both", created)
	}
	want := map[string]map[string]string{
		"three": {"min.insync.replicas": "2", "max.message.bytes": "1048576"},
		"one":   {"min.insync.replicas": "1", "cleanup.policy": "compact"},
	}
	cfgs, err := adm.DescribeTopicConfigs(ctx, "three", "one")
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range cfgs {
		for key, v := range want[rc.Name] {
			got := ""
			for _, c := range rc.Configs {
				if c.Key == key {
					got = c.MaybeValue()
				}
			}
			if rc.Err != nil || got != v {
				t.Errorf("topic %s: %s = %q (%v), want %q", rc.Name, key, got, rc.Err, v)
			}
		}
	}
	if again, err := Ensure(ctx, adm, Spec{Name: "one", Partitions: 1, ReplicationFactor: 1}); err != nil || len(again) != 0 {
		t.Errorf("Ensure of an existing topic: created %v, %v; want nothing", again, err)
	}
}

// testEnsurePrecreated: with kafka.precreated_topics a topic that exists
// is used as it is and one that is missing is not created: the error
// names it with the layout to create it with.
func testEnsurePrecreated(t *testing.T) {
	ctx, adm := fakeAdmin(t, kfake.NumBrokers(1), kfake.SeedTopics(3, "p.manifests"))
	created, err := Ensure(ctx, adm, Spec{Name: "p.manifests", Partitions: 12, ReplicationFactor: 1, Precreated: true})
	if err != nil || len(created) != 0 {
		t.Fatalf("an existing precreated topic: created %v, %v; want nothing created, no error", created, err)
	}
	_, err = Ensure(ctx, adm, Spec{Name: "p.tailer.checkpoints", Partitions: 1, ReplicationFactor: 3, Compact: true, Precreated: true})
	if err == nil || !strings.Contains(err.Error(), "kafka.precreated_topics") ||
		!strings.Contains(err.Error(), "p.tailer.checkpoints: 1 partitions, replication 3, cleanup.policy=compact, min.insync.replicas=2") {
		t.Fatalf("a missing precreated topic: %v; want an error naming it and its layout", err)
	}
	td, err := adm.ListTopics(ctx, "p.tailer.checkpoints")
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := td["p.tailer.checkpoints"]; ok && d.Err == nil {
		t.Error("the missing precreated topic was created")
	}
}

// TestAwaitLeaders: a topic the cluster knows with a leader per partition
// is ready at once; a topic it does not know is reported by name when
// the wait runs out.
func TestAwaitLeaders(t *testing.T) {
	ctx, adm := fakeAdmin(t, kfake.NumBrokers(1), kfake.SeedTopics(3, "p.ready"))
	if err := awaitLeaders(ctx, adm, []string{"p.ready"}, 5*time.Second); err != nil {
		t.Fatalf("seeded topic: %v", err)
	}
	err := awaitLeaders(ctx, adm, []string{"p.ready", "p.absent"}, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "p.absent") || strings.Contains(err.Error(), "p.ready/") {
		t.Fatalf("absent topic: got %v, want an error naming p.absent only", err)
	}
	created, err := Ensure(ctx, adm, Spec{Name: "p.new", Partitions: 4, ReplicationFactor: 1})
	if err != nil || !created["p.new"] {
		t.Fatalf("Ensure: created %v, %v", created, err)
	}
	if pending, err := leaderless(ctx, adm, []string{"p.new"}); err != nil || len(pending) != 0 {
		t.Fatalf("after Ensure returned: partitions without a leader %v (%v)", pending, err)
	}
}
