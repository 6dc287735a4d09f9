package copyd

import "testing"

// Same-target serialisation compares canonical targets: two spellings of
// one DR file never copy at once.
func TestTargetKeyIsCanonical(t *testing.T) {
	for _, group := range [][]string{
		{"hdfs://dr-nn/w/t/f", "hdfs://DR-NN:8020/w/t/f", "hdfs://dr-nn:8020/w//t/f"},
		{"s3a://b/w/f", "s3://b/w/f", "S3N://B/w/f"},
		{"/dr/w/f", "file:/dr/w/f", "file:///dr/w/f", "file://localhost/dr/w/f"},
	} {
		for _, s := range group[1:] {
			if targetKey(s) != targetKey(group[0]) {
				t.Errorf("targetKey(%s) = %s, targetKey(%s) = %s; want one key", s, targetKey(s), group[0], targetKey(group[0]))
			}
		}
	}
	if targetKey("hdfs://dr-nn:8020/a") == targetKey("hdfs://dr-nn:8021/a") {
		t.Error("two clusters share a target key")
	}
	// A target that does not parse keeps its own key (the Engine refuses it).
	if got := targetKey("rel/x"); got != "rel/x" {
		t.Errorf("targetKey(rel/x) = %s", got)
	}
}
