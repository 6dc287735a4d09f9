package state

import (
	"context"
	"testing"
)

func TestStagingSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Begin(ctx, "7-0", "hdfs://dr/w/t/f0", "hdfs://dr/w/t/.f0.hivedr-1.staging"))
	must(s.Begin(ctx, "7-1", "s3://b/w/t/f1", "upload-xyz"))
	must(s.End(ctx, "7-0", "hdfs://dr/w/t/f0", "hdfs://dr/w/t/.f0.hivedr-1.staging"))
	must(s.Close())

	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Pending()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != (Staging{TaskID: "7-1", Location: "s3://b/w/t/f1", Staging: "upload-xyz"}) {
		t.Fatalf("pending = %+v", got)
	}
}
