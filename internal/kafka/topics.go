// Package kafka holds what every role and tool shares about hivedr's
// topics: their names under a prefix (Topics) and the transactional IDs
// derived from it, the headers every record carries, creating them with
// their settings (Ensure), and reading a partition's committed records in
// an offset range (CommittedEnd, ReadCommitted, EachCommitted: the
// tailer's checkpoint and chain on start, and `hivedr status`, read from
// the end backwards), and a source's checkpoints (NewestCheckpoint,
// CheckpointsBackward: `hivedr status` and `hivedr bootstrap`). It also
// sends operators' requests to the appliers (SendApplierControl), names
// each role's ACLs (RoleACLs, CreateACLs: `hivedr kafka-acls`), and tells
// an authentication or TLS refusal from other errors (IsAuthError,
// IsTLSRefusal).
package kafka

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Header keys every hivedr record carries, so consumers and tools without
// Avro (kcat) can route without decoding the value.
const (
	HeaderType    = "hivedr.type"     // record full name, e.g. io.hivedr.MetastoreEvent
	HeaderEventID = "hivedr.event_id" // decimal event ID, on events and copy tasks
	HeaderTaskID  = "hivedr.task_id"  // copy task ID, on copy tasks (keyed by target)
	// HeaderWriter names the tailer process that wrote a checkpoint: a
	// fenced tailer reads it to tell a newer tailer from its own
	// transaction coordinator.
	HeaderWriter = "hivedr.writer"
)

// Topics names hivedr's topics under one prefix, as one DR site reads
// them. The tailer's topics (events, manifests, checkpoints, control, the
// change view) are every site's; a further site (fan-out: Site set) has
// its own completions and applier control topics and its own copy
// daemons' transactional IDs, so that no site reads another's copies or
// requests.
type Topics struct {
	Prefix string
	// Site is the further site's name (config.Config.TopicSite); "" for
	// the top-level site, whose topics have no site part.
	Site string
}

// sitePart is what a further site's own names carry after the prefix.
func (t Topics) sitePart() string {
	if t.Site == "" {
		return ""
	}
	return ".site." + t.Site
}

// Events is the ordered topic of one database: one partition, total order.
func (t Topics) Events(db string) string { return t.Prefix + ".events." + db }

// EventsPattern matches every database's events topic; the submatch is the
// database name.
func (t Topics) EventsPattern() *regexp.Regexp {
	return regexp.MustCompile("^" + regexp.QuoteMeta(t.Prefix+".events.") + "(.+)$")
}

// Manifests carries copy tasks, keyed by target location in canonical
// form, so the tasks writing one file share a partition, in event order.
func (t Topics) Manifests() string { return t.Prefix + ".manifests" }

// Completions carries the site's copy completions, keyed by task ID:
// <prefix>.completions, or <prefix>.site.<site>.completions for a
// further site.
func (t Topics) Completions() string { return t.Prefix + t.sitePart() + ".completions" }

// Checkpoints carries the tailer's checkpoints, keyed by source name.
func (t Topics) Checkpoints() string { return t.Prefix + ".tailer.checkpoints" }

// Control carries operators' requests to the tailer (BootstrapRequest),
// keyed by request ID.
func (t Topics) Control() string { return t.Prefix + ".control" }

// ApplierControl carries operators' requests to running appliers
// (schemas.ApplierControl: seek a database's topic, plan its head again), keyed
// by database. It is separate from Control so neither role reads the
// other's requests.
// A further site's is <prefix>.site.<site>.applier.control.
func (t Topics) ApplierControl() string { return t.Prefix + t.sitePart() + ".applier.control" }

// CopydTransactionalIDPrefix starts the transactional IDs of this
// pipeline's copy daemons: <prefix>-copyd-. It is derived from the topic
// prefix so that pipelines sharing a Kafka cluster (each with its own
// prefix) cannot fence each other's copy daemons, and so that a PREFIXED
// ACL on it grants one pipeline's IDs only. With the default prefix
// hivedr it is hivedr-copyd-, the IDs every copy daemon used before they
// were derived from the prefix.
// A further site's daemons' IDs start <prefix>.site.<site>-copyd-, so the
// sites' daemons never fence each other.
func (t Topics) CopydTransactionalIDPrefix() string { return t.Prefix + t.sitePart() + "-copyd-" }

// CopydTransactionalID is the transactional ID of the copy daemon
// instance (copyd.instance): <prefix>-copyd-<instance>. It must be unique
// per daemon and stable across its restarts, so that a restarted daemon
// fences its older self.
func (t Topics) CopydTransactionalID(instance string) string {
	return t.CopydTransactionalIDPrefix() + instance
}

