package location

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct{ in, want, err string }{
		{in: "hdfs://NN:8020/w/t/dt=10%3A00/f", want: "hdfs://nn:8020/w/t/dt=10%3A00/f"},
		{in: "s3://Bucket/a//b/", want: "s3://bucket/a/b"},
		{in: "file:///tmp/x", want: "/tmp/x"},
		{in: "/local/p", want: "/local/p"},
		{in: "hdfs://nn/a?b", err: "query"},
		{in: "hdfs://nn/a#b", err: "query"},
		{in: "hdfs://u@nn/a", err: "user"},
		{in: "://nn/a", err: "scheme"},
		{in: "hdfs://nn/a/../b", err: `".."`},
		{in: "hdfs://nn/a/./b", err: `"."`},
		{in: "rel/path", err: "not absolute"},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), tt.in) {
				t.Errorf("Parse(%q) err = %v, want it to name the location and say %s", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got.String() != tt.want {
			t.Errorf("Parse(%q) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
}

func TestWithin(t *testing.T) {
	root, _ := Parse("hdfs://nn:8020/warehouse")
	for in, want := range map[string]bool{
		"hdfs://nn:8020/warehouse":      true,
		"hdfs://NN:8020/warehouse/a/b":  true,
		"hdfs://nn:8020/warehousex/a":   false,
		"hdfs://nn:8021/warehouse/a":    false,
		"s3://nn:8020/warehouse/a":      false,
		"/warehouse/a":                  false,
		"hdfs://nn:8020/warehouse//a/b": true,
	} {
		l, err := Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := l.Within(root); got != want {
			t.Errorf("%s within %s = %v, want %v", in, root, got, want)
		}
	}
}
