package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hivedr/hivedr/copyd"
	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/connect"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/metrics"
	"github.com/hivedr/hivedr/internal/state"
)

func runCopyd(args []string, stdout, stderr io.Writer) int {
	fl, cf := newFlagSet("copyd", "Usage: hivedr copyd [flags]\n\nCopy the files the copy tasks on <prefix>.manifests name, verify them with CRC32C,\n"+
		"publish them atomically, and write one completion per task to <prefix>.completions,\n"+
		"in Kafka transactions with the consumer group's offsets. Tasks run copyd.workers at\n"+
		"a time in a sliding window of copyd.max_batch tasks; a partition's offset is committed\n"+
		"up to its oldest unfinished task. The state directory (-state-dir) holds the in-flight\n"+
		"writes.", stdout, stderr)
	metricsAddr := metricsAddrFlag(fl)
	dirFlag := stateDirFlag(fl)
	conf, log, err := setup(fl, cf, args)
	if err != nil {
		return exitCode(err)
	}
	logKafka(log, conf)
	if *metricsAddr != "" {
		conf.Copyd.MetricsAddr = *metricsAddr
	}
	ctx, stop := signalContext()
	defer stop()
	if err := runCopyDaemon(ctx, conf, *dirFlag, log); err != nil && ctx.Err() == nil {
		log.Error("copyd stopped", "err", connect.Explain(conf, err))
		return exitError
	}
	return exitOK
}

// stateDir returns dir, or when it is empty the daemon's default
// $XDG_STATE_HOME/hivedr/<name> (~/.local/state/hivedr/<name>), created.
func stateDir(dir, name string) (string, error) {
	if dir == "" {
		base := os.Getenv("XDG_STATE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", errors.New("-state-dir: not set and there is no home directory")
			}
			base = filepath.Join(home, ".local", "state")
		}
		dir = filepath.Join(base, "hivedr", name)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("state directory: %w", err)
	}
	return dir, nil
}

// stateName is a daemon's default state directory name (name, e.g.
// applier) for conf's site: a further site's daemons keep theirs apart
// (name-site-<site>), so two sites' daemons can share a host.
func stateName(conf *config.Config, name string) string {
	if s := conf.TopicSite(); s != "" {
		return name + "-site-" + s
	}
	return name
}

func runCopyDaemon(ctx context.Context, conf *config.Config, dirFlag string, log *slog.Logger) error {
	router, err := newRouter(conf)
	if err != nil {
		return err
	}
	defer router.Close()
	dir, err := stateDir(dirFlag, stateName(conf, "copyd-"+conf.Copyd.Instance))
	if err != nil {
		return err
	}
	st, err := state.Open(dir)
	if err != nil {
		return err
	}
	defer st.Close()
	serde, err := dialSerde(ctx, conf.SchemaRegistry, log)
	if err != nil {
		return err
	}
	m := copyd.NewMetrics()
	if _, err := serveHTTP(ctx, "copyd", metrics.Pipeline(conf), conf.Copyd.MetricsAddr, withKerberos(m, conf), copydChecks(conf), log); err != nil {
		return err
	}
	mapPath := conf.Replication.MapPath
	if conf.Copyd.AnyTarget {
		mapPath = nil
	}
	eng, err := copyd.NewEngine(copyd.EngineConfig{
		SourceRoots:    conf.Replication.SourceRoots,
		TargetRoots:    conf.Copyd.TargetRoots,
		MapPath:        mapPath,
		CMRoots:        conf.Copyd.CMRoots,
		Retries:        conf.Copyd.Retries,
		BytesPerSecond: conf.Copyd.BytesPerSecond,
		SplitSize:      conf.Copyd.SplitSize,
		SplitWorkers:   conf.Copyd.SplitWorkers,
		Preserve:       preserve(conf.Copyd.Preserve),
		Staging:        st,
		Logger:         log.With("role", "copyd"),
	}, router, m)
	if err != nil {
		return err
	}
	if _, err := eng.DiscardInterrupted(ctx); err != nil {
		return err
	}
	kopts, err := kafkaOpts(conf)
	if err != nil {
		return err
	}
	d, err := copyd.NewDaemon(copyd.DaemonConfig{
		Site:                 copydSite(conf),
		Brokers:              conf.Kafka.Brokers,
		KafkaOpts:            kopts,
		Topics:               kafka.Topics{Prefix: conf.Kafka.TopicPrefix, Site: conf.TopicSite()},
		Group:                conf.Copyd.Group,
		TransactionalID:      kafka.Topics{Prefix: conf.Kafka.TopicPrefix, Site: conf.TopicSite()}.CopydTransactionalID(conf.Copyd.Instance),
		Instance:             conf.Copyd.Instance,
		SessionTimeout:       conf.Copyd.SessionTimeout.Duration,
		Workers:              conf.Copyd.Workers,
		MaxBatch:             conf.Copyd.MaxBatch,
		CompletionPartitions: conf.Kafka.ManifestPartitions,
		ReplicationFactor:    conf.Kafka.ReplicationFactor,
		PrecreatedTopics:     conf.Kafka.PrecreatedTopics,
		Copier:               eng,
		Codec:                serde,
		Logger:               log,
		Metrics:              m,
	})
	if err != nil {
		return err
	}
	return d.Run(ctx)
}

// copydSite is a further site's adaptation of the tailer's tasks (conf
// being the site's configuration); nil for the top-level site, whose
// targets the tailer names.
func copydSite(conf *config.Config) *copyd.Site {
	if conf.TopicSite() == "" {
		return nil
	}
	// A task that names no database is copied: passing it over could
	// leave a file the site needs uncopied.
	inScope := func(db, table string) bool { return db == "" || conf.Replication.Replicated(db, table) }
	return &copyd.Site{Name: conf.TopicSite(), InScope: inScope,
		TailerMap: conf.TopLevel().Replication.MapPath, SiteMap: conf.Replication.MapPath}
}

// preserve is copyd.preserve as the engine takes it.
func preserve(p config.Preserve) copyd.Preserve {
	return copyd.Preserve{Owner: p.Owner, Group: p.Group, Perm: p.Permission, Times: p.Times,
		Users: p.Users, Groups: p.Groups}
}
