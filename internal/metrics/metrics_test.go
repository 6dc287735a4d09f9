package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hivedr/hivedr/internal/config"
)

// roleMetrics is a role's metrics made of the collectors given.
type roleMetrics []prometheus.Collector

func (cs roleMetrics) Register(r prometheus.Registerer) error {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// TestRegistryLabelsEveryFamily: every family the registry gathers (the
// role's, hivedr_build_info, go_*, process_*) carries pipeline=<the
// pipeline> on every series, next to the series' own labels.
func TestRegistryLabelsEveryFamily(t *testing.T) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "hivedr_test_gauge", Help: "x"})
	v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hivedr_test_halted", Help: "x"}, []string{"db", "reason"})
	v.WithLabelValues("sales", "x").Set(1)
	v.WithLabelValues("hr", "y").Set(1)
	reg, err := NewRegistry("apply", "fwd", roleMetrics{g, v})
	if err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels[PipelineLabel] != "fwd" {
				t.Errorf("%s%v: pipeline %q, want fwd", mf.GetName(), labels, labels[PipelineLabel])
			}
			if mf.GetName() == "hivedr_test_halted" && labels["db"] == "" {
				t.Errorf("%s%v lost its own labels", mf.GetName(), labels)
			}
		}
		for _, p := range []string{"hivedr_", "go_", "process_"} {
			if strings.HasPrefix(mf.GetName(), p) {
				seen[p] = true
			}
		}
	}
	if len(seen) != 3 || len(mfs) < 10 {
		t.Errorf("gathered %d families, prefixes %v: want the role's, hivedr_build_info, go_ and process_", len(mfs), seen)
	}
}

// TestRegistryRefuses: no pipeline, or a role metric with a pipeline label
// of its own, is an error rather than series no per-pipeline alert sees.
func TestRegistryRefuses(t *testing.T) {
	if _, err := NewRegistry("tail", "", roleMetrics{}); err == nil {
		t.Error("an empty pipeline was accepted")
	}
	own := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hivedr_test_own", Help: "x"}, []string{PipelineLabel})
	if _, err := NewRegistry("tail", "fwd", roleMetrics{own}); err == nil {
		t.Error("a metric with a pipeline label of its own was accepted")
	}
}

// TestPipelineIsTopicPrefix: the label is kafka.topic_prefix, which two
// pipelines on one cluster (a failback's forward and reverse) differ in,
// even when their source names do not.
func TestPipelineIsTopicPrefix(t *testing.T) {
	fwd, rev := &config.Config{}, &config.Config{}
	fwd.Kafka.TopicPrefix, rev.Kafka.TopicPrefix = "hivedr", "hivedr-back"
	fwd.Source.Name, rev.Source.Name = "primary", "primary"
	if Pipeline(fwd) != "hivedr" || Pipeline(rev) != "hivedr-back" {
		t.Errorf("pipelines %q and %q, want the topic prefixes hivedr and hivedr-back", Pipeline(fwd), Pipeline(rev))
	}
}
