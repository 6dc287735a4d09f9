package main

// The copy daemon's path of `make bench-copy`: copy tasks in, completions
// out, through Kafka.
//
//	gen tasks       -brokers B -registry URL -prefix P -partitions N -src-nn A -src PATH -dst-nn B -dst PATH
//	gen completions -brokers B -registry URL -prefix P -n N [-timeout 1h]
//
// tasks lists the files under the source directory and publishes a copy
// task for each to P.manifests (created with N partitions), as the tailer
// publishes them: keyed by target, the task ID in a header, encoded with
// the registry's schemas. Targets keep the files' paths relative to the
// source directory, under the destination directory. It prints the number
// of tasks.
//
// completions reads P.completions (committed records only) until N
// distinct tasks have completed, then prints the count by status and when
// the first copy started and the last completion was produced, and exits
// non-zero if a task did not end COPIED or SKIPPED_IDENTICAL.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/schemas"
)

func serde(ctx context.Context, registry string) (*schemas.Serde, error) {
	cl, err := sr.NewClient(sr.URLs(registry))
	if err != nil {
		return nil, fmt.Errorf("schema registry %s: %w", registry, err)
	}
	return schemas.NewSerde(ctx, schemas.NewSRRegistry(cl))
}

func runTasks(args []string) error {
	fs := flag.NewFlagSet("tasks", flag.ExitOnError)
	brokers := fs.String("brokers", "", "Kafka brokers, comma-separated")
	registry := fs.String("registry", "", "schema registry URL")
	prefix := fs.String("prefix", "", "topic prefix")
	partitions := fs.Int("partitions", 12, "partitions of the manifests topic")
	srcNN := fs.String("src-nn", "", "source NameNode host:port")
	src := fs.String("src", "", "source directory")
	dstNN := fs.String("dst-nn", "", "target NameNode host:port")
	dst := fs.String("dst", "", "target directory (must not exist)")
	fs.Parse(args)
	if *brokers == "" || *registry == "" || *prefix == "" || *srcNN == "" || *src == "" || *dstNN == "" || *dst == "" {
		return errors.New("-brokers, -registry, -prefix, -src-nn, -src, -dst-nn and -dst are required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	s, err := serde(ctx, *registry)
	if err != nil {
		return err
	}
	c, err := connect(*srcNN)
	if err != nil {
		return err
	}
	l, err := list(c, *src)
	c.Close()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(*brokers, ",")...), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	topics := kafka.Topics{Prefix: *prefix}
	if _, err := kafka.Ensure(ctx, kadm.NewClient(cl), kafka.Spec{Name: topics.Manifests(), Partitions: int32(*partitions), ReplicationFactor: 1}); err != nil {
		return fmt.Errorf("create %s: %w", topics.Manifests(), err)
	}
	now, i := time.Now(), 0
	var (
		mu       sync.Mutex
		firstErr error
	)
	for rel := range l {
		task := &schemas.CopyTask{TaskID: fmt.Sprintf("bench-%06d", i), EventID: 1, EventTime: now, Database: "bench", Table: "bench",
			SourceURI: "hdfs://" + *srcNN + strings.TrimSuffix(*src, "/") + "/" + rel,
			TargetURI: "hdfs://" + *dstNN + strings.TrimSuffix(*dst, "/") + "/" + rel}
		i++
		v, err := s.Encode(task)
		if err != nil {
			return fmt.Errorf("encode task %s: %w", task.TaskID, err)
		}
		cl.Produce(ctx, &kgo.Record{Topic: topics.Manifests(), Key: []byte(task.TargetURI), Value: v, Headers: []kgo.RecordHeader{
			{Key: kafka.HeaderType, Value: []byte(schemas.NameCopyTask)}, {Key: kafka.HeaderTaskID, Value: []byte(task.TaskID)}}},
			func(_ *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
			})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	if firstErr != nil {
		return fmt.Errorf("produce tasks: %w", firstErr)
	}
	fmt.Println(i)
	return nil
}

func runCompletions(args []string) error {
	fs := flag.NewFlagSet("completions", flag.ExitOnError)
	brokers := fs.String("brokers", "", "Kafka brokers, comma-separated")
	registry := fs.String("registry", "", "schema registry URL")
	prefix := fs.String("prefix", "", "topic prefix")
	n := fs.Int("n", 0, "tasks to wait for")
	timeout := fs.Duration("timeout", time.Hour, "give up after")
	fs.Parse(args)
	if *brokers == "" || *registry == "" || *prefix == "" || *n <= 0 {
		return errors.New("-brokers, -registry, -prefix and -n > 0 are required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	s, err := serde(ctx, *registry)
	if err != nil {
		return err
	}
	topic := kafka.Topics{Prefix: *prefix}.Completions()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(*brokers, ",")...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.MetadataMinAge(250*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	done := map[string]schemas.CopyStatus{}
	statuses := map[schemas.CopyStatus]int{}
	var firstStart, lastRecord time.Time
	var firstFailure string
	for len(done) < *n {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%d of %d tasks completed after %s", len(done), *n, *timeout)
		}
		fetches.EachError(func(t string, p int32, err error) {
			// The topic may not exist until copyd creates it.
			fmt.Fprintf(os.Stderr, "gen completions: %s/%d: %v\n", t, p, err)
		})
		for _, r := range fetches.Records() {
			v, err := s.Decode(ctx, r.Value)
			if err != nil {
				return fmt.Errorf("%s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
			}
			c, ok := v.(*schemas.CopyCompletion)
			if !ok {
				continue
			}
			if _, seen := done[c.TaskID]; seen {
				continue
			}
			done[c.TaskID] = c.Status
			statuses[c.Status]++
			if c.Status != schemas.StatusCopied && c.Status != schemas.StatusSkippedIdentical && firstFailure == "" {
				firstFailure = fmt.Sprintf("%s %s: %s", c.TaskID, c.Status, c.Error)
			}
			if firstStart.IsZero() || c.Started.Before(firstStart) {
				firstStart = c.Started
			}
			if r.Timestamp.After(lastRecord) {
				lastRecord = r.Timestamp
			}
		}
	}
	fmt.Printf("completions %d %v first_started %s last_produced %s work_seconds %.2f\n", len(done), statuses,
		firstStart.Format(time.RFC3339Nano), lastRecord.Format(time.RFC3339Nano), lastRecord.Sub(firstStart).Seconds())
	if firstFailure != "" {
		return fmt.Errorf("not every task copied: %s", firstFailure)
	}
	return nil
}
