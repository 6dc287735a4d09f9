package hms

import (
	"context"
	"errors"
	"fmt"

	"github.com/beltran/gohive/hive_metastore"
)

// ErrNoResult is a metastore reply that carried neither a result nor an
// exception. The generated Thrift client returns (nil, nil) for one, as
// a metastore restarting mid-call can send; the methods below turn it
// into this error, so no caller dereferences a nil result. It is
// transient: the call can be made again.
var ErrNoResult = errors.New("the metastore's reply carried no result")

// noResult returns r and err, or ErrNoResult naming op when the reply
// carried nothing.
func noResult[T any](op string, r *T, err error) (*T, error) {
	if err == nil && r == nil {
		return nil, fmt.Errorf("%s: %w", op, ErrNoResult)
	}
	return r, err
}

// The calls hivedr makes whose result is a pointer, through noResult.

// GetDatabase calls get_database; a reply without a result is ErrNoResult.
func (c *Client) GetDatabase(ctx context.Context, name string) (*hive_metastore.Database, error) {
	r, err := c.ThriftHiveMetastoreClient.GetDatabase(ctx, name)
	return noResult("get_database", r, err)
}

// GetTable calls get_table; a reply without a result is ErrNoResult.
func (c *Client) GetTable(ctx context.Context, db, table string) (*hive_metastore.Table, error) {
	r, err := c.ThriftHiveMetastoreClient.GetTable(ctx, db, table)
	return noResult("get_table", r, err)
}

// GetTableReq calls get_table_req; a reply without a result is ErrNoResult.
func (c *Client) GetTableReq(ctx context.Context, req *hive_metastore.GetTableRequest) (*hive_metastore.GetTableResult_, error) {
	r, err := c.ThriftHiveMetastoreClient.GetTableReq(ctx, req)
	return noResult("get_table_req", r, err)
}

// GetPartitionsByNamesReq calls get_partitions_by_names_req; a reply without a result is ErrNoResult.
func (c *Client) GetPartitionsByNamesReq(ctx context.Context, req *hive_metastore.GetPartitionsByNamesRequest) (*hive_metastore.GetPartitionsByNamesResult_, error) {
	r, err := c.ThriftHiveMetastoreClient.GetPartitionsByNamesReq(ctx, req)
	return noResult("get_partitions_by_names_req", r, err)
}

// DropPartitionsReq calls drop_partitions_req; a reply without a result is ErrNoResult.
func (c *Client) DropPartitionsReq(ctx context.Context, req *hive_metastore.DropPartitionsRequest) (*hive_metastore.DropPartitionsResult_, error) {
	r, err := c.ThriftHiveMetastoreClient.DropPartitionsReq(ctx, req)
	return noResult("drop_partitions_req", r, err)
}

// GetPartition calls get_partition; a reply without a result is ErrNoResult.
func (c *Client) GetPartition(ctx context.Context, db, table string, vals []string) (*hive_metastore.Partition, error) {
	r, err := c.ThriftHiveMetastoreClient.GetPartition(ctx, db, table, vals)
	return noResult("get_partition", r, err)
}

// GetTableObjectsByNameReq calls get_table_objects_by_name_req; a reply without a result is ErrNoResult.
func (c *Client) GetTableObjectsByNameReq(ctx context.Context, req *hive_metastore.GetTablesRequest) (*hive_metastore.GetTablesResult_, error) {
	r, err := c.ThriftHiveMetastoreClient.GetTableObjectsByNameReq(ctx, req)
	return noResult("get_table_objects_by_name_req", r, err)
}

// GetCurrentNotificationEventId calls get_current_notificationEventId; a reply without a result is ErrNoResult.
func (c *Client) GetCurrentNotificationEventId(ctx context.Context) (*hive_metastore.CurrentNotificationEventId, error) {
	r, err := c.ThriftHiveMetastoreClient.GetCurrentNotificationEventId(ctx)
	return noResult("get_current_notificationEventId", r, err)
}

// GetNextNotification calls get_next_notification; a reply without a result is ErrNoResult.
func (c *Client) GetNextNotification(ctx context.Context, req *hive_metastore.NotificationEventRequest) (*hive_metastore.NotificationEventResponse, error) {
	r, err := c.ThriftHiveMetastoreClient.GetNextNotification(ctx, req)
	return noResult("get_next_notification", r, err)
}

// GetValidWriteIds calls get_valid_write_ids; a reply without a result is ErrNoResult.
func (c *Client) GetValidWriteIds(ctx context.Context, req *hive_metastore.GetValidWriteIdsRequest) (*hive_metastore.GetValidWriteIdsResponse, error) {
	r, err := c.ThriftHiveMetastoreClient.GetValidWriteIds(ctx, req)
	return noResult("get_valid_write_ids", r, err)
}

// GetOpenTxns calls get_open_txns; a reply without a result is ErrNoResult.
func (c *Client) GetOpenTxns(ctx context.Context) (*hive_metastore.GetOpenTxnsResponse, error) {
	r, err := c.ThriftHiveMetastoreClient.GetOpenTxns(ctx)
	return noResult("get_open_txns", r, err)
}

// OpenTxns calls open_txns; a reply without a result is ErrNoResult.
func (c *Client) OpenTxns(ctx context.Context, req *hive_metastore.OpenTxnRequest) (*hive_metastore.OpenTxnsResponse, error) {
	r, err := c.ThriftHiveMetastoreClient.OpenTxns(ctx, req)
	return noResult("open_txns", r, err)
}

// AllocateTableWriteIds calls allocate_table_write_ids; a reply without a result is ErrNoResult.
func (c *Client) AllocateTableWriteIds(ctx context.Context, req *hive_metastore.AllocateTableWriteIdsRequest) (*hive_metastore.AllocateTableWriteIdsResponse, error) {
	r, err := c.ThriftHiveMetastoreClient.AllocateTableWriteIds(ctx, req)
	return noResult("allocate_table_write_ids", r, err)
}
