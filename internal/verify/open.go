package verify

import (
	"context"
	"errors"
	"fmt"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/connect"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/internal/hmsevent"
	"github.com/hivedr/hivedr/internal/hmslog"
	"github.com/hivedr/hivedr/internal/kafka"
)

// Open makes the Config of a pipeline's configuration: the source
// metastore (source.metastore, Thrift), the DR metastore
// (applier.metastore), the filesystems, the scope and path mapping of
// replication, and for in_flight the event topics with the applier
// group's offsets, the tailer's checkpoints and the source log. close releases the connections.
func Open(ctx context.Context, conf *config.Config) (cfg Config, close func(), err error) {
	if conf.Source.Metastore == "" {
		return Config{}, nil, errors.New("config: source.metastore (the source's Thrift address) is required")
	}
	var closers []func() error
	close = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			close()
		}
	}()
	router, err := fs.NewRouter(conf.Filesystems)
	if err != nil {
		return Config{}, nil, fmt.Errorf("config: filesystems.%w", err)
	}
	closers = append(closers, router.Close)
	src, err := hms.Dial(ctx, conf.Source.Metastore, conf.SourceMetastoreOptions())
	if err != nil {
		return Config{}, nil, fmt.Errorf("source metastore: %w", err)
	}
	closers = append(closers, src.Close)
	dr, err := hms.Dial(ctx, conf.Applier.Metastore, conf.DRMetastoreOptions())
	if err != nil {
		return Config{}, nil, fmt.Errorf("DR metastore: %w", err)
	}
	closers = append(closers, dr.Close)
	dec, err := connect.Decoder(conf.SchemaRegistry)
	if err != nil {
		return Config{}, nil, err
	}
	kopts, err := connect.Kafka(conf.Kafka)
	if err != nil {
		return Config{}, nil, err
	}
	srcLog, err := hmslog.Open(ctx, conf.Source, conf.SourceMetastoreOptions())
	if err != nil {
		return Config{}, nil, fmt.Errorf("source log: %w", err)
	}
	closers = append(closers, srcLog.Close)
	topics := kafka.Topics{Prefix: conf.Kafka.TopicPrefix, Site: conf.TopicSite()}
	files := FileStore{Router: router}
	return Config{
		Source: src, DR: dr, SourceFiles: files, DRFiles: files,
		MapLocation: conf.Replication.MapPath,
		Replicated: func(db, table string) bool {
			p, ok := conf.Replication.Scope(db)
			return ok && (table == "" || p.TableIncluded(table))
		},
		Target: drparam.TargetMark(conf.Source.Name),
		Log:    &KafkaLog{Opts: kopts, Topics: topics, Group: conf.Applier.Group, Decoder: dec},
		Tailer: &SourceLog{Log: srcLog, Decode: hmsevent.Decode, Opts: kopts, Topics: topics,
			Source: conf.Source.Name, Decoder: dec},
	}, close, nil
}
