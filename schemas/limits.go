package schemas

import "github.com/linkedin/goavro/v2"

// maxAvroBlockCount bounds the item count of one Avro array or map block
// that goavro accepts when decoding. goavro sizes the Go map or slice by
// the count the record claims before reading any item, so with its default
// (2^31-1) a six-byte record off a topic could ask for gigabytes and take
// a daemon down (found by FuzzDecode; kept in testdata/fuzz). Our writer
// puts a whole array in one block; a million items is far beyond any
// record Kafka carries (a file reference alone takes tens of bytes), and
// preallocating that many costs tens of megabytes at worst.
const maxAvroBlockCount = 1 << 20

// goavro keeps the limit in a package variable: every codec in the process
// shares it, and hivedr's codecs are all made here.
func init() { goavro.MaxBlockCount = maxAvroBlockCount }
