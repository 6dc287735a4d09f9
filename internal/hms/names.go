package hms

import (
	"fmt"
	"strings"

	"github.com/beltran/gohive/hive_metastore"
)

// PartitionName is the metastore's name of a partition,
// k1=v1/k2=v2, with the escaping Hive applies to path names.
func PartitionName(keys []*hive_metastore.FieldSchema, values []string) string {
	var b strings.Builder
	for i, v := range values {
		if i > 0 {
			b.WriteByte('/')
		}
		k := ""
		if i < len(keys) {
			k = keys[i].Name
		}
		b.WriteString(escapePathName(strings.ToLower(k)))
		b.WriteByte('=')
		if v == "" {
			v = "__HIVE_DEFAULT_PARTITION__"
		}
		b.WriteString(escapePathName(v))
	}
	return b.String()
}

// escapePathName escapes the characters Hive's FileUtils.escapePathName
// escapes, as %XX.
func escapePathName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f || strings.IndexByte("\"#%'*/:=?\\{[]^", c) >= 0 {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
