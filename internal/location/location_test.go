package location

import (
	"strings"
	"testing"
)

func TestParseNormalises(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		// Scheme and authority case.
		{"HDFS://NN:8020/w", "hdfs://nn:8020/w"},
		{"hdfs://DR-NN:8020/W/T", "hdfs://dr-nn:8020/W/T"}, // the path keeps its case
		// hdfs default port.
		{"hdfs://dr-nn/w", "hdfs://dr-nn:8020/w"},
		{"hdfs://ns1/w", "hdfs://ns1:8020/w"},
		{"hdfs://dr-nn:08020/w", "hdfs://dr-nn:8020/w"},
		{"hdfs://dr-nn:9000/w", "hdfs://dr-nn:9000/w"},
		{"hdfs://[::1]/w", "hdfs://[::1]:8020/w"},
		{"hdfs://[::1]:9000/w", "hdfs://[::1]:9000/w"},
		{"hdfs://dr-nn", "hdfs://dr-nn:8020/"},
		// s3 connector names.
		{"s3a://Bucket/k", "s3://bucket/k"},
		{"s3n://bucket/k", "s3://bucket/k"},
		{"S3A://bucket/k", "s3://bucket/k"},
		{"s3://bucket/k", "s3://bucket/k"}, // no port added but for hdfs
		// Local forms.
		{"file:///tmp/x", "/tmp/x"},
		{"file://localhost/tmp/x", "/tmp/x"},
		{"file://LOCALHOST/tmp/x", "/tmp/x"},
		{"file:/tmp/x", "/tmp/x"},
		{"FILE:/tmp/x", "/tmp/x"},
		{"/local/p", "/local/p"},
		{"/a:b/c", "/a:b/c"},
		{"/a?b", "/a?b"}, // a local name may hold "?"
		// Path cleaning.
		{"s3://bucket/a//b/", "s3://bucket/a/b"},
		{"hdfs://nn:8020/w/t/", "hdfs://nn:8020/w/t"},
		{"hdfs://nn:8020/", "hdfs://nn:8020/"},
		{"/tmp//x/", "/tmp/x"},
		// Paths are not percent-decoded.
		{"hdfs://NN:8020/w/t/dt=10%3A00/f", "hdfs://nn:8020/w/t/dt=10%3A00/f"},
		// Other schemes are kept, lower-cased.
		{"ViewFS://Cluster/w", "viewfs://cluster/w"},
	} {
		got, err := Parse(tt.in)
		if err != nil || got.String() != tt.want {
			t.Errorf("Parse(%q) = %s, %v; want %s", tt.in, got, err, tt.want)
			continue
		}
		if again, err := Parse(got.String()); err != nil || again != got {
			t.Errorf("Parse(%q) = %+v, %v: the canonical form does not parse to itself (%+v)", got, again, err, got)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tt := range []struct{ in, err string }{
		{"", "empty"},
		{"hdfs://nn/a?b", "query"},
		{"hdfs://nn/a#b", "query"},
		{"hdfs://u@nn/a", "user"},
		{"s3://key:secret@bucket/a", "user"},
		{"://nn/a", "not absolute"},
		{"hdfs://nn/a/../b", `".."`},
		{"hdfs://nn/a/./b", `"."`},
		{"/a/../b", `".."`},
		{"file:/a/./b", `"."`},
		{"rel/path", "not absolute"},
		{"dt=10:00/x", "not absolute"},
		{"file:rel", "not absolute"},
		{"hdfs:rel", "not absolute"},
		{"hdfs:///w", "without an authority"},
		{"hdfs:/w", "without an authority"},
		{"s3:///key", "without an authority"},
		{"file://remote/tmp/x", "not local"},
		{"hdfs://nn:/w", "port"},
		{"hdfs://nn:abc/w", "port"},
		{"hdfs://nn:0/w", "port"},
		{"hdfs://nn:65536/w", "port"},
		{"hdfs://:8020/w", "no host"},
		{"hdfs://::1/w", "IPv6"},
		{"hdfs://[::1/w", "unclosed"},
		{"hdfs://[::1]x/w", "after ]"},
	} {
		got, err := Parse(tt.in)
		if err == nil {
			t.Errorf("Parse(%q) = %s, want an error saying %s", tt.in, got, tt.err)
			continue
		}
		if !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), `"`+tt.in+`"`) {
			t.Errorf("Parse(%q) error %q: want it to quote the input and say %s", tt.in, err, tt.err)
		}
	}
}

