package failover

import (
	"slices"
	"strings"
	"testing"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/hmslog"
)

func TestCheckReverse(t *testing.T) {
	fwd := &config.Config{Source: config.Source{Name: "prod", Kind: config.SourceThrift, Metastore: "src:9083"},
		Applier: config.Applier{Metastore: "dr:9083", Group: "fwd-applier"}, Kafka: config.Kafka{TopicPrefix: "hivedr"}}
	good := func() *config.Config {
		return &config.Config{Source: config.Source{Name: "prod-back", Kind: config.SourceThrift, Metastore: "dr:9083"},
			Applier: config.Applier{Metastore: "src:9083", Group: "rev-applier"}, Kafka: config.Kafka{TopicPrefix: "hivedr-back"},
			Tailer: config.Tailer{StartEventID: "500"}}
	}
	for _, c := range []struct {
		name string
		edit func(*config.Config)
		want string
	}{
		{"reversed", func(*config.Config) {}, ""},
		{"start before the head", func(c *config.Config) { c.Tailer.StartEventID = "400" }, ""},
		{"reads the old primary", func(c *config.Config) { c.Source.Metastore = "src:9083" }, "source.metastore"},
		{"writes into DR", func(c *config.Config) { c.Applier.Metastore = "dr:9083" }, "applier.metastore"},
		{"same name", func(c *config.Config) { c.Source.Name = "prod" }, "source.name"},
		{"same topics", func(c *config.Config) { c.Kafka.TopicPrefix = "hivedr" }, "topic_prefix"},
		{"same group", func(c *config.Config) { c.Applier.Group = "fwd-applier" }, "applier.group"},
		{"database out of scope", func(c *config.Config) {
			c.Replication.Databases = []config.DatabasePolicy{{Name: "other"}}
		}, "does not hold sales"},
		{"tailer starts at latest", func(c *config.Config) { c.Tailer.StartEventID = "latest" }, "start_event_id"},
		{"tailer starts after the head", func(c *config.Config) { c.Tailer.StartEventID = "501" }, "start_event_id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rev := good()
			c.edit(rev)
			probs := CheckReverse(fwd, rev, []string{"sales"}, 500)
			got := strings.Join(probs, "; ")
			if (c.want == "") != (len(probs) == 0) || !strings.Contains(got, c.want) {
				t.Fatalf("CheckReverse: %q, want %q", got, c.want)
			}
		})
	}
}

func TestChangedAndMoved(t *testing.T) {
	evs := []hmslog.RawEvent{
		{EventID: 10, Database: "sales", Table: "orders"},
		{EventID: 11, Database: "SALES", Table: "Orders"},
		{EventID: 12, Database: "sales", Table: "accounts"},
		{EventID: 13, Database: "crm", Table: "leads"},
		{EventID: 14, Database: "sales"},
		{EventID: 15},
	}
	src := map[string]int{}
	Changed(src, evs, "sales", 10)
	if src["orders"] != 1 || src["accounts"] != 1 || src[""] != 1 || len(src) != 3 {
		t.Fatalf("Changed after 10: %v", src)
	}
	dr := map[string]int{"accounts": 2, "written_on_dr": 1}
	if got := Moved(src, dr); !slices.Equal(got, []string{"accounts", "orders", "written_on_dr"}) {
		t.Fatalf("Moved %v", got)
	}
	if got := Moved(map[string]int{"": 3}, nil); len(got) != 0 {
		t.Fatalf("database-level events moved tables: %v", got)
	}
}

func TestCheckOldPrimary(t *testing.T) {
	const rev = "hivedr:prod-back"
	marked := map[string]string{drparam.Target: rev, drparam.FailbackAt: "2026-12-03T10:00:00Z", drparam.FailbackDRLogHead: "500"}
	for _, c := range []struct {
		name   string
		params map[string]string
		again  bool
		want   string
	}{
		{"a primary database", map[string]string{"owner": "etl"}, false, ""},
		{"not on the old primary", nil, false, "not on the old primary"},
		{"another pipeline's replica", map[string]string{drparam.Target: "hivedr:other"}, false, `replica of "hivedr:other"`},
		{"failed back already", marked, false, "failed back at 2026-12-03T10:00:00Z, from DR log event 500): a failback runs once; add -again"},
		{"failed back already, again", marked, true, ""},
		{"another pipeline's replica, again", map[string]string{drparam.Target: "hivedr:other"}, true, `replica of "hivedr:other"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := CheckOldPrimary("sales", c.params, rev, c.again)
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "sales") {
				t.Fatalf("CheckOldPrimary: %v, want %q", err, c.want)
			}
		})
	}
}
