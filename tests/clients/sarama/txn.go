package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/IBM/sarama"
)

func (o *opts) txnProducer(clientID string) (sarama.SyncProducer, error) {
	cfg, err := o.config(clientID)
	if err != nil {
		return nil, err
	}
	// sarama's preconditions for a transactional producer.
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Transaction.ID = o.txnID
	cfg.Producer.Transaction.Timeout = 30 * time.Second
	cfg.Producer.Transaction.Retry.Max = 20
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	return sarama.NewSyncProducer([]string{o.bootstrap}, cfg)
}

// bounded runs a sarama call that takes no context, giving up (and saying so) after d.
func bounded(d time.Duration, f func() error) any {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	select {
	case err := <-ch:
		return errJSON(err)
	case <-time.After(d):
		return M{"name": "CLIENT_TIMEOUT", "text": fmt.Sprintf("no answer within %s", d)}
	}
}

// txnRound begins a transaction, sends values to partition 0 of topic (one SendMessage each)
// and ends it with end ("commit", "abort" or "" to leave it open).
func txnRound(p sarama.SyncProducer, topic string, values []string, end string) M {
	out := M{"begin": errJSON(p.BeginTxn())}
	sent := []M{}
	for _, v := range values {
		var part int32
		var off int64
		res := bounded(20*time.Second, func() error {
			var err error
			part, off, err = p.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: 0,
				Value: sarama.StringEncoder(v)})
			return err
		})
		sent = append(sent, M{"partition": part, "offset": off, "error": res})
	}
	out["produce"] = sent
	out["status_before_end"] = p.TxnStatus().String()
	switch end {
	case "commit":
		out["end"] = bounded(20*time.Second, p.CommitTxn)
	case "abort":
		out["end"] = bounded(20*time.Second, p.AbortTxn)
	}
	out["status"] = p.TxnStatus().String()
	return out
}

func (o *opts) readAll(ctx context.Context, topic string, level sarama.IsolationLevel, want int) M {
	cfg, err := o.config("sarama-txn-reader")
	if err != nil {
		return M{"error": errJSON(err)}
	}
	cfg.Consumer.IsolationLevel = level
	c, err := sarama.NewConsumer([]string{o.bootstrap}, cfg)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer c.Close()
	// The extra wait is long enough for a few empty fetches: whatever should stay hidden
	// (aborted records, records past the last stable offset) would show up in it.
	return readPartition(ctx, c, topic, 0, sarama.OffsetOldest, want, 800*time.Millisecond, 10*time.Second)
}

// waitStable polls (bounded) until no transaction holds the partition's last stable offset
// back: Kafka answers EndTxn before it has written the markers, so for a moment after
// AbortTxn/CommitTxn returns the high watermark and LSO can still be the old ones.
func waitStable(ctx context.Context, adm sarama.ClusterAdmin, t string) (M, M) {
	var hwm, lso M
	for i := 0; i < 50; i++ {
		hwm = listOffsetsJSON(adm, t, 1, sarama.OffsetNewest, sarama.ReadUncommitted)
		lso = listOffsetsJSON(adm, t, 1, sarama.OffsetNewest, sarama.ReadCommitted)
		h, _ := hwm["0"].(M)
		l, _ := lso["0"].(M)
		if h != nil && l != nil && h["offset"] == l["offset"] || !sleepCtx(ctx, 100*time.Millisecond) {
			break
		}
	}
	return hwm, lso
}

func valuesOf(m ...string) []string { return m }

