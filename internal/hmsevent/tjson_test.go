package hmsevent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/hms"
	"github.com/hivedr/hivedr/schemas"
)

// These tests hold the TJSON reader (tjson.go) to Thrift's own: apache
// thrift's TJSONProtocol reading gohive's generated types, mapped to
// schemas types as Decode did before it had its own reader. Thrift is the
// reference here and only here.

// tjsonKind is which metastore struct an embedded text holds.
type tjsonKind byte

const (
	tjsonKindTable tjsonKind = iota
	tjsonKindPartition
	tjsonKindDatabase
	tjsonKindColStats
	tjsonKinds
)

func (k tjsonKind) String() string {
	return [...]string{"Table", "Partition", "Database", "ColumnStatistics"}[k]
}

// tjsonMessageFields maps the message fields that embed a metastore object
// to its kind.
var tjsonMessageFields = map[string]tjsonKind{
	"tableObjJson": tjsonKindTable, "tableObjBeforeJson": tjsonKindTable, "tableObjAfterJson": tjsonKindTable,
	"partitionListJson": tjsonKindPartition, "partitionObjBeforeJson": tjsonKindPartition,
	"partitionObjAfterJson": tjsonKindPartition, "ptnObjJson": tjsonKindPartition,
	"dbJson": tjsonKindDatabase, "dbObjBeforeJson": tjsonKindDatabase, "dbObjAfterJson": tjsonKindDatabase,
	"colStatsJson": tjsonKindColStats,
}

type tjsonText struct {
	name string
	kind tjsonKind
	text string
}

