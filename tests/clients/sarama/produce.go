package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/IBM/sarama"
)

var codecs = map[string]sarama.CompressionCodec{
	"none": sarama.CompressionNone, "gzip": sarama.CompressionGZIP,
	"snappy": sarama.CompressionSnappy, "lz4": sarama.CompressionLZ4, "zstd": sarama.CompressionZSTD,
}

// sampleMessages builds n messages over `partitions` partitions (i % partitions, with the
// manual partitioner) covering what a record can carry: keys, a null key, null and empty
// values, values of several sizes, headers (binary, and a null header value), and a chosen
// timestamp base+i. test_sarama.py's sample() computes the same records.
func sampleMessages(topic string, n, partitions int, base int64) []*sarama.ProducerMessage {
	out := make([]*sarama.ProducerMessage, 0, n)
	for i := 0; i < n; i++ {
		m := &sarama.ProducerMessage{Topic: topic, Partition: int32(i % partitions),
			Timestamp: time.UnixMilli(base + int64(i)), Metadata: i}
		if i%10 != 3 {
			m.Key = sarama.StringEncoder(fmt.Sprintf("key-%d", i%17))
		}
		switch i % 10 {
		case 5: // null value
		case 6:
			m.Value = sarama.ByteEncoder([]byte{})
		default:
			m.Value = sarama.StringEncoder(strings.Repeat(fmt.Sprintf("value-%d-", i), 1+i%7))
		}
		m.Headers = []sarama.RecordHeader{{Key: []byte("idx"), Value: []byte(fmt.Sprint(i))},
			{Key: []byte("bin"), Value: []byte{0, 1, 0xff}}}
		if i%4 == 0 {
			m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte("nil")})
		}
		out = append(out, m)
	}
	return out
}

func (o *opts) producerConfig(clientID string) (*sarama.Config, error) {
	cfg, err := o.config(clientID)
	if err != nil {
		return nil, err
	}
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	codec, ok := codecs[o.codec]
	if !ok {
		return nil, fmt.Errorf("unknown codec %q", o.codec)
	}
	cfg.Producer.Compression = codec
	switch o.acks {
	case "1":
		cfg.Producer.RequiredAcks = sarama.WaitForLocal
	case "all":
		cfg.Producer.RequiredAcks = sarama.WaitForAll
	default:
		return nil, fmt.Errorf("unknown acks %q", o.acks)
	}
	if o.idempotent {
		// sarama's preconditions for Producer.Idempotent.
		cfg.Producer.Idempotent = true
		cfg.Net.MaxOpenRequests = 1
		cfg.Producer.RequiredAcks = sarama.WaitForAll
	}
	// Batch a little so several records share a (compressed) batch.
	cfg.Producer.Flush.Frequency = 20 * time.Millisecond
	cfg.Producer.Flush.Messages = 16
	return cfg, nil
}

// produceAsync feeds every message to an AsyncProducer and collects one outcome per message
// from Successes/Errors, keyed by the message's Metadata index.
// connectedClient is a client whose brokers are connected before a producer uses them. It works
// around a race in sarama v1.61.1's Broker.Open: Open marks the broker opened before it takes
// the lock the connecting goroutine holds, so when two partition producers open the same
// broker at once the loser can send first and fail with "broker not connected". The producer
// then refreshes metadata, which fails the same way and closes the broker under the winner's
// in-flight batch; that batch is retried and, without idempotence, appended twice (seen about
// once in 200 runs as offsets starting at 16, against any broker).
func connectedClient(bootstrap string, cfg *sarama.Config) (sarama.Client, error) {
	client, err := sarama.NewClient([]string{bootstrap}, cfg)
	if err != nil {
		return nil, err
	}
	for _, b := range client.Brokers() {
		_ = b.Open(cfg)
		if _, err := b.Connected(); err != nil { // waits for the dial
			client.Close()
			return nil, err
		}
	}
	return client, nil
}

