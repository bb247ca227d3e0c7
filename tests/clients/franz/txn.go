package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func describeTxnJSON(ctx context.Context, adm *kadm.Client, id string) M {
	dts, err := adm.DescribeTransactions(ctx, id)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	d, ok := dts[id]
	if !ok {
		return M{"error": M{"name": "CLIENT_ERROR", "text": "txn id missing from response"}}
	}
	parts := map[string][]int32{}
	for t, ps := range d.Topics {
		for p := range ps {
			parts[t] = append(parts[t], p)
		}
	}
	return M{"error": errJSON(d.Err), "state": d.State, "producer_id": d.ProducerID,
		"producer_epoch": d.ProducerEpoch, "timeout_ms": d.TimeoutMillis, "topics": parts}
}

// describeTxnSettled waits (bounded) for the coordinator to finish writing markers: Kafka
// answers EndTxn before the markers are written, so a describe right after may still say
// Prepare*.
func describeTxnSettled(ctx context.Context, adm *kadm.Client, id string) M {
	var d M
	for i := 0; i < 50 && ctx.Err() == nil; i++ {
		d = describeTxnJSON(ctx, adm, id)
		if st, _ := d["state"].(string); !strings.HasPrefix(st, "Prepare") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return d
}

func describeProducersJSON(ctx context.Context, adm *kadm.Client, topic string) M {
	dps, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		return M{"error": errJSON(err)}
	}
	out := M{}
	dps.EachPartition(func(p kadm.DescribedProducersPartition) {
		ps := []M{}
		for _, d := range p.ActiveProducers.Sorted() {
			ps = append(ps, M{"producer_id": d.ProducerID, "producer_epoch": d.ProducerEpoch,
				"last_sequence": d.LastSequence, "current_txn_start_offset": d.CurrentTxnStartOffset,
				"coordinator_epoch": d.CoordinatorEpoch})
		}
		out[fmt.Sprint(p.Partition)] = M{"error": errJSON(p.Err), "producers": ps}
	})
	return out
}

func listTxnJSON(ctx context.Context, adm *kadm.Client, id string) M {
	lts, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	out := M{"found": false}
	lts.Each(func(l kadm.ListedTransaction) {
		if l.TxnID == id {
			out = M{"found": true, "state": l.State, "producer_id": l.ProducerID}
		}
	})
	return out
}

