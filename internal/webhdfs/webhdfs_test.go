package webhdfs

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"
)

func TestClient(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/webhdfs/v1/data/f", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("user.name") != "hdfs" {
			t.Errorf("user.name = %q", r.URL.Query().Get("user.name"))
		}
		switch r.URL.Query().Get("op") {
		case "GETFILECHECKSUM":
			w.Write([]byte(`{"FileChecksum":{"algorithm":"COMPOSITE-CRC32C","bytes":"1a2b3c4d","length":4}}`))
		case "GETFILEBLOCKLOCATIONS":
			w.Write([]byte(`{"BlockLocations":{"BlockLocation":[{"offset":0,"length":1048576,"hosts":["h"]},{"offset":1048576,"length":5,"hosts":["h"]}]}}`))
		}
	})
	mux.HandleFunc("/webhdfs/v1/data", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("op") != "GETSNAPSHOTDIFF" || q.Get("oldsnapshotname") != "s1" || q.Get("snapshotname") != "s2" {
			t.Errorf("unexpected query %v", q)
		}
		w.Write([]byte(`{"SnapshotDiffReport":{"diffList":[{"sourcePath":"","type":"MODIFY"},{"sourcePath":"a","type":"DELETE"},{"sourcePath":"b","type":"RENAME","targetPath":"c"}]}}`))
	})
	mux.HandleFunc("/webhdfs/v1/missing", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"RemoteException":{"exception":"FileNotFoundException","javaClassName":"java.io.FileNotFoundException","message":"File does not exist: /missing"}}`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := New(srv.URL, "hdfs", srv.Client())
	ctx := context.Background()

	sum, err := c.GetFileChecksum(ctx, "/data/f")
	if err != nil {
		t.Fatal(err)
	}
	if crc, ok := sum.CRC32C(); !ok || crc != 0x1a2b3c4d {
		t.Fatalf("CRC32C() = %08x, %v", crc, ok)
	}
	if _, ok := (FileChecksum{Algorithm: "MD5-of-0MD5-of-512CRC32C", Bytes: make([]byte, 28)}).CRC32C(); ok {
		t.Fatal("an MD5-of-MD5 checksum claims to be a CRC32C")
	}

	blocks, err := c.GetFileBlockLocations(ctx, "/data/f")
	if err != nil || len(blocks) != 2 || blocks[1].Offset != 1048576 {
		t.Fatalf("blocks = %+v, %v", blocks, err)
	}

	diff, err := c.SnapshotDiff(ctx, "/data", "s1", "s2")
	if err != nil || len(diff) != 3 || diff[2].TargetPath != "c" || diff[1].Type != DiffDelete {
		t.Fatalf("diff = %+v, %v", diff, err)
	}

	_, err = c.GetFileChecksum(ctx, "/missing")
	var re *RemoteError
	if !errors.As(err, &re) || re.Exception != "FileNotFoundException" || re.Status != 404 {
		t.Fatalf("err = %#v", err)
	}
	if _, err := c.GetFileChecksum(ctx, "relative"); err == nil {
		t.Fatal("relative path accepted")
	}
}

func TestSnapshotLists(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/webhdfs/v1/data", func(w http.ResponseWriter, r *http.Request) {
		if op := r.URL.Query().Get("op"); op != "GETSNAPSHOTLIST" {
			t.Errorf("op %q on /data", op)
		}
		w.Write([]byte(`{"SnapshotList":[` +
			`{"deletionStatus":"ACTIVE","dirStatus":{"accessTime":0,"blockSize":0,"childrenNum":1,"fileId":26868,"group":"supergroup","length":0,"modificationTime":1796224116286,"owner":"root","pathSuffix":"s1","permission":"755","replication":0,"storagePolicy":0,"type":"DIRECTORY"},"fullPath":"/data/.snapshot/s1","snapshotID":17},` +
			`{"deletionStatus":"DELETED","dirStatus":{"modificationTime":1796224116317,"pathSuffix":"s2","type":"DIRECTORY"},"snapshotID":18}]}`))
	})
	mux.HandleFunc("/webhdfs/v1/data/sub", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`{"RemoteException":{"exception":"SnapshotException","javaClassName":"org.apache.hadoop.hdfs.protocol.SnapshotException","message":"Directory is not a snapshottable directory: /data/sub"}}`))
	})
	mux.HandleFunc("/webhdfs/v1/empty", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"SnapshotList":[]}`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := New(srv.URL, "hdfs", srv.Client())
	ctx := context.Background()

	snaps, err := c.GetSnapshotList(ctx, "/data")
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) != 2 {
		t.Fatalf("snapshots = %+v", snaps)
	}
	s1 := Snapshot{Name: "s1", Path: "/data/.snapshot/s1", ID: 17, ModificationTime: time.UnixMilli(1796224116286)}
	if snaps[0] != s1 {
		t.Errorf("snapshot 0 = %+v, want %+v", snaps[0], s1)
	}
	if s := snaps[1]; s.Name != "s2" || s.Path != "/data/.snapshot/s2" || s.ID != 18 || !s.Deleted {
		t.Errorf("snapshot 1 = %+v", s)
	}
	if snaps, err := c.GetSnapshotList(ctx, "/empty"); err != nil || len(snaps) != 0 {
		t.Errorf("empty: %+v, %v", snaps, err)
	}
	_, err = c.GetSnapshotList(ctx, "/data/sub")
	var re *RemoteError
	if !errors.As(err, &re) || re.Exception != "SnapshotException" || re.Status != http.StatusForbidden {
		t.Fatalf("not snapshottable: err = %#v", err)
	}
}

