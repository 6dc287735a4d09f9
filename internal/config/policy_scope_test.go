package config

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestScopeIndexFirstMatch: Scope through the index made by Validate
// answers as matching every entry in order does (the first match wins):
// random lists of names and patterns, asked for names that match
// several, one and none of them.
func TestScopeIndexFirstMatch(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	pick := []string{"sales", "sales_eu", "hr", "s*", "sales_*", "h?", "[a-h]*", "*", "finance", "x_[0-9]"}
	asked := []string{"sales", "sales_eu", "sales_us", "hr", "hx", "finance", "x_1", "zz", "apple"}
	for round := range 500 {
		r := &Replication{}
		for range 1 + rng.IntN(6) {
			r.Databases = append(r.Databases, DatabasePolicy{Name: pick[rng.IntN(len(pick))]})
		}
		r.EnsureDefaults()
		if err := r.Validate(); err != nil {
			t.Fatal(err)
		}
		if r.scope == nil {
			t.Fatal("Validate made no index")
		}
		scan := *r
		scan.scope = nil
		for _, db := range asked {
			got, gotOK := r.Scope(db)
			want, wantOK := scan.Scope(db)
			if gotOK != wantOK || got != want {
				t.Fatalf("round %d, databases %v, Scope(%q) = %v %v; matching in order gives %v %v", round, names(r.Databases), db, name(got), gotOK, name(want), wantOK)
			}
		}
	}
	// A pattern listed before the exact name wins.
	r := &Replication{Databases: []DatabasePolicy{{Name: "sales*", RPO: Duration{1}}, {Name: "sales", RPO: Duration{2}}}}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	if p, ok := r.Scope("SALES"); !ok || p.RPO.Duration != 1 {
		t.Fatalf("Scope(SALES) = %v %v, want the pattern's entry", p, ok)
	}
}

func name(p *DatabasePolicy) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%q@%p", p.Name, p)
}

func names(ds []DatabasePolicy) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Name)
	}
	return out
}
