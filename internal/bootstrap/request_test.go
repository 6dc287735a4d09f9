package bootstrap

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/config"
)

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		in   Options
		want Options
		err  string // substring of the error; "" for none
	}{
		{name: "one db", in: Options{Databases: []string{"Finance"}}, want: Options{Databases: []string{"finance"}}},
		{name: "globs, commas, repeats", in: Options{Databases: []string{"sales_*, finance", "finance", " "}},
			want: Options{Databases: []string{"sales_*", "finance"}}},
		{name: "tables of one db", in: Options{Databases: []string{"finance"}, Tables: []string{"Orders,items"}},
			want: Options{Databases: []string{"finance"}, Tables: []string{"orders", "items"}}},
		{name: "all", in: Options{All: true}, want: Options{All: true}},
		{name: "repair", in: Options{RepairChain: true}, want: Options{RepairChain: true}},
		{name: "nothing", in: Options{}, err: "say what to bootstrap"},
		{name: "bad glob", in: Options{Databases: []string{"sales_["}}, err: `-db "sales_["`},
		{name: "tables of two dbs", in: Options{Databases: []string{"a", "b"}, Tables: []string{"t"}}, err: "-tables needs exactly one -db"},
		{name: "tables of a glob", in: Options{Databases: []string{"a*"}, Tables: []string{"t"}}, err: "not a glob"},
		{name: "table glob", in: Options{Databases: []string{"a"}, Tables: []string{"t*"}}, err: "not globs"},
		{name: "all and db", in: Options{All: true, Databases: []string{"a"}}, err: "-all bootstraps every database"},
		{name: "repair and db", in: Options{RepairChain: true, Databases: []string{"a"}}, err: "-repair-chain bootstraps every"},
		{name: "repair and all", in: Options{RepairChain: true, All: true}, err: "-repair-chain"},
		{name: "slash", in: Options{Databases: []string{"a/b"}}, err: "not a name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.in.Validate()
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, ErrUsage) {
					t.Fatalf("Validate(%+v) = %+v, %v; want a usage error with %q", c.in, got, err, c.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Validate(%+v) = %+v, %v; want %+v", c.in, got, err, c.want)
			}
		})
	}
}

func TestRequest(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 34, 56, 789_123_000, time.UTC)
	r := Request(Options{Databases: []string{"finance"}}, "primary", "ops@host1", now)
	if r.Reason != ReasonRequested || r.Source != "primary" || r.RequestedBy != "ops@host1" ||
		!reflect.DeepEqual(r.Databases, []string{"finance"}) || r.Tables == nil || !r.RequestedAt.Equal(now.Truncate(time.Millisecond)) {
		t.Errorf("Request = %+v", r)
	}
	if !strings.HasPrefix(r.RequestID, "r20261203T123456Z-") || len(r.RequestID) != len("r20261203T123456Z-")+12 {
		t.Errorf("request ID %q", r.RequestID)
	}
	r2 := Request(Options{RepairChain: true}, "primary", "ops@host1", now)
	if r2.Reason != ReasonChainBroken || r2.Databases == nil || len(r2.Databases) != 0 || r2.RequestID == r.RequestID {
		t.Errorf("repair request = %+v (first ID %s)", r2, r.RequestID)
	}
}

func TestPolicyWarnings(t *testing.T) {
	repl := &config.Replication{Databases: []config.DatabasePolicy{{Name: "finance"}, {Name: "sales_*"}, {Name: "hr_[ab]"}}}
	for _, c := range []struct {
		glob string
		warn bool
	}{
		{"finance", false}, {"fin*", false}, {"sales_eu", false}, {"sales_*", false}, {"sales_e*", false},
		{"s*", false}, {"*", false}, {"hr_a", false}, {"hr_c", true}, {"marketing", true}, {"mark*", true},
		{"financ", true},
	} {
		w := PolicyWarnings(repl, []string{c.glob})
		if (len(w) > 0) != c.warn {
			t.Errorf("PolicyWarnings(%q) = %q, want a warning: %v", c.glob, w, c.warn)
		}
		if c.warn && !strings.Contains(w[0], c.glob) {
			t.Errorf("warning %q does not name %q", w[0], c.glob)
		}
	}
	if w := PolicyWarnings(&config.Replication{}, []string{"anything"}); len(w) != 0 {
		t.Errorf("an empty policy replicates everything; got %q", w)
	}
}

func TestTaskAndBootstrapIDs(t *testing.T) {
	for _, c := range []struct {
		task, id string
		ok       bool
	}{
		{"finance-40-1764765000000-s12-0", "finance-40-1764765000000", true},
		{"my-db-7-1764765000000-s3-15", "my-db-7-1764765000000", true},
		{"123-0", "", false},       // an event's task
		{"finance-s-0", "", false}, // no seq
		{"x-s1-a", "", false},
		{"-s1-0", "", false},
	} {
		id, ok := TaskBootstrap(c.task)
		if id != c.id || ok != c.ok {
			t.Errorf("TaskBootstrap(%q) = %q, %v; want %q, %v", c.task, id, ok, c.id, c.ok)
		}
	}
	if cut, ok := BootstrapCut("my-db-7-1764765000000"); !ok || cut != 7 {
		t.Errorf("BootstrapCut = %d, %v", cut, ok)
	}
	if _, ok := BootstrapCut("nope"); ok {
		t.Error("BootstrapCut(nope) ok")
	}
}