func seq(prefix string, n int) []string {
	out := []string{}
	for i := 0; i < n; i++ {
		out = append(out, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

// scenarioTxn: committed, aborted, committed and finally an open transaction on one partition;
// what read_committed and read_uncommitted consumers and ListOffsets see with the transaction
// open and after it is aborted; then a second producer with the same transactional id fences
// the first.
func scenarioTxn(ctx context.Context, o *opts) M {
	adm, err := o.adminWithTopic(ctx, 1, nil)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer adm.Close()
	t := o.topic
	p, err := o.txnProducer("sarama-txn")
	if err != nil {
		return M{"error": errJSON(err)}
	}
	out := M{"transactional": p.IsTransactional(), "status_initial": p.TxnStatus().String()}
	out["txn1"] = txnRound(p, t, seq("commit1", 5), "commit")
	out["txn2"] = txnRound(p, t, seq("abort", 5), "abort")
	out["txn3"] = txnRound(p, t, seq("commit2", 3), "commit")
	out["txn4_open"] = txnRound(p, t, seq("open", 2), "")

	out["hwm_open"] = listOffsetsJSON(adm, t, 1, sarama.OffsetNewest, sarama.ReadUncommitted)
	out["lso_open"] = listOffsetsJSON(adm, t, 1, sarama.OffsetNewest, sarama.ReadCommitted)
	out["read_committed_open"] = o.readAll(ctx, t, sarama.ReadCommitted, 8)
	out["read_uncommitted_open"] = o.readAll(ctx, t, sarama.ReadUncommitted, 15)

	out["txn4_abort"] = bounded(20*time.Second, p.AbortTxn)
	out["hwm"], out["lso"] = waitStable(ctx, adm, t)
	out["read_committed"] = o.readAll(ctx, t, sarama.ReadCommitted, 8)

	// A new instance with the same transactional id (InitProducerId bumps the epoch).
	p2, err := o.txnProducer("sarama-txn-2")
	if err != nil {
		out["new_instance"] = M{"error": errJSON(err)}
		p.Close()
		return out
	}
	out["txn_new_instance"] = txnRound(p2, t, valuesOf("new-0"), "commit")
	out["txn_fenced_instance"] = txnRound(p, t, valuesOf("zombie-0"), "commit")
	out["read_committed_after_fence"] = o.readAll(ctx, t, sarama.ReadCommitted, 9)
	out["close_new"] = bounded(10*time.Second, p2.Close)
	out["close_fenced"] = bounded(10*time.Second, p.Close)
	return out
}

// scenarioTxnETL: consume-transform-produce. The input records' offsets are committed for a
// group inside the transactions that write their output (AddMessageToTxn: AddOffsetsToTxn +
// TxnOffsetCommit); an aborted round commits neither output nor offsets.
func scenarioTxnETL(ctx context.Context, o *opts) M {
	adm, err := o.admin()
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer adm.Close()
	in, outT := o.topic, o.topic2
	for _, t := range []string{in, outT} {
		if err := createTopic(ctx, adm, t, 1, nil); err != nil {
			return M{"error": errJSON(err)}
		}
	}
	out := M{}
	pcfg, _ := o.config("sarama-etl-input")
	pcfg.Producer.RequiredAcks = sarama.WaitForAll
	pcfg.Producer.Partitioner = sarama.NewManualPartitioner
	ip, err := sarama.NewSyncProducer([]string{o.bootstrap}, pcfg)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	var msgs []*sarama.ProducerMessage
	for i := 0; i < o.count; i++ {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: in, Partition: 0,
			Key: sarama.StringEncoder(fmt.Sprint(i)), Value: sarama.StringEncoder(fmt.Sprintf("item-%d", i))})
	}
	out["produce_input"] = errJSON(ip.SendMessages(msgs))
	ip.Close()

	ccfg, _ := o.config("sarama-etl-consumer")
	c, err := sarama.NewConsumer([]string{o.bootstrap}, ccfg)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer c.Close()
	pc, err := c.ConsumePartition(in, 0, sarama.OffsetOldest)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer pc.AsyncClose()
	var input []*sarama.ConsumerMessage
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	for len(input) < o.count && rctx.Err() == nil {
		select {
		case m := <-pc.Messages():
			input = append(input, m)
		case e := <-pc.Errors():
			out["input_error"] = errJSON(e.Err)
			cancel()
		case <-rctx.Done():
		}
	}
	cancel()
	out["input"] = len(input)
	if len(input) < o.count {
		return out
	}

	p, err := o.txnProducer("sarama-etl")
	if err != nil {
		out["error"] = errJSON(err)
		return out
	}
	defer p.Close()
	round := func(from, to int, end string, want int64) M {
		r := M{"begin": errJSON(p.BeginTxn())}
		var errs []any
		for _, m := range input[from:to] {
			_, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: outT, Partition: 0, Key: sarama.ByteEncoder(m.Key),
				Value: sarama.StringEncoder(strings.ToUpper(string(m.Value)))})
			if err != nil {
				errs = append(errs, errJSON(err))
			}
			if err := p.AddMessageToTxn(m, o.group, nil); err != nil {
				errs = append(errs, M{"add_message": errJSON(err)})
			}
		}
		r["errors"] = errs
		if end == "commit" {
			r["end"] = bounded(20*time.Second, p.CommitTxn)
		} else {
			r["end"] = bounded(20*time.Second, p.AbortTxn)
		}
		r["status"] = p.TxnStatus().String()
		// Kafka makes a transaction's offset commit visible once its marker is written, which
		// can be a moment after EndTxn returns: poll (bounded) for the expected offset.
		key := fmt.Sprintf("%s/0", in)
		for i := 0; i < 30; i++ {
			r["offsets"] = fetchOffsetsJSON(adm, o.group, nil)
			offs, _ := r["offsets"].(M)["offsets"].(M)
			if b, ok := offs[key].(M); ok && b["offset"] == want || !sleepCtx(ctx, 100*time.Millisecond) {
				break
			}
		}
		return r
	}
	split1, split2 := 8, 13
	out["round1"] = round(0, split1, "commit", int64(split1))
	out["round2_aborted"] = round(split1, split2, "abort", int64(split1))
	out["round3"] = round(split1, len(input), "commit", int64(len(input)))
	out["output"] = o.readAll(ctx, outT, sarama.ReadCommitted, o.count)
	out["output_uncommitted"] = o.readAll(ctx, outT, sarama.ReadUncommitted, o.count+split2-split1)
	out["output_end"] = listOffsetsJSON(adm, outT, 1, sarama.OffsetNewest, sarama.ReadUncommitted)
	out["describe_group"] = describeGroupJSON(adm, o.group)
	return out
}

