package hms

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/thrift/lib/go/thrift"
	"github.com/beltran/gohive/hive_metastore"
)

// EachPartitionName calls get_partition_names for every partition of
// db.table and passes each name to fn as it is read off the connection,
// in the metastore's order: the whole list is never held. The metastore
// has no call that lists a table's partitions a page at a time (its
// max_parts takes the first n, get_partition_values' filter and order do
// not page either), so a caller that wants pages streams the list and
// keeps what it needs (NamesAfter).
//
// The metastore's exceptions (MetaException, NoSuchObjectException) are
// returned as the generated client returns them, so Answered and
// errors.As work on them.
func (c *Client) EachPartitionName(ctx context.Context, db, table string, fn func(name string)) error {
	args := hive_metastore.ThriftHiveMetastoreGetPartitionNamesArgs{DbName: db, TblName: table, MaxParts: -1}
	res := &namesResult{fn: fn}
	if _, err := c.Client_().Call(ctx, "get_partition_names", &args, res); err != nil {
		return err
	}
	switch {
	case res.o1 != nil:
		return res.o1
	case res.o2 != nil:
		return res.o2
	}
	return nil
}

// namesResult reads get_partition_names' result struct, handing each name
// of its list to fn instead of keeping it.
type namesResult struct {
	fn func(string)
	o1 *hive_metastore.MetaException
	o2 *hive_metastore.NoSuchObjectException
}

func (r *namesResult) Write(context.Context, thrift.TProtocol) error {
	return errors.New("hms: a get_partition_names result is only read")
}

func (r *namesResult) Read(ctx context.Context, in thrift.TProtocol) error {
	if _, err := in.ReadStructBegin(ctx); err != nil {
		return fmt.Errorf("get_partition_names result: %w", err)
	}
	for {
		_, typ, id, err := in.ReadFieldBegin(ctx)
		if err != nil {
			return fmt.Errorf("get_partition_names result field %d: %w", id, err)
		}
		if typ == thrift.STOP {
			break
		}
		switch {
		case id == 0 && typ == thrift.LIST:
			err = r.readNames(ctx, in)
		case id == 1 && typ == thrift.STRUCT:
			r.o1 = &hive_metastore.MetaException{}
			err = r.o1.Read(ctx, in)
		case id == 2 && typ == thrift.STRUCT:
			r.o2 = &hive_metastore.NoSuchObjectException{}
			err = r.o2.Read(ctx, in)
		default:
			err = in.Skip(ctx, typ)
		}
		if err != nil {
			return err
		}
		if err := in.ReadFieldEnd(ctx); err != nil {
			return err
		}
	}
	return in.ReadStructEnd(ctx)
}

func (r *namesResult) readNames(ctx context.Context, in thrift.TProtocol) error {
	_, n, err := in.ReadListBegin(ctx)
	if err != nil {
		return fmt.Errorf("get_partition_names list: %w", err)
	}
	for range n {
		s, err := in.ReadString(ctx)
		if err != nil {
			return fmt.Errorf("get_partition_names name: %w", err)
		}
		r.fn(s)
	}
	return in.ReadListEnd(ctx)
}

// NamesAfter keeps, of the names Add is given in any order, the limit
// smallest (in byte order) that sort after a cursor: one page of a list
// streamed by EachPartitionName, in memory bounded by limit whatever the
// list's length. Use NewNamesAfter.
type NamesAfter struct {
	after string
	limit int
	top   maxHeap // the kept names, largest first
	more  bool
}

// NewNamesAfter keeps the limit (at least 1) smallest names after after
// ("": from the first).
func NewNamesAfter(after string, limit int) *NamesAfter {
	return &NamesAfter{after: after, limit: max(limit, 1)}
}

// Add considers one name.
func (n *NamesAfter) Add(name string) {
	switch {
	case name <= n.after:
	case len(n.top) < n.limit:
		heap.Push(&n.top, name)
	case name < n.top[0]:
		n.top[0] = name
		heap.Fix(&n.top, 0)
		n.more = true
	case name != n.top[0]:
		n.more = true
	}
}

// Names returns the names kept, in order, and whether names after them
// were left out (the next page starts after the last).
func (n *NamesAfter) Names() ([]string, bool) {
	out := slices.Clone([]string(n.top))
	slices.Sort(out)
	return out, n.more
}

// maxHeap is a heap.Interface of strings, the largest first.
type maxHeap []string

func (h maxHeap) Len() int           { return len(h) }
func (h maxHeap) Less(i, j int) bool { return h[i] > h[j] }
func (h maxHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *maxHeap) Push(x any)        { *h = append(*h, x.(string)) }
func (h *maxHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
