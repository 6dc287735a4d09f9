// Package replay moves the applier group's position on a database's topic
// (`hivedr replay`): it finds the first record at or after an event ID by
// binary search over offsets (Search), checks who owns the topic in the
// group (Owners), and commits the new offset for an idle group (Commit)
// or asks the running applier to seek (schemas.ControlSeek).
package replay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/schemas"
)

// Found is the first event record at or after an offset.
type Found struct {
	Offset, EventID int64
	// OK is false when there is no event record from the offset to the
	// end of the topic.
	OK bool
}

// Reader reads the first event record at or after an offset, stepping
// over heartbeats, transaction markers and aborted records.
type Reader interface {
	First(ctx context.Context, offset int64) (Found, error)
}

// Search returns the offset of the first event record in [start, end)
// whose event ID is at least id, or end when there is none, reading
// O(log(end-start)) records. The events of a topic are in event ID order
// (a bootstrap's records share the cut's ID), so "the first event at or
// after offset o has an ID >= id" is false then true as o grows: the
// search finds where it turns.
func Search(ctx context.Context, r Reader, start, end, id int64) (int64, int, error) {
	lo, hi := start, end
	reads := 0
	for lo < hi {
		mid := lo + (hi-lo)/2
		f, err := r.First(ctx, mid)
		reads++
		if err != nil {
			return 0, reads, err
		}
		if !f.OK || f.EventID >= id {
			hi = mid
			continue
		}
		// Every offset in [mid, f.Offset] has f as its first event.
		lo = f.Offset + 1
	}
	if lo >= end {
		return end, reads, nil
	}
	f, err := r.First(ctx, lo)
	reads++
	if err != nil {
		return 0, reads, err
	}
	if !f.OK {
		return end, reads, nil
	}
	return f.Offset, reads, nil
}

// TopicReader reads one record at a time of a database's topic.
type TopicReader struct {
	Brokers []string
	Topic   string
	// End is the topic's last stable offset: nothing at or past it is
	// read.
	End  int64
	Opts []kgo.Opt
}

// First implements Reader with a read_committed consumer started at
// offset: event records carry the hivedr.event_id header (records of
// other writers without it are keyed by event ID).
func (t *TopicReader) First(ctx context.Context, offset int64) (Found, error) {
	if offset >= t.End {
		return Found{}, nil
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(t.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{t.Topic: {0: kgo.NewOffset().At(offset)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords()}, t.Opts...)...)
	if err != nil {
		return Found{}, err
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return Found{}, fmt.Errorf("read %s at offset %d: %w", t.Topic, offset, err)
		}
		if err := fs.Err(); err != nil {
			return Found{}, fmt.Errorf("read %s at offset %d: %w", t.Topic, offset, err)
		}
		var found Found
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			if done || r.Offset < offset {
				return
			}
			if r.Offset >= t.End {
				done = true
				return
			}
			if r.Attrs.IsControl() {
				if r.Offset == t.End-1 {
					done = true
				}
				return
			}
			if id, ok := eventID(r); ok {
				found, done = Found{Offset: r.Offset, EventID: id, OK: true}, true
				return
			}
			if r.Offset == t.End-1 {
				done = true
			}
		})
		if done {
			return found, nil
		}
	}
}

// eventID returns the event ID of an event record; heartbeats have none.
func eventID(r *kgo.Record) (int64, bool) {
	var typ, id string
	for _, h := range r.Headers {
		switch h.Key {
		case kafka.HeaderType:
			typ = string(h.Value)
		case kafka.HeaderEventID:
			id = string(h.Value)
		}
	}
	if typ != "" && typ != schemas.NameMetastoreEvent {
		return 0, false
	}
	if id == "" {
		id = string(r.Key)
	}
	n, err := strconv.ParseInt(id, 10, 64)
	return n, err == nil
}

// Membership is who is in the applier group, as replay needs it.
type Membership struct {
	// Owners are the members the topic is assigned to (while the group
	// rebalances and no assignment is known: every member).
	Owners []string
	// Members are all the group's members, each as instance (or member
	// ID) @ host.
	Members []string
	// State is the group's state (Stable, Empty, PreparingRebalance...).
	State string
}

// Owners describes group: its members and those that own topic.
func Owners(ctx context.Context, adm *kadm.Client, group, topic string) (Membership, error) {
	dg, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return Membership{}, fmt.Errorf("describe group %s: %w", group, err)
	}
	g, ok := dg[group]
	if !ok {
		return Membership{}, nil
	}
	if errors.Is(g.Err, kerr.GroupIDNotFound) {
		return Membership{State: "Dead"}, nil // no group: no members
	}
	if g.Err != nil {
		return Membership{}, fmt.Errorf("describe group %s: %w", group, g.Err)
	}
	m := Membership{State: g.State}
	for _, mem := range g.Members {
		name := mem.MemberID
		if mem.InstanceID != nil {
			name = *mem.InstanceID
		}
		name += "@" + mem.ClientHost
		m.Members = append(m.Members, name)
		if ca, ok := mem.Assigned.AsConsumer(); ok {
			for _, t := range ca.Topics {
				if t.Topic == topic {
					m.Owners = append(m.Owners, name)
				}
			}
		}
	}
	if len(m.Owners) == 0 && g.State != "Stable" && g.State != "Empty" && g.State != "Dead" {
		m.Owners = m.Members
	}
	return m, nil
}

// Move is how replay moves a group's position.
type Move int

// The moves.
const (
	// MoveCommit commits the offset with the admin API: Kafka takes it
	// only from a group without members.
	MoveCommit Move = iota
	// MoveSeek asks the member owning the topic to seek
	// (schemas.ControlSeek on the applier control topic).
	MoveSeek
)

// HowToMove decides how to move group's position on topic given its
// membership: a commit when the group has no members; with members, a
// seek by the owner when coordinate is set. Refused, with why, when
// members own the topic and coordinate is not set, and when the group
// has members of which none owns the topic: Kafka would refuse the
// commit, and no member would act on a seek.
func HowToMove(group, topic string, m Membership, coordinate bool) (Move, error) {
	switch {
	case len(m.Members) == 0:
		return MoveCommit, nil
	case len(m.Owners) > 0 && coordinate:
		return MoveSeek, nil
	case len(m.Owners) > 0:
		return 0, fmt.Errorf("the applier group %s has members owning %s (%s): stop them, or add -coordinate to ask the running applier to seek",
			group, topic, strings.Join(m.Owners, ", "))
	}
	return 0, fmt.Errorf("the applier group %s has %d member(s) (%s, group %s) but none owns %s: Kafka takes an offset commit only from a group "+
		"without members, and no member would act on a seek request. The members have not been assigned the topic (it is new to them: "+
		"their pattern subscription finds it within 10 s), or they subscribe to other topics (another topic_prefix?): wait and run again "+
		"with -coordinate once one owns it, or stop them", group, len(m.Members), strings.Join(m.Members, ", "), m.State, topic)
}

// Commit sets group's committed offset of partition 0 of topic; Kafka
// accepts it only while the group has no members.
func Commit(ctx context.Context, adm *kadm.Client, group, topic string, offset int64) error {
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: offset, LeaderEpoch: -1})
	res, err := adm.CommitOffsets(ctx, group, os)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		return fmt.Errorf("commit offset %d of %s for group %s: %w", offset, topic, group, err)
	}
	return nil
}
