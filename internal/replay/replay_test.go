package replay

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// topic is a fake topic: per offset, an event ID, 0 for a heartbeat, -1
// for an offset no read_committed consumer sees (a marker, an aborted
// record).
type topic struct {
	ids   []int64
	reads int
}

func (t *topic) First(_ context.Context, offset int64) (Found, error) {
	t.reads++
	for o := offset; o < int64(len(t.ids)); o++ {
		if t.ids[o] > 0 {
			return Found{Offset: o, EventID: t.ids[o], OK: true}, nil
		}
	}
	return Found{}, nil
}

func TestSearch(t *testing.T) {
	// offsets:        0   1  2   3   4  5   6   7   8   9
	mixed := []int64{10, 0, 11, -1, 0, 12, 12, 15, 0, -1}
	cases := []struct {
		name  string
		ids   []int64
		start int64
		id    int64
		want  int64
	}{
		{"before every event", mixed, 0, 1, 0},
		{"the first event", mixed, 0, 10, 0},
		{"past heartbeats and a marker", mixed, 0, 12, 5},
		{"a bootstrap's shared ID: its first record", mixed, 0, 12, 5},
		{"a gap in IDs: the next present", mixed, 0, 13, 7},
		{"past the last event: the end", mixed, 0, 16, 10},
		{"an event after a heartbeat", mixed, 0, 11, 2},
		{"from a start past the log's beginning", mixed, 3, 10, 5},
		{"no events at all", []int64{0, 0, -1}, 0, 1, 3},
		{"empty topic", nil, 0, 5, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tp := &topic{ids: c.ids}
			got, reads, err := Search(context.Background(), tp, c.start, int64(len(c.ids)), c.id)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("Search(id %d) = %d, want %d", c.id, got, c.want)
			}
			if reads != tp.reads {
				t.Errorf("reported %d reads, made %d", reads, tp.reads)
			}
		})
	}
}

// TestSearchReadsLogarithmically: a million offsets take a few dozen
// reads, not a scan.
func TestSearchReadsLogarithmically(t *testing.T) {
	const n = 1 << 20
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i/2) + 1 // pairs share an ID; every 7th is a heartbeat
		if i%7 == 3 {
			ids[i] = 0
		}
	}
	tp := &topic{ids: ids}
	got, reads, err := Search(context.Background(), tp, 0, n, 300_001)
	if err != nil {
		t.Fatal(err)
	}
	if ids[got] != 300_001 || (got > 0 && ids[got-1] == 300_001) {
		t.Errorf("offset %d (id %d), want the first record of event 300001", got, ids[got])
	}
	t.Logf("%d offsets searched in %d reads", n, reads)
	if reads > 2*21+2 {
		t.Errorf("%d reads of %d offsets, want O(log n)", reads, n)
	}
}

func TestHowToMove(t *testing.T) {
	const group, topic = "hivedr-applier", "hivedr.events.sales"
	for _, c := range []struct {
		name       string
		m          Membership
		coordinate bool
		want       Move
		refused    string
	}{
		{"no members: commit", Membership{State: "Empty"}, false, MoveCommit, ""},
		{"no members, coordinate: commit", Membership{State: "Empty"}, true, MoveCommit, ""},
		{"an owner: refused", Membership{Owners: []string{"a@h"}, Members: []string{"a@h"}, State: "Stable"}, false, 0, "members owning " + topic + " (a@h)"},
		{"an owner, coordinate: seek", Membership{Owners: []string{"a@h"}, Members: []string{"a@h", "b@h"}, State: "Stable"}, true, MoveSeek, ""},
		{"members, none owning", Membership{Members: []string{"a@h", "b@h"}, State: "Stable"}, false, 0, "2 member(s) (a@h, b@h, group Stable) but none owns " + topic},
		{"members, none owning, coordinate", Membership{Members: []string{"a@h"}, State: "Stable"}, true, 0, "none owns " + topic},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := HowToMove(group, topic, c.m, c.coordinate)
			if c.refused != "" {
				if err == nil || !strings.Contains(err.Error(), c.refused) {
					t.Fatalf("HowToMove: %v, %v; want refused with %q", got, err, c.refused)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("HowToMove: %v, %v; want %v", got, err, c.want)
			}
		})
	}
}

// TestOwnersOfAnotherTopic: a member of the group consuming another topic
// is a member but not an owner, and replay refuses to move the topic,
// saying so; an offset commit the admin API makes for that group is
// refused by Kafka indeed.
func TestOwnersOfAnotherTopic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "ev.other", "ev.sales"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	const group = "applier"
	member, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumerGroup(group),
		kgo.ConsumeTopics("ev.other"), kgo.InstanceID("applier-1"))
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	go func() {
		for ctx.Err() == nil {
			member.PollFetches(ctx)
		}
	}()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var m Membership
	for {
		if m, err = Owners(ctx, adm, group, "ev.other"); err != nil {
			t.Fatal(err)
		}
		if len(m.Owners) == 1 && m.State == "Stable" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the member never owned ev.other: %+v", m)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if m, err = Owners(ctx, adm, group, "ev.sales"); err != nil {
		t.Fatal(err)
	}
	if len(m.Owners) != 0 || len(m.Members) != 1 || !strings.HasPrefix(m.Members[0], "applier-1@") {
		t.Fatalf("ev.sales: %+v, want one member and no owner", m)
	}
	if _, err := HowToMove(group, "ev.sales", m, false); err == nil || !strings.Contains(err.Error(), "none owns ev.sales") {
		t.Fatalf("HowToMove: %v", err)
	}
	if err := Commit(ctx, adm, group, "ev.sales", 0); err == nil {
		t.Fatal("Kafka took a commit for a group with a member")
	} else {
		t.Logf("the commit HowToMove spares: %v", err)
	}
}
