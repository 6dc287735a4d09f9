package kafka

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

var testNames = Names{Topics: Topics{Prefix: "dr1"}, TailerTransactionalID: "hivedr-tailer-prod", CopydGroup: "dr1-copyd", ApplierGroup: "dr1-applier"}

// TestRoleACLsLeastPrivilege checks what the table grants against what
// each role does: only names of the deployment, no DELETE, ALTER or
// cluster ACL anywhere, writes only by the roles that publish, and each
// role's own group and transactional IDs.
func TestRoleACLsLeastPrivilege(t *testing.T) {
	owns := func(a ACL) bool {
		switch a.Resource {
		case ResourceTopic:
			return strings.HasPrefix(a.Name, "dr1.")
		case ResourceGroup:
			return a.Name == "dr1-copyd" || a.Name == "dr1-applier"
		case ResourceTransactionalID:
			return a.Name == "hivedr-tailer-prod" || a.Name == "dr1-copyd-"
		}
		return false
	}
	has := func(r Role, res Resource, name string, op kmsg.ACLOperation) bool {
		for _, a := range RoleACLs(r, testNames) {
			if a.Resource == res && a.Name == name {
				for _, o := range a.Operations {
					if o == op {
						return true
					}
				}
			}
		}
		return false
	}
	for _, r := range Roles {
		acls := RoleACLs(r, testNames)
		if len(acls) == 0 {
			t.Fatalf("role %s has no ACLs", r)
		}
		for _, a := range acls {
			if !owns(a) {
				t.Errorf("%s: ACL on %s %s, outside the deployment's names", r, a.Resource, a.Name)
			}
			for _, op := range a.Operations {
				switch op {
				case kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationCreate:
				case kmsg.ACLOperationDescribe:
					if r != RoleViewer || a.Resource != ResourceGroup {
						t.Errorf("%s: DESCRIBE on %s %s; only the viewer describes, and only groups", r, a.Resource, a.Name)
					}
				default:
					t.Errorf("%s: %s on %s %s; roles only read, write, create and describe", r, op, a.Resource, a.Name)
				}
			}
			if a.Why == "" || a.Role != r {
				t.Errorf("%s: ACL %+v without its reason or role", r, a)
			}
		}
	}
	tp := testNames.Topics
	for _, c := range []struct {
		role Role
		res  Resource
		name string
		op   kmsg.ACLOperation
		want bool
	}{
		{RoleTailer, ResourceTransactionalID, "hivedr-tailer-prod", kmsg.ACLOperationWrite, true},
		{RoleTailer, ResourceTopic, tp.Prefix + ".events.", kmsg.ACLOperationCreate, true},
		{RoleTailer, ResourceGroup, "dr1-applier", kmsg.ACLOperationRead, false},
		{RoleTailer, ResourceTopic, tp.Completions(), kmsg.ACLOperationRead, true},
		{RoleTailer, ResourceTopic, tp.Completions(), kmsg.ACLOperationWrite, false},
		{RoleCopyd, ResourceTopic, tp.Completions(), kmsg.ACLOperationWrite, true},
		{RoleCopyd, ResourceTopic, tp.Prefix + ".events.", kmsg.ACLOperationRead, false},
		{RoleCopyd, ResourceGroup, "dr1-copyd", kmsg.ACLOperationRead, true},
		{RoleCopyd, ResourceTransactionalID, "dr1-copyd-", kmsg.ACLOperationWrite, true},
		{RoleCopyd, ResourceTransactionalID, "hivedr-copyd-", kmsg.ACLOperationWrite, false},
		{RoleCopyd, ResourceGroup, "dr1-applier", kmsg.ACLOperationRead, false},
		{RoleApplier, ResourceGroup, "dr1-applier", kmsg.ACLOperationRead, true},
		{RoleApplier, ResourceTopic, tp.Prefix + ".events.", kmsg.ACLOperationWrite, false},
		{RoleApplier, ResourceTopic, tp.Manifests(), kmsg.ACLOperationRead, false},
		{RoleApplier, ResourceTopic, tp.Completions(), kmsg.ACLOperationWrite, false},
		{RoleOperator, ResourceTopic, tp.Control(), kmsg.ACLOperationWrite, true},
		{RoleOperator, ResourceTopic, tp.Prefix + ".events.", kmsg.ACLOperationWrite, false},
		{RoleOperator, ResourceGroup, "dr1-copyd", kmsg.ACLOperationRead, false},
		{RoleViewer, ResourceTopic, tp.Prefix + ".", kmsg.ACLOperationRead, true},
		{RoleViewer, ResourceGroup, "dr1-applier", kmsg.ACLOperationDescribe, true},
		{RoleViewer, ResourceGroup, "dr1-copyd", kmsg.ACLOperationDescribe, true},
		{RoleViewer, ResourceGroup, "dr1-applier", kmsg.ACLOperationRead, false},
		{RoleViewer, ResourceTopic, tp.Control(), kmsg.ACLOperationWrite, false},
		{RoleViewer, ResourceTopic, tp.ApplierControl(), kmsg.ACLOperationWrite, false},
	} {
		if got := has(c.role, c.res, c.name, c.op); got != c.want {
			t.Errorf("%s has %s on %s %s: %v, want %v", c.role, c.op, c.res, c.name, got, c.want)
		}
	}
	// Only the tailer and copyd hold transactional IDs, only the tailer
	// writes events, the applier writes nothing, and the viewer writes,
	// creates and commits nothing.
	for _, r := range Roles {
		for _, a := range RoleACLs(r, testNames) {
			if a.Resource == ResourceTransactionalID && r != RoleTailer && r != RoleCopyd {
				t.Errorf("%s holds transactional ID %s", r, a.Name)
			}
			for _, op := range a.Operations {
				if op == kmsg.ACLOperationWrite && r == RoleApplier {
					t.Errorf("the applier may write %s %s", a.Resource, a.Name)
				}
				if r == RoleViewer && (op != kmsg.ACLOperationRead || a.Resource != ResourceTopic) && op != kmsg.ACLOperationDescribe {
					t.Errorf("the viewer may %s %s %s", op, a.Resource, a.Name)
				}
			}
		}
	}
}

