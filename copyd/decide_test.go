package copyd

import (
	"strings"
	"testing"
)

func TestDecide(t *testing.T) {
	file := func(size int64, crc uint32) FileState {
		return FileState{Exists: true, Size: size, CRC32C: crc, HasCRC: true}
	}
	noCRC := func(size int64) FileState { return FileState{Exists: true, Size: size} }
	gone := FileState{}
	for _, tc := range []struct {
		name   string
		o      Observation
		want   Action
		reason string // a part of the reason
	}{
		{"target missing", Observation{Source: file(10, 1)}, Copy, "does not exist"},
		{"target other size", Observation{Source: file(10, 1), Target: file(9, 1)}, Copy, "9 bytes"},
		{"target other crc", Observation{Source: file(10, 1), Target: file(10, 2)}, Copy, "differs"},
		{"target same length, no source crc", Observation{Source: noCRC(10), Target: file(10, 1)}, Copy, "no checksum"},
		{"target same length, no target crc", Observation{Source: file(10, 1), Target: noCRC(10)}, Copy, "no checksum"},
		{"identical", Observation{Source: file(10, 1), Target: file(10, 1)}, SkipIdentical, "same length and CRC32C"},
		{"identical empty", Observation{Source: file(0, 0), Target: file(0, 0)}, SkipIdentical, ""},
		{"identical, event matches source", Observation{Source: file(10, 1), SourceMatch: MatchYes, Target: file(10, 1), TargetMatch: MatchYes}, SkipIdentical, ""},
		{"source matches event, target missing", Observation{Source: file(10, 1), SourceMatch: MatchYes}, Copy, ""},
		{"source match unknown, copies", Observation{Source: noCRC(10), SourceMatch: MatchUnknown, CMAvailable: true}, Copy, ""},
		{"source gone, cm available", Observation{Source: gone, CMAvailable: true}, LookInCMRoot, "does not exist"},
		{"source changed, cm available", Observation{Source: file(10, 1), SourceMatch: MatchNo, Target: file(10, 1), CMAvailable: true}, LookInCMRoot, "changed after the event"},
		{"source gone, no cm", Observation{Source: gone}, SourceGone, "does not exist"},
		{"source changed, no cm", Observation{Source: file(10, 1), SourceMatch: MatchNo}, SourceGone, "changed"},
		{"source gone, target holds event bytes", Observation{Source: gone, Target: file(10, 7), TargetMatch: MatchYes, CMAvailable: true}, SkipIdentical, "event's checksum"},
		{"source changed, target holds event bytes", Observation{Source: file(11, 1), SourceMatch: MatchNo, Target: file(10, 7), TargetMatch: MatchYes}, SkipIdentical, ""},
		{"source changed, target differs from event", Observation{Source: file(10, 1), SourceMatch: MatchNo, Target: file(10, 1), TargetMatch: MatchNo, CMAvailable: true}, LookInCMRoot, ""},
		{"cm copy matches", Observation{Origin: FromCMRoot, Source: file(10, 7), SourceMatch: MatchYes, CMAvailable: true}, Copy, ""},
		{"cm copy unknown", Observation{Origin: FromCMRoot, Source: noCRC(10), CMAvailable: true}, Copy, ""},
		{"cm copy identical to target", Observation{Origin: FromCMRoot, Source: file(10, 7), SourceMatch: MatchYes, Target: file(10, 7), CMAvailable: true}, SkipIdentical, ""},
		{"cm copy gone", Observation{Origin: FromCMRoot, Source: gone, CMAvailable: true}, SourceGone, "change-management copy does not exist"},
		{"cm copy differs", Observation{Origin: FromCMRoot, Source: file(10, 8), SourceMatch: MatchNo, CMAvailable: true}, SourceGone, "change-management copy changed"},
		{"source gone, snapshots", Observation{Source: gone, SnapshotsAvailable: true}, LookInSnapshots, "source does not exist"},
		{"source changed, snapshots", Observation{Source: file(10, 1), SourceMatch: MatchNo, SnapshotsAvailable: true}, LookInSnapshots, "changed"},
		{"source gone, cm before snapshots", Observation{Source: gone, CMAvailable: true, SnapshotsAvailable: true}, LookInCMRoot, ""},
		{"cm copy gone, snapshots", Observation{Origin: FromCMRoot, Source: gone, CMAvailable: true, SnapshotsAvailable: true}, LookInSnapshots, "change-management copy does not exist"},
		{"cm copy differs, snapshots", Observation{Origin: FromCMRoot, Source: file(10, 8), SourceMatch: MatchNo, CMAvailable: true, SnapshotsAvailable: true}, LookInSnapshots, ""},
		{"source unknown, snapshots not needed", Observation{Source: noCRC(10), SnapshotsAvailable: true}, Copy, ""},
		{"snapshot copy matches", Observation{Origin: FromSnapshot, Source: file(10, 7), SourceMatch: MatchYes, SnapshotsAvailable: true}, Copy, ""},
		{"snapshot copy identical to target", Observation{Origin: FromSnapshot, Source: file(10, 7), SourceMatch: MatchYes, Target: file(10, 7), SnapshotsAvailable: true}, SkipIdentical, ""},
		{"snapshot copy differs", Observation{Origin: FromSnapshot, Source: file(10, 8), SourceMatch: MatchNo, CMAvailable: true, SnapshotsAvailable: true}, SourceGone, "snapshot copy's checksum differs"},
		{"snapshot copy unknown", Observation{Origin: FromSnapshot, Source: noCRC(10), SnapshotsAvailable: true}, SourceGone, "not copied unverified"},
		{"snapshot copy unknown, same as target", Observation{Origin: FromSnapshot, Source: file(10, 7), Target: file(10, 7), SnapshotsAvailable: true}, SourceGone, "cannot be compared"},
		{"snapshot copy gone", Observation{Origin: FromSnapshot, Source: gone, SnapshotsAvailable: true}, SourceGone, "snapshot copy does not exist"},
		{"snapshot copy is a directory", Observation{Origin: FromSnapshot, Source: FileState{Exists: true, IsDir: true}, SnapshotsAvailable: true}, Fail, "snapshot copy is a directory"},
		{"source is a directory", Observation{Source: FileState{Exists: true, IsDir: true}}, Fail, "source is a directory"},
		{"source is a symlink", Observation{Source: FileState{Exists: true, IsSymlink: true}}, Fail, "symbolic link"},
		{"target is a directory", Observation{Source: file(1, 1), Target: FileState{Exists: true, IsDir: true}}, Fail, "target is a directory"},
		{"target is a symlink", Observation{Source: file(1, 1), Target: FileState{Exists: true, IsSymlink: true}}, Fail, "target is a symbolic link"},
		{"directory checked before gone", Observation{Source: FileState{Exists: true, IsDir: true}, SourceMatch: MatchNo, CMAvailable: true}, Fail, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.o)
			if d.Action != tc.want || !strings.Contains(d.Reason, tc.reason) {
				t.Fatalf("Decide(%+v) = %v %q; want %v with %q", tc.o, d.Action, d.Reason, tc.want, tc.reason)
			}
			if d.Reason == "" {
				t.Fatalf("Decide(%+v) gave no reason", tc.o)
			}
		})
	}
}

