package e2e

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/hmslog"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/producer"
	"github.com/hivedr/hivedr/producer/cdc"
)

// BenchmarkTailerPostgres measures the tailer end to end on the real stack:
// 200,000 real captured notification rows in a Postgres NOTIFICATION_LOG,
// read, decoded, routed, encoded with registered Avro schemas and published
// with their copy tasks and checkpoints in Kafka transactions of 1,000
// events. It reports events/s; `make bench-tail` runs it.
func BenchmarkTailerPostgres(b *testing.B) {
	env := testenv.Require(b)
	const n = 200_000
	log := newSynthLog(b, env)
	rows := repeatRows(capturedRows(b), n)
	log.append(b, rows)
	s := serde(b, env)
	codec := viewCodec(b, env)
	for i := 0; i < b.N; i++ {
		// The tailer alone, then with the change view (tailer.cdc) in the
		// same process, as hivedr tail runs it: its events/s with the view
		// is the view's cost to it.
		var rates [2]float64
		var tasks float64
		for mode, withView := range []bool{false, true} {
			conf := config.Default()
			conf.Source = config.Source{Name: "bench" + uniq(b), Kind: "postgres", PostgresDSN: log.DSN}
			conf.Kafka.Brokers = env.KafkaBrokers(b)
			conf.Kafka.TopicPrefix = "b" + uniq(b)
			conf.SchemaRegistry = config.SchemaRegistry{URL: env.Get(b, "HIVEDR_SCHEMA_REGISTRY")}
			conf.Tailer.StartEventID = "earliest"
			conf.Tailer.MetricsAddr = ""
			src := "hdfs://" + env.Get(b, "HIVEDR_HDFS_SRC_NAMENODE")
			conf.Replication = config.Replication{
				Databases:    []config.DatabasePolicy{{Name: "cap_*"}},
				SourceRoots:  []string{src + "/warehouse", src + "/external"},
				PathMappings: []config.PathMapping{{Source: src + "/", Target: "hdfs://" + env.Get(b, "HIVEDR_HDFS_DR_NAMENODE") + "/"}},
			}
			if err := conf.Validate(); err != nil {
				b.Fatal(err)
			}
			source, err := hmslog.NewPostgresSource(context.Background(), log.DSN)
			if err != nil {
				b.Fatal(err)
			}
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
			m := producer.NewMetrics()
			tl, err := producer.New(producer.Config{Origin: conf.Source, Kafka: conf.Kafka, Tailer: conf.Tailer, Replication: conf.Replication, Source: source, Codec: s, Metrics: m,
				Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			done := make(chan error, 1)
			var view *cdc.View
			viewDone := make(chan error, 1)
			if withView {
				view = cdc.New(cdc.Config{Topics: kafka.Topics{Prefix: conf.Kafka.TopicPrefix}, Source: conf.Source.Name,
					KafkaOpts: []kgo.Opt{kgo.SeedBrokers(conf.Kafka.Brokers...)}, Events: s, Codec: codec, ReplicationFactor: 1, Logger: quiet})
				go func() { viewDone <- view.Run(ctx) }()
			}
			b.ResetTimer()
			start := time.Now()
			go func() { done <- tl.Run(ctx) }()
			for m.LastPublished() < n {
				select {
				case err := <-done:
					b.Fatalf("tailer stopped at %d: %v", m.LastPublished(), err)
				case <-time.After(5 * time.Millisecond):
				}
			}
			elapsed := time.Since(start)
			b.StopTimer()
			rates[mode] = float64(n) / elapsed.Seconds()
			if withView {
				// The view's own pace: until it has derived every event
				// record the tailer published (the captured log's events
				// go to several databases' topics).
				want := m.EventsPublished()
				for view.Metrics().Events() < want {
					select {
					case err := <-viewDone:
						b.Fatalf("the change view stopped at %d of %d event records: %v", view.Metrics().Events(), want, err)
					case <-time.After(20 * time.Millisecond):
					}
				}
				b.Logf("the change view derived %d event records in %s after the tailer started (%.0f a second)", want,
					time.Since(start).Round(time.Millisecond), float64(want)/time.Since(start).Seconds())
			}
			cancel()
			<-done
			if withView {
				<-viewDone
			}
			source.Close()
			if !withView {
				tasks = float64(m.TasksPublished()) / elapsed.Seconds()
			}
		}
		// (ResetTimer drops metrics reported before it: all go here.)
		cost := 1 - rates[1]/rates[0]
		b.ReportMetric(rates[0], "events/s")
		b.ReportMetric(tasks, "tasks/s")
		b.ReportMetric(rates[1], "events/s-with-cdc")
		verdict := "MET"
		if cost > 0.30 {
			verdict = "MISSED"
		}
		b.Logf("the change view costs the tailer %.1f%% of its events/s (%.0f alone, %.0f with it; target at most 30%%): %s",
			100*cost, rates[0], rates[1], verdict)
	}
}
