package kafka

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/schemas"
)

// ApplierControlRecord makes the record that carries c on the applier
// control topic of topics.
func ApplierControlRecord(topics Topics, c schemas.ApplierControl) (*kgo.Record, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	return &kgo.Record{Topic: topics.ApplierControl(), Key: []byte(c.Database), Value: b,
		Headers: []kgo.RecordHeader{{Key: HeaderType, Value: []byte(schemas.ApplierControlType)}}}, nil
}

// EnsureApplierControlTopic creates the applier control topic if it is
// missing.
func EnsureApplierControlTopic(ctx context.Context, adm *kadm.Client, topics Topics, rf int16, precreated bool) error {
	_, err := Ensure(ctx, adm, Spec{Name: topics.ApplierControl(), Partitions: 1, ReplicationFactor: rf, Retention: 7 * 24 * time.Hour, Precreated: precreated})
	return err
}

// SendApplierControl publishes c on the applier control topic of topics
// (creating the topic with replication factor rf if it is missing), for
// the running applier that owns c's database. An applier that is not
// running never sees it: it reads the topic from its end as of its start.
func SendApplierControl(ctx context.Context, cl *kgo.Client, topics Topics, rf int16, precreated bool, c schemas.ApplierControl) error {
	if err := EnsureApplierControlTopic(ctx, kadm.NewClient(cl), topics, rf, precreated); err != nil {
		return err
	}
	rec, err := ApplierControlRecord(topics, c)
	if err != nil {
		return err
	}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return fmt.Errorf("publish the request on %s: %w", rec.Topic, err)
	}
	return nil
}
