package config

import "testing"

func TestExpandEnv(t *testing.T) {
	env := map[string]string{"S3_SECRET": "s3cr3t", "EMPTY": ""}
	lookup := func(n string) (string, bool) { v, ok := env[n]; return v, ok }
	cases := []struct{ in, want, err string }{
		{in: `secret_key: "${S3_SECRET}"`, want: `secret_key: "s3cr3t"`},
		{in: `a: ${EMPTY}x`, want: `a: x`},
		{in: `include_tables: ["^fact_.*$", "$x", "$$", "${lower}"]`, want: `include_tables: ["^fact_.*$", "$x", "$$", "${lower}"]`},
		{in: "a: 1\nb: ${NOPE}\n", err: "${NOPE}: environment variable not set (line 2)"},
	}
	for _, c := range cases {
		got, err := expandEnv([]byte(c.in), lookup)
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("%q: error %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || string(got) != c.want {
			t.Errorf("%q: %q %v, want %q", c.in, got, err, c.want)
		}
	}
}
