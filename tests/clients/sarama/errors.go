package main

import (
	"context"
	"math/rand"
	"time"

	"github.com/IBM/sarama"
)

// scenarioProduceUnknown sends one message to a topic nobody created, with sarama's
// Metadata.AllowAutoTopicCreation as --auto-create says (sarama's default is true).
func scenarioProduceUnknown(ctx context.Context, o *opts) M {
	cfg, err := o.config("sarama-unknown")
	if err != nil {
		return M{"error": errJSON(err)}
	}
	// A user checking for a missing topic keeps the retries short.
	cfg.Producer.Retry.Max = 2
	cfg.Metadata.Retry.Max = 2
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	out := M{}
	start := time.Now()
	p, err := sarama.NewSyncProducer([]string{o.bootstrap}, cfg)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	var part int32
	var off int64
	out["produce"] = bounded(25*time.Second, func() error {
		var err error
		part, off, err = p.SendMessage(&sarama.ProducerMessage{Topic: o.topic,
			Value: sarama.StringEncoder("hello")})
		return err
	})
	out["partition"], out["offset"] = part, off
	out["produce_ms"] = time.Since(start).Milliseconds()
	p.Close()
	adm, err := o.admin()
	if err != nil {
		out["topic_after"] = M{"error": errJSON(err)}
		return out
	}
	defer adm.Close()
	out["topic_after"] = describeTopicsJSON(adm, o.topic)
	return out
}

// scenarioTooLarge sends a record bigger than the topic's (or the broker's) message size limit
// but within sarama's own Producer.MaxMessageBytes, so the broker is the one to refuse it; then
// a small record with the same producer.
func scenarioTooLarge(ctx context.Context, o *opts) M {
	adm, err := o.admin()
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer adm.Close()
	t := o.topic
	if err := createTopic(ctx, adm, t, 1, parseConfigs(o.configs)); err != nil {
		return M{"error": errJSON(err)}
	}
	out := M{}
	if d := describeConfigJSON(adm, sarama.TopicResource, t); d["error"] == nil {
		c := d["configs"].(M)["max.message.bytes"].(M)
		out["max_message_bytes"] = M{"value": c["value"], "source": c["source"]}
	}
	cfg, err := o.producerConfig("sarama-too-large")
	if err != nil {
		return M{"error": err.Error()}
	}
	p, err := sarama.NewSyncProducer([]string{o.bootstrap}, cfg)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer p.Close()
	// Random bytes so no codec can shrink the batch under the limit.
	big := make([]byte, o.size)
	rand.New(rand.NewSource(1)).Read(big)
	send := func(v []byte) M {
		var part int32
		var off int64
		res := bounded(20*time.Second, func() error {
			var err error
			part, off, err = p.SendMessage(&sarama.ProducerMessage{Topic: t, Partition: 0,
				Value: sarama.ByteEncoder(v)})
			return err
		})
		return M{"error": res, "partition": part, "offset": off}
	}
	out["big"] = send(big)
	out["small"] = send([]byte("fits"))
	out["end"] = listOffsetsJSON(adm, t, 1, sarama.OffsetNewest, sarama.ReadUncommitted)
	return out
}

