package iceberg

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/parquet-go/parquet-go"
)

// RewritePositionDeletes is the position delete file b (Parquet) with
// every row's file_path moved by m: the same schema (with its Iceberg
// field IDs), compression and key/value metadata, the rows sorted by
// (file_path, pos) as the specification requires of position deletes.
func RewritePositionDeletes(b []byte, m PathMap) ([]byte, error) {
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, fmt.Errorf("position delete file: %w", err)
	}
	schema := f.Schema()
	pathCol, posCol := -1, -1
	for i, leaf := range schema.Columns() {
		if len(leaf) != 1 {
			continue // the optional row column's nested fields
		}
		switch leaf[0] {
		case "file_path":
			pathCol = i
		case "pos":
			posCol = i
		}
	}
	if pathCol < 0 || posCol < 0 {
		return nil, fmt.Errorf("position delete file: no file_path and pos columns in %s", schema)
	}
	md := f.Metadata()
	opts := []parquet.WriterOption{schema}
	if len(md.RowGroups) > 0 && len(md.RowGroups[0].Columns) > 0 {
		opts = append(opts, parquet.Compression(parquet.LookupCompressionCodec(md.RowGroups[0].Columns[0].MetaData.Codec)))
	}
	for _, kv := range md.KeyValueMetadata {
		opts = append(opts, parquet.KeyValueMetadata(kv.Key, kv.Value))
	}
	if md.CreatedBy != "" {
		opts = append(opts, parquet.CreatedBy(md.CreatedBy, "", ""))
	}

	r := parquet.NewReader(bytes.NewReader(b), schema)
	defer r.Close()
	var rows []parquet.Row
	buf := make([]parquet.Row, 64)
	for {
		n, err := r.ReadRows(buf)
		for _, row := range buf[:n] {
			row = row.Clone()
			for i, v := range row {
				if v.Column() != pathCol {
					continue
				}
				src := string(v.ByteArray())
				dst, err := m(src)
				if err != nil {
					return nil, fmt.Errorf("position delete file: row %d: file_path %q: %w", len(rows), src, err)
				}
				row[i] = parquet.ByteArrayValue([]byte(dst)).Level(v.RepetitionLevel(), v.DefinitionLevel(), pathCol)
			}
			rows = append(rows, row)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("position delete file: row %d: %w", len(rows), err)
		}
	}
	value := func(row parquet.Row, col int) parquet.Value {
		for _, v := range row {
			if v.Column() == col {
				return v
			}
		}
		return parquet.Value{}
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := value(rows[i], pathCol).ByteArray(), value(rows[j], pathCol).ByteArray()
		if c := bytes.Compare(a, b); c != 0 {
			return c < 0
		}
		return value(rows[i], posCol).Int64() < value(rows[j], posCol).Int64()
	})

	var out bytes.Buffer
	w := parquet.NewWriter(&out, opts...)
	if _, err := w.WriteRows(rows); err != nil {
		return nil, fmt.Errorf("position delete file: writing %d rows: %w", len(rows), err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("position delete file: %w", err)
	}
	return out.Bytes(), nil
}

// PositionDeletes reads the (file_path, pos) rows of a position delete
// file.
func PositionDeletes(b []byte) ([]PositionDelete, error) {
	f, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, fmt.Errorf("position delete file: %w", err)
	}
	r := parquet.NewGenericReader[PositionDelete](f)
	defer r.Close()
	var out []PositionDelete
	buf := make([]PositionDelete, 64)
	for {
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("position delete file: %w", err)
		}
	}
}

// PositionDelete is one row of a position delete file: the row at
// position Pos of the data file Path is deleted.
type PositionDelete struct {
	Path string `parquet:"file_path"`
	Pos  int64  `parquet:"pos"`
}