func TestParseEventChecksum(t *testing.T) {
	for _, tc := range []struct {
		in      string
		hex     string
		crc     uint32
		isCRC   bool
		wantErr bool
	}{
		{"", "", 0, false, false},
		{"1A2B3C4D", "1a2b3c4d", 0x1a2b3c4d, true, false},
		// MD5-of-0MD5-of-512CRC32C: bytesPerCRC, crcPerBlock, MD5.
		{"00000200000000000000000077ac2bb5c4b4e7b8bd3e9fd4b6b9d6c9", "00000200000000000000000077ac2bb5c4b4e7b8bd3e9fd4b6b9d6c9", 0, false, false},
		{"xyz", "", 0, false, true},
		{"abc", "", 0, false, true},
	} {
		c, err := ParseEventChecksum(tc.in)
		if (err != nil) != tc.wantErr || c.Hex != tc.hex || c.CRC32C != tc.crc || c.IsCRC32C != tc.isCRC {
			t.Errorf("ParseEventChecksum(%q) = %+v, %v", tc.in, c, err)
		}
	}
	c, _ := ParseEventChecksum("0000000a")
	if c.matchCRC(10, true) != MatchYes || c.matchCRC(11, true) != MatchNo || c.matchCRC(10, false) != MatchUnknown {
		t.Error("matchCRC")
	}
	if c.matchHex("0000000a", true) != MatchYes || c.matchHex("0000000A", true) != MatchYes || c.matchHex("0000000b", true) != MatchNo ||
		c.matchHex("000000000a", true) != MatchUnknown || c.matchHex("0000000a", false) != MatchUnknown {
		t.Error("matchHex")
	}
	var none EventChecksum
	if none.matchCRC(0, true) != MatchUnknown || none.matchHex("", true) != MatchUnknown {
		t.Error("no event checksum matched something")
	}
}

func TestCMPath(t *testing.T) {
	const sum = "0000020000000000000000003f7c5b1a0000000000000000"
	if got, want := CMPath("hdfs://nn:8020/cmroot", "000000_0", sum), "hdfs://nn:8020/cmroot/000000_0_"+sum; got != want {
		t.Errorf("CMPath = %q, want %q", got, want)
	}
	// What the local stack's metastore (change management on) left in its
	// CM root for a file f1.txt: the hex of the 28-byte
	// MD5-of-0MD5-of-512CRC32C FileChecksum, as WebHDFS GETFILECHECKSUM
	// also gives it (its "bytes" cut to "length").
	const real = "000002000000000000000000a8309262ccc3f1650f30d96bbf9b7730"
	if got := CMPath("hdfs://127.0.0.1:18020/cmroot", "f1.txt", real); got != "hdfs://127.0.0.1:18020/cmroot/f1.txt_"+real {
		t.Errorf("CMPath = %q", got)
	}
	if c, err := ParseEventChecksum(real); err != nil || c.IsCRC32C || c.Hex != real {
		t.Errorf("ParseEventChecksum(%q) = %+v, %v", real, c, err)
	}
	if got := CMPath("hdfs://nn:8020/cmroot/", "f", "ab"); got != "hdfs://nn:8020/cmroot/f_ab" {
		t.Errorf("CMPath with a trailing slash = %q", got)
	}
	// Longer than 255: cut to 254 (Java's substring(0, max-1)).
	long := strings.Repeat("a", 250)
	got := CMPath("/cm", long, sum)
	if name := strings.TrimPrefix(got, "/cm/"); len(name) != 254 || name != (long + "_" + sum)[:254] {
		t.Errorf("long name cut to %d characters: %q", len(name), name)
	}
	// Exactly 255 is kept.
	n255 := strings.Repeat("b", 255-1-len(sum))
	if got := CMPath("/cm", n255, sum); len(strings.TrimPrefix(got, "/cm/")) != 255 {
		t.Errorf("255-character name changed: %q", got)
	}
	// Java counts UTF-16 code units: a character outside the BMP is two.
	astral := strings.Repeat("\U0001F600", 127) + "x" // 255 units as a name alone
	got = strings.TrimPrefix(CMPath("/cm", astral, "ab"), "/cm/")
	if got != strings.Repeat("\U0001F600", 127) {
		t.Errorf("UTF-16 cut: %q", got)
	}
}
