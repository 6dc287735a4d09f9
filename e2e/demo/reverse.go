package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/failover"
	"github.com/hivedr/hivedr/internal/hms"
)

// reverseSuffix names what the reverse pipeline has of its own: source
// name, topic prefix, groups, transactional and instance IDs.
const reverseSuffix = "-back"

// runReverse writes the reverse pipeline's configuration of the demo's
// pipeline (-config, default the local stack's), for its drill's
// failback: the DR metastore as the source, the source metastore as the
// applier's, the path mappings turned around, names, topics, groups and
// IDs of its own, no metrics addresses (the forward daemons hold them),
// the drills' scratch databases as its only scope, and its tailer
// starting at the DR log's head now (a failover later records a head at
// or after it, as failback requires).
func runReverse(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("reverse", flag.ContinueOnError)
	fl.SetOutput(stderr)
	configPath := fl.String("config", "", "the forward pipeline's configuration (default: the local stack's)")
	out := fl.String("out", "", "where to write the reverse configuration")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() > 0 || *out == "" {
		return errors.New("want -out FILE and no arguments")
	}
	fwd, err := config.Load(*configPath)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	dr, err := hms.Dial(ctx, fwd.Applier.Metastore, hms.Options{})
	if err != nil {
		return fmt.Errorf("DR metastore %s: %w", fwd.Applier.Metastore, err)
	}
	defer dr.Close()
	head, err := dr.GetCurrentNotificationEventId(ctx)
	if err != nil {
		return fmt.Errorf("DR metastore %s: head of its log: %w", fwd.Applier.Metastore, err)
	}

	rev := *fwd
	rev.Source = config.Source{Name: fwd.Source.Name + reverseSuffix, Kind: config.SourceThrift, Metastore: fwd.Applier.Metastore}
	rev.Applier.Metastore = fwd.Source.Metastore
	rev.Kafka.TopicPrefix = fwd.Kafka.TopicPrefix + reverseSuffix
	rev.Applier.Group, rev.Copyd.Group = fwd.Applier.Group+reverseSuffix, fwd.Copyd.Group+reverseSuffix
	rev.Applier.Instance, rev.Copyd.Instance = fwd.Applier.Instance+reverseSuffix, fwd.Copyd.Instance+reverseSuffix
	rev.Tailer.TransactionalID = fwd.Tailer.TransactionalID + reverseSuffix
	rev.Tailer.StartEventID = strconv.FormatInt(head.EventId, 10)
	rev.Tailer.MetricsAddr, rev.Copyd.MetricsAddr, rev.Applier.MetricsAddr = "", "", ""
	rev.Copyd.CMRoots, rev.Copyd.TargetRoots = nil, nil
	rev.Replication.Databases = []config.DatabasePolicy{{Name: failover.DrillPrefix + "*"}}
	rev.Replication.PathMappings, rev.Replication.SourceRoots = nil, nil
	for _, m := range fwd.Replication.PathMappings {
		rev.Replication.PathMappings = append(rev.Replication.PathMappings, config.PathMapping{Source: m.Target, Target: m.Source})
		rev.Replication.SourceRoots = append(rev.Replication.SourceRoots, m.Target)
	}
	b, err := yaml.Marshal(&rev)
	if err != nil {
		return err
	}
	b = append([]byte(fmt.Sprintf("# The reverse pipeline of the demo's drill, written by `demo reverse` (e2e/demo/reverse.go).\n")), b...)
	if err := os.WriteFile(*out, b, 0o600); err != nil {
		return err
	}
	// The file is a configuration every role (and failback) accepts.
	c, err := config.Load(*out)
	if err != nil {
		return fmt.Errorf("the reverse configuration %s: %w", *out, err)
	}
	if err := c.Require("demo reverse", config.SectionSource, config.SectionKafka, config.SectionSchemaRegistry,
		config.SectionDRMetastore, config.SectionReplication, config.SectionFilesystems); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "reverse pipeline %s: %s -> %s, topics %s.*, tailer from DR event %d (%s)\n",
		c.Source.Name, c.Source.Metastore, c.Applier.Metastore, c.Kafka.TopicPrefix, head.EventId, *out)
	return nil
}
