package location

import "testing"

// FuzzParse parses locations as they come in metastore events (a table's
// or partition's location, written by any metastore client). A location
// that parses must be canonical: its spelling parses to itself, it lies
// within itself, and it is within its directory.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"hdfs://NN:8020/w/t/ds=2025-03-01", "hdfs://dr-nn/w", "hdfs://[::1]:9000/w", "s3a://Bucket/k//x/",
		"file:///tmp/x", "file://localhost/tmp/x", "/a:b/c", "/a?b", "hdfs://nn/a?b", "hdfs://nn:8020/w/t/dt=10%3A00/f",
		"ViewFS://Cluster/w", "hdfs://nn:99999/w", "hdfs://nn:8020/../x", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := Parse(s)
		if err != nil {
			return
		}
		c := l.String()
		again, err := Parse(c)
		if err != nil || again != l {
			t.Fatalf("Parse(%q) = %+v, whose spelling %q parses to %+v, %v", s, l, c, again, err)
		}
		if !l.Within(l) {
			t.Fatalf("%q is not within itself", c)
		}
		if d := l.Dir(); !l.Within(d) {
			t.Fatalf("%q is not within its directory %q", c, d)
		}
	})
}