// TestSpellingsAreOneLocation: every spelling of one place is one
// Location, so == and map keys see one location.
func TestSpellingsAreOneLocation(t *testing.T) {
	for _, group := range [][]string{
		{"hdfs://dr-nn/w/t/f", "hdfs://dr-nn:8020/w/t/f", "HDFS://DR-NN:8020/w/t/f", "hdfs://dr-nn:8020/w//t/f", "hdfs://Dr-Nn/w/t/f"},
		{"hdfs://ns1/w/t", "hdfs://ns1:8020/w/t/", "hdfs://NS1/w/t//"},
		{"s3://b/k/f", "s3a://b/k/f", "s3n://B/k/f", "S3A://b/k//f"},
		{"/dr/w/f", "file:/dr/w/f", "file:///dr/w/f", "file://localhost/dr/w/f", "/dr/w/f/"},
	} {
		keys := map[Location]bool{}
		for _, s := range group {
			keys[MustParse(s)] = true
		}
		if len(keys) != 1 {
			t.Errorf("%q are %d locations, want 1: %v", group, len(keys), keys)
		}
	}
	for _, pair := range [][2]string{
		{"hdfs://nn:8020/w", "hdfs://nn:8021/w"},
		{"hdfs://nn/w", "viewfs://nn/w"},
		{"s3://b/w", "hdfs://b/w"},
		{"/w", "hdfs://localhost/w"},
		{"hdfs://nn/W", "hdfs://nn/w"},
	} {
		if MustParse(pair[0]) == MustParse(pair[1]) {
			t.Errorf("%s and %s are one location", pair[0], pair[1])
		}
	}
}

func TestWithin(t *testing.T) {
	root := MustParse("hdfs://nn:8020/warehouse")
	for in, want := range map[string]bool{
		"hdfs://nn:8020/warehouse":      true,
		"hdfs://NN:8020/warehouse/a/b":  true,
		"hdfs://nn/warehouse/a":         true,
		"hdfs://nn:8020/warehousex/a":   false,
		"hdfs://nn:8021/warehouse/a":    false,
		"s3://nn:8020/warehouse/a":      false,
		"/warehouse/a":                  false,
		"hdfs://nn:8020/warehouse//a/b": true,
		"hdfs://nn:8020/":               false,
	} {
		if got := MustParse(in).Within(root); got != want {
			t.Errorf("%s within %s = %v, want %v", in, root, got, want)
		}
	}
	if !MustParse("s3a://b/any/key").Within(MustParse("s3://b/")) {
		t.Error("a key is not within its bucket's root")
	}
	if (Location{}).Within(Location{}) {
		t.Error("the zero Location is within itself")
	}
}

