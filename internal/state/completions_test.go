package state

import (
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// WrittenAfter finds a completion's target in any spelling of it: the
// path mapping's (on the completion) and the DR filesystem's (asked).
func TestWrittenAfterCanonicalTargets(t *testing.T) {
	s, err := OpenCompletions(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Put([]Completion{
		{TaskID: "20-0", EventID: 20, Target: "hdfs://DR-NN/w/t/f", Status: "COPIED"},
		{TaskID: "20-1", EventID: 20, Target: "s3a://Bucket/w/t/f", Status: "COPIED"},
		{TaskID: "20-2", EventID: 20, Target: "file:/dr/w/t/f", Status: "COPIED"},
		{TaskID: "20-3", EventID: 20, Target: "hdfs://ns1/w//t/g/", Status: "COPIED"},
	}, "c", map[int32]int64{0: 4}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		target string
		after  int64
		want   bool
	}{
		{"hdfs://dr-nn:8020/w/t/f", 10, true},
		{"hdfs://dr-nn/w/t/f", 10, true},
		{"hdfs://dr-nn:8020/w/t/f", 20, false}, // not after its own event
		{"hdfs://dr-nn:8021/w/t/f", 10, false},
		{"hdfs://dr-nn:8020/w/t/f2", 10, false},
		{"hdfs://dr-nn:8020/w/t", 10, false},
		{"s3://bucket/w/t/f", 10, true},
		{"/dr/w/t/f", 10, true},
		{"file:///dr/w/t/f", 10, true},
		{"hdfs://ns1:8020/w/t/g", 10, true},
	} {
		got, err := s.WrittenAfter(tt.target, tt.after)
		if err != nil || got != tt.want {
			t.Errorf("WrittenAfter(%s, %d) = %v, %v; want %v", tt.target, tt.after, got, err, tt.want)
		}
	}
}

// A store written before targets were indexed in canonical form is
// emptied on open (the topic is read again from its start); a current
// one keeps what it holds.
func TestCompletionsOldFormatIsRebuilt(t *testing.T) {
	dir := t.TempDir()
	old, err := pebble.Open(dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := old.NewBatch()
	for k, v := range map[string]string{
		complPrefix + "20-0":                  `{"task_id":"20-0","event_id":20,"target":"hdfs://dr-nn/w/f","status":"COPIED"}`,
		targetPrefix + "hdfs://dr-nn/w/f\x00": "20-0",
		string(offsetKey("c", 0)):             "\x00\x00\x00\x00\x00\x00\x00\x01",
	} {
		if err := b.Set([]byte(k), []byte(v), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := OpenCompletions(dir)
	if err != nil {
		t.Fatal(err)
	}
	offs, err := s.Offsets("c")
	if err != nil || len(offs) != 0 {
		t.Fatalf("old-format store: offsets %v, %v; want none (read the topic again)", offs, err)
	}
	if _, ok, _ := s.Get("20-0"); ok {
		t.Fatal("old-format store kept its completions")
	}
	if err := s.Put([]Completion{{TaskID: "20-0", EventID: 20, Target: "hdfs://dr-nn/w/f", Status: "COPIED"}}, "c", map[int32]int64{0: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = OpenCompletions(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	offs, err = s.Offsets("c")
	if err != nil || offs[0] != 1 {
		t.Fatalf("reopened store: offsets %v, %v; want partition 0 at 1", offs, err)
	}
	if ok, err := s.WrittenAfter("hdfs://dr-nn:8020/w/f", 10); err != nil || !ok {
		t.Fatalf("reopened store: WrittenAfter = %v, %v", ok, err)
	}
}
