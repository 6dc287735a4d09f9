package hmslog

import (
	"context"
	"strings"
	"testing"

	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/hms"
)

// TestOpen: each source.kind gets its reader, without connecting; a
// DSN that does not parse is an error naming its key.
func TestOpen(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []string{config.SourceThrift, ""} {
		s, err := Open(ctx, config.Source{Kind: kind, Metastore: "127.0.0.1:1"}, hms.Options{})
		if err != nil {
			t.Fatalf("kind %q: %v", kind, err)
		}
		if ts, ok := s.(*ThriftSource); !ok || ts.addr != "127.0.0.1:1" {
			t.Errorf("kind %q: %T %+v, want a ThriftSource for 127.0.0.1:1", kind, s, s)
		}
		s.Close()
	}
	s, err := Open(ctx, config.Source{Kind: config.SourcePostgres, PostgresDSN: "postgres://hive:s3cret@127.0.0.1:1/metastore"}, hms.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ps, ok := s.(*PostgresSource); !ok || ps.dsn != "postgres://hive:***@127.0.0.1:1/metastore" {
		t.Errorf("postgres: %T %+v, want a PostgresSource with the DSN's password hidden", s, s)
	}
	s.Close()
	if _, err := Open(ctx, config.Source{Kind: config.SourcePostgres, PostgresDSN: "postgres://h:x@[::1"}, hms.Options{}); err == nil ||
		!strings.HasPrefix(err.Error(), "source.postgres_dsn: ") {
		t.Errorf("bad DSN: %v; want an error naming source.postgres_dsn", err)
	}
	if _, err := Open(ctx, config.Source{Kind: "mysql"}, hms.Options{}); err == nil || !strings.Contains(err.Error(), `source.kind: "mysql"`) {
		t.Errorf("kind mysql: %v", err)
	}
}

func TestRedactDSN(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://hive:pw@db:5432/metastore":   "postgres://hive:***@db:5432/metastore",
		"postgres://hive@db/metastore":           "postgres://hive@db/metastore",
		"postgres://db/metastore":                "postgres://db/metastore",
		"postgres://hive:p@ss:w@rd@db/m":         "postgres://hive:***@db/m",
		"host=db user=hive password=pw dbname=m": "host=db user=hive password=*** dbname=m",
	} {
		if got := redactDSN(in); got != want {
			t.Errorf("redactDSN(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestProdDSNMasked: a libpq DSN's password, however the DSN spells it
// (spaces around the =, quoted), is masked where the DSN is shown (the
// effective configuration `hivedr config check` prints) and in the error
// naming a DSN pgx cannot parse.
func TestProdDSNMasked(t *testing.T) {
	for _, dsn := range []string{
		"host=db password = hunter2 sslmode=bogus",
		"host=db password\t=\t'hunter2' sslmode=bogus",
		"host=db password='hunter2' sslmode=bogus",
		"postgres://hive:hunter2@db/m?sslmode=bogus",
	} {
		var c config.Config
		c.Source.PostgresDSN = dsn
		shown, err := c.MaskedYAML()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(shown), "hunter2") || !strings.Contains(string(shown), "***") {
			t.Errorf("%q: the configuration shows the password or does not mask it:\n%s", dsn, shown)
		}
		_, err = NewPostgresSource(context.Background(), dsn)
		if err == nil {
			t.Fatalf("%q: no error", dsn)
		}
		if strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "***") {
			t.Errorf("%q: error %q shows the password or does not mask it", dsn, err)
		}
	}
}
