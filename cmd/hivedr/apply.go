package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/hivedr/hivedr/applier"
	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/connect"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/internal/metrics"
	"github.com/hivedr/hivedr/internal/state"
)

// skipFlags collects repeated --skip-event db:id flags.
type skipFlags []applier.Skip

func (s *skipFlags) String() string { return fmt.Sprint(*s) }

func (s *skipFlags) Set(v string) error {
	db, id, ok := strings.Cut(v, ":")
	n, err := strconv.ParseInt(id, 10, 64)
	if !ok || db == "" || err != nil || n <= 0 {
		return fmt.Errorf("%q is not <database>:<event ID>", v)
	}
	*s = append(*s, applier.Skip{DB: strings.ToLower(db), EventID: n})
	return nil
}

func runApply(args []string, stdout, stderr io.Writer) int {
	fl, cf := newFlagSet("apply", "Usage: hivedr apply [flags]\n\nApply the events of every <prefix>.events.<db> topic to the DR metastore, in order,\n"+
		"each after the files it references are copied and verified; the committed offsets of\n"+
		"the applier's consumer group are the replication checkpoints. The state directory\n"+
		"(-state-dir) holds the completion cache.", stdout, stderr)
	metricsAddr := metricsAddrFlag(fl)
	dirFlag := stateDirFlag(fl)
	skips := skipEventFlag(fl)
	conf, log, err := setup(fl, cf, args)
	if err != nil {
		return exitCode(err)
	}
	logKafka(log, conf)
	if *metricsAddr != "" {
		conf.Applier.MetricsAddr = *metricsAddr
	}
	ctx, stop := signalContext()
	defer stop()
	if err := runApplier(ctx, conf, *dirFlag, *skips, log); err != nil && ctx.Err() == nil {
		log.Error("applier stopped", "err", connect.Explain(conf, err))
		return exitError
	}
	return exitOK
}

func runApplier(ctx context.Context, conf *config.Config, dirFlag string, skips []applier.Skip, log *slog.Logger) error {
	router, err := newRouter(conf)
	if err != nil {
		return err
	}
	defer router.Close()
	dir, err := stateDir(dirFlag, stateName(conf, "applier"))
	if err != nil {
		return err
	}
	store, err := state.OpenCompletions(dir)
	if err != nil {
		return err
	}
	defer store.Close()
	serde, err := dialSerde(ctx, conf.SchemaRegistry, log)
	if err != nil {
		return err
	}
	m := applier.NewMetrics()
	if _, err := serveHTTP(ctx, "apply", metrics.Pipeline(conf), conf.Applier.MetricsAddr, withKerberos(m, conf), applierChecks(conf), log); err != nil {
		return err
	}
	kopts, err := kafkaOpts(conf)
	if err != nil {
		return err
	}
	addr := conf.Applier.Metastore
	// The replication scope follows the file (config.Watch): on SIGHUP, or
	// within seconds of a change.
	policy := config.NewLivePolicy(&conf.Replication)
	var databases string
	if conf.TopicSite() == "" {
		go func() {
			for rep := range config.Watch(ctx, conf, config.WatchEvery, hupSignal(ctx), log) {
				policy.Set(rep)
			}
		}()
	} else {
		// A further site reads the topics of its own databases only; its
		// scope is read at start (docs/fan-out.md).
		databases = conf.Replication.DatabasePattern()
		log.Info("serving a further DR site: its scope is read at start; restart the site's appliers and copy daemons after changing it",
			"site", conf.SiteName(), "group", conf.Applier.Group, "metastore", conf.Applier.Metastore)
	}
	a, err := applier.New(applier.Config{
		Brokers:        conf.Kafka.Brokers,
		KafkaOpts:      kopts,
		Topics:         kafka.Topics{Prefix: conf.Kafka.TopicPrefix, Site: conf.TopicSite()},
		Group:          conf.Applier.Group,
		Instance:       conf.Applier.Instance,
		SessionTimeout: conf.Applier.SessionTimeout.Duration,
		Source:         conf.Source.Name,
		Dial: func(ctx context.Context) (applier.Metastore, func() error, error) {
			c, err := hms.Dial(ctx, addr, conf.DRMetastoreOptions())
			if err != nil {
				return nil, nil, err
			}
			return c, c.Close, nil
		},
		Policy:               policy,
		Databases:            databases,
		RPO:                  policy.RPO,
		Files:                router, // lists and removes DR data files (fs.Router.Walk, Remove)
		Completions:          store,
		Codec:                serde,
		HaltAfter:            conf.Applier.HaltAfter.Duration,
		PruneDelay:           conf.Applier.PruneDelay.Duration,
		LookAhead:            conf.Applier.LookAhead,
		LookAheadBytes:       conf.Applier.LookAheadBytes,
		BatchPartitions:      conf.Applier.BatchPartitions,
		DRConnections:        conf.Applier.DRConnections,
		CompletionPartitions: conf.Kafka.ManifestPartitions,
		ReplicationFactor:    conf.Kafka.ReplicationFactor,
		PrecreatedTopics:     conf.Kafka.PrecreatedTopics,
		Skips:                skips,
		Operator:             operator(),
		Logger:               log,
		Metrics:              m,
	})
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

// operator names who runs this command, for skip records.
func operator() string {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}
