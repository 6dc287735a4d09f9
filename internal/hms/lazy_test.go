package hms

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/beltran/gohive/hive_metastore"
)

func TestAnswered(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{&hive_metastore.NoSuchObjectException{}, true},
		{fmt.Errorf("get_table t: %w", &hive_metastore.MetaException{}), true},
		{errors.New("EOF"), false},
		{&net.OpError{Op: "read", Err: errors.New("connection reset")}, false},
	} {
		if got := Answered(tt.err); got != tt.want {
			t.Errorf("Answered(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestLazyDialFailsAndRetries(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	l := &Lazy{Addr: addr}
	l.Drop() // no connection yet: nothing to do
	for range 2 {
		if _, err := l.Get(context.Background()); err == nil || !strings.Contains(err.Error(), addr) {
			t.Fatalf("Get on a closed port = %v, want an error naming %s", err, addr)
		}
	}
	if l.c != nil {
		t.Error("a failed dial left a connection behind")
	}
}