// tjsonFixtureTexts returns every embedded object in the fixtures.
func tjsonFixtureTexts(tb testing.TB) []tjsonText {
	tb.Helper()
	var out []tjsonText
	for _, f := range loadDecodeFixtures(tb) {
		msg, err := hms.MessageJSON(f.raw.MessageFormat, f.raw.Message)
		if err != nil {
			tb.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(msg, &m); err != nil {
			tb.Fatal(err)
		}
		for field, v := range m {
			kind, ok := tjsonMessageFields[field]
			if !ok {
				continue
			}
			switch v := v.(type) {
			case string:
				out = append(out, tjsonText{f.name + "/" + field, kind, v})
			case []any:
				for i, e := range v {
					s, _ := e.(string)
					out = append(out, tjsonText{fmt.Sprintf("%s/%s[%d]", f.name, field, i), kind, s})
				}
			}
		}
	}
	if len(out) == 0 {
		tb.Fatal("no embedded objects in the fixtures")
	}
	return out
}

// The reference: Thrift's reader and the mapping Decode used with it.

func tjsonRefRead(text string, obj thrift.TStruct) error {
	buf := &thrift.TMemoryBuffer{Buffer: bytes.NewBufferString(text)}
	return obj.Read(context.Background(), thrift.NewTJSONProtocol(buf))
}

func tjsonRefColumns(fs []*hive_metastore.FieldSchema) []schemas.Column {
	if len(fs) == 0 {
		return nil
	}
	out := make([]schemas.Column, 0, len(fs))
	for _, f := range fs {
		if f != nil {
			out = append(out, schemas.Column{Name: f.Name, Type: f.Type, Comment: f.Comment})
		}
	}
	return out
}

func tjsonRefStorage(sd *hive_metastore.StorageDescriptor) schemas.Storage {
	if sd == nil {
		return schemas.Storage{NumBuckets: -1}
	}
	s := schemas.Storage{InputFormat: sd.InputFormat, OutputFormat: sd.OutputFormat, Compressed: sd.Compressed,
		NumBuckets: sd.NumBuckets, BucketColumns: sd.BucketCols, Parameters: sd.Parameters}
	if sd.SerdeInfo != nil {
		s.SerdeLib = sd.SerdeInfo.SerializationLib
		s.SerdeParameters = sd.SerdeInfo.Parameters
	}
	return s
}

// tjsonRef reads text with Thrift into the values Decode uses.
func tjsonRef(kind tjsonKind, text string) (any, error) {
	switch kind {
	case tjsonKindTable:
		var t hive_metastore.Table
		if err := tjsonRefRead(text, &t); err != nil {
			return nil, err
		}
		out := &schemas.Table{Database: t.DbName, Name: t.TableName, Owner: t.Owner, TableType: t.TableType,
			PartitionKeys: tjsonRefColumns(t.PartitionKeys), Parameters: t.Parameters, Storage: tjsonRefStorage(t.Sd),
			ViewOriginalText: t.ViewOriginalText, ViewExpandedText: t.ViewExpandedText,
			CreateTime: int64(t.CreateTime), WriteID: t.WriteId, ThriftJSON: text}
		if t.Sd != nil {
			out.Location = t.Sd.Location
			out.Columns = tjsonRefColumns(t.Sd.Cols)
		}
		return out, nil
	case tjsonKindPartition:
		var p hive_metastore.Partition
		if err := tjsonRefRead(text, &p); err != nil {
			return nil, err
		}
		out := &schemas.Partition{Values: p.Values, Parameters: p.Parameters, CreateTime: int64(p.CreateTime),
			WriteID: p.WriteId, ThriftJSON: text}
		if p.Sd != nil {
			out.Location = p.Sd.Location
			out.Columns = tjsonRefColumns(p.Sd.Cols)
			st := tjsonRefStorage(p.Sd)
			out.Storage = &st
		}
		return out, nil
	case tjsonKindDatabase:
		var db hive_metastore.Database
		if err := tjsonRefRead(text, &db); err != nil {
			return nil, err
		}
		return &schemas.Database{Name: db.Name, Description: db.Description, Location: db.LocationUri,
			ManagedLocation: db.GetManagedLocationUri(), Owner: db.GetOwnerName(), Parameters: db.Parameters}, nil
	case tjsonKindColStats:
		var cs hive_metastore.ColumnStatistics
		if err := tjsonRefRead(text, &cs); err != nil {
			return nil, err
		}
		out := &tjsonColumnStats{}
		if cs.StatsDesc != nil {
			out.database, out.table = cs.StatsDesc.DbName, cs.StatsDesc.TableName
		}
		for _, o := range cs.StatsObj {
			if o != nil {
				out.columns = append(out.columns, o.ColName)
			}
		}
		return out, nil
	}
	panic("bad kind")
}

// tjsonMine reads text with the TJSON reader.
func tjsonMine(kind tjsonKind, text string) (any, error) {
	switch kind {
	case tjsonKindTable:
		return tjsonTable(text)
	case tjsonKindPartition:
		return tjsonPartition(text)
	case tjsonKindDatabase:
		return tjsonDatabase(text)
	case tjsonKindColStats:
		return tjsonColumnStatistics(text)
	}
	panic("bad kind")
}

// tjsonSkipped are the metastore structs the reader skips as plain TJSON
// inside each kind of object; Thrift reads them against their schema.
var tjsonSkipped = map[tjsonKind][]string{
	tjsonKindTable: {"ColumnStatistics", "CreationMetadata", "PrincipalPrivilegeSet", "PrivilegeGrantInfo",
		"SkewedInfo", "Order"},
	tjsonKindPartition: {"ColumnStatistics", "PrincipalPrivilegeSet", "PrivilegeGrantInfo", "SkewedInfo", "Order"},
	tjsonKindDatabase:  {"PrincipalPrivilegeSet", "PrivilegeGrantInfo"},
	tjsonKindColStats:  {"ColumnStatisticsData"},
}

// tjsonRefLaxer reports a Thrift error that the reader knowingly does not
// raise (see tjson.go): the text fails the schema of a sub-object Decode
// does not use and the reader skips (a required field missing, bad base64
// in a binary field, ...), though it is well-formed TJSON.
func tjsonRefLaxer(kind tjsonKind, err error) bool {
	for _, name := range tjsonSkipped[kind] {
		if strings.Contains(err.Error(), "*hive_metastore."+name+" error reading struct") {
			return true
		}
	}
	return false
}

// tjsonCompare reads text both ways. It fails tb when the reader accepts
// what Thrift rejects (bar tjsonRefLaxer) or gets other values, and
// reports whether the reader rejected what Thrift accepted.
func tjsonCompare(tb testing.TB, name string, kind tjsonKind, text string) (stricter bool) {
	tb.Helper()
	got, err := tjsonMine(kind, text)
	if err != nil {
		if _, refErr := tjsonRef(kind, text); refErr == nil {
			return true
		}
		return false
	}
	want, refErr := tjsonRef(kind, text)
	if refErr != nil {
		if !tjsonRefLaxer(kind, refErr) {
			tb.Errorf("%s: reader accepts %s that thrift rejects (%v):\n%q", name, kind, refErr, text)
		}
		return false
	}
	if !reflect.DeepEqual(got, want) {
		tb.Errorf("%s: %s reads as\n%#v\nthrift reads\n%#v\ntext %q", name, kind, got, want, text)
	}
	return false
}

// TestTJSONMatchesThrift reads every embedded object of every fixture
// both ways: both accept it and give the same values.
func TestTJSONMatchesThrift(t *testing.T) {
	for _, x := range tjsonFixtureTexts(t) {
		got, err := tjsonMine(x.kind, x.text)
		if err != nil {
			t.Errorf("%s: %v", x.name, err)
			continue
		}
		want, err := tjsonRef(x.kind, x.text)
		if err != nil {
			t.Fatalf("%s: thrift: %v", x.name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: reads as\n%#v\nthrift reads\n%#v", x.name, got, want)
		}
	}
}

// Random metastore objects, written by Thrift's own TJSONProtocol writer.

func tjsonRandString(r *rand.Rand) string {
	pieces := []string{"", "a", "orders", "hdfs://nn:8020/w/t", "\"", "\\", "/", "\n\t\r\b\f", "\x00\x01\x1f",
		"é", "日本", "😀", "\u2028", "<&>", "\xff\xfe", "\xed\xa0\x80", "}]{[,:", "NaN", "-1", "null"}
	var b strings.Builder
	for range r.IntN(4) {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

func tjsonRandStrings(r *rand.Rand) []string {
	if r.IntN(4) == 0 {
		return nil
	}
	out := make([]string, r.IntN(4))
	for i := range out {
		out[i] = tjsonRandString(r)
	}
	return out
}

func tjsonRandMap(r *rand.Rand) map[string]string {
	if r.IntN(4) == 0 {
		return nil
	}
	m := map[string]string{}
	for range r.IntN(4) {
		m[tjsonRandString(r)] = tjsonRandString(r)
	}
	return m
}

func tjsonRandI32(r *rand.Rand) int32 {
	return []int32{0, 1, -1, math.MaxInt32, math.MinInt32, r.Int32()}[r.IntN(6)]
}

func tjsonRandI64(r *rand.Rand) int64 {
	return []int64{0, -1, 12, math.MaxInt64, math.MinInt64, r.Int64()}[r.IntN(6)]
}

func tjsonRandDouble(r *rand.Rand) *float64 {
	v := []float64{0, -1.5, 1e300, math.NaN(), math.Inf(1), math.Inf(-1), r.Float64()}[r.IntN(7)]
	return &v
}

func tjsonRandOptString(r *rand.Rand) *string {
	if r.IntN(2) == 0 {
		return nil
	}
	s := tjsonRandString(r)
	return &s
}

func tjsonRandCols(r *rand.Rand) []*hive_metastore.FieldSchema {
	if r.IntN(4) == 0 {
		return nil
	}
	out := make([]*hive_metastore.FieldSchema, r.IntN(4))
	for i := range out {
		out[i] = &hive_metastore.FieldSchema{Name: tjsonRandString(r), Type: tjsonRandString(r), Comment: tjsonRandString(r)}
	}
	return out
}

func tjsonRandPrivileges(r *rand.Rand) *hive_metastore.PrincipalPrivilegeSet {
	if r.IntN(2) == 0 {
		return nil
	}
	grants := func() map[string][]*hive_metastore.PrivilegeGrantInfo {
		m := map[string][]*hive_metastore.PrivilegeGrantInfo{}
		for range r.IntN(3) {
			m[tjsonRandString(r)] = []*hive_metastore.PrivilegeGrantInfo{{Privilege: "ALL", CreateTime: tjsonRandI32(r),
				Grantor: tjsonRandString(r), GrantorType: hive_metastore.PrincipalType_ROLE, GrantOption: r.IntN(2) == 0}}
		}
		return m
	}
	return &hive_metastore.PrincipalPrivilegeSet{UserPrivileges: grants(), GroupPrivileges: grants(), RolePrivileges: grants()}
}

func tjsonRandStorage(r *rand.Rand) *hive_metastore.StorageDescriptor {
	if r.IntN(5) == 0 {
		return nil
	}
	sd := &hive_metastore.StorageDescriptor{Cols: tjsonRandCols(r), Location: tjsonRandString(r),
		InputFormat: tjsonRandString(r), OutputFormat: tjsonRandString(r), Compressed: r.IntN(2) == 0,
		NumBuckets: tjsonRandI32(r), BucketCols: tjsonRandStrings(r), Parameters: tjsonRandMap(r)}
	if r.IntN(4) != 0 {
		sd.SerdeInfo = &hive_metastore.SerDeInfo{Name: tjsonRandString(r), SerializationLib: tjsonRandString(r),
			Parameters: tjsonRandMap(r), Description: tjsonRandOptString(r)}
	}
	if r.IntN(2) == 0 {
		sd.SortCols = []*hive_metastore.Order{{Col: tjsonRandString(r), Order: tjsonRandI32(r)}}
	}
	if r.IntN(2) == 0 {
		sd.SkewedInfo = &hive_metastore.SkewedInfo{SkewedColNames: tjsonRandStrings(r),
			SkewedColValues: [][]string{tjsonRandStrings(r), {}}}
	}
	if r.IntN(2) == 0 {
		v := r.IntN(2) == 0
		sd.StoredAsSubDirectories = &v
	}
	return sd
}

func tjsonRandColStats(r *rand.Rand) *hive_metastore.ColumnStatistics {
	cs := &hive_metastore.ColumnStatistics{StatsDesc: &hive_metastore.ColumnStatisticsDesc{
		IsTblLevel: r.IntN(2) == 0, DbName: tjsonRandString(r), TableName: tjsonRandString(r),
		PartName: tjsonRandOptString(r)}, StatsObj: []*hive_metastore.ColumnStatisticsObj{}}
	if r.IntN(2) == 0 {
		v := tjsonRandI64(r)
		cs.StatsDesc.LastAnalyzed = &v
	}
	for range r.IntN(4) {
		data := &hive_metastore.ColumnStatisticsData{}
		switch r.IntN(3) {
		case 0:
			data.DoubleStats = &hive_metastore.DoubleColumnStatsData{LowValue: tjsonRandDouble(r),
				HighValue: tjsonRandDouble(r), NumNulls: tjsonRandI64(r), NumDVs: tjsonRandI64(r), BitVectors: []byte("\x00\xffhll")}
		case 1:
			lo := tjsonRandI64(r)
			data.LongStats = &hive_metastore.LongColumnStatsData{LowValue: &lo, NumNulls: 1, NumDVs: 2}
		default:
			data.BooleanStats = &hive_metastore.BooleanColumnStatsData{NumTrues: 1, NumFalses: 2, NumNulls: 3}
		}
		cs.StatsObj = append(cs.StatsObj, &hive_metastore.ColumnStatisticsObj{ColName: tjsonRandString(r),
			ColType: tjsonRandString(r), StatsData: data})
	}
	if r.IntN(2) == 0 {
		e := tjsonRandString(r)
		cs.Engine = &e
	}
	return cs
}

// tjsonRandom returns a random object of kind, written with TJSONProtocol.
func tjsonRandom(tb testing.TB, r *rand.Rand, kind tjsonKind) string {
	tb.Helper()
	var obj thrift.TStruct
	switch kind {
	case tjsonKindTable:
		t := &hive_metastore.Table{TableName: tjsonRandString(r), DbName: tjsonRandString(r), Owner: tjsonRandString(r),
			CreateTime: tjsonRandI32(r), LastAccessTime: tjsonRandI32(r), Sd: tjsonRandStorage(r),
			PartitionKeys: tjsonRandCols(r), Parameters: tjsonRandMap(r), ViewOriginalText: tjsonRandString(r),
			ViewExpandedText: tjsonRandString(r), TableType: tjsonRandString(r), Privileges: tjsonRandPrivileges(r),
			Temporary: r.IntN(2) == 0, CatName: tjsonRandOptString(r), OwnerType: hive_metastore.PrincipalType_GROUP,
			WriteId: tjsonRandI64(r), RequiredReadCapabilities: tjsonRandStrings(r)}
		if r.IntN(3) == 0 {
			t.CreationMetadata = &hive_metastore.CreationMetadata{CatName: "hive", DbName: "d", TblName: "t",
				TablesUsed: []string{"d.a", "d.b"}, ValidTxnList: tjsonRandOptString(r)}
		}
		if r.IntN(3) == 0 {
			t.ColStats = tjsonRandColStats(r)
		}
		if r.IntN(3) == 0 {
			a := int8(r.IntN(256) - 128)
			t.AccessType = &a
		}
		obj = t
	case tjsonKindPartition:
		obj = &hive_metastore.Partition{Values: tjsonRandStrings(r), DbName: tjsonRandString(r),
			TableName: tjsonRandString(r), CreateTime: tjsonRandI32(r), Sd: tjsonRandStorage(r),
			Parameters: tjsonRandMap(r), Privileges: tjsonRandPrivileges(r), CatName: tjsonRandOptString(r),
			WriteId: tjsonRandI64(r)}
	case tjsonKindDatabase:
		db := &hive_metastore.Database{Name: tjsonRandString(r), Description: tjsonRandString(r),
			LocationUri: tjsonRandString(r), Parameters: tjsonRandMap(r), Privileges: tjsonRandPrivileges(r),
			OwnerName: tjsonRandOptString(r), CatalogName: tjsonRandOptString(r),
			ManagedLocationUri: tjsonRandOptString(r)}
		if r.IntN(2) == 0 {
			c := tjsonRandI32(r)
			db.CreateTime = &c
		}
		obj = db
	case tjsonKindColStats:
		obj = tjsonRandColStats(r)
	}
	return tjsonOf(tb, obj)
}

// TestTJSONRandomObjects reads random objects written by Thrift's own
// writer (every string oddity, extreme integers, NaN and infinities,
// optional fields present and not, nested sub-objects to skip): both
// readers accept them and give the same values.
func TestTJSONRandomObjects(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		kind := tjsonKind(i % int(tjsonKinds))
		text := tjsonRandom(t, r, kind)
		if _, err := tjsonMine(kind, text); err != nil {
			t.Fatalf("random %s %d: %v\n%q", kind, i, err, text)
		}
		tjsonCompare(t, fmt.Sprintf("random %d", i), kind, text)
	}
}

// tjsonUnknownFields are fields no metastore struct has, of every type,
// as TJSONProtocol writes them, for the reader to skip.
var tjsonUnknownFields = []string{
	`"900":{"tf":1}`, `"901":{"i8":-128}`, `"902":{"i16":32767}`, `"903":{"i32":-2147483648}`,
	`"904":{"i64":9223372036854775807}`, `"905":{"dbl":-1.5e-7}`, `"906":{"dbl":"NaN"}`,
	`"907":{"dbl":"-Infinity"}`, `"908":{"str":"x\"}]\\\u00e9"}`, `"909":{"uid":"00112233-4455-6677-8899-aabbccddeeff"}`,
	`"910":{"rec":{}}`, `"911":{"rec":{"1":{"rec":{"2":{"lst":["rec",1,{"3":{"str":"deep"}}]}}}}}`,
	`"912":{"lst":["str",0]}`, `"913":{"set":["i32",2,1,2]}`, `"914":{"map":["i32","dbl",2,{"1":0.5,"-2":"Infinity"}]}`,
	`"915":{"map":["str","lst",1,{"k":["map",1,["tf","rec",1,{"1":{}}]]}]}`,
	`"916":{"map":["dbl","uid",1,{"1.5e3":"00112233-4455-6677-8899-aabbccddeeff"}]}`,
	`"-3":{"str":"negative id"}`, `"1":{"i64":5}`, `"7":{"str":"sd of the wrong type"}`,
	`"917":{"lst":["lst",2,["i64",1,0],["i64",0]]}`,
}

// tjsonNested returns a field nested depth containers deep.
func tjsonNested(depth int) string {
	return `"999":{"lst":` + strings.Repeat(`["lst",1,`, depth-1) + `["i8",0]` + strings.Repeat(`]`, depth-1) + `}`
}

// tjsonInsertField adds field to text, as its first or last field.
func tjsonInsertField(text, field string, first bool) string {
	if first {
		if text == "{}" {
			return "{" + field + "}"
		}
		return "{" + field + "," + text[1:]
	}
	if text == "{}" {
		return "{" + field + "}"
	}
	return text[:len(text)-1] + "," + field + "}"
}

// TestTJSONSkipsUnknownFields adds unknown fields of every type and
// nesting, and used fields of the wrong type, to every fixture object:
// both readers skip them alike.
func TestTJSONSkipsUnknownFields(t *testing.T) {
	texts := tjsonFixtureTexts(t)
	for _, x := range texts {
		for i, f := range tjsonUnknownFields {
			text := tjsonInsertField(x.text, f, i%2 == 0)
			if _, err := tjsonMine(x.kind, text); err != nil {
				t.Errorf("%s + %s: %v", x.name, f, err)
			}
			tjsonCompare(t, x.name+" + "+f, x.kind, text)
		}
	}
	// Nesting: Thrift skips up to 64 levels below a field; so does the
	// reader, and both reject one more.
	x := texts[0]
	for _, depth := range []int{63, 64} {
		text := tjsonInsertField(x.text, tjsonNested(depth), false)
		if _, err := tjsonMine(x.kind, text); err != nil {
			t.Errorf("depth %d: %v", depth, err)
		}
		tjsonCompare(t, fmt.Sprintf("depth %d", depth), x.kind, text)
	}
	text := tjsonInsertField(x.text, tjsonNested(65), false)
	if _, err := tjsonMine(x.kind, text); err == nil {
		t.Error("depth 65 accepted")
	}
	if _, err := tjsonRef(x.kind, text); err == nil {
		t.Error("thrift accepts depth 65")
	}
}

// TestTJSONRejectsMalformed lists inputs the reader must reject.
func TestTJSONRejectsMalformed(t *testing.T) {
	for _, text := range []string{
		``, `{`, `}`, `[1,2,3]`, `null`, `{"1":{"str":`, `{"1":{"str":"a"}`, `{"1":{"str":"a"}}x`,
		`{ "1":{"str":"a"}}`, `{"1":{"str":"a"},}`, `{"1":{"str":"a"}"2":{"str":"b"}}`,
		`{"1":{"str":"a\x01"}}`, `{"1":{"str":"\q"}}`, `{"1":{"str":"\u12"}}`, `{"1":{"str":null}}`,
		`{"1":{"xyz":1}}`, `{"1":{"i32":1}`, `{"4":{"i32":2147483648}}`, `{"4":{"i32":1.5}}`, `{"4":{"i32":"1"}}`,
		`{"4":{"i32":01}}`, `{"4":{"i32":+1}}`, `{"4":{"i32":-}}`, `{"19":{"i64":9223372036854775808}}`,
		`{"70000":{"str":"a"}}`, `{"1.0":{"str":"a"}}`, `{1:{"str":"a"}}`,
		`{"8":{"lst":["rec",2,{}]}}`, `{"8":{"lst":["rec",1,{},{}]}}`, `{"8":{"lst":["rec",-1]}}`,
		`{"8":{"lst":["str",1,"a"]}}`, `{"9":{"map":["str","str",1,{}]}}`, `{"9":{"map":["str","str",0,{"a":"b"}]}}`,
		`{"9":{"map":["str","i32",1,{"a":1}]}}`, `{"9":{"map":["str","str",1,{"a":"b"}}}`,
		`{"900":{"tf":2}}`, `{"900":{"dbl":"1.5"}}`, `{"900":{"dbl":1.}}`, `{"900":{"uid":"0011"}}`,
		`{"900":{"map":["rec","str",1,{"a":"b"}]}}`, `{"900":{"map":["i32","str",1,{"x":"a"}]}}`,
		`{"900":{"set":["str",1,1]}}`, `{"900":{"rec":null}}`, `{"7":{"rec":{"5":{"tf":1}}`,
	} {
		if _, err := tjsonTable(text); err == nil {
			t.Errorf("accepted %q", text)
		}
		tjsonCompare(t, "malformed", tjsonKindTable, text)
	}
	// Column statistics keep Thrift's required fields.
	for _, text := range []string{
		`{"1":{"rec":{"1":{"tf":1},"2":{"str":"d"},"3":{"str":"t"}}}}`,
		`{"2":{"lst":["rec",0]}}`,
		`{"1":{"rec":{"1":{"tf":1},"2":{"str":"d"}}},"2":{"lst":["rec",0]}}`,
		`{"1":{"rec":{"1":{"tf":1},"2":{"str":"d"},"3":{"str":"t"}}},"2":{"lst":["rec",1,{"1":{"str":"c"},"2":{"str":"int"}}]}}`,
	} {
		if _, err := tjsonColumnStatistics(text); err == nil {
			t.Errorf("column statistics accepted %q", text)
		}
		if _, err := tjsonRef(tjsonKindColStats, text); err == nil {
			t.Errorf("thrift accepts column statistics %q", text)
		}
	}
}

// tjsonMutate changes text at one random place.
func tjsonMutate(r *rand.Rand, text string) string {
	const alphabet = "{}[]\":,\\ 0123456789-+.eEtfnulrsaxyz\x00\xff"
	if text == "" {
		return string(alphabet[r.IntN(len(alphabet))])
	}
	i := r.IntN(len(text))
	c := alphabet[r.IntN(len(alphabet))]
	switch r.IntN(4) {
	case 0:
		return text[:i] + string(c) + text[i+1:]
	case 1:
		return text[:i] + string(c) + text[i:]
	case 2:
		return text[:i] + text[i+1:]
	default: // move a token-sized chunk
		j := min(len(text), i+1+r.IntN(8))
		k := r.IntN(len(text) + 1)
		chunk := text[i:j]
		rest := text[:i] + text[j:]
		k = min(k, len(rest))
		return rest[:k] + chunk + rest[k:]
	}
}

// TestTJSONMutated mutates fixture and random objects: whatever the
// reader accepts, Thrift accepts with the same values. Inputs only Thrift
// accepts are counted: those are where Thrift makes up a value from
// malformed text.
func TestTJSONMutated(t *testing.T) {
	texts := tjsonFixtureTexts(t)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 40 {
		kind := tjsonKind(i % int(tjsonKinds))
		texts = append(texts, tjsonText{fmt.Sprintf("random %d", i), kind, tjsonRandom(t, r, kind)})
	}
	n, accepted, stricter := 0, 0, 0
	var examples []string
	for _, x := range texts {
		for range 300 {
			text := tjsonMutate(r, x.text)
			if r.IntN(3) == 0 {
				text = tjsonMutate(r, text)
			}
			n++
			if _, err := tjsonMine(x.kind, text); err == nil {
				accepted++
			}
			if tjsonCompare(t, x.name+" mutated", x.kind, text) {
				stricter++
				if len(examples) < 10 {
					examples = append(examples, text)
				}
			}
		}
	}
	t.Logf("%d mutations: %d accepted by both; %d rejected by the reader but read by thrift, e.g.:", n, accepted, stricter)
	for _, e := range examples {
		t.Logf("  %q", e)
	}
}

// FuzzTJSON checks the reader on any input: it never panics, and what it
// accepts Thrift accepts with the same values.
//
//	go test ./producer/ -run '^$' -fuzz FuzzTJSON -fuzztime 60s
func FuzzTJSON(f *testing.F) {
	for _, x := range tjsonFixtureTexts(f) {
		f.Add(byte(x.kind), x.text)
	}
	for _, field := range tjsonUnknownFields {
		f.Add(byte(tjsonKindTable), "{"+field+"}")
	}
	f.Fuzz(func(t *testing.T, k byte, text string) {
		kind := tjsonKind(k % byte(tjsonKinds))
		got, err := tjsonMine(kind, text)
		if err != nil {
			if got != nil && !reflect.ValueOf(got).IsNil() {
				t.Fatalf("value %v with error %v", got, err)
			}
			return
		}
		tjsonCompare(t, "fuzz", kind, text)
	})
}

// tjsonOf serializes a Thrift object as the metastore's log does.
func tjsonOf(t testing.TB, v thrift.TStruct) string {
	t.Helper()
	ser := thrift.NewTSerializer()
	ser.Protocol = thrift.NewTJSONProtocolFactory().GetProtocol(ser.Transport)
	s, err := ser.WriteString(context.Background(), v)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
