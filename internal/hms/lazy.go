package hms

import (
	"context"
	"errors"

	"github.com/beltran/gohive/hive_metastore"
)

// Lazy is a connection to one metastore made on first use and made again
// after Drop: a Thrift connection is not reusable after a transport
// error, so a caller drops it when a call fails that way and the next
// call reconnects. Not safe for concurrent use; callers serialize.
type Lazy struct {
	// Addr is the metastore's host:port.
	Addr string
	// Opts are the Dial options.
	Opts Options
	c    *Client
}

// Get returns the connection, dialing Addr when there is none.
func (l *Lazy) Get(ctx context.Context) (*Client, error) {
	if l.c != nil {
		return l.c, nil
	}
	c, err := Dial(ctx, l.Addr, l.Opts)
	if err != nil {
		return nil, err // Dial names the address
	}
	l.c = c
	return c, nil
}

// Drop closes the connection, if any; the next Get dials again.
func (l *Lazy) Drop() {
	if l.c != nil {
		l.c.Close()
		l.c = nil
	}
}

// Answered reports whether err is the metastore's own answer to a call
// (NoSuchObjectException, MetaException), after which the connection is
// still in step and can be kept.
func Answered(err error) bool {
	var nso *hive_metastore.NoSuchObjectException
	var me *hive_metastore.MetaException
	return errors.As(err, &nso) || errors.As(err, &me)
}
