package config

import (
	"fmt"
	"reflect"
	"strings"
)

// FillZero sets *v to the default of the configuration key key (its value
// in the one table of defaults, fileDefaults: what a file that omits the
// key gets) when *v is the zero value. A role's New calls it for each
// tuning field its caller left zero, so a role built in code (a test, a
// tool) runs with the values a configuration file gives, and no role
// keeps defaults of its own. A duration key fills a time.Duration.
//
// It panics when key names no key whose value is a T: the call is wrong,
// whatever the configuration.
func FillZero[T comparable](v *T, key string) {
	var zero T
	if *v != zero {
		return
	}
	d := lookup(key)
	if d.Type() == durationType {
		d = d.Field(0) // the time.Duration
	}
	def, ok := d.Interface().(T)
	if !ok {
		panic(fmt.Sprintf("config: FillZero: %s is a %s, not a %T", key, d.Type(), zero))
	}
	*v = def
}

// lookup returns the default of the key at the dotted path key; it
// panics when there is none.
func lookup(key string) reflect.Value {
	v := reflect.ValueOf(fileDefaults()).Elem()
	for name := range strings.SplitSeq(key, ".") {
		f, ok := fieldByKey(v.Type(), name)
		if !ok || v.Kind() != reflect.Struct {
			panic(fmt.Sprintf("config: FillZero: no key %s", key))
		}
		v = v.FieldByIndex(f.Index)
	}
	return v
}

// fieldByKey returns the field of struct type t whose YAML key is name.
func fieldByKey(t reflect.Type, name string) (reflect.StructField, bool) {
	if t.Kind() != reflect.Struct {
		return reflect.StructField{}, false
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if k, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); k == name && f.IsExported() {
			return f, true
		}
	}
	return reflect.StructField{}, false
}
