package applier

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fetchErr is a poll result holding one error, as the client injects
// client-level errors: no topic, partition -1.
func fetchErr(topic string, err error) kgo.Fetches {
	return kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: topic, Partitions: []kgo.FetchPartition{{Partition: -1, Err: err}}}}}}
}

// TestFatalFetchErrors: only a client-level error the client does not
// recover from itself, or a refusal of the credentials or an ACL, stops
// the applier; a failed group join (the broker restarting) is retried by
// the client and must not.
func TestFatalFetchErrors(t *testing.T) {
	dial := errors.New("unable to dial: dial tcp 127.0.0.1:9092: connect: connection refused")
	for _, c := range []struct {
		name  string
		fs    kgo.Fetches
		fatal bool
	}{
		{"nothing", nil, false},
		{"group join failed while the broker restarts", fetchErr("", &kgo.ErrGroupSession{Err: dial}), false},
		{"client closed", fetchErr("", kgo.ErrClientClosed), false},
		{"context cancelled", fetchErr("", context.Canceled), false},
		{"a partition's fetch error", fetchErr("p.events.sales", dial), false},
		{"another client-level error", fetchErr("", errors.New("invalid SASL mechanism")), true},
		{"group join refused by an ACL", fetchErr("", &kgo.ErrGroupSession{Err: kerr.GroupAuthorizationFailed}), true},
		{"wrong password", fetchErr("", &kgo.ErrGroupSession{Err: kerr.SaslAuthenticationFailed}), true},
		{"a topic refused by an ACL", fetchErr("p.events.sales", kerr.TopicAuthorizationFailed), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := fatal(c.fs, "g"); (err != nil) != c.fatal {
				t.Errorf("fatal = %v, want fatal %v", err, c.fatal)
			}
		})
	}
}
