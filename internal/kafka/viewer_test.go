package kafka

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestProdViewerRole runs the viewer's Kafka calls in a cluster that
// enforces the ACLs `hivedr acls` grants: it reads an events topic to
// its end, lists its offsets and describes the applier's group with its
// committed offsets (what status, verify and cat do), but committing the
// group's offsets, writing the control topics and creating a topic are
// refused. The operator, under its own ACLs, commits the same offsets,
// so the refusals are the viewer's role and not the setup.
func TestProdViewerRole(t *testing.T) {
	const mech = "SCRAM-SHA-512"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser(mech, "admin", "admin-pw"),
		kfake.User(mech, "viewer", "viewer-pw"), kfake.User(mech, "operator", "operator-pw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	client := func(user, pass string, opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...),
			kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism())}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}

	tp, group := testNames.Topics, testNames.ApplierGroup
	events := tp.Events("sales")
	admin := client("admin", "admin-pw")
	adm := kadm.NewClient(admin)
	who := map[Role]string{RoleViewer: "User:viewer", RoleOperator: "User:operator"}
	acls := append(RoleACLs(RoleViewer, testNames), RoleACLs(RoleOperator, testNames)...)
	if _, err := CreateACLs(ctx, adm, who, acls); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{events, tp.Control(), tp.ApplierControl()} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	if err := admin.ProduceSync(ctx, &kgo.Record{Topic: events, Value: []byte("event 1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	commit := func(adm *kadm.Client, at int64) error {
		var os kadm.Offsets
		os.AddOffset(events, 0, at, -1)
		res, err := adm.CommitOffsets(ctx, group, os)
		if err != nil {
			return err
		}
		return res.Error()
	}
	if err := commit(adm, 1); err != nil {
		t.Fatal(err)
	}

	viewer := client("viewer", "viewer-pw",
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{events: {0: kgo.NewOffset().AtStart()}}))
	vadm := kadm.NewClient(viewer)
	// status and verify: the group's members and committed offsets, the
	// topic's offsets.
	dg, err := vadm.DescribeGroups(ctx, group)
	if err != nil || dg[group].Err != nil {
		t.Errorf("the viewer describing group %s: %v %v", group, err, dg[group].Err)
	}
	committed, err := vadm.FetchOffsets(ctx, group)
	if o, ok := committed.Lookup(events, 0); err != nil || !ok || o.Err != nil || o.At != 1 {
		t.Errorf("the viewer fetching %s's offsets: %+v %v, want offset 1 on %s", group, o, err, events)
	}
	ends, err := vadm.ListEndOffsets(ctx, events)
	if o, ok := ends.Lookup(events, 0); err != nil || !ok || o.Err != nil || o.Offset != 1 {
		t.Errorf("the viewer listing %s's end: %+v %v, want 1", events, o, err)
	}
	// cat: the records.
	fs := viewer.PollRecords(ctx, 1)
	if err := fs.Err0(); err != nil || fs.NumRecords() != 1 || string(fs.Records()[0].Value) != "event 1" {
		t.Errorf("the viewer reading %s: %v, %d records, want event 1", events, err, fs.NumRecords())
	}

	// Never: commit the group's offsets (replay's seek), write a request,
	// create a topic.
	if err := commit(vadm, 0); !errors.Is(err, kerr.GroupAuthorizationFailed) {
		t.Errorf("the viewer committing %s's offsets: %v, want GROUP_AUTHORIZATION_FAILED", group, err)
	}
	// Without idempotence, so what refuses the write is the topic's ACL.
	writer := client("viewer", "viewer-pw", kgo.DisableIdempotentWrite())
	for _, topic := range []string{tp.Control(), tp.ApplierControl()} {
		err := writer.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("seek")}).FirstErr()
		if !errors.Is(err, kerr.TopicAuthorizationFailed) {
			t.Errorf("the viewer writing %s: %v, want TOPIC_AUTHORIZATION_FAILED", topic, err)
		}
	}
	if _, err := vadm.CreateTopic(ctx, 1, 1, nil, tp.Events("new")); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("the viewer creating a topic: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	if committed, err := adm.FetchOffsets(ctx, group); err != nil || committed[events][0].At != 1 {
		t.Errorf("%s's offset after the viewer's commit: %+v %v, want 1 still", group, committed[events][0], err)
	}

	if err := commit(kadm.NewClient(client("operator", "operator-pw")), 0); err != nil {
		t.Errorf("the operator committing %s's offsets (replay): %v", group, err)
	}
}
