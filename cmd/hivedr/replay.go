package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/applier"
	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/connect"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/replay"
	"github.com/hivedr/hivedr/schemas"
)

// runReplay is `hivedr replay`: it re-drives (or fast-forwards) one
// database's topic for the applier group, or reaches a running applier
// with a skip. The decisions are internal/replay's and the applier's.
func runReplay(args []string, stdout, stderr io.Writer) int {
	fl, cf := newFlagSet("replay", "Usage: hivedr replay -db DB (-from-event N | -to-latest) [-coordinate]\n"+
		"       hivedr replay -skip-event DB:ID [-skip-event ...]\n\n"+
		"Move the applier group's committed offset of DB's topic to the first record with an event ID\n"+
		"of at least N (found by binary search over the topic's offsets), or to the topic's end with\n"+
		"-to-latest. Re-driving is safe: the applier is idempotent, events the DR has applied are\n"+
		"no-ops. While an applier of the group owns the topic, replay refuses unless -coordinate: then\n"+
		"it asks the running applier to seek, with a request on <prefix>.applier.control.\n\n"+
		"-skip-event records the skip on the DR database (as apply -skip-event does) and asks the\n"+
		"running applier to plan that database's head again, so a database halted on the event goes\n"+
		"on without a restart. -timeout bounds the whole run.\n\n"+
		"Exit status: 0 done, 1 failed or refused, 2 bad flags or configuration.", stdout, stderr)
	dbs := dbFlag(fl)
	from := fl.Int64("from-event", 0, "move to the first record with an event ID >= this")
	latest := fl.Bool("to-latest", false, "move to the end of the topic (skip everything not applied yet)")
	coordinate := fl.Bool("coordinate", false, "when an applier owns the topic, ask it to seek instead of refusing")
	timeout := timeoutFlag(fl, time.Minute)
	skips := skipEventFlag(fl)
	conf, _, err := setup(fl, cf, args)
	if err != nil {
		return exitCode(err)
	}
	db, err := oneDB("replay", "moves the topic of", *dbs)
	if err != nil {
		fmt.Fprintf(stderr, "hivedr replay: %v\n", err)
		return exitUsage
	}
	moving := db != "" || *from != 0 || *latest
	switch {
	case fl.NArg() > 0:
		fmt.Fprintf(stderr, "hivedr replay: unexpected arguments %q\n", fl.Args())
		return exitUsage
	case len(*skips) > 0 && moving:
		fmt.Fprintln(stderr, "hivedr replay: -skip-event goes alone, without -db, -from-event or -to-latest")
		return exitUsage
	case len(*skips) == 0 && (db == "" || (*from > 0) == *latest):
		fmt.Fprintln(stderr, "hivedr replay: want -db and one of -from-event N (N > 0) or -to-latest, or -skip-event")
		return exitUsage
	}
	ctx, stop := signalContext()
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	kopts, err := kafkaOpts(conf)
	var cl *kgo.Client
	if err == nil {
		cl, err = kgo.NewClient(append(slices.Clone(kopts), kgo.DefaultProduceTopic(kafka.Topics{Prefix: conf.Kafka.TopicPrefix, Site: conf.TopicSite()}.ApplierControl()))...)
	}
	if err != nil {
		fmt.Fprintf(stderr, "hivedr replay: kafka: %v\n", err)
		return exitError
	}
	defer cl.Close()
	if len(*skips) > 0 {
		err = skipRunning(ctx, conf, cl, *skips, stdout)
	} else {
		err = moveTopic(ctx, conf, cl, kopts, db, *from, *coordinate, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "hivedr replay: %v\n", connect.Explain(conf, err))
		return exitError
	}
	return exitOK
}

