package bootstrap

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/kafka"
	"github.com/hivedr/hivedr/schemas"
)

// ControlSpec is the control topic as the command and the tailer create
// it: one partition, so the tailer takes requests in the order they were
// written, with the retention of the other topics.
func ControlSpec(t kafka.Topics, k config.Kafka) kafka.Spec {
	return kafka.Spec{Name: t.Control(), Partitions: 1, ReplicationFactor: k.ReplicationFactor, Retention: k.Retention.Duration,
		Precreated: k.PrecreatedTopics}
}

// Marks are where the command starts following: the request's offset on
// the control topic, and the ends of the checkpoints and completions
// topics just before the request was written (everything about the
// request comes after them).
type Marks struct {
	Request     int64
	Checkpoints int64
	// Completions by partition; a partition not in it was created later
	// and is read from its start.
	Completions map[int32]int64
}

// Write creates the control topic if it does not exist, takes the Marks
// and writes req to the control topic (keyed by request ID, with the
// record-type header every hivedr record carries), waiting for the
// brokers to acknowledge it.
func Write(ctx context.Context, cl *kgo.Client, serde *schemas.Serde, t kafka.Topics, k config.Kafka, req *schemas.BootstrapRequest) (Marks, error) {
	adm := kadm.NewClient(cl)
	if _, err := kafka.Ensure(ctx, adm, ControlSpec(t, k)); err != nil {
		return Marks{}, err
	}
	var m Marks
	var err error
	if m.Checkpoints, m.Completions, err = ends(ctx, adm, t); err != nil {
		return Marks{}, err
	}
	v, err := serde.Encode(req)
	if err != nil {
		return Marks{}, fmt.Errorf("encode the bootstrap request %s: %w", req.RequestID, err)
	}
	rec := &kgo.Record{Topic: t.Control(), Partition: 0, Key: []byte(req.RequestID), Value: v,
		Headers: []kgo.RecordHeader{{Key: kafka.HeaderType, Value: []byte(schemas.NameBootstrapRequest)}}}
	r, err := cl.ProduceSync(ctx, rec).First()
	if err != nil {
		return Marks{}, fmt.Errorf("write the bootstrap request %s to %s: %w", req.RequestID, t.Control(), err)
	}
	m.Request = r.Offset
	return m, nil
}

// ends returns the end offsets of the checkpoints topic (0 when it does
// not exist yet) and of each partition of the completions topic.
func ends(ctx context.Context, adm *kadm.Client, t kafka.Topics) (int64, map[int32]int64, error) {
	listed, err := adm.ListEndOffsets(ctx, t.Checkpoints(), t.Completions())
	if err != nil {
		return 0, nil, fmt.Errorf("list the end offsets of %s and %s: %w", t.Checkpoints(), t.Completions(), err)
	}
	var cp int64
	comps := map[int32]int64{}
	var firstErr error
	listed.Each(func(o kadm.ListedOffset) {
		switch {
		case errors.Is(o.Err, kerr.UnknownTopicOrPartition):
		case o.Err != nil:
			if firstErr == nil {
				firstErr = fmt.Errorf("end offset of %s/%d: %w", o.Topic, o.Partition, o.Err)
			}
		case o.Topic == t.Checkpoints() && o.Partition == 0:
			cp = o.Offset
		case o.Topic == t.Completions():
			comps[o.Partition] = o.Offset
		}
	})
	return cp, comps, firstErr
}
