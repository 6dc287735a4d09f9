package kafka

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Role is a kind of hivedr process whose Kafka principal gets ACLs of its
// own (least privilege: guarantee 8 in docs/design.md).
type Role string

// The roles. RoleOperator is the operators' commands: status, verify,
// cat, replay, bootstrap, failover, failback and drill. RoleViewer is
// the read-only commands alone (status, verify, cat) and consumer-group
// lag tools: it reads hivedr's topics and describes its groups, and can
// neither commit a group's offsets nor write a request.
const (
	RoleTailer   Role = "tailer"
	RoleCopyd    Role = "copyd"
	RoleApplier  Role = "applier"
	RoleOperator Role = "operator"
	RoleViewer   Role = "viewer"
)

// Roles lists every role, in the order ACLs are listed.
var Roles = []Role{RoleTailer, RoleCopyd, RoleApplier, RoleOperator, RoleViewer}

// Resource is the kind of Kafka resource an ACL is on.
type Resource string

// The resources hivedr's ACLs are on.
const (
	ResourceTopic           Resource = "TOPIC"
	ResourceGroup           Resource = "GROUP"
	ResourceTransactionalID Resource = "TRANSACTIONAL_ID"
)

// Pattern says how an ACL's name matches resources.
type Pattern string

// The patterns: the name exactly, or every name starting with it.
const (
	Literal  Pattern = "LITERAL"
	Prefixed Pattern = "PREFIXED"
)

// Names are the names of one deployment that its ACLs are about.
type Names struct {
	Topics                Topics
	TailerTransactionalID string
	CopydGroup            string
	ApplierGroup          string
	// CDC: the tailer also writes the change view (tailer.cdc.enabled).
	CDC bool
}

// ACL allows one role some operations on resources of one name.
type ACL struct {
	Role       Role
	Resource   Resource
	Pattern    Pattern
	Name       string
	Operations []kmsg.ACLOperation
	// Why says what of the role needs it.
	Why string
}

// Ops writes the operations as Kafka names them: READ, WRITE.
func (a ACL) Ops() string {
	s := make([]string, len(a.Operations))
	for i, op := range a.Operations {
		s[i] = op.String()
	}
	return strings.Join(s, ",")
}

