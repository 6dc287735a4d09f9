// Package metrics builds the Prometheus registry a hivedr daemon (tail,
// copyd, apply) serves on its metrics address: the role's own metrics,
// hivedr_build_info and the Go runtime and process collectors, every one
// labelled with the pipeline the process belongs to.
//
// The pipeline label tells two pipelines on the same Prometheus apart:
// during a failback the forward and the reverse pipeline run at once over
// the same database names, so without it an alert on one database mixes
// the two, and an absence of one pipeline's daemon is hidden by the
// other's. Its value is the configuration's kafka.topic_prefix: two
// pipelines sharing a Kafka cluster must differ in it (their topics,
// groups and transactional IDs are named after it), and a failback's
// reverse pipeline is required to have its own. source.name would not do:
// two pipelines reading different sources on different Kafka clusters may
// both keep the default "primary".
//
// The label is set here, on the registry, rather than as a target label
// in each scrape configuration: the process knows its pipeline from the
// configuration it runs with, the scrape configuration (a static list, a
// ServiceMonitor) does not.
package metrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/hivedr/hivedr/internal/buildinfo"
	"github.com/hivedr/hivedr/internal/config"
)

// PipelineLabel is the label every metric of a daemon carries, naming its
// pipeline (Pipeline).
const PipelineLabel = "pipeline"

// Pipeline is the value of the pipeline label of a daemon running with
// conf: its kafka.topic_prefix.
func Pipeline(conf *config.Config) string { return conf.Kafka.TopicPrefix }

// Registerer is a role's metrics (producer, copyd and applier Metrics).
type Registerer interface {
	Register(prometheus.Registerer) error
}

// NewRegistry returns a registry holding role's metrics m, hivedr_build_info
// of role and the Go runtime and process collectors, each metric with the
// label pipeline=pipeline. An empty pipeline is refused: a series without
// it would be one no per-pipeline alert sees.
func NewRegistry(role, pipeline string, m Registerer) (*prometheus.Registry, error) {
	if pipeline == "" {
		return nil, errors.New("metrics: empty pipeline label")
	}
	reg := prometheus.NewRegistry()
	labelled := prometheus.WrapRegistererWith(prometheus.Labels{PipelineLabel: pipeline}, reg)
	if err := m.Register(labelled); err != nil {
		return nil, fmt.Errorf("register %s metrics: %w", role, err)
	}
	if err := errors.Join(
		labelled.Register(buildinfo.Get().Collector(role)),
		labelled.Register(collectors.NewGoCollector()),
		labelled.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})),
	); err != nil {
		return nil, fmt.Errorf("register %s metrics: %w", role, err)
	}
	return reg, nil
}
