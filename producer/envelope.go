package producer

import (
	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/schemas"
)

// envelope fills the change-data-capture fields of ev (op and
// source_info) from its other fields and the source's configuration, so
// readers that know Debezium's envelope find what they expect. It is
// called on every MetastoreEvent the tailer publishes, once its type,
// payload, database, table and snapshot block are final.
func envelope(ev *schemas.Event, src *config.Source, version string) {
	ev.Op = schemas.OpOf(ev)
	catalog := ev.Catalog
	if catalog == "" {
		catalog = "hive"
	}
	ev.SourceInfo = &schemas.SourceInfo{
		Name:      src.Name,
		Metastore: src.Metastore,
		Reader:    src.Kind,
		Version:   version,
		Catalog:   catalog,
		EventID:   ev.EventID,
		EventTime: ev.EventTime,
		Database:  ev.Database,
		Table:     ev.Table,
		Snapshot:  ev.Snapshot != nil && ev.EventType != schemas.EventDiscontinuity,
	}
}