// RoleACLs returns what role needs of Kafka under names, and nothing more.
// Reading or writing a topic implies describing it (metadata, offsets),
// and a transactional ID's WRITE its DESCRIBE, so neither is listed; a
// group's READ (joining it, committing its offsets) implies its DESCRIBE,
// which alone is what the viewer gets (members, committed offsets). No
// role needs an ACL on the cluster: topics are created under a TOPIC
// CREATE, and a transactional producer needs no IDEMPOTENT_WRITE.
func RoleACLs(role Role, n Names) []ACL {
	var (
		read, write, create = kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationCreate
		describe            = kmsg.ACLOperationDescribe
		t                   = n.Topics
		events              = t.Prefix + ".events."
	)
	acl := func(r Resource, p Pattern, name, why string, ops ...kmsg.ACLOperation) ACL {
		return ACL{Role: role, Resource: r, Pattern: p, Name: name, Operations: ops, Why: why}
	}
	switch role {
	case RoleTailer:
		acls := []ACL{
			acl(ResourceTopic, Prefixed, events, "creates each database's topic, publishes its events, reads its newest records at start (the chain)", create, write, read),
			acl(ResourceTopic, Literal, t.Manifests(), "creates it, publishes copy tasks", create, write),
			acl(ResourceTopic, Literal, t.Completions(), "creates it at start (copyd writes it); reads completions to release bootstraps' HDFS snapshots", create, read),
			acl(ResourceTopic, Literal, t.Checkpoints(), "creates it, commits checkpoints, reads its own at start", create, write, read),
			acl(ResourceTopic, Literal, t.Control(), "creates it, reads bootstrap requests", create, read),
			acl(ResourceTransactionalID, Literal, n.TailerTransactionalID, "one transaction per batch; fences an older tailer", write),
		}
		if n.CDC {
			acls = append(acls,
				acl(ResourceTopic, Prefixed, t.Prefix+".cdc", "the change view: creates each database's view topic and the heartbeat topic, writes them, reads its own back at start", create, write, read),
				acl(ResourceGroup, Literal, t.CDCGroup(), "the change view reads the event topics in this group, its offsets committed in its transactions", read),
				acl(ResourceTransactionalID, Literal, t.CDCTransactionalID(), "the change view's transactions; fences an older view", write))
		}
		return acls
	case RoleCopyd:
		return []ACL{
			acl(ResourceTopic, Literal, t.Manifests(), "consumes copy tasks", read),
			acl(ResourceTopic, Literal, t.Completions(), "creates it if missing, publishes completions", create, write),
			acl(ResourceGroup, Literal, n.CopydGroup, "shares the tasks; commits offsets in its transactions", read),
			acl(ResourceTransactionalID, Prefixed, t.CopydTransactionalIDPrefix(), "one transactional ID per daemon ("+t.CopydTransactionalIDPrefix()+"<instance>)", write),
		}
	case RoleApplier:
		return []ACL{
			acl(ResourceTopic, Prefixed, events, "consumes every database's events", read),
			acl(ResourceTopic, Literal, t.Completions(), "creates it if missing, reads completions", create, read),
			acl(ResourceTopic, Literal, t.Checkpoints(), "reads the tailer's checkpoints to find new databases at once", read),
			acl(ResourceTopic, Literal, t.ApplierControl(), "creates it, reads operators' requests (seek, replan)", create, read),
			acl(ResourceGroup, Literal, n.ApplierGroup, "owns the databases' topics; its offsets are the replication checkpoints", read),
		}
	case RoleOperator:
		return []ACL{
			acl(ResourceTopic, Prefixed, t.Prefix+".", "status, verify, cat, failover read every hivedr topic", read),
			acl(ResourceTopic, Literal, t.Control(), "bootstrap and failback write requests (and create the topic)", create, write),
			acl(ResourceTopic, Literal, t.ApplierControl(), "replay writes seek and skip requests (and creates the topic)", create, write),
			acl(ResourceGroup, Literal, n.ApplierGroup, "status, verify, failover read its offsets; replay commits them", read),
		}
	case RoleViewer:
		return []ACL{
			acl(ResourceTopic, Prefixed, t.Prefix+".", "status, verify, cat read every hivedr topic; writes none, creates none", read),
			acl(ResourceGroup, Literal, n.ApplierGroup, "status, verify read its members and committed offsets (the applier's lag); commits none", describe),
			acl(ResourceGroup, Literal, n.CopydGroup, "consumer-group tools read copyd's committed offsets (its lag on the manifests); commits none", describe),
		}
	}
	return nil
}

// CreateACLs creates acls, each for the principal of its role (User:NAME),
// and returns how many it created; an ACL that exists is created again
// without change. It stops at the first the cluster refuses.
func CreateACLs(ctx context.Context, adm *kadm.Client, principals map[Role]string, acls []ACL) (int, error) {
	n := 0
	for _, a := range acls {
		p, ok := principals[a.Role]
		if !ok {
			return n, fmt.Errorf("no principal for role %s", a.Role)
		}
		b := kadm.NewACLs().Allow(p).AllowHosts("*").Operations(a.Operations...)
		switch a.Resource {
		case ResourceTopic:
			b.Topics(a.Name)
		case ResourceGroup:
			b.Groups(a.Name)
		case ResourceTransactionalID:
			b.TransactionalIDs(a.Name)
		default:
			return n, fmt.Errorf("ACL on unknown resource %s", a.Resource)
		}
		if a.Pattern == Prefixed {
			b.ResourcePatternType(kadm.ACLPatternPrefixed)
		} else {
			b.ResourcePatternType(kadm.ACLPatternLiteral)
		}
		res, err := adm.CreateACLs(ctx, b)
		if err != nil {
			return n, fmt.Errorf("create ACL %s %s %s %s for %s: %w", a.Ops(), a.Resource, a.Pattern, a.Name, p, err)
		}
		for _, r := range res {
			if r.Err != nil {
				return n, fmt.Errorf("create ACL %s %s %s %s for %s: %w", a.Ops(), a.Resource, a.Pattern, a.Name, p, r.Err)
			}
			n++
		}
	}
	return n, nil
}
