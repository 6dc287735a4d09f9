package schemas

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
)

// PlainTimeLayout is how Plain writes a timestamp-millis: RFC 3339 in UTC
// with milliseconds, e.g. 2026-03-14T15:09:26.535Z.
const PlainTimeLayout = "2006-01-02T15:04:05.000Z07:00"

// Plain converts a record (*Event, *Heartbeat, ...) into the form a
// generic Avro reader gives its readers, ready for encoding/json: records
// are maps keyed by the schema's field names (event_id, not EventID),
// a union's value stands without its branch name (null, or the value),
// enums are their symbols and timestamp-millis fields are strings in
// PlainTimeLayout. It follows the record's current schema, so a record
// decoded from an older writer shows the current fields with their
// defaults.
func Plain(v any) (map[string]any, error) {
	name, native, err := ToNative(v)
	if err != nil {
		return nil, err
	}
	idx, err := namedTypes()
	if err != nil {
		return nil, err
	}
	def, ok := idx[name]
	if !ok {
		return nil, fmt.Errorf("plain: no schema named %s", name)
	}
	out, err := idx.plain(def, "", native)
	if err != nil {
		return nil, fmt.Errorf("plain %s: %w", name, err)
	}
	return out.(map[string]any), nil
}

// typeIndex maps every named type of the current schemas (records and
// enums, by full name) to its JSON definition.
type typeIndex map[string]map[string]any

var namedTypes = sync.OnceValues(func() (typeIndex, error) {
	all, err := Schemas()
	if err != nil {
		return nil, err
	}
	idx := typeIndex{}
	for _, s := range all {
		var top any
		if err := json.Unmarshal([]byte(s.Text), &top); err != nil {
			return nil, fmt.Errorf("schema %s: %w", s.File, err)
		}
		idx.collect(top, "")
	}
	return idx, nil
})

// fullName is a type's full name within namespace ns.
func fullName(name, ns string) string {
	if strings.Contains(name, ".") || ns == "" {
		return name
	}
	return ns + "." + name
}

// collect indexes the named types in schema s, defined in namespace ns.
func (idx typeIndex) collect(s any, ns string) {
	switch t := s.(type) {
	case []any:
		for _, b := range t {
			idx.collect(b, ns)
		}
	case map[string]any:
		if n, _ := t["namespace"].(string); n != "" {
			ns = n
		}
		switch t["type"] {
		case "record", "enum", "fixed":
			name := fullName(t["name"].(string), ns)
			t["_full"] = name
			idx[name] = t
			if i := strings.LastIndex(name, "."); i > 0 {
				ns = name[:i]
			}
		}
		t["_ns"] = ns
		if fs, ok := t["fields"].([]any); ok {
			for _, f := range fs {
				idx.collect(f.(map[string]any)["type"], ns)
			}
		}
		if it, ok := t["items"]; ok {
			idx.collect(it, ns)
		}
		if vs, ok := t["values"]; ok {
			idx.collect(vs, ns)
		}
		if ty, ok := t["type"].([]any); ok {
			idx.collect(ty, ns)
		} else if ty, ok := t["type"].(map[string]any); ok {
			idx.collect(ty, ns)
		}
	}
}

// resolve returns the definition of a type reference: a named type's
// definition, or s itself.
func (idx typeIndex) resolve(s any, ns string) any {
	if name, ok := s.(string); ok {
		if def, ok := idx[fullName(name, ns)]; ok {
			return def
		}
		if def, ok := idx[name]; ok {
			return def
		}
	}
	return s
}

// branchName is the name goavro keys a union's value with for the
// branch schema s.
func branchName(s any) string {
	switch t := s.(type) {
	case string:
		return t
	case map[string]any:
		if full, ok := t["_full"].(string); ok {
			return full
		}
		if ty, ok := t["type"].(string); ok {
			return ty
		}
	}
	return ""
}

// plain converts native value v of schema s, which is in namespace ns.
func (idx typeIndex) plain(s any, ns string, v any) (any, error) {
	switch t := s.(type) {
	case []any: // union
		if v == nil {
			return nil, nil
		}
		m, ok := v.(map[string]any)
		if !ok || len(m) != 1 {
			return nil, fmt.Errorf("union value %T is not one branch", v)
		}
		for key, val := range m {
			for _, b := range t {
				if b = idx.resolve(b, ns); branchName(b) == key {
					return idx.plain(b, ns, val)
				}
			}
			return nil, fmt.Errorf("union has no branch %s", key)
		}
	case string:
		if def, ok := idx.resolve(t, ns).(map[string]any); ok {
			return idx.plain(def, ns, v)
		}
		return v, nil
	case map[string]any:
		if n, ok := t["_ns"].(string); ok {
			ns = n
		}
		if lt, _ := t["logicalType"].(string); lt == "timestamp-millis" {
			return plainTime(v)
		}
		switch t["type"] {
		case "record":
			m, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("record %v: value %T", t["_full"], v)
			}
			out := make(map[string]any, len(m))
			for _, f := range t["fields"].([]any) {
				fd := f.(map[string]any)
				name := fd["name"].(string)
				pv, err := idx.plain(fd["type"], ns, m[name])
				if err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
				out[name] = pv
			}
			return out, nil
		case "array":
			a, _ := v.([]any)
			out := make([]any, len(a))
			for i, e := range a {
				pe, err := idx.plain(t["items"], ns, e)
				if err != nil {
					return nil, fmt.Errorf("[%d]: %w", i, err)
				}
				out[i] = pe
			}
			return out, nil
		case "map":
			m, _ := v.(map[string]any)
			out := make(map[string]any, len(m))
			for k, e := range m {
				pe, err := idx.plain(t["values"], ns, e)
				if err != nil {
					return nil, fmt.Errorf("[%q]: %w", k, err)
				}
				out[k] = pe
			}
			return out, nil
		case "enum":
			return v, nil
		}
		if ty, ok := t["type"]; ok {
			return idx.plain(ty, ns, v)
		}
	}
	return nil, fmt.Errorf("unsupported schema %v", s)
}

// plainTime formats a timestamp-millis value (milliseconds or time.Time).
func plainTime(v any) (any, error) {
	switch x := v.(type) {
	case int64:
		return time.UnixMilli(x).UTC().Format(PlainTimeLayout), nil
	case time.Time:
		return x.UTC().Format(PlainTimeLayout), nil
	}
	return nil, fmt.Errorf("timestamp value %T", v)
}