// scenarioFetchOutOfRange: sarama checks a requested start offset against ListOffsets itself
// (ConsumePartition fails), so the broker's own OFFSET_OUT_OF_RANGE in a Fetch is reached by
// pausing a partition consumer at a valid offset and deleting the records under it. Then a
// group whose committed offset fell below the log start resets to the oldest offset.
func scenarioFetchOutOfRange(ctx context.Context, o *opts) M {
	adm, err := o.adminWithTopic(ctx, 1, nil)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer adm.Close()
	t := o.topic
	out := M{}
	pcfg, _ := o.config("sarama-oor-producer")
	pcfg.Producer.RequiredAcks = sarama.WaitForAll
	pcfg.Producer.Partitioner = sarama.NewManualPartitioner
	p, err := sarama.NewSyncProducer([]string{o.bootstrap}, pcfg)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer p.Close()
	five := func(first byte) any {
		var msgs []*sarama.ProducerMessage
		for i := 0; i < 5; i++ {
			msgs = append(msgs, &sarama.ProducerMessage{Topic: t, Partition: 0,
				Value: sarama.ByteEncoder([]byte{first + byte(i)})})
		}
		return errJSON(p.SendMessages(msgs))
	}
	out["produce_1"] = five('a')

	ccfg, _ := o.config("sarama-oor-consumer")
	c, err := sarama.NewConsumer([]string{o.bootstrap}, ccfg)
	if err != nil {
		out["error"] = errJSON(err)
		return out
	}
	defer c.Close()
	_, err = c.ConsumePartition(t, 0, 100)
	out["consume_past_end"] = errJSON(err)

	pc, err := c.ConsumePartition(t, 0, sarama.OffsetNewest)
	if err != nil {
		out["consume_newest"] = errJSON(err)
		return out
	}
	pc.Pause()
	// Any fetch already in flight (200 ms MaxWaitTime) returns empty before the new records.
	sleepCtx(ctx, 700*time.Millisecond)
	out["produce_2"] = five('f')
	out["delete_records"] = errJSON(adm.DeleteRecords(t, map[int32]int64{0: 8}))
	pc.Resume()
	fetched := M{"messages": []int64{}}
	wait := time.After(8 * time.Second)
loop:
	for i := 0; i < 100; i++ {
		select {
		case m, ok := <-pc.Messages():
			if !ok {
				fetched["closed"] = true
				break loop
			}
			fetched["messages"] = append(fetched["messages"].([]int64), m.Offset)
		case e, ok := <-pc.Errors():
			if !ok {
				fetched["closed"] = true
				break loop
			}
			fetched["error"] = errJSON(e.Err)
			break loop
		case <-wait:
			break loop
		}
	}
	pc.AsyncClose()
	out["fetch_after_delete"] = fetched

	_, err = c.ConsumePartition(t, 0, 2)
	out["consume_below_start"] = errJSON(err)
	oldest := readPartition(ctx, c, t, 0, sarama.OffsetOldest, 2, 300*time.Millisecond, 8*time.Second)
	offs := []any{}
	for _, m := range oldest["messages"].([]M) {
		offs = append(offs, m["offset"])
	}
	out["consume_oldest"] = M{"offsets": offs, "errors": oldest["errors"]}

	// A group committed at 2, below the log start (8): sarama's ResetInvalidOffsets starts it
	// at Offsets.Initial (oldest) instead.
	out["commit_stale"] = alterOffsetsJSON(adm.AlterConsumerGroupOffsets(o.group,
		map[string]map[int32]sarama.OffsetAndMetadata{t: {0: {Offset: 2, LeaderEpoch: -1}}}, nil))
	m, err := startMember(ctx, o, "sarama-oor-group")
	if err != nil {
		out["group"] = M{"error": errJSON(err)}
		return out
	}
	waitConsumed(ctx, 2, m)
	out["group_close"] = m.close()
	out["group"] = m.json()
	return out
}

// scenarioOldVersion: a sarama configured for an old Kafka (--version, e.g. 0.10.2.0) against
// a topic holding three records (written by a current client): sarama still caps its requests
// at what Config.Version allows, so it asks for versions Kafka 4.0 removed (KIP-896) and the
// broker closes the connection. Records carry no headers (sarama refuses those below 0.11).
func scenarioOldVersion(ctx context.Context, o *opts) M {
	cur := *o
	cur.version = "4.0.0"
	adm, err := cur.admin()
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer adm.Close()
	t := o.topic
	if err := createTopic(ctx, adm, t, 1, nil); err != nil {
		return M{"error": errJSON(err)}
	}
	pcfg, _ := cur.config("sarama-current")
	pcfg.Producer.RequiredAcks = sarama.WaitForAll
	cp, err := sarama.NewSyncProducer([]string{o.bootstrap}, pcfg)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	var msgs []*sarama.ProducerMessage
	for i := 0; i < 3; i++ {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: t, Value: sarama.StringEncoder("current")})
	}
	out := M{"produce_current": errJSON(cp.SendMessages(msgs))}
	cp.Close()

	cfg, err := o.config("sarama-old")
	if err != nil {
		return M{"error": errJSON(err)}
	}
	cfg.Producer.Retry.Max = 1
	cfg.Metadata.Retry.Max = 1
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	p, err := sarama.NewSyncProducer([]string{o.bootstrap}, cfg)
	if err != nil {
		out["new_producer"] = errJSON(err)
	} else {
		var off int64
		out["produce_old"] = bounded(20*time.Second, func() error {
			var err error
			_, off, err = p.SendMessage(&sarama.ProducerMessage{Topic: t, Value: sarama.StringEncoder("old")})
			return err
		})
		out["produce_old_offset"] = off
		p.Close()
	}
	c, err := sarama.NewConsumer([]string{o.bootstrap}, cfg)
	if err != nil {
		out["new_consumer"] = errJSON(err)
		return out
	}
	defer c.Close()
	r := readPartition(ctx, c, t, 0, sarama.OffsetOldest, 3, 300*time.Millisecond, 1500*time.Millisecond)
	offs := []any{}
	for _, m := range r["messages"].([]M) {
		offs = append(offs, m["offset"])
	}
	errs, _ := r["errors"].([]any)
	var first any
	if len(errs) > 0 {
		first = errs[0]
	}
	out["consume_old"] = M{"consume_error": r["consume_error"], "offsets": offs,
		"first_fetch_error": first}
	out["end"] = listOffsetsJSON(adm, t, 1, sarama.OffsetNewest, sarama.ReadUncommitted)
	return out
}
