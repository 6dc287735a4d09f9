package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/connect"
	"github.com/hivedr/hivedr/internal/kafka"
)

// runReset deletes what an earlier run of the pipeline left in Kafka: the
// topics under the configured prefix (every database's events, manifests,
// completions, the tailer's checkpoints) and the copyd and applier groups.
// A tailer started afterwards has no checkpoint, so it starts at the
// source log's head (tailer.start_event_id "latest"), as on a fresh
// machine; the daemons' state directories must be emptied with it.
func runReset(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("reset", flag.ContinueOnError)
	fl.SetOutput(stderr)
	configPath := fl.String("config", "", "hivedr configuration file (default: the local stack's)")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fl.Args())
	}
	cfg, err := config.Load(*configPath)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	kopts, err := connect.Kafka(cfg.Kafka)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	brokers := strings.Join(cfg.Kafka.Brokers, ",")
	topics := kafka.Topics{Prefix: cfg.Kafka.TopicPrefix}
	ours := func(name string) bool {
		return topics.EventsPattern().MatchString(name) ||
			name == topics.Manifests() || name == topics.Completions() || name == topics.Checkpoints()
	}
	listOurs := func() ([]string, error) {
		td, err := adm.ListTopics(ctx)
		if err != nil {
			return nil, fmt.Errorf("kafka %s: list topics: %w (is the stack up?)", brokers, err)
		}
		var names []string
		for _, n := range td.Names() {
			if ours(n) {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		return names, nil
	}
	groups := []string{cfg.Copyd.Group, cfg.Applier.Group}

	// Refuse while a daemon still runs: it would recreate what we delete.
	dg, err := adm.DescribeGroups(ctx, groups...)
	if err != nil {
		return fmt.Errorf("kafka %s: describe groups: %w", brokers, err)
	}
	for _, g := range dg {
		if g.Err == nil && len(g.Members) > 0 && g.Group == cfg.Applier.Group {
			return fmt.Errorf("group %s still has %d members: stop `hivedr apply` first", g.Group, len(g.Members))
		}
	}

	names, err := listOurs()
	if err != nil {
		return err
	}
	if len(names) == 0 {
		fmt.Fprintf(stdout, "no topics under prefix %q: nothing to delete\n", cfg.Kafka.TopicPrefix)
	} else {
		fmt.Fprintf(stdout, "deleting %d topics under prefix %q (%s)\n", len(names), cfg.Kafka.TopicPrefix, summarize(names))
		res, err := adm.DeleteTopics(ctx, names...)
		if err != nil {
			return fmt.Errorf("kafka %s: delete topics: %w", brokers, err)
		}
		for _, r := range res.Sorted() {
			if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
				return fmt.Errorf("delete topic %s: %w", r.Topic, r.Err)
			}
		}
		// Deletion is asynchronous: wait until the topics are gone, so
		// that the tailer can create them anew.
		for {
			left, err := listOurs()
			if err != nil {
				return err
			}
			if len(left) == 0 {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("topics still not deleted: %s", summarize(left))
			case <-time.After(200 * time.Millisecond):
			}
		}
	}

	// Groups: deleting them drops their committed offsets. A copy daemon
	// with static membership stays a member for its session timeout after
	// it stops, so its group may refuse; Kafka drops a group's offsets of
	// deleted topics anyway, which is checked below.
	res, err := adm.DeleteGroups(ctx, groups...)
	if err != nil {
		return fmt.Errorf("kafka %s: delete groups: %w", brokers, err)
	}
	for _, g := range groups {
		r := res[g]
		switch {
		case r.Err == nil:
			fmt.Fprintf(stdout, "deleted consumer group %s\n", g)
		case errors.Is(r.Err, kerr.GroupIDNotFound):
		case errors.Is(r.Err, kerr.NonEmptyGroup):
			fmt.Fprintf(stdout, "consumer group %s still has a member (static membership); keeping it\n", g)
		default:
			return fmt.Errorf("delete consumer group %s: %w", g, r.Err)
		}
	}
	for _, g := range groups {
		for {
			offs, err := adm.FetchOffsets(ctx, g)
			if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
				return fmt.Errorf("kafka %s: offsets of group %s: %w", brokers, g, err)
			}
			var stale []string
			offs.Each(func(o kadm.OffsetResponse) {
				if ours(o.Topic) {
					stale = append(stale, o.Topic)
				}
			})
			if len(stale) == 0 {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("group %s keeps offsets of deleted topics: %s", g, summarize(stale))
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

// summarize names up to five topics.
func summarize(names []string) string {
	if len(names) <= 5 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s, ... and %d more", strings.Join(names[:5], ", "), len(names)-5)
}