// scenarioTxnTimeout: a transaction left open past its Producer.Transaction.Timeout (1 s) is
// aborted by the coordinator on its own (the broker under test checks every 500 ms); the
// producer that opened it then finds itself fenced at CommitTxn; a new producer with the same
// transactional id carries on.
func scenarioTxnTimeout(ctx context.Context, o *opts) M {
	adm, err := o.adminWithTopic(ctx, 1, nil)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer adm.Close()
	t := o.topic
	cfg, err := o.config("sarama-txn-timeout")
	if err != nil {
		return M{"error": errJSON(err)}
	}
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Transaction.ID = o.txnID
	cfg.Producer.Transaction.Timeout = time.Second
	cfg.Producer.Transaction.Retry.Max = 5
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	p, err := sarama.NewSyncProducer([]string{o.bootstrap}, cfg)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer p.Close()
	out := M{}
	out["open"] = txnRound(p, t, valuesOf("doomed-0"), "")
	start := time.Now()
	var hwm, lso M
	for i := 0; i < 150; i++ {
		hwm = listOffsetsJSON(adm, t, 1, sarama.OffsetNewest, sarama.ReadUncommitted)
		lso = listOffsetsJSON(adm, t, 1, sarama.OffsetNewest, sarama.ReadCommitted)
		h, _ := hwm["0"].(M)
		l, _ := lso["0"].(M)
		if h != nil && l != nil && h["offset"] == l["offset"] || !sleepCtx(ctx, 100*time.Millisecond) {
			break
		}
	}
	out["aborted_after_ms"] = time.Since(start).Milliseconds()
	out["hwm"], out["lso"] = hwm, lso
	out["commit_after_timeout"] = bounded(20*time.Second, p.CommitTxn)
	out["status_after_commit"] = p.TxnStatus().String()
	out["read_committed"] = o.readAll(ctx, t, sarama.ReadCommitted, 0)
	out["read_uncommitted"] = o.readAll(ctx, t, sarama.ReadUncommitted, 1)
	p2, err := o.txnProducer("sarama-txn-timeout-2")
	if err != nil {
		out["new_instance"] = M{"error": errJSON(err)}
		return out
	}
	out["new_instance"] = txnRound(p2, t, valuesOf("after-0"), "commit")
	out["close_new"] = bounded(10*time.Second, p2.Close)
	out["read_committed_after"] = o.readAll(ctx, t, sarama.ReadCommitted, 1)
	return out
}
