package copyd

import (
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf16"
)

// This file is the pure core of a copy: given what was observed of the
// file to copy from, of the target, and of how both relate to the checksum
// the metastore logged, what is to be done. It does no I/O; the engine
// observes, asks Decide, and carries the decision out.

// Match says whether a file holds the bytes the metastore logged for it.
type Match int8

// The values of Match.
const (
	// MatchUnknown: no checksum was logged, or none comparable with it
	// could be had from the store.
	MatchUnknown Match = iota
	// MatchYes: the file's current checksum equals the logged one.
	MatchYes
	// MatchNo: the file's current checksum differs from the logged one:
	// it changed after the event (an INSERT OVERWRITE, a rewrite).
	MatchNo
)

func (m Match) String() string {
	switch m {
	case MatchYes:
		return "matches"
	case MatchNo:
		return "differs from"
	}
	return "unknown"
}

// FileState is what was observed of one file.
type FileState struct {
	Exists    bool
	IsDir     bool
	IsSymlink bool
	Size      int64
	// CRC32C of the whole file as its store reports it, when HasCRC.
	CRC32C uint32
	HasCRC bool
}

// Origin says which candidate the bytes would be copied from.
type Origin int8

// The values of Origin.
const (
	// FromSource is the task's source location.
	FromSource Origin = iota
	// FromCMRoot is the copy Hive's change management keeps of the file
	// under the task's change-management root.
	FromCMRoot
	// FromSnapshot is the file as a snapshot of a source directory holds
	// it (read-only: its bytes cannot change between check and copy).
	FromSnapshot
)

func (o Origin) String() string {
	switch o {
	case FromCMRoot:
		return "change-management copy"
	case FromSnapshot:
		return "snapshot copy"
	}
	return "source"
}

// Observation is the input of Decide.
type Observation struct {
	// Origin is which candidate Source describes.
	Origin Origin
	// Source is the candidate to copy from.
	Source FileState
	// SourceMatch says whether Source holds the bytes the event logged.
	SourceMatch Match
	// Target is the file at the target location.
	Target FileState
	// TargetMatch says whether Target holds the bytes the event logged
	// (known only for CRC32C event checksums: a MD5-of-MD5 checksum
	// depends on the block size, which differs between clusters).
	TargetMatch Match
	// CMAvailable is set when the task names a change-management root and
	// a checksum, so that a CM copy of the file can be looked for.
	CMAvailable bool
	// SnapshotsAvailable is set when the source's store can find the file
	// in snapshots and the task names a checksum to check them by.
	SnapshotsAvailable bool
}

// Action is what Decide says to do.
type Action int8

// The values of Action.
const (
	// SkipIdentical: the target already holds the right bytes.
	SkipIdentical Action = iota + 1
	// Copy the candidate to the target.
	Copy
	// LookInCMRoot: the source is gone or changed; observe the
	// change-management copy and decide again.
	LookInCMRoot
	// LookInSnapshots: neither the source nor a change-management copy
	// holds the right bytes; observe the file in the source's snapshots,
	// newest first, and decide again for each.
	LookInSnapshots
	// SourceGone: no candidate holds the right bytes.
	SourceGone
	// Fail: the task cannot be done (see the reason).
	Fail
)

func (a Action) String() string {
	switch a {
	case SkipIdentical:
		return "skip-identical"
	case Copy:
		return "copy"
	case LookInCMRoot:
		return "look-in-cm-root"
	case LookInSnapshots:
		return "look-in-snapshots"
	case SourceGone:
		return "source-gone"
	case Fail:
		return "fail"
	}
	return fmt.Sprintf("Action(%d)", int8(a))
}

// Decision is the output of Decide.
type Decision struct {
	Action Action
	// Reason says why, in words fit for a completion's error or evidence.
	Reason string
}

