package applier

import (
	"github.com/beltran/gohive/hive_metastore"

	"github.com/hivedr/hivedr/schemas"
)

// The planner's choices of PruneFiles for objects made and dropped. The
// invariant they keep, with the executor's prune (exec.go), is that once
// an event is applied a DR directory holds what the source's holds
// (hidden staging names excepted), for managed, external and
// transactional objects alike:
//
//   - CREATE_TABLE and ADD_PARTITION (and a bootstrap's TABLE and
//     PARTITION records, bootstrap.go) prune their object's DR directory,
//     recursively, to the files the event names, before the object is
//     written: an object made again at a path an earlier one used (an
//     external partition dropped, its directory removed, added again; a
//     transactional table dropped and created again, whose old base_N a
//     DR reader would choose once the new write IDs reach N) starts from
//     the source's files, never the earlier object's. A transactional
//     object's make names no files (its data comes with its commits), so
//     its DR directory starts as empty as the source's.
//   - A drop of a managed table or partition (the source metastore
//     deletes its directory) prunes its DR directory. External objects
//     keep their files at the source, so a drop keeps them on DR too; if
//     the source directory is removed and the object made again, the
//     make's prune removes them.
//
// Every such prune runs before the metadata it goes with (as an INSERT
// OVERWRITE's does): once the object carries the event's stamp, or is
// gone, a re-driven event is a no-op, so a crash in between must not lose
// the prune. A drop's DR reader thus may see the object empty for the
// moment between the two; a make's sees nothing, the object not being
// there yet. The prune keeps every file a later event's copy wrote, every
// file a later event read ahead names (keepLaterCopies), and every path
// the source directory holds when it runs (copies run ahead of
// metadata), so a later incarnation's files are never lost to an earlier
// event's prune.

// recreatePrune is the prune of an object made by the event (sd its DR
// storage, files the event's files of it, src its source location): its
// DR directory to hold exactly files. None without a location.
func (p *planner) recreatePrune(sd *hive_metastore.StorageDescriptor, files []schemas.FileRef, src string) ([]Action, error) {
	if sd == nil || sd.Location == "" {
		return nil, nil
	}
	keep, err := p.keepFiles(files)
	if err != nil {
		return nil, err
	}
	return []Action{PruneFiles{Dir: sd.Location, Keep: keep, EventID: p.ev.EventID, Source: src}}, nil
}

// dropPrune is the prune of a dropped object of table t at source
// location src: all of its DR directory when t is managed (the source's
// is deleted with it), none when it is external or has no location.
func (p *planner) dropPrune(t *schemas.Table, src string) ([]Action, error) {
	if t == nil || t.External() || src == "" {
		return nil, nil
	}
	dir, err := p.mapLocation(src)
	if err != nil {
		return nil, err
	}
	return []Action{PruneFiles{Dir: dir, EventID: p.ev.EventID, Source: src}}, nil
}