func produceAsync(ctx context.Context, p sarama.AsyncProducer, msgs []*sarama.ProducerMessage) []any {
	results := make([]any, len(msgs))
	go func() {
		for _, m := range msgs {
			select {
			case p.Input() <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	for got := 0; got < len(msgs); got++ {
		select {
		case m := <-p.Successes():
			results[m.Metadata.(int)] = M{"partition": m.Partition, "offset": m.Offset, "error": nil}
		case e := <-p.Errors():
			results[e.Msg.Metadata.(int)] = M{"partition": e.Msg.Partition, "offset": e.Msg.Offset,
				"error": errJSON(e.Err)}
		case <-ctx.Done():
			return results
		}
	}
	return results
}

// scenarioProduceConsume produces the sample records with a SyncProducer (SendMessages) or an
// AsyncProducer, with the chosen acks, codec and idempotence, then reads every partition back
// from the start with a partition consumer.
func scenarioProduceConsume(ctx context.Context, o *opts) M {
	adm, err := o.admin()
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer adm.Close()
	t := o.topic
	if err := createTopic(ctx, adm, t, o.partitions, parseConfigs(o.configs)); err != nil {
		return M{"error": errJSON(err)}
	}
	cfg, err := o.producerConfig("sarama-producer")
	if err != nil {
		return M{"error": err.Error()}
	}
	base := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()
	msgs := sampleMessages(t, o.count, o.partitions, base)
	out := M{"base": base, "before_ms": time.Now().UnixMilli()}
	var produced []any
	switch o.producer {
	case "sync":
		p, err := sarama.NewSyncProducer([]string{o.bootstrap}, cfg)
		if err != nil {
			return M{"error": errJSON(err)}
		}
		// The first record alone (SendMessage), the rest in one call (SendMessages).
		part, off, err := p.SendMessage(msgs[0])
		produced = append(produced, M{"partition": part, "offset": off, "error": errJSON(err)})
		err = p.SendMessages(msgs[1:])
		out["send_messages"] = errJSON(err)
		failed := map[*sarama.ProducerMessage]error{}
		if pes, ok := err.(sarama.ProducerErrors); ok {
			for _, pe := range pes {
				failed[pe.Msg] = pe.Err
			}
		}
		for _, m := range msgs[1:] {
			produced = append(produced, M{"partition": m.Partition, "offset": m.Offset,
				"error": errJSON(failed[m])})
		}
		out["close"] = errJSON(p.Close())
	case "async":
		client, err := connectedClient(o.bootstrap, cfg)
		if err != nil {
			return M{"error": errJSON(err)}
		}
		defer client.Close()
		p, err := sarama.NewAsyncProducerFromClient(client)
		if err != nil {
			return M{"error": errJSON(err)}
		}
		pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		produced = produceAsync(pctx, p, msgs)
		cancel()
		out["close"] = errJSON(p.Close())
	default:
		return M{"error": "unknown producer " + o.producer}
	}
	out["produced"] = produced
	out["after_ms"] = time.Now().UnixMilli()

	per := map[int32]int{}
	for _, m := range msgs {
		per[m.Partition]++
	}
	ccfg, _ := o.config("sarama-consumer")
	c, err := sarama.NewConsumer([]string{o.bootstrap}, ccfg)
	if err != nil {
		out["consume"] = errJSON(err)
		return out
	}
	defer c.Close()
	consumed := M{}
	for p := 0; p < o.partitions; p++ {
		consumed[fmt.Sprint(p)] = readPartition(ctx, c, t, int32(p), sarama.OffsetOldest,
			per[int32(p)], 300*time.Millisecond, 15*time.Second)
	}
	out["consumed"] = consumed
	out["end"] = listOffsetsJSON(adm, t, o.partitions, sarama.OffsetNewest, sarama.ReadUncommitted)
	return out
}

// scenarioFetchLimits: ten 20 kB records (one batch each), then 200 small ones in one batch,
// read with Consumer.Fetch.Default (the partition limit) and Fetch.MaxBytes at 1 KiB. The
// broker still returns a first batch bigger than the limits (KIP-74); sarama reads on.
func scenarioFetchLimits(ctx context.Context, o *opts) M {
	adm, err := o.adminWithTopic(ctx, 1, nil)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer adm.Close()
	t := o.topic
	cfg, err := o.config("sarama-fetch-limits-producer")
	if err != nil {
		return M{"error": errJSON(err)}
	}
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	p, err := sarama.NewSyncProducer([]string{o.bootstrap}, cfg)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer p.Close()
	out := M{}
	var perr []any
	for i := 0; i < 10; i++ {
		_, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: t, Partition: 0,
			Value: sarama.StringEncoder(strings.Repeat(string(rune('a'+i)), 20_000))})
		perr = append(perr, errJSON(err))
	}
	var small []*sarama.ProducerMessage
	for i := 0; i < 200; i++ {
		small = append(small, &sarama.ProducerMessage{Topic: t, Partition: 0,
			Value: sarama.StringEncoder(fmt.Sprintf("small-%03d-%s", i, strings.Repeat("x", 90)))})
	}
	perr = append(perr, errJSON(p.SendMessages(small)))
	out["produce"] = perr

	ccfg, _ := o.config("sarama-fetch-limits")
	ccfg.Consumer.Fetch.Default = 1024
	ccfg.Consumer.Fetch.MaxBytes = 1024
	c, err := sarama.NewConsumer([]string{o.bootstrap}, ccfg)
	if err != nil {
		out["error"] = errJSON(err)
		return out
	}
	defer c.Close()
	r := readPartition(ctx, c, t, 0, sarama.OffsetOldest, 210, 300*time.Millisecond, 20*time.Second)
	offs, sizes := []int64{}, []int{}
	for _, m := range r["messages"].([]M) {
		offs = append(offs, m["offset"].(int64))
		v, _ := m["value"].(string)
		sizes = append(sizes, len(v))
	}
	out["offsets"], out["b64_sizes"], out["errors"] = offs, sizes, r["errors"]
	return out
}
