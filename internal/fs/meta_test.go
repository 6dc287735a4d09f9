package fs

import (
	"errors"
	"os"
	"testing"
	"time"
)

func TestMetaMissing(t *testing.T) {
	mtime := time.Date(2025, 11, 5, 8, 30, 12, 345_000_000, time.UTC)
	have := FileInfo{Owner: "hive", Group: "hadoop", Perm: 0o755, HasPerm: true, ModTime: mtime}
	for _, tt := range []struct {
		name string
		want Meta
		have FileInfo
		diff Meta
	}{
		{"nothing asked", Meta{}, have, Meta{}},
		{"all equal", Meta{Owner: "hive", Group: "hadoop", Perm: 0o755, HasPerm: true, ModTime: mtime}, have, Meta{}},
		{"owner only differs", Meta{Owner: "etl", Group: "hadoop"}, have, Meta{Owner: "etl"}},
		{"group and mode differ", Meta{Group: "finance", Perm: 0o750, HasPerm: true}, have,
			Meta{Group: "finance", Perm: 0o750, HasPerm: true}},
		{"mode bits beyond the permission are not compared", Meta{Perm: os.ModeDir | 0o755, HasPerm: true}, have, Meta{}},
		{"a store without modes", Meta{Perm: 0o755, HasPerm: true}, FileInfo{}, Meta{Perm: 0o755, HasPerm: true}},
		{"mtime equal to the millisecond", Meta{ModTime: mtime.Add(400 * time.Microsecond)}, have, Meta{}},
		{"mtime kept to the second only", Meta{ModTime: mtime}, FileInfo{ModTime: mtime.Truncate(time.Second)}, Meta{ModTime: mtime}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.want.Missing(tt.have); got != tt.diff {
				t.Fatalf("Missing = %+v, want %+v", got, tt.diff)
			}
		})
	}
}

func TestPermissionErrorNamesWhatAndWho(t *testing.T) {
	for _, tt := range []struct {
		err  *PermissionError
		want string
	}{
		{&PermissionError{Location: "hdfs://dr/wh/t/f", Op: "chmod to 0640", User: "hivedr", Err: os.ErrPermission},
			"keep metadata of hdfs://dr/wh/t/f: user hivedr may not chmod to 0640: permission denied"},
		{&PermissionError{Location: "hdfs://dr/wh/t", Dir: true, Op: "chown to etl:g", User: "hivedr-copyd@R", Err: os.ErrPermission},
			"keep metadata of directory hdfs://dr/wh/t: user hivedr-copyd@R may not chown to etl:g: permission denied"},
	} {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
		if !errors.Is(tt.err, os.ErrPermission) {
			t.Errorf("%q does not wrap the store's refusal", tt.err)
		}
	}
}
