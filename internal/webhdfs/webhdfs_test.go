package webhdfs

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
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
