package config

import "time"

// RPO returns the recovery point objective of db: its policy's rpo, or
// DefaultRPO for a database in scope without one (with no databases
// configured, every database is); 0 when db does not replicate.
func (r *Replication) RPO(db string) time.Duration {
	p, ok := r.Scope(db)
	switch {
	case !ok:
		return 0
	case p.RPO.Duration == 0:
		return DefaultRPO
	}
	return p.RPO.Duration
}
