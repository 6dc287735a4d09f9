package e2e

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/hmslog"
	"github.com/hivedr/hivedr/internal/testenv"
	"github.com/hivedr/hivedr/producer"
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
	for i := 0; i < b.N; i++ {
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
		m := producer.NewMetrics()
		tl, err := producer.New(producer.Config{Origin: conf.Source, Kafka: conf.Kafka, Tailer: conf.Tailer, Replication: conf.Replication, Source: source, Codec: s, Metrics: m,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		done := make(chan error, 1)
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
		cancel()
		<-done
		source.Close()
		b.ReportMetric(float64(n)/elapsed.Seconds(), "events/s")
		b.ReportMetric(float64(m.TasksPublished())/elapsed.Seconds(), "tasks/s")
	}
}