// CDC is the change view of one database (the tailer's cdc section): its
// objects' changes in Debezium's shape, keyed by object, compacted.
func (t Topics) CDC(db string) string { return t.Prefix + ".cdc." + db }

// CDCPattern matches every database's change view topic; the submatch is
// the database name.
func (t Topics) CDCPattern() *regexp.Regexp {
	return regexp.MustCompile("^" + regexp.QuoteMeta(t.Prefix+".cdc.") + "(.+)$")
}

// CDCHeartbeats carries the change view's heartbeats, keyed by database.
// A hyphen keeps it apart from every CDC(db): the metastore's database
// names have none.
func (t Topics) CDCHeartbeats() string { return t.Prefix + ".cdc-heartbeats" }

// CDCTransactionalID is the transactional ID, and CDCGroup the consumer
// group, of the change view: one per pipeline, so a restarted view fences
// its older self.
func (t Topics) CDCTransactionalID() string { return t.Prefix + "-cdc" }

// CDCGroup is the consumer group the change view reads the event topics
// with; its committed offsets go with the view's records in one
// transaction.
func (t Topics) CDCGroup() string { return t.Prefix + "-cdc" }

var legalTopic = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// CheckName returns an error naming topic when Kafka would refuse it.
func CheckName(topic string) error {
	if !legalTopic.MatchString(topic) {
		return fmt.Errorf("topic name %q is not legal in Kafka (letters, digits, '.', '_', '-'; at most 249)", topic)
	}
	return nil
}

// Spec is a topic to create.
type Spec struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16
	// Retention is retention.ms; 0 leaves the broker default.
	Retention time.Duration
	// Compact sets cleanup.policy=compact (retention then does not apply).
	Compact bool
	// MaxMessageBytes is max.message.bytes, the largest record batch the
	// topic takes; 0 leaves the broker default (1 MiB unless set).
	MaxMessageBytes int32
	// Precreated: the topic is made by someone else (kafka.precreated_topics);
	// Ensure only checks that it exists.
	Precreated bool
	// Configs are more topic configs to create it with (a compacted
	// topic's segment.ms, say); they override the fields above.
	Configs map[string]string
}

// configsKey is cs as one comparable string, sorted by key.
func configsKey(cs map[string]string) string {
	keys := make([]string, 0, len(cs))
	for k := range cs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(cs[k])
		b.WriteByte(0)
	}
	return b.String()
}

// checkPrecreated checks that the topics of specs exist, naming each
// missing one with the layout hivedr would have given it.
func checkPrecreated(ctx context.Context, adm *kadm.Client, specs []Spec) error {
	if len(specs) == 0 {
		return nil
	}
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	td, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return fmt.Errorf("list topics %v: %w", names, err)
	}
	var missing []string
	for _, s := range specs {
		if d, ok := td[s.Name]; ok && d.Err == nil {
			continue
		}
		layout := fmt.Sprintf("%s: %d partitions, replication %d", s.Name, s.Partitions, s.ReplicationFactor)
		switch {
		case s.Compact:
			layout += ", cleanup.policy=compact"
		case s.Retention > 0:
			layout += ", retention.ms=" + strconv.FormatInt(s.Retention.Milliseconds(), 10)
		}
		if s.MaxMessageBytes > 0 {
			layout += ", max.message.bytes=" + strconv.FormatInt(int64(s.MaxMessageBytes), 10)
		}
		if s.ReplicationFactor > 0 {
			layout += ", min.insync.replicas=" + strconv.Itoa(int(MinInsyncReplicas(s.ReplicationFactor)))
		}
		missing = append(missing, layout)
	}
	if len(missing) > 0 {
		return fmt.Errorf("kafka.precreated_topics is true and these topics do not exist; have them created (%s)", strings.Join(missing, "; "))
	}
	return nil
}

// MinInsyncReplicas is the min.insync.replicas of a topic created with
// replication factor rf: 2 where there are at least 2 replicas, so a
// write hivedr's producers (acks=all) see acknowledged is on two brokers
// and survives losing one; 1 for a single replica.
func MinInsyncReplicas(rf int16) int16 { return min(rf, 2) }