func readAll(ctx context.Context, o *opts, name, topic string, level kgo.IsolationLevel, want int) M {
	c, err := o.client(name, kgo.FetchIsolationLevel(level),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer c.Close()
	recs, errs := consume(ctx, c, want, 8*time.Second)
	return M{"records": recordsJSON(recs), "fetch_errors": errs}
}

// scenarioTxn: one transactional producer commits 5 records, aborts 5, commits 3, then leaves
// a fourth transaction open while the partition is read under both isolation levels and the
// last stable offset is listed; then aborts it.
func scenarioTxn(ctx context.Context, o *opts) M {
	adm, acl, err := o.adminWithTopic(ctx, 1, nil)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer acl.Close()
	t := o.topic
	p, err := o.client("franz-txn", kgo.TransactionalID(o.txnID), kgo.DefaultProduceTopic(t),
		kgo.TransactionTimeout(30*time.Second))
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer p.Close()
	out := M{}
	txn := func(label string, n int, end *kgo.TransactionEndTry) M {
		r := M{"begin": errJSON(p.BeginTransaction())}
		var recs []*kgo.Record
		for i := 0; i < n; i++ {
			recs = append(recs, &kgo.Record{Key: []byte(label), Value: []byte(fmt.Sprintf("%s-%d", label, i))})
		}
		r["produce"] = produceResultsJSON(p.ProduceSync(ctx, recs...))
		if end != nil {
			r["end"] = errJSON(p.EndTransaction(ctx, *end))
		}
		return r
	}
	commit, abort := kgo.TryCommit, kgo.TryAbort
	out["txn1"] = txn("commit1", 5, &commit)
	out["txn2"] = txn("abort", 5, &abort)
	out["txn3"] = txn("commit2", 3, &commit)
	out["describe_after_commit"] = describeTxnSettled(ctx, adm, o.txnID)
	out["list_after_commit"] = listTxnJSON(ctx, adm, o.txnID)

	out["txn4_open"] = txn("open", 2, nil)
	out["describe_open"] = describeTxnJSON(ctx, adm, o.txnID)
	out["producers_open"] = describeProducersJSON(ctx, adm, t)
	out["end_open"] = listedJSON(adm.ListEndOffsets(ctx, t))
	out["lso_open"] = listedJSON(adm.ListCommittedOffsets(ctx, t))
	out["read_committed_open"] = readAll(ctx, o, "franz-rc-open", t, kgo.ReadCommitted(), 8)
	out["read_uncommitted_open"] = readAll(ctx, o, "franz-ru-open", t, kgo.ReadUncommitted(), 15)
	out["txn4_abort"] = errJSON(p.EndTransaction(ctx, kgo.TryAbort))

	out["describe_final"] = describeTxnSettled(ctx, adm, o.txnID)
	out["end"] = listedJSON(adm.ListEndOffsets(ctx, t))
	out["lso"] = listedJSON(adm.ListCommittedOffsets(ctx, t))
	out["read_committed"] = readAll(ctx, o, "franz-rc", t, kgo.ReadCommitted(), 8)

	// A second producer with the same transactional id (a restarted instance) fences the
	// first: its next transaction must fail, and the new one's commit must land.
	p2, err := o.client("franz-txn-2", kgo.TransactionalID(o.txnID), kgo.DefaultProduceTopic(t),
		kgo.TransactionTimeout(30*time.Second))
	if err != nil {
		out["error"] = errJSON(err)
		return out
	}
	defer p2.Close()
	r2 := M{"begin": errJSON(p2.BeginTransaction())}
	r2["produce"] = produceResultsJSON(p2.ProduceSync(ctx,
		&kgo.Record{Key: []byte("new"), Value: []byte("new-0")}))
	r2["end"] = errJSON(p2.EndTransaction(ctx, kgo.TryCommit))
	out["txn_new_instance"] = r2
	zombie := M{"begin": errJSON(p.BeginTransaction())}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	zombie["produce"] = produceResultsJSON(p.ProduceSync(pctx,
		&kgo.Record{Key: []byte("zombie"), Value: []byte("zombie-0")}))
	cancel()
	zombie["end"] = errJSON(p.EndTransaction(ctx, kgo.TryCommit))
	out["txn_fenced_instance"] = zombie
	out["read_committed_after_fence"] = readAll(ctx, o, "franz-rc-2", t, kgo.ReadCommitted(), 9)
	return out
}

// scenarioTxnSession: consume-transform-produce with a GroupTransactSession, reading
// `count` records of topic into topic2 upper-cased, exactly once, then checking the group's
// committed offset and the output under read_committed.
func scenarioTxnSession(ctx context.Context, o *opts) M {
	adm, acl, err := o.admin()
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer acl.Close()
	in, outT := o.topic, o.topic2
	for _, t := range []string{in, outT} {
		if err := createTopic(ctx, adm, t, 1, nil); err != nil {
			return M{"error": errJSON(err)}
		}
	}
	out := M{}
	p, err := o.client("franz-etl-source", kgo.DefaultProduceTopic(in))
	if err != nil {
		return M{"error": errJSON(err)}
	}
	var recs []*kgo.Record
	for i := 0; i < o.count; i++ {
		recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("item-%d", i))})
	}
	out["produce_input"] = errJSON(p.ProduceSync(ctx, recs...).FirstErr())
	p.Close()

	s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(o.bootstrap), kgo.ClientID("franz-etl"),
		o.logger(), kgo.TransactionalID(o.txnID), kgo.TransactionTimeout(30*time.Second),
		kgo.ConsumerGroup(o.group), kgo.ConsumeTopics(in), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DefaultProduceTopic(outT))
	if err != nil {
		out["error"] = errJSON(err)
		return out
	}
	sessionClosed := false
	defer func() {
		if !sessionClosed {
			s.Close()
		}
	}()
	processed, rounds := 0, []M{}
	for i := 0; i < 100 && processed < o.count && ctx.Err() == nil; i++ {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := s.PollRecords(pctx, 8) // several transactions, each committing its offsets
		cancel()
		var ferrs []any
		for _, fe := range fs.Errors() {
			if fe.Topic != "" || pctx.Err() == nil {
				ferrs = append(ferrs, errJSON(fe.Err))
			}
		}
		if fs.NumRecords() == 0 {
			if len(ferrs) > 0 {
				rounds = append(rounds, M{"fetch_errors": ferrs})
			}
			continue
		}
		round := M{"records": fs.NumRecords(), "fetch_errors": ferrs, "begin": errJSON(s.Begin())}
		var outs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			outs = append(outs, &kgo.Record{Key: []byte(fmt.Sprint(r.Offset)),
				Value: []byte(strings.ToUpper(string(r.Value)))})
		})
		round["produce"] = errJSON(s.ProduceSync(ctx, outs...).FirstErr())
		committed, err := s.End(ctx, kgo.TryCommit)
		round["committed"], round["end"] = committed, errJSON(err)
		if committed {
			processed += fs.NumRecords()
		}
		rounds = append(rounds, round)
	}
	out["rounds"] = rounds
	out["processed"] = processed
	// The last transaction's offsets become visible once its markers are written, which Kafka
	// does after answering EndTxn: poll (bounded) for them.
	var fo M
	for i := 0; i < 50 && ctx.Err() == nil; i++ {
		fo = fetchOffsetsJSON(ctx, adm, o.group)
		if offs, _ := fo["offsets"].(M); offs != nil {
			if p0, _ := offs["0"].(M); p0 != nil && p0["offset"] == int64(processed) {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	out["fetch_offsets"] = fo
	s.Close()
	sessionClosed = true
	out["output"] = readAll(ctx, o, "franz-etl-check", outT, kgo.ReadCommitted(), o.count)
	out["output_end"] = listedJSON(adm.ListEndOffsets(ctx, outT))
	return out
}
