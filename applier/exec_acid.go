package applier

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/internal/acid"
	"github.com/hivedr/hivedr/internal/drparam"
	"github.com/hivedr/hivedr/internal/fs"
	"github.com/hivedr/hivedr/internal/location"
)

// Transactions is the part of the DR metastore's API that replays source
// transactions (acid.go); *hms.Client implements it.
type Transactions interface {
	OpenTxns(ctx context.Context, req *hive_metastore.OpenTxnRequest) (*hive_metastore.OpenTxnsResponse, error)
	AllocateTableWriteIds(ctx context.Context, req *hive_metastore.AllocateTableWriteIdsRequest) (*hive_metastore.AllocateTableWriteIdsResponse, error)
	CommitReplTxn(ctx context.Context, policy string, srcTxn int64, writes []*hive_metastore.WriteEventInfo, last *hive_metastore.ReplLastIdInfo) error
	AbortReplTxn(ctx context.Context, policy string, srcTxn int64) error
}

// walker lists a directory's files recursively (fs.Router).
type walker interface {
	Walk(ctx context.Context, dir string, fn func(location string, size int64) error) error
}

func (x *executor) runACID(ctx context.Context, a Action) error {
	op := a.String()
	if p, ok := a.(PruneObsolete); ok {
		return x.pruneObsolete(ctx, p)
	}
	tx, ok := x.ms.(Transactions)
	if !ok {
		return &RefusedError{Op: op, Err: fmt.Errorf("the DR metastore client (%T) cannot replay transactions", x.ms)}
	}
	switch a := a.(type) {
	case ReplAllocate:
		src := make([]int64, len(a.Txns))
		pairs := make([]*hive_metastore.TxnToWriteId, len(a.Txns))
		for i, t := range a.Txns {
			src[i] = t.TxnID
			pairs[i] = &hive_metastore.TxnToWriteId{TxnId: t.TxnID, WriteId: t.WriteID}
		}
		// Hive 4.0 keeps a transaction's host, not its agent: the host
		// names the database, so that a failover finds what it leaves
		// open (drparam.ReplTxnAgent).
		policy := a.Policy
		agent := drparam.ReplTxnAgent(policy)
		_, err := tx.OpenTxns(ctx, &hive_metastore.OpenTxnRequest{
			NumTxns: int32(len(src)), User: "hivedr", Hostname: agent, AgentInfo: agent,
			ReplPolicy: &policy, ReplSrcTxnIds: src, TxnType: hive_metastore.TxnType_REPL_CREATED,
		})
		if err != nil {
			return classify(op, err)
		}
		_, err = tx.AllocateTableWriteIds(ctx, &hive_metastore.AllocateTableWriteIdsRequest{
			DbName: a.DB, TableName: a.Table, ReplPolicy: &policy, SrcTxnToWriteIdList: pairs,
		})
		return classify(op, err)
	case ReplCommit:
		return classify(op, tx.CommitReplTxn(ctx, a.Policy, a.SrcTxn, a.Writes, nil))
	case ReplAbort:
		return classify(op, tx.AbortReplTxn(ctx, a.Policy, a.SrcTxn))
	}
	return fmt.Errorf("unknown action %T", a)
}

// pruneObsolete removes the files of the ACID directories directly under
// a.Dir that the base a.Base covers. Only names that parse as ACID
// directories are touched; a listed file outside a.Dir is refused.
func (x *executor) pruneObsolete(ctx context.Context, a PruneObsolete) error {
	refuse := func(err error) error { return &RefusedError{Op: a.String(), Err: err} }
	w, ok := x.files.(walker)
	if !ok || x.files == nil {
		return refuse(errors.New("no filesystem that lists directories is configured for DR data"))
	}
	dir, err := location.Parse(a.Dir)
	if err != nil {
		return refuse(err)
	}
	var remove []string
	err = w.Walk(ctx, a.Dir, func(loc string, _ int64) error {
		l, err := location.Parse(loc)
		if err != nil {
			return refuse(fmt.Errorf("listed file: %w", err))
		}
		rel, ok := l.Rel(dir)
		if !ok || rel == "" {
			return refuse(fmt.Errorf("walking %s gave %s, which is not under it", a.Dir, loc))
		}
		top, _, nested := strings.Cut(rel, "/")
		if nested && acid.Obsolete(top, a.Base) {
			remove = append(remove, loc)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil // nothing there to prune
	}
	if err != nil {
		return fmt.Errorf("%s: %w", a, err)
	}
	for _, loc := range remove {
		if err := x.files.Remove(ctx, loc); err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
	}
	return nil
}
