package main

import (
	"context"
	"errors"
	"math/rand"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// scenarioProduceUnknown produces one record to a topic nobody created, with or without
// franz-go's AllowAutoTopicCreation (franz-go asks Metadata not to create topics unless told).
func scenarioProduceUnknown(ctx context.Context, o *opts) M {
	extra := []kgo.Opt{kgo.DefaultProduceTopic(o.topic),
		// Defaults wait 5 s between metadata refreshes; a user testing for a missing topic
		// lowers it so the unknown-topic retries run out quickly.
		kgo.MetadataMinAge(250 * time.Millisecond)}
	if o.autoCreate {
		extra = append(extra, kgo.AllowAutoTopicCreation())
	}
	cl, err := o.client("franz-unknown", extra...)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer cl.Close()
	out := M{}
	start := time.Now()
	pctx, cancel := context.WithTimeout(ctx, 25*time.Second)
	out["produce"] = produceResultsJSON(cl.ProduceSync(pctx, &kgo.Record{Value: []byte("hello")}))
	cancel()
	out["produce_ms"] = time.Since(start).Milliseconds()
	adm := kadm.NewClient(cl)
	tds, err := adm.ListTopics(ctx, o.topic)
	if err != nil {
		out["topic_after"] = M{"error": errJSON(err)}
	} else {
		td := tds[o.topic]
		out["topic_after"] = M{"error": errJSON(td.Err), "partitions": len(td.Partitions)}
	}
	return out
}

// firstOutcome polls until the first record or fetch error (or 6 s).
func firstOutcome(ctx context.Context, cl *kgo.Client, want int) M {
	ctx, cancel := context.WithTimeout(ctx, 6*time.Second)
	defer cancel()
	var recs []*kgo.Record
	var errs []any
	for i := 0; i < 100 && ctx.Err() == nil && len(errs) == 0 && len(recs) < want; i++ {
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cl.PollFetches(pctx)
		pcancel()
		for _, fe := range fs.Errors() {
			if errors.Is(fe.Err, context.DeadlineExceeded) || errors.Is(fe.Err, context.Canceled) {
				continue
			}
			errs = append(errs, M{"partition": fe.Partition, "error": errJSON(fe.Err)})
		}
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
	}
	offs := []int64{}
	for _, r := range recs {
		offs = append(offs, r.Offset)
	}
	return M{"offsets": offs, "fetch_errors": errs}
}

// scenarioFetchOutOfRange consumes a 5-record partition at offsets past its end and below its
// start, once with franz-go's NoResetOffset (the error reaches the user) and once with the
// default reset policy (franz-go lists offsets and resumes).
func scenarioFetchOutOfRange(ctx context.Context, o *opts) M {
	adm, acl, err := o.adminWithTopic(ctx, 1, nil)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer acl.Close()
	t := o.topic
	p, err := o.client("franz-oor-producer", kgo.DefaultProduceTopic(t))
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer p.Close()
	var recs []*kgo.Record
	for i := 0; i < 5; i++ {
		recs = append(recs, &kgo.Record{Value: []byte{byte('a' + i)}})
	}
	out := M{"produce": errJSON(p.ProduceSync(ctx, recs...).FirstErr())}
	at := func(name string, offset int64, reset bool, want int) M {
		start := map[string]map[int32]kgo.Offset{t: {0: kgo.NewOffset().At(offset)}}
		opts := []kgo.Opt{kgo.ConsumePartitions(start)}
		if !reset {
			opts = append(opts, kgo.ConsumeResetOffset(kgo.NoResetOffset()))
		}
		c, err := o.client(name, opts...)
		if err != nil {
			return M{"error": errJSON(err)}
		}
		defer c.Close()
		return firstOutcome(ctx, c, want)
	}
	out["past_end_no_reset"] = at("franz-oor-1", 100, false, 1)
	out["past_end_default_reset"] = at("franz-oor-2", 100, true, 5)
	dr, err := adm.DeleteRecords(ctx, kadm.Offsets{t: {0: {Topic: t, Partition: 0, At: 3}}})
	out["delete_records"] = deleteRecordsJSON(dr, err)
	out["below_start_no_reset"] = at("franz-oor-3", 1, false, 1)
	out["below_start_default_reset"] = at("franz-oor-4", 1, true, 2)
	return out
}

// scenarioTooLarge produces a record bigger than the topic's (or broker's) message size limit,
// then a small one with the same idempotent producer.
func scenarioTooLarge(ctx context.Context, o *opts) M {
	adm, acl, err := o.admin()
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer acl.Close()
	t := o.topic
	if err := createTopic(ctx, adm, t, 1, parseConfigs(o.configs)); err != nil {
		return M{"error": errJSON(err)}
	}
	out := M{}
	rcs, err := adm.DescribeTopicConfigs(ctx, t)
	if err == nil && len(rcs) == 1 {
		for _, c := range rcs[0].Configs {
			if c.Key == "max.message.bytes" {
				out["max_message_bytes"] = M{"value": c.Value, "source": c.Source.String()}
			}
		}
	}
	p, err := o.client("franz-too-large", kgo.DefaultProduceTopic(t))
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer p.Close()
	// Random bytes so no codec can shrink the batch under the limit.
	big := make([]byte, o.size)
	rand.New(rand.NewSource(1)).Read(big)
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	out["big"] = produceResultsJSON(p.ProduceSync(pctx, &kgo.Record{Value: big}))
	cancel()
	pctx, cancel = context.WithTimeout(ctx, 15*time.Second)
	out["small"] = produceResultsJSON(p.ProduceSync(pctx, &kgo.Record{Value: []byte("fits")}))
	cancel()
	out["end"] = listedJSON(adm.ListEndOffsets(ctx, t))
	return out
}