// Decide says what to do with a copy task, given what was observed.
//
// It keeps three rules of DESIGN.md and the copyd issue:
//   - never copy bytes whose checksum differs from the event's: a
//     candidate with SourceMatch == MatchNo is never copied;
//   - a target already holding the same bytes is skipped, never rewritten:
//     same size and equal CRC32Cs reported by both stores (never on length
//     alone), or a target whose CRC32C is the event's own;
//   - no symbolic link or directory is read or replaced.
//
// A snapshot copy is held to more than the others: it is copied only when
// its checksum is known to equal the event's (MatchYes), never when it
// cannot be compared; a candidate is looked for in the change-management
// root first, then in snapshots, and after a snapshot copy is rejected the
// engine tries the next one itself (Decide never says LookInSnapshots for
// a snapshot copy).
func Decide(o Observation) Decision {
	s, t := o.Source, o.Target
	switch {
	case s.Exists && s.IsSymlink:
		return Decision{Fail, o.Origin.String() + " is a symbolic link; not followed"}
	case s.Exists && s.IsDir:
		return Decision{Fail, o.Origin.String() + " is a directory, not a file"}
	case t.Exists && t.IsSymlink:
		return Decision{Fail, "target is a symbolic link; not replaced"}
	case t.Exists && t.IsDir:
		return Decision{Fail, "target is a directory, not a file"}
	case t.Exists && o.TargetMatch == MatchYes:
		return Decision{SkipIdentical, "target's CRC32C is the event's checksum"}
	}

	unverified := o.Origin == FromSnapshot && o.SourceMatch == MatchUnknown
	if !s.Exists || o.SourceMatch == MatchNo || unverified {
		why := o.Origin.String() + " does not exist"
		switch {
		case !s.Exists:
		case unverified:
			why = o.Origin.String() + "'s checksum cannot be compared with the event's; not copied unverified"
		case o.Origin == FromSnapshot:
			why = o.Origin.String() + "'s checksum differs from the event's"
		default:
			why = o.Origin.String() + " changed after the event: its checksum differs from the event's"
		}
		switch {
		case o.Origin == FromSource && o.CMAvailable:
			return Decision{LookInCMRoot, why}
		case o.Origin != FromSnapshot && o.SnapshotsAvailable:
			return Decision{LookInSnapshots, why}
		}
		return Decision{SourceGone, why}
	}

	switch {
	case !t.Exists:
		return Decision{Copy, "target does not exist"}
	case t.Size != s.Size:
		return Decision{Copy, fmt.Sprintf("target has %d bytes, %s %d", t.Size, o.Origin, s.Size)}
	case !s.HasCRC || !t.HasCRC:
		return Decision{Copy, "target has the same length but no checksum to compare it by"}
	case t.CRC32C != s.CRC32C:
		return Decision{Copy, fmt.Sprintf("target CRC32C %08x differs from the %s's %08x", t.CRC32C, o.Origin, s.CRC32C)}
	}
	return Decision{SkipIdentical, fmt.Sprintf("target has the same length and CRC32C %08x", s.CRC32C)}
}

// EventChecksum is a checksum as the metastore logs it for a file (the hex
// of Hadoop's FileChecksum bytes, ReplChangeManager.checksumFor).
type EventChecksum struct {
	// Hex is the logged text, lower-cased; "" when none was logged.
	Hex string
	// CRC32C is the file's CRC32C when the logged checksum is a
	// COMPOSITE-CRC32C (4 bytes: the metastore's HDFS client ran with
	// dfs.checksum.combine.mode=COMPOSITE_CRC), and IsCRC32C is set. A
	// MD5-of-MD5-of-CRC32C (28 bytes, the default mode) cannot be
	// compared with a CRC32C; only with the same cluster's own
	// FileChecksum.
	CRC32C   uint32
	IsCRC32C bool
}

// ParseEventChecksum parses the checksum field of a copy task. A 4-byte
// checksum is taken as a COMPOSITE-CRC32C: HDFS's default chunk checksum
// type is CRC32C, and clusters with dfs.checksum.type=CRC32 are not
// supported (their 4-byte checksums would never match, and every changed
// file would be reported SOURCE_GONE rather than copied wrongly).
func ParseEventChecksum(s string) (EventChecksum, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return EventChecksum{}, nil
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return EventChecksum{}, fmt.Errorf("event checksum %q is not hex", s)
	}
	c := EventChecksum{Hex: s}
	if len(b) == 4 {
		c.CRC32C = uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
		c.IsCRC32C = true
	}
	return c, nil
}

// matchCRC compares a store's CRC32C with the event's checksum.
func (c EventChecksum) matchCRC(crc uint32, ok bool) Match {
	if !c.IsCRC32C || !ok {
		return MatchUnknown
	}
	if crc == c.CRC32C {
		return MatchYes
	}
	return MatchNo
}

// matchHex compares a store's FileChecksum (as hex) with the event's. Two
// checksums of different lengths are of different algorithms and say
// nothing.
func (c EventChecksum) matchHex(h string, ok bool) Match {
	h = strings.ToLower(h)
	if c.Hex == "" || !ok || len(h) != len(c.Hex) {
		return MatchUnknown
	}
	if h == c.Hex {
		return MatchYes
	}
	return MatchNo
}

// maxComponentLength is HDFS's default limit on the length of one path
// component (dfs.namenode.fs-limits.max-component-length), which Hive
// applies to change-management file names.
const maxComponentLength = 255

// CMPath returns where Hive's change management (ReplChangeManager) keeps
// the copy of a file that was deleted or overwritten: directly under the
// change-management root, named <file name>_<checksum>, the name cut to
// maxComponentLength-1 characters (UTF-16 code units, as Java counts) when
// it is longer than maxComponentLength. fileName is the last segment of the
// file's path as the event logged it.
func CMPath(cmRoot, fileName, checksum string) string {
	name := fileName + "_" + checksum
	if u := utf16.Encode([]rune(name)); len(u) > maxComponentLength {
		name = string(utf16.Decode(u[:maxComponentLength-1]))
	}
	return strings.TrimRight(cmRoot, "/") + "/" + name
}