func TestRelAndAppend(t *testing.T) {
	for _, tt := range []struct{ loc, root, rel string }{
		{"hdfs://nn/w/db/t/f", "hdfs://nn:8020/w", "db/t/f"},
		{"hdfs://nn/w", "hdfs://nn:8020/w/", ""},
		{"hdfs://nn/w/x", "hdfs://nn/", "w/x"},
		{"file:/dr/a", "/", "dr/a"},
	} {
		rel, ok := MustParse(tt.loc).Rel(MustParse(tt.root))
		if !ok || rel != tt.rel {
			t.Errorf("Rel(%s, %s) = %q, %v; want %q", tt.loc, tt.root, rel, ok, tt.rel)
		}
	}
	if _, ok := MustParse("hdfs://nn/wx").Rel(MustParse("hdfs://nn/w")); ok {
		t.Error("Rel accepted a sibling sharing a name prefix")
	}

	// Append keeps the prefix as written, including an authority without
	// its port and upper case, and names the canonical join.
	for _, tt := range []struct{ prefix, rel, want string }{
		{"hdfs://ns1/", "db/t", "hdfs://ns1/db/t"},
		{"hdfs://ns1", "db/t", "hdfs://ns1/db/t"},
		{"hdfs://DR-NN/Warehouse/", "db/t", "hdfs://DR-NN/Warehouse/db/t"},
		{"s3a://bucket/w", "db/t/f", "s3a://bucket/w/db/t/f"},
		{"file:/dr/", "db", "file:/dr/db"},
		{"file:///dr", "db", "file:///dr/db"},
		{"/dr", "db", "/dr/db"},
		{"/", "db", "/db"},
		{"hdfs://ns1/w/", "", "hdfs://ns1/w"},
		{"hdfs://ns1/", "", "hdfs://ns1/"},
		{"file:///", "", "file:///"},
		{"/", "", "/"},
	} {
		got := Append(tt.prefix, tt.rel)
		if got != tt.want {
			t.Errorf("Append(%q, %q) = %q, want %q", tt.prefix, tt.rel, got, tt.want)
		}
		joined := MustParse(tt.prefix)
		if tt.rel != "" {
			joined.Path = strings.TrimSuffix(joined.Path, "/") + "/" + tt.rel
		}
		if MustParse(got) != joined {
			t.Errorf("Append(%q, %q) = %s, which is not %s in canonical form", tt.prefix, tt.rel, MustParse(got), joined)
		}
	}
}

func TestCanonicalAuthority(t *testing.T) {
	for _, tt := range []struct{ scheme, in, want string }{
		{"hdfs", "NS1", "ns1:8020"},
		{"hdfs", "dr-nn:8020", "dr-nn:8020"},
		{"hdfs", "dr-nn:9000", "dr-nn:9000"},
		{"s3", "Bucket", "bucket"},
	} {
		if got, err := CanonicalAuthority(tt.scheme, tt.in); err != nil || got != tt.want {
			t.Errorf("CanonicalAuthority(%s, %s) = %s, %v; want %s", tt.scheme, tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{"", "u@nn", "nn/x", "nn:x"} {
		if _, err := CanonicalAuthority("hdfs", in); err == nil {
			t.Errorf("CanonicalAuthority(hdfs, %q) succeeded", in)
		}
	}
}

func TestBelowSameHidden(t *testing.T) {
	for _, tt := range []struct {
		dir, loc, rel string
		ok            bool
	}{
		{"hdfs://nn:8020/w/", "hdfs://NN/w/db/f", "db/f", true},
		{"hdfs://nn/w", "hdfs://nn/w", "", false},    // the directory itself
		{"hdfs://nn/w", "hdfs://nn/wx/f", "", false}, // a sibling sharing a name prefix
		{"hdfs://nn/w", "hdfs://other/w/f", "", false},
		{"hdfs://nn/w", "hdfs://nn/w/../f", "", false}, // does not parse
	} {
		rel, ok := Below(tt.dir, tt.loc)
		if rel != tt.rel || ok != tt.ok {
			t.Errorf("Below(%s, %s) = %q, %v; want %q, %v", tt.dir, tt.loc, rel, ok, tt.rel, tt.ok)
		}
	}
	for _, tt := range []struct {
		a, b string
		same bool
	}{
		{"hdfs://NN/w/", "hdfs://nn:8020/w", true},
		{"s3a://b/k", "s3://b/k", true},
		{"hdfs://nn/w", "hdfs://nn/x", false},
		{"hdfs://nn/a/../b", "hdfs://nn/a/../b", true}, // unparsable: equal strings
		{"hdfs://nn/a/../b", "hdfs://nn/b", false},
	} {
		if got := Same(tt.a, tt.b); got != tt.same {
			t.Errorf("Same(%s, %s) = %v, want %v", tt.a, tt.b, got, tt.same)
		}
	}
	for _, tt := range []struct {
		rel    string
		hidden bool
	}{
		{"a/b/part-0", false},
		{"_SUCCESS", true},
		{"a/.hive-staging/f", true},
		{"a/_tmp/f", true},
		{"a_b/c.d", false},
	} {
		if got := Hidden(tt.rel); got != tt.hidden {
			t.Errorf("Hidden(%q) = %v, want %v", tt.rel, got, tt.hidden)
		}
	}
}