func TestConcat(t *testing.T) {
	var got []string
	mux := http.NewServeMux()
	mux.HandleFunc("/webhdfs/v1/d/t", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.Method != http.MethodPost || q.Get("op") != "CONCAT" {
			t.Errorf("%s op=%s", r.Method, q.Get("op"))
		}
		got = append(got, q.Get("sources"))
	})
	mux.HandleFunc("/webhdfs/v1/d/old", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"RemoteException":{"exception":"HadoopIllegalArgumentException","javaClassName":"org.apache.hadoop.HadoopIllegalArgumentException","message":"concat: source file /d/b is invalid or empty or underConstruction"}}`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := New(srv.URL, "hdfs", srv.Client())
	ctx := context.Background()
	if err := c.Concat(ctx, "/d/t", []string{"/d/a b", "/d/c"}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "/d/a b,/d/c" {
		t.Errorf("sources sent: %q", got)
	}
	for _, bad := range [][]string{nil, {"/d/a,b"}, {"rel"}} {
		if err := c.Concat(ctx, "/d/t", bad); err == nil {
			t.Errorf("Concat with sources %q accepted", bad)
		}
	}
	if len(got) != 1 {
		t.Errorf("refused sources reached the server: %q", got)
	}
	err := c.Concat(ctx, "/d/old", []string{"/d/b"})
	var re *RemoteError
	if !errors.As(err, &re) || re.Exception != "HadoopIllegalArgumentException" {
		t.Fatalf("err = %#v", err)
	}
}

func TestSnapshottableDirectoryList(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/webhdfs/v1/", func(w http.ResponseWriter, r *http.Request) {
		if op := r.URL.Query().Get("op"); op != "GETSNAPSHOTTABLEDIRECTORYLIST" || r.URL.Path != "/webhdfs/v1/" {
			t.Errorf("op %q on %s", op, r.URL.Path)
		}
		// (As the stack's NameNode answers.)
		w.Write([]byte(`{"SnapshottableDirectoryList":[` +
			`{"dirStatus":{"accessTime":0,"childrenNum":1,"fileId":70575,"group":"supergroup","owner":"hivedr","pathSuffix":"snap","permission":"755","type":"DIRECTORY"},"parentFullPath":"/copytest/a86a52bb","snapshotNumber":0,"snapshotQuota":65536},` +
			`{"dirStatus":{"pathSuffix":"warehouse","type":"DIRECTORY"},"parentFullPath":"/","snapshotNumber":2,"snapshotQuota":65536}]}`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	dirs, err := New(srv.URL, "hdfs", srv.Client()).GetSnapshottableDirectoryList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/copytest/a86a52bb/snap", "/warehouse"}; !slices.Equal(dirs, want) {
		t.Errorf("dirs %v, want %v", dirs, want)
	}
}

// TestSetModTime checks that SETTIMES carries the modification time to the
// millisecond and leaves the access time alone (-1), and that a refusal
// is a RemoteError.
func TestSetModTime(t *testing.T) {
	var got []string
	mux := http.NewServeMux()
	mux.HandleFunc("/webhdfs/v1/d/f", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		got = append(got, r.Method+" "+q.Get("op")+" m="+q.Get("modificationtime")+" a="+q.Get("accesstime"))
	})
	mux.HandleFunc("/webhdfs/v1/d/locked", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`{"RemoteException":{"exception":"AccessControlException","javaClassName":"org.apache.hadoop.security.AccessControlException","message":"Permission denied: user=hivedr, access=WRITE, inode=\"/d/locked\""}}`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := New(srv.URL, "hdfs", srv.Client())
	ctx := context.Background()
	mtime := time.Date(2025, 11, 5, 8, 30, 12, 345_678_901, time.UTC)
	if err := c.SetModTime(ctx, "/d/f", mtime); err != nil {
		t.Fatal(err)
	}
	if want := []string{"PUT SETTIMES m=1762331412345 a=-1"}; !slices.Equal(got, want) {
		t.Errorf("sent %q, want %q", got, want)
	}
	err := c.SetModTime(ctx, "/d/locked", mtime)
	var re *RemoteError
	if !errors.As(err, &re) || re.Exception != "AccessControlException" || re.Status != http.StatusForbidden {
		t.Fatalf("refused: err = %#v", err)
	}
	if err := c.SetModTime(ctx, "/d/f", time.Unix(-5, 0)); err == nil || len(got) != 1 {
		t.Errorf("a time before 1970: err %v, %d requests; want refused before sending", err, len(got))
	}
}
