// Package bootstrap is the operator's side of a bootstrap, `hivedr
// bootstrap`: it checks what the operator asks for and turns it into one
// BootstrapRequest on <prefix>.control (Request, Write), then follows the
// bootstraps the tailer starts for that request to their end on DR.
//
// The tailer, the single writer of the event topics, takes the request
// up, matches its globs against the source's databases in scope and
// publishes each database's snapshot; copyd copies its files and the
// applier applies it. This package expands nothing itself: it learns
// which databases a request became from the tailer's checkpoints (the
// BootstrapStates that carry the request's ID), how many files are copied
// from the completions topic, and how far each database is applied from
// its DR database's parameters (internal/drparam). Folding those into
// figures and a verdict is pure (Tracker); so is drawing them (Renderer,
// with a clock the caller gives); Follower.Run does the I/O.
package bootstrap

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/schemas"
)

// The reasons a request carries (BootstrapRequest.reason), declared once
// in schemas.
const (
	ReasonRequested   = schemas.ReasonRequested
	ReasonChainBroken = schemas.ReasonChainBroken
)

// RepairCommand is the command that repairs a tailer stopped on a broken
// chain; docs/bootstrap.md, the tailer's CHAIN_BROKEN error and `hivedr status`
// name it.
const RepairCommand = "hivedr bootstrap -repair-chain"

// Options is what the operator asked for, as the flags give it.
type Options struct {
	// Databases are names or globs (path.Match); empty with All or
	// RepairChain.
	Databases []string
	// Tables restricts a bootstrap of one database (named, not a glob) to
	// these tables.
	Tables []string
	// All: every database in the replication scope.
	All bool
	// RepairChain: the request repairs a broken chain (reason
	// chain_broken): every database in scope.
	RepairChain bool
}

// ErrUsage marks an error in what the operator asked for (exit 2).
var ErrUsage = errors.New("usage")

// Validate checks o and returns it normalised (names in lower case,
// without blanks or repeats). Every error wraps ErrUsage and names the
// flag at fault.
func (o Options) Validate() (Options, error) {
	bad := func(format string, args ...any) (Options, error) {
		return Options{}, fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, args...))
	}
	dbs, err := names("-db", o.Databases, true)
	if err != nil {
		return bad("%v", err)
	}
	tables, err := names("-tables", o.Tables, false)
	if err != nil {
		return bad("%v", err)
	}
	switch {
	case o.RepairChain && (len(dbs) > 0 || len(tables) > 0 || o.All):
		return bad("-repair-chain bootstraps every database in scope: it takes no -db, -tables or -all")
	case o.All && (len(dbs) > 0 || len(tables) > 0):
		return bad("-all bootstraps every database in scope: it takes no -db or -tables")
	case !o.All && !o.RepairChain && len(dbs) == 0:
		return bad("say what to bootstrap: -db NAME_OR_GLOB (repeatable), -all, or -repair-chain")
	case len(tables) > 0 && (len(dbs) != 1 || isGlob(dbs[0])):
		return bad("-tables needs exactly one -db naming a database (not a glob); got -db %q", dbs)
	}
	return Options{Databases: dbs, Tables: tables, All: o.All, RepairChain: o.RepairChain}, nil
}

// names lower-cases and checks a list of names (globs when glob), each
// possibly comma-separated, dropping blanks and repeats.
func names(flag string, in []string, glob bool) ([]string, error) {
	var out []string
	for _, s := range in {
		for _, n := range strings.Split(s, ",") {
			n = strings.ToLower(strings.TrimSpace(n))
			switch {
			case n == "":
				continue
			case glob:
				if _, err := path.Match(n, ""); err != nil {
					return nil, fmt.Errorf("%s %q: not a glob (path.Match): %v", flag, n, err)
				}
			case isGlob(n):
				return nil, fmt.Errorf("%s %q: table names are names, not globs", flag, n)
			}
			if strings.ContainsAny(n, "/ \t") {
				return nil, fmt.Errorf("%s %q: not a name", flag, n)
			}
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out, nil
}

func isGlob(s string) bool { return strings.ContainsAny(s, `*?[\`) }

// Request builds the BootstrapRequest for o (validated) from source, asked
// by requestedBy (user@host) at now.
func Request(o Options, source, requestedBy string, now time.Time) schemas.BootstrapRequest {
	reason := ReasonRequested
	if o.RepairChain {
		reason = ReasonChainBroken
	}
	dbs := o.Databases
	if dbs == nil {
		dbs = []string{}
	}
	tables := o.Tables
	if tables == nil {
		tables = []string{}
	}
	return schemas.BootstrapRequest{
		RequestID:   NewRequestID(now),
		Source:      source,
		Databases:   dbs,
		Tables:      tables,
		Reason:      reason,
		RequestedBy: requestedBy,
		RequestedAt: now.UTC().Truncate(time.Millisecond),
	}
}

// NewRequestID returns a random request ID that sorts by time:
// "r20261203T123456Z-1f2e3d4c5b6a".
func NewRequestID(now time.Time) string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return "r" + now.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// PolicyWarnings returns a warning for each of the globs that no database
// of the replication policy can match: the tailer will bootstrap nothing
// for it. An empty policy replicates every database. Two globs are taken
// to overlap when either matches the other's text or their fixed prefixes
// agree, so a warning is only given when no overlap is plausible.
func PolicyWarnings(r *config.Replication, globs []string) []string {
	if len(r.Databases) == 0 {
		return nil
	}
	var out []string
	for _, g := range globs {
		if !slices.ContainsFunc(r.Databases, func(p config.DatabasePolicy) bool { return overlap(g, strings.ToLower(p.Name)) }) {
			out = append(out, fmt.Sprintf("-db %q: no database of replication.databases matches it; the tailer bootstraps only databases in scope, so it will bootstrap nothing for it", g))
		}
	}
	return out
}

// overlap reports whether globs a and b plausibly match a common name.
func overlap(a, b string) bool {
	if ok, _ := path.Match(a, b); ok {
		return true
	}
	if ok, _ := path.Match(b, a); ok {
		return true
	}
	if !isGlob(a) || !isGlob(b) {
		return false // a name is matched exactly or not at all
	}
	pa, pb := fixedPrefix(a), fixedPrefix(b)
	return strings.HasPrefix(pa, pb) || strings.HasPrefix(pb, pa)
}

// fixedPrefix is the part of a glob before its first special character.
func fixedPrefix(g string) string {
	if i := strings.IndexAny(g, `*?[\`); i >= 0 {
		return g[:i]
	}
	return g
}
