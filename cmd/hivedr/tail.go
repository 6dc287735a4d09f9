package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/hivedr/hivedr/internal/buildinfo"
	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/connect"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/hmslog"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/metrics"
	"github.com/hivedr/hivedr/internal/retry"
	"github.com/hivedr/hivedr/producer"
	"github.com/hivedr/hivedr/producer/cdc"
	"github.com/hivedr/hivedr/schemas"
)

// signalContext is cancelled on SIGINT or SIGTERM.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// hupSignal delivers SIGHUP until ctx ends: the daemons read their
// replication scope again on it (config.Watch).
func hupSignal(ctx context.Context) <-chan os.Signal {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	context.AfterFunc(ctx, func() { signal.Stop(ch) })
	return ch
}

// newRouter opens the configured filesystems.
func newRouter(conf *config.Config) (*fs.Router, error) {
	r, err := fs.NewRouter(conf.Filesystems)
	if err != nil {
		return nil, fmt.Errorf("config: filesystems.%w", err)
	}
	return r, nil
}

// dialSerde connects to the schema registry, waiting for it
// (retry.Until, logged) while it is away: a daemon started while the
// registry restarts must not exit. A refusal of its credentials or TLS
// ends the wait at once.
func dialSerde(ctx context.Context, reg config.SchemaRegistry, log *slog.Logger) (*schemas.Serde, error) {
	var s *schemas.Serde
	err := retry.Until(ctx, log, "schema registry "+reg.URL, retry.Policy{Fatal: connect.IsAuthError}, func(ctx context.Context) (err error) {
		s, err = connect.Serde(ctx, reg)
		return err
	})
	return s, err
}

// logKafka says once, as a daemon starts, which brokers it reaches and
// who it is to them (connect.Explain names it again in a refusal).
func logKafka(log *slog.Logger, conf *config.Config) {
	log.Info("kafka", "brokers", strings.Join(conf.Kafka.Brokers, ","), "as", conf.Kafka.Security())
}

// kafkaOpts are the options every Kafka client of a command starts from
// (connect.Kafka).
func kafkaOpts(conf *config.Config) ([]kgo.Opt, error) { return connect.Kafka(conf.Kafka) }

func runTail(args []string, stdout, stderr io.Writer) int {
	fl, cf := newFlagSet("tail", "Usage: hivedr tail [flags]\n\nPublish the source metastore's notification log to Kafka: one ordered topic per\n"+
		"database, copy tasks for the files events reference, and the tailer's checkpoint, in\n"+
		"one transaction per batch. Exits 3 when the chain of events is broken (purged log), after\n"+
		"serving its metrics for tailer.chain_broken_linger (default 60s; SIGTERM ends it at once).\n"+
		"With tailer.cdc.enabled it also writes the change view, <prefix>.cdc.<db> (docs/change-topics.md).", stdout, stderr)
	metricsAddr := metricsAddrFlag(fl)
	linger := fl.Duration("chain-broken-linger", 0, "on CHAIN_BROKEN, serve /metrics this long before exiting 3, overriding tailer.chain_broken_linger (0: exit at once)")
	conf, log, err := setup(fl, cf, args)
	if err != nil {
		return exitCode(err)
	}
	if *metricsAddr != "" {
		conf.Tailer.MetricsAddr = *metricsAddr
	}
	fl.Visit(func(f *flag.Flag) {
		if f.Name == "chain-broken-linger" {
			conf.Tailer.ChainBrokenLinger.Duration = *linger
		}
	})
	if conf.Tailer.ChainBrokenLinger.Duration < 0 {
		fmt.Fprintf(stderr, "hivedr tail: -chain-broken-linger %s must not be negative\n", *linger)
		return exitUsage
	}
	logKafka(log, conf)
	ctx, stop := signalContext()
	defer stop()
	if err := tail(ctx, conf, log); err != nil && ctx.Err() == nil {
		log.Error("tailer stopped", "err", connect.Explain(conf, err))
		if errors.Is(err, producer.ErrChainBroken) {
			lingerChainBroken(ctx, conf.Tailer.MetricsAddr, conf.Tailer.ChainBrokenLinger.Duration, log)
			return exitChainBroken
		}
		return exitError
	}
	return exitOK
}

