package kafka

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Producer is what ProduceAll needs of a client or a group transact
// session.
type Producer interface {
	Produce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error))
}

// ProduceAll produces recs and waits for every one's outcome; it returns
// the first failure, naming its topic.
func ProduceAll(ctx context.Context, p Producer, recs []*kgo.Record) error {
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	for _, r := range recs {
		wg.Add(1)
		p.Produce(ctx, r, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("produce to %s: %w", r.Topic, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return firstErr
}