// TestCreateACLs creates every role's ACLs in a cluster that enforces
// them, as its super user, and finds each listed once; creating them
// again changes nothing.
func TestCreateACLs(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser("SCRAM-SHA-512", "admin", "admin-pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.SASL(scram.Auth{User: "admin", Pass: "admin-pw"}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	who := map[Role]string{}
	var acls []ACL
	want := 0
	for _, r := range Roles {
		who[r] = "User:" + string(r)
		for _, a := range RoleACLs(r, testNames) {
			acls = append(acls, a)
			want += len(a.Operations)
		}
	}
	for range 2 {
		n, err := CreateACLs(ctx, adm, who, acls)
		if err != nil || n != want {
			t.Fatalf("CreateACLs = %d, %v; want %d entries", n, err, want)
		}
	}
	res, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Allow().AllowHosts().Operations())
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		got += len(r.Described)
	}
	if got != want {
		t.Errorf("the cluster lists %d ACL entries, want %d", got, want)
	}
	if _, err := CreateACLs(ctx, adm, map[Role]string{}, acls); err == nil || !strings.Contains(err.Error(), "no principal for role tailer") {
		t.Errorf("without principals: %v", err)
	}
}

// TestCopydTransactionalIDs checks that copy daemons' transactional IDs
// follow the topic prefix: the default prefix keeps the IDs copy daemons
// had before (hivedr-copyd-<instance>), two pipelines' daemons of one
// instance name get different IDs (neither fences the other), and one
// pipeline's copyd ACL covers its own IDs only.
func TestCopydTransactionalIDs(t *testing.T) {
	def, a, b := Topics{Prefix: "hivedr"}, Topics{Prefix: "dr1"}, Topics{Prefix: "dr2"}
	if got := def.CopydTransactionalID("host1"); got != "hivedr-copyd-host1" {
		t.Errorf("default prefix: %q, want hivedr-copyd-host1", got)
	}
	if a.CopydTransactionalID("host1") == b.CopydTransactionalID("host1") {
		t.Errorf("pipelines dr1 and dr2 share transactional ID %q", a.CopydTransactionalID("host1"))
	}
	var grant string
	for _, acl := range RoleACLs(RoleCopyd, Names{Topics: a}) {
		if acl.Resource == ResourceTransactionalID {
			if acl.Pattern != Prefixed {
				t.Errorf("copyd's transactional ID ACL is %s, want PREFIXED", acl.Pattern)
			}
			grant = acl.Name
		}
	}
	for _, c := range []struct {
		id   string
		want bool
	}{
		{a.CopydTransactionalID("host1"), true},
		{b.CopydTransactionalID("host1"), false},
		{def.CopydTransactionalID("host1"), false},
	} {
		if got := grant != "" && strings.HasPrefix(c.id, grant); got != c.want {
			t.Errorf("dr1's copyd ACL %q covers %q: %v, want %v", grant, c.id, got, c.want)
		}
	}
}

func TestRoleACLsChangeView(t *testing.T) {
	n := Names{Topics: Topics{Prefix: "p"}, TailerTransactionalID: "hivedr-tailer-s"}
	without := RoleACLs(RoleTailer, n)
	n.CDC = true
	with := RoleACLs(RoleTailer, n)
	if len(with) != len(without)+3 {
		t.Fatalf("%d ACLs with the change view, %d without: want 3 more", len(with), len(without))
	}
	want := map[string]bool{"TOPIC PREFIXED p.cdc": false, "GROUP LITERAL p-cdc": false, "TRANSACTIONAL_ID LITERAL p-cdc": false}
	for _, a := range with[len(without):] {
		k := fmt.Sprintf("%v %v %s", a.Resource, a.Pattern, a.Name)
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected ACL %s", k)
		}
		want[k] = true
	}
	for k, seen := range want {
		if !seen {
			t.Errorf("no ACL %s", k)
		}
	}
}
