package applier

import (
	"slices"
	"testing"

	"github.com/hivedr/hivedr/schemas"
)

func TestNewDatabases(t *testing.T) {
	cp := func(chain []string, boots ...string) *schemas.TailerCheckpoint {
		c := &schemas.TailerCheckpoint{TopicLastEventIDs: map[string]int64{}}
		for i, db := range chain {
			c.TopicLastEventIDs[db] = int64(i + 1)
		}
		for _, b := range boots {
			c.Bootstraps = append(c.Bootstraps, schemas.BootstrapState{Database: b})
		}
		return c
	}
	seen := map[string]bool{}
	for _, tc := range []struct {
		name string
		cp   *schemas.TailerCheckpoint
		want []string
	}{
		{"first checkpoint: everything is new", cp([]string{"sales", "finance"}), []string{"finance", "sales"}},
		{"same databases again", cp([]string{"finance", "sales"}), nil},
		{"one more in the chain", cp([]string{"finance", "sales", "hr"}), []string{"hr"}},
		{"a bootstrap of a database with no event yet", cp([]string{"finance"}, "legacy"), []string{"legacy"}},
		{"a database gone from the checkpoint is not new when it comes back", cp([]string{"sales"}), nil},
		{"empty names are ignored", cp([]string{""}, ""), nil},
	} {
		if got := newDatabases(seen, tc.cp); !slices.Equal(got, tc.want) {
			t.Errorf("%s: newDatabases = %v, want %v", tc.name, got, tc.want)
		}
	}
}