// moveTopic finds the offset of event from (0: the end) in db's topic
// and moves the applier group there: a commit when no applier owns the
// topic, a seek request to the owner with coordinate.
func moveTopic(ctx context.Context, conf *config.Config, cl *kgo.Client, kopts []kgo.Opt, db string, from int64, coordinate bool, stdout io.Writer) error {
	topics := kafka.Topics{Prefix: conf.Kafka.TopicPrefix, Site: conf.TopicSite()}
	topic, group := topics.Events(db), conf.Applier.Group
	adm := kadm.NewClient(cl)
	end, err := kafka.CommittedEnd(ctx, cl, topic, 0)
	if err != nil {
		return fmt.Errorf("database %s: %w (is it replicated?)", db, err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("start offset of %s: %w", topic, err)
	}
	start := int64(0)
	if s, ok := starts.Lookup(topic, 0); ok && s.Err == nil {
		start = s.Offset
	}
	committed := int64(-1)
	if offs, err := adm.FetchOffsets(ctx, group); err == nil {
		if c, ok := offs.Lookup(topic, 0); ok && c.Err == nil {
			committed = c.At
		}
	} else if !errors.Is(err, kerr.GroupIDNotFound) {
		return fmt.Errorf("committed offsets of group %s: %w", group, err)
	}
	target, what := end, "the end of the topic"
	if from > 0 {
		r := &replay.TopicReader{Brokers: conf.Kafka.Brokers, Opts: kopts, Topic: topic, End: end}
		off, reads, err := replay.Search(ctx, r, start, end, from)
		if err != nil {
			return err
		}
		target = off
		if f, err := r.First(ctx, off); err == nil && f.OK {
			what = fmt.Sprintf("event %d, the first with an ID >= %d (found in %d reads of [%d, %d))", f.EventID, from, reads, start, end)
		} else {
			what = fmt.Sprintf("the end of the topic: no event with an ID >= %d (%d reads)", from, reads)
		}
	}
	members, err := replay.Owners(ctx, adm, group, topic)
	if err != nil {
		return err
	}
	how, err := replay.HowToMove(group, topic, members, coordinate)
	fmt.Fprintf(stdout, "%s: %s: committed offset %d, moving to %d: %s\n", db, topic, committed, target, what)
	if committed >= 0 && target > committed {
		// Forward: the records in between are never applied. The
		// applier's chain check sees the hole at the next record and
		// halts chain_broken, naming the event to skip to accept it.
		fmt.Fprintf(stdout, "%s: warning: moving forward past %d records not applied yet: the applier will halt the database "+
			"(chain_broken) at the next record; accept the loss with hivedr replay -skip-event %s:<the event it names>, or bootstrap the database\n",
			db, target-committed, db)
	}
	if err != nil {
		return err
	}
	if how == replay.MoveSeek {
		c := schemas.ApplierControl{Kind: schemas.ControlSeek, Database: db, Offset: target, EventID: from, By: operator(), At: time.Now().UTC()}
		if err := sendControl(ctx, conf, cl, c); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: asked the running applier (%s) to seek to offset %d\n", db, strings.Join(members.Owners, ", "), target)
		return nil
	}
	if err := replay.Commit(ctx, adm, group, topic, target); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: committed offset %d for group %s; the next applier resumes there\n", db, target, group)
	return nil
}

// skipRunning records each skip on its DR database and asks the running
// applier to plan that database again.
func skipRunning(ctx context.Context, conf *config.Config, cl *kgo.Client, skips []applier.Skip, stdout io.Writer) error {
	ms, err := hms.Dial(ctx, conf.Applier.Metastore, conf.DRMetastoreOptions())
	if err != nil {
		return fmt.Errorf("DR metastore: %w", err)
	}
	defer ms.Close()
	for _, s := range skips {
		if err := applier.RecordSkip(ctx, ms, conf.Source.Name, operator(), s); err != nil {
			return err
		}
		c := schemas.ApplierControl{Kind: schemas.ControlReplan, Database: s.DB, EventID: s.EventID, By: operator(), At: time.Now().UTC()}
		if err := sendControl(ctx, conf, cl, c); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: event %d will be skipped (recorded on the DR database; the running applier plans the database again)\n", s.DB, s.EventID)
	}
	return nil
}

func sendControl(ctx context.Context, conf *config.Config, cl *kgo.Client, c schemas.ApplierControl) error {
	return kafka.SendApplierControl(ctx, cl, kafka.Topics{Prefix: conf.Kafka.TopicPrefix, Site: conf.TopicSite()}, conf.Kafka.ReplicationFactor, conf.Kafka.PrecreatedTopics, c)
}