// Ensure creates the topics that do not exist yet, in one request per
// distinct layout, with min.insync.replicas set (MinInsyncReplicas), and
// returns the names it created. Existing topics are
// left as they are (their partition count and settings are not changed:
// no role may alter a topic). It returns only once the cluster's
// metadata shows a leader for each partition of the topics it created or
// found (one may have been created a moment ago by another role), so a
// write that follows is not refused with UNKNOWN_TOPIC_OR_PARTITION
// while the brokers learn of a new topic.
func Ensure(ctx context.Context, adm *kadm.Client, specs ...Spec) (created map[string]bool, err error) {
	type layout struct {
		partitions int32
		rf         int16
		compact    bool
		retention  time.Duration
		maxBytes   int32
		configs    string
	}
	groups := map[layout][]string{}
	extra := map[string]map[string]string{} // by layout's configs
	var order []layout
	var precreated []Spec
	for _, s := range specs {
		if err := CheckName(s.Name); err != nil {
			return nil, err
		}
		if s.Precreated {
			precreated = append(precreated, s)
			continue
		}
		l := layout{s.Partitions, s.ReplicationFactor, s.Compact, s.Retention, s.MaxMessageBytes, configsKey(s.Configs)}
		extra[l.configs] = s.Configs
		if _, ok := groups[l]; !ok {
			order = append(order, l)
		}
		groups[l] = append(groups[l], s.Name)
	}
	created = map[string]bool{}
	if err := checkPrecreated(ctx, adm, precreated); err != nil {
		return created, err
	}
	for _, l := range order {
		cfg := map[string]*string{}
		if l.compact {
			cfg["cleanup.policy"] = kadm.StringPtr("compact")
		} else if l.retention > 0 {
			cfg["retention.ms"] = kadm.StringPtr(strconv.FormatInt(l.retention.Milliseconds(), 10))
		}
		if l.maxBytes > 0 {
			cfg["max.message.bytes"] = kadm.StringPtr(strconv.FormatInt(int64(l.maxBytes), 10))
		}
		if l.rf > 0 {
			cfg["min.insync.replicas"] = kadm.StringPtr(strconv.Itoa(int(MinInsyncReplicas(l.rf))))
		}
		for k, v := range extra[l.configs] {
			cfg[k] = kadm.StringPtr(v)
		}
		res, err := adm.CreateTopics(ctx, l.partitions, l.rf, cfg, groups[l]...)
		if err != nil {
			return created, fmt.Errorf("create topics %v (%d partitions, replication %d): %w", groups[l], l.partitions, l.rf, err)
		}
		for _, name := range groups[l] {
			r, ok := res[name]
			switch {
			case !ok:
				return created, fmt.Errorf("create topic %s: no answer from the cluster", name)
			case r.Err == nil:
				created[name] = true
			case !errors.Is(r.Err, kerr.TopicAlreadyExists):
				return created, fmt.Errorf("create topic %s (%d partitions, replication %d): %w", name, l.partitions, l.rf, r.Err)
			}
		}
	}
	var names []string
	for _, l := range order {
		names = append(names, groups[l]...)
	}
	if err := awaitLeaders(ctx, adm, names, topicReadyTimeout); err != nil {
		return created, err
	}
	return created, nil
}

// topicReadyTimeout bounds how long Ensure waits for a topic it created
// to have a leader for every partition.
const topicReadyTimeout = 60 * time.Second

// awaitLeaders polls the cluster's metadata until every partition of
// each named topic has a leader, or fails after timeout naming the
// topics still without one.
func awaitLeaders(ctx context.Context, adm *kadm.Client, names []string, timeout time.Duration) error {
	if len(names) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	wait := 20 * time.Millisecond
	for {
		pending, err := leaderless(ctx, adm, names)
		if err == nil && len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("partitions without a leader: %s", strings.Join(pending, ", "))
			}
			return fmt.Errorf("topics %v not ready after %s: %w", names, timeout, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// leaderless returns the partitions of names (topic/partition, or the
// topic alone while the metadata does not know it) that have no leader.
func leaderless(ctx context.Context, adm *kadm.Client, names []string) ([]string, error) {
	md, err := adm.Metadata(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("read the metadata of %v: %w", names, err)
	}
	var pending []string
	for _, name := range names {
		td, ok := md.Topics[name]
		if !ok || td.Err != nil || len(td.Partitions) == 0 {
			pending = append(pending, name)
			continue
		}
		for _, p := range td.Partitions.Sorted() {
			if p.Err != nil || p.Leader < 0 {
				pending = append(pending, fmt.Sprintf("%s/%d", name, p.Partition))
			}
		}
	}
	return pending, nil
}
