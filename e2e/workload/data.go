package workload

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/hms"
)

// fieldSep and the other text-format details are those of Hive's default
// LazySimpleSerDe: fields separated by ^A, lines by \n, NULL written \N.
const (
	fieldSep = "\x01"
	nullText = `\N`
)

// parseColumns turns "name type" specs into field schemas. A spec without
// a type is a string column (the usual partition key).
func parseColumns(specs []string) ([]*hive_metastore.FieldSchema, error) {
	var fs []*hive_metastore.FieldSchema
	for _, s := range specs {
		name, typ, _ := strings.Cut(strings.TrimSpace(s), " ")
		typ = strings.TrimSpace(typ)
		if name == "" {
			return nil, fmt.Errorf("column %q: no name", s)
		}
		if typ == "" {
			typ = "string"
		}
		fs = append(fs, &hive_metastore.FieldSchema{Name: strings.ToLower(name), Type: strings.ToLower(typ)})
	}
	return fs, nil
}

// textRows returns n rows of text-format data for the columns, with values
// that parse as their types.
func textRows(rng *rand.Rand, cols []*hive_metastore.FieldSchema, n int) []byte {
	var b strings.Builder
	for i := 0; i < n; i++ {
		for j, c := range cols {
			if j > 0 {
				b.WriteString(fieldSep)
			}
			b.WriteString(value(rng, c.Type, i))
		}
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

var words = []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"}

// value is one field of row i of a column of type typ.
func value(rng *rand.Rand, typ string, i int) string {
	base, _, _ := strings.Cut(typ, "(")
	switch base {
	case "tinyint":
		return fmt.Sprint(rng.IntN(128))
	case "smallint", "int", "integer", "bigint":
		return fmt.Sprint(i*1000 + rng.IntN(1000))
	case "float", "double", "decimal", "numeric":
		return fmt.Sprintf("%d.%02d", rng.IntN(100000), rng.IntN(100))
	case "boolean":
		return fmt.Sprint(rng.IntN(2) == 1)
	case "date":
		return fmt.Sprintf("2026-%02d-%02d", 1+rng.IntN(12), 1+rng.IntN(28))
	case "timestamp":
		return fmt.Sprintf("2026-%02d-%02d %02d:%02d:%02d", 1+rng.IntN(12), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60))
	case "string", "varchar", "char":
		return fmt.Sprintf("%s-%d", words[rng.IntN(len(words))], rng.IntN(1_000_000))
	}
	return nullText
}

// partitionName returns the name Hive gives the partition with these keys
// and values, "k1=v1/k2=v2", escaped as Hive's FileUtils.escapePathName
// escapes directory names (applier.PartitionName), refusing what Hive
// refuses.
func partitionName(keys []*hive_metastore.FieldSchema, vals []string) (string, error) {
	if len(keys) != len(vals) {
		return "", fmt.Errorf("%d partition values %v for %d partition keys", len(vals), vals, len(keys))
	}
	for i, k := range keys {
		if vals[i] == "" {
			return "", fmt.Errorf("partition key %s: empty value", k.Name)
		}
	}
	return hms.PartitionName(keys, vals), nil
}
