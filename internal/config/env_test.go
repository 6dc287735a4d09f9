package config

import (
	"strings"
	"testing"
)

// TestProdConfigEnvAfterYAML: ${NAME} is expanded in values after YAML has parsed the
// file, so what a variable holds is taken whole.
func TestProdConfigEnvAfterYAML(t *testing.T) {
	env := map[string]string{
		"PW":       "pa ss #word: 'x\" \n- y", // a comment marker, quotes, a newline, ": "
		"AHEAD":    "250",
		"EMPTY":    "",
		"USER":     "alice",
		"SECTION":  "kafka",
		"MECHNAME": "SCRAM-SHA-512",
	}
	lookup := func(n string) (string, bool) { v, ok := env[n]; return v, ok }
	c, err := parse([]byte(`
# a comment naming ${NOT_SET} is not expanded
kafka:
  sasl:
    mechanism: ${MECHNAME}
    user: "${USER}${EMPTY}"
    password: ${PW}
applier:
  look_ahead: ${AHEAD}
replication:
  databases:
    - name: sales
      include_tables: ["^fact_.*$", "$x", "$$", "${lower}"]
`), lookup)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Kafka.SASL.Password; got != env["PW"] {
		t.Errorf("kafka.sasl.password = %q, want the variable's value whole, %q", got, env["PW"])
	}
	if c.Kafka.SASL.User != "alice" || c.Kafka.SASL.Mechanism != "SCRAM-SHA-512" {
		t.Errorf("user %q mechanism %q, want alice and SCRAM-SHA-512", c.Kafka.SASL.User, c.Kafka.SASL.Mechanism)
	}
	if got := c.Replication.Databases[0].IncludeTables; strings.Join(got, " ") != "^fact_.*$ $x $$ ${lower}" {
		t.Errorf("include_tables = %q, want the $ signs that are no ${NAME} as written", got)
	}
	if c.Applier.LookAhead != 250 {
		t.Errorf("applier.look_ahead = %d, want 250 (a plain value is typed by what it expands to)", c.Applier.LookAhead)
	}

	for _, bad := range []struct{ in, want string }{
		{"applier:\n  look_ahead: 1\nkafka:\n  sasl:\n    password: ${NOPE}\n", "${NOPE}: environment variable not set (line 5)"},
		// A quoted value stays a string: not a number.
		{"applier:\n  look_ahead: \"${AHEAD}\"\n", "look_ahead"},
		// Keys are not expanded.
		{"${SECTION}:\n  topic_prefix: x\n", "${SECTION}"},
	} {
		if _, err := parse([]byte(bad.in), lookup); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: error %v, want one naming %q", bad.in, err, bad.want)
		}
	}
}
