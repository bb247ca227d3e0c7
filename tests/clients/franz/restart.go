package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// scenarioProduceRestart produces `count` numbered records one every few milliseconds with the
// default idempotent producer while the test restarts the broker (it waits for the
// "delivered N" progress lines on stderr), then reads the partition back: every record must be
// there exactly once, in order, across the restart.
func scenarioProduceRestart(ctx context.Context, o *opts) M {
	adm, acl, err := o.admin()
	if err != nil {
		return M{"error": errJSON(err)}
	}
	if err := createTopic(ctx, adm, o.topic, 1, nil); err != nil {
		acl.Close()
		return M{"error": errJSON(err)}
	}
	acl.Close()
	p, err := o.client("franz-restart-producer", kgo.DefaultProduceTopic(o.topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer p.Close()
	var (
		mu        sync.Mutex
		delivered int
		errs      []any
		pids      = map[string]int{}
	)
	var wg sync.WaitGroup
	for i := 0; i < o.count && ctx.Err() == nil; i++ {
		wg.Add(1)
		p.Produce(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}, func(r *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, errJSON(err))
				return
			}
			delivered++
			pids[fmt.Sprintf("%d/%d", r.ProducerID, r.ProducerEpoch)]++
			if delivered%50 == 0 {
				fmt.Fprintf(os.Stderr, "delivered %d\n", delivered)
			}
		})
		time.Sleep(5 * time.Millisecond)
	}
	wg.Wait()
	out := M{"delivered": delivered, "produce_errors": errs, "producer_ids": pids}

	c, err := o.client("franz-restart-consumer",
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{o.topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		out["error"] = errJSON(err)
		return out
	}
	defer c.Close()
	recs, ferrs := consume(ctx, c, o.count, 30*time.Second)
	vals, offs := []int{}, []int64{}
	for _, r := range recs {
		v, _ := strconv.Atoi(string(r.Value))
		vals, offs = append(vals, v), append(offs, r.Offset)
	}
	out["values"], out["offsets"], out["fetch_errors"] = vals, offs, ferrs
	return out
}
