package copyd

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hivedr/hivedr/internal/fs"
)

func TestPreserveMeta(t *testing.T) {
	mtime := time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)
	hdfsFile := fs.FileInfo{Size: 1, ModTime: mtime, Owner: "etl", Group: "analysts", Perm: 0o640, HasPerm: true}
	s3Object := fs.FileInfo{Size: 1, ModTime: mtime}
	all := Preserve{Owner: true, Group: true, Perm: true, Times: true}
	mapped := all
	mapped.Users, mapped.Groups = map[string]string{"etl": "etl_dr"}, map[string]string{"other": "x"}
	for _, tt := range []struct {
		name string
		p    Preserve
		fi   fs.FileInfo
		want fs.Meta
	}{
		{"nothing kept", Preserve{}, hdfsFile, fs.Meta{}},
		{"all", all, hdfsFile, fs.Meta{Owner: "etl", Group: "analysts", Perm: 0o640, HasPerm: true, ModTime: mtime}},
		{"mapped user, unmapped group kept", mapped, hdfsFile,
			fs.Meta{Owner: "etl_dr", Group: "analysts", Perm: 0o640, HasPerm: true, ModTime: mtime}},
		{"group only", Preserve{Group: true}, hdfsFile, fs.Meta{Group: "analysts"}},
		{"perm only", Preserve{Perm: true}, hdfsFile, fs.Meta{Perm: 0o640, HasPerm: true}},
		{"a source without owners asks only for the time", all, s3Object, fs.Meta{ModTime: mtime}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Meta(tt.fi); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Meta = %+v, want %+v", got, tt.want)
			}
		})
	}
}

type metaWriter struct {
	fs.Writer
	got *fs.Meta
}

func (w metaWriter) SetMeta(m fs.Meta) { *w.got = m }

func TestPreserveGive(t *testing.T) {
	fi := fs.FileInfo{Owner: "etl", Group: "g", Perm: 0o750, HasPerm: true}
	p := Preserve{Owner: true, Perm: true}
	var got fs.Meta
	if err := p.give(fi, "hdfs://dr/f", metaWriter{got: &got}); err != nil || got.Owner != "etl" || got.Perm != 0o750 {
		t.Fatalf("give = %v, set %+v", err, got)
	}
	// A store that keeps no metadata refuses the copy, naming what was asked.
	err := p.give(fi, "s3://b/f", &memWriter{})
	var perm *permanentError
	if err == nil || !errors.As(err, &perm) || !strings.Contains(err.Error(), "owner etl, permission 0750") ||
		!strings.Contains(err.Error(), "s3://b/f") {
		t.Fatalf("give to a store without metadata = %v, want a permanent error naming owner and permission", err)
	}
	// Nothing asked: any writer will do.
	if err := (Preserve{}).give(fi, "s3://b/f", &memWriter{}); err != nil {
		t.Fatal(err)
	}
}