// lingerChainBroken keeps a tailer stopped on CHAIN_BROKEN alive for d
// before it exits 3, so that Prometheus, scraping every 15-30 s, sees
// hivedr_tailer_state{state="CHAIN_BROKEN"} (the HivedrChainBroken alert):
// the metrics server, started by tail on ctx, goes on serving /metrics,
// /healthz (200) and /readyz (503: fail running). It returns when d has
// passed (true) or at once when ctx ends (false): SIGTERM or SIGINT,
// which cancel ctx, end the wait. With no metrics address or d <= 0 there
// is nothing to see and it returns false at once.
func lingerChainBroken(ctx context.Context, addr string, d time.Duration, log *slog.Logger) bool {
	if addr == "" || d <= 0 || ctx.Err() != nil {
		return false
	}
	log.Warn("CHAIN_BROKEN: serving metrics and probes before exiting 3 (tailer.chain_broken_linger; SIGTERM exits now)",
		"addr", addr, "linger", d)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		log.Info("signal during the CHAIN_BROKEN linger: exiting 3 now")
		return false
	}
}

func tail(ctx context.Context, conf *config.Config, log *slog.Logger) error {
	var src hmslog.Source
	err := retry.Until(ctx, log, "source metastore log", retry.Policy{}, func(ctx context.Context) (err error) {
		src, err = hmslog.Open(ctx, conf.Source, conf.SourceMetastoreOptions())
		return err
	})
	if err != nil {
		return err
	}
	defer src.Close()
	serde, err := dialSerde(ctx, conf.SchemaRegistry, log)
	if err != nil {
		return err
	}
	m := producer.NewMetrics()
	var reg metrics.Registerer = m
	var view *cdc.View
	if conf.Tailer.CDC.Enabled {
		if view, err = newView(conf, serde, log); err != nil {
			return err
		}
		reg = registerers{m, view.Metrics()}
	}
	if _, err := serveHTTP(ctx, "tail", metrics.Pipeline(conf), conf.Tailer.MetricsAddr, withKerberos(reg, conf), tailerChecks(conf), log); err != nil {
		return err
	}
	// The source filesystems list external tables' new directories (the
	// metastore lists only managed tables' files in its events).
	router, err := newRouter(conf)
	if err != nil {
		return err
	}
	defer router.Close()
	// The same filesystems take the HDFS snapshots a bootstrap copies from
	// (of the directories an operator made snapshottable).
	kopts, err := kafkaOpts(conf)
	if err != nil {
		return err
	}
	pc := producer.Config{Origin: conf.Source, Kafka: conf.Kafka, Tailer: conf.Tailer, Replication: conf.Replication,
		Source: src, Codec: serde, Lister: router, DirSnapshots: router, Logger: log, Metrics: m,
		Scope: config.Watch(ctx, conf, config.WatchEvery, hupSignal(ctx), log), KafkaOpts: kopts}
	if len(conf.Sites) > 0 {
		// A snapshot is released once the top-level site's copies are
		// done; another site's could still be reading it. Bootstraps copy
		// the live files instead (docs/fan-out.md).
		pc.DirSnapshots = nil
		log.Info("further DR sites configured: bootstraps copy live files, not HDFS snapshots", "sites", conf.SiteNames())
	}
	// Bootstraps read the source metastore's objects over Thrift, and
	// commits that name no writes read them there.
	if conf.Source.Metastore != "" {
		snaps := producer.NewMetastoreReader(conf.Source.Metastore, conf.SourceMetastoreOptions())
		defer snaps.Close()
		pc.Snapshots, pc.Txns = snaps, snaps
	}
	t, err := producer.New(pc)
	if err != nil {
		return err
	}
	if view != nil {
		// The view goes its own way: stopped at a record it cannot read,
		// it says so, and the tailer goes on.
		vctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := view.Run(vctx); err != nil {
				log.Error("change view stopped; the tailer and DR replication go on", "err", err)
			}
		}()
		defer func() { cancel(); <-done }()
	}
	return t.Run(ctx)
}

// newView is the change view of tailer.cdc: it registers its schemas
// under its topics' subjects in the same registry as the tailer's.
func newView(conf *config.Config, events *schemas.Serde, log *slog.Logger) (*cdc.View, error) {
	ropts, err := connect.Registry(conf.SchemaRegistry)
	if err != nil {
		return nil, err
	}
	rc, err := sr.NewClient(ropts...)
	if err != nil {
		return nil, fmt.Errorf("schema registry %s: %w", conf.SchemaRegistry.URL, err)
	}
	codec, err := cdc.NewCodec(schemas.NewSRRegistry(rc))
	if err != nil {
		return nil, err
	}
	kopts, err := kafkaOpts(conf)
	if err != nil {
		return nil, err
	}
	return cdc.New(cdc.Config{
		Topics: kafka.Topics{Prefix: conf.Kafka.TopicPrefix}, Source: conf.Source.Name, Version: buildinfo.Get().Version,
		KafkaOpts: kopts, Events: events, Codec: codec, ReplicationFactor: conf.Kafka.ReplicationFactor,
		Precreated: conf.Kafka.PrecreatedTopics, TopicConfigs: conf.Tailer.CDC.TopicConfigs, Logger: log,
	}), nil
}
