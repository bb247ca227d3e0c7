package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func codecOpt(codec string) ([]kgo.Opt, error) {
	var c kgo.CompressionCodec
	switch codec {
	case "default":
		return nil, nil // franz-go's own preference: snappy, else none
	case "none":
		c = kgo.NoCompression()
	case "gzip":
		c = kgo.GzipCompression()
	case "snappy":
		c = kgo.SnappyCompression()
	case "lz4":
		c = kgo.Lz4Compression()
	case "zstd":
		c = kgo.ZstdCompression()
	default:
		return nil, fmt.Errorf("unknown codec %q", codec)
	}
	return []kgo.Opt{kgo.ProducerBatchCompression(c)}, nil
}

// sampleRecords are what a user's records look like at their most varied: keyed and unkeyed,
// null, empty and compressible values, several headers including binary and null values, and
// explicit create timestamps. Python rebuilds the same list to compare (test_franz.sample).
func sampleRecords(n int, base int64) []*kgo.Record {
	recs := make([]*kgo.Record, 0, n)
	for i := 0; i < n; i++ {
		r := &kgo.Record{Timestamp: time.UnixMilli(base + int64(i))}
		if i%10 != 3 {
			r.Key = []byte(fmt.Sprintf("key-%d", i%17))
		}
		switch i % 10 {
		case 5:
			r.Value = nil
		case 6:
			r.Value = []byte{}
		default:
			r.Value = []byte(strings.Repeat(fmt.Sprintf("value-%d-", i), 1+i%7))
		}
		r.Headers = []kgo.RecordHeader{
			{Key: "idx", Value: []byte(fmt.Sprint(i))},
			{Key: "bin", Value: []byte{0, 1, 0xff}},
		}
		if i%4 == 0 {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: "nil", Value: nil})
		}
		recs = append(recs, r)
	}
	return recs
}

// scenarioProduceConsume produces the sample with franz-go's producer defaults (idempotent,
// acks=all) and the chosen codec, then reads every partition back from the start without a
// group.
func scenarioProduceConsume(ctx context.Context, o *opts) M {
	adm, acl, err := o.admin()
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer acl.Close()
	t := o.topic
	if err := createTopic(ctx, adm, t, o.partitions, parseConfigs(o.configs)); err != nil {
		return M{"error": errJSON(err)}
	}
	copts, err := codecOpt(o.codec)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	p, err := o.client("franz-producer", append(copts, kgo.DefaultProduceTopic(t))...)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer p.Close()
	base := time.Now().Add(-10 * time.Minute).UnixMilli()
	out := M{"base": base}
	out["produce"] = produceResultsJSON(p.ProduceSync(ctx, sampleRecords(o.count, base)...))

	parts := map[int32]kgo.Offset{}
	for i := 0; i < o.partitions; i++ {
		parts[int32(i)] = kgo.NewOffset().AtStart()
	}
	c, err := o.client("franz-consumer", kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{t: parts}))
	if err != nil {
		out["error"] = errJSON(err)
		return out
	}
	defer c.Close()
	recs, errs := consume(ctx, c, o.count, 20*time.Second)
	out["consumed"] = recordsJSON(recs)
	out["fetch_errors"] = errs
	return out
}

// scenarioProduceModes covers the producer settings users change from the defaults: acks=1 and
// acks=0 without idempotence, and a LogAppendTime topic (where the broker's append time
// replaces the record's timestamp, in the produce response and in the log).
func scenarioProduceModes(ctx context.Context, o *opts) M {
	adm, acl, err := o.admin()
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer acl.Close()
	t, lat := o.topic, o.topic2
	if err := createTopic(ctx, adm, t, 1, nil); err != nil {
		return M{"error": errJSON(err)}
	}
	latCfg := map[string]*string{"message.timestamp.type": strp("LogAppendTime")}
	if err := createTopic(ctx, adm, lat, 1, latCfg); err != nil {
		return M{"error": errJSON(err)}
	}
	out := M{}
	produce := func(name string, n int, topic string, extra ...kgo.Opt) []M {
		p, err := o.client(name, append(extra, kgo.DefaultProduceTopic(topic))...)
		if err != nil {
			return []M{{"error": errJSON(err)}}
		}
		defer p.Close()
		var recs []*kgo.Record
		for i := 0; i < n; i++ {
			recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("%s-%d", name, i)),
				Timestamp: time.UnixMilli(1_000_000 + int64(i))})
		}
		return produceResultsJSON(p.ProduceSync(ctx, recs...))
	}
	out["acks1"] = produce("acks1", 5, t, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	out["acks0"] = produce("acks0", 5, t, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	before := time.Now().UnixMilli()
	out["log_append"] = produce("logappend", 3, lat)
	out["before_ms"], out["after_ms"] = before, time.Now().UnixMilli()

	c, err := o.client("franz-modes-consumer", kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		t: {0: kgo.NewOffset().AtStart()}, lat: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		out["error"] = errJSON(err)
		return out
	}
	defer c.Close()
	recs, errs := consume(ctx, c, 13, 15*time.Second)
	out["consumed"], out["fetch_errors"] = recordsJSON(recs), errs
	return out
}

// scenarioCluster: what kadm reports about the cluster itself: brokers, the broker's own
// configs, and the log dirs holding a topic.
func scenarioCluster(ctx context.Context, o *opts) M {
	adm, acl, err := o.admin()
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer acl.Close()
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	brokers := []M{}
	for _, b := range md.Brokers {
		brokers = append(brokers, M{"node_id": b.NodeID, "host": b.Host, "port": b.Port, "rack": b.Rack})
	}
	out := M{"cluster_id": md.Cluster, "controller": md.Controller, "brokers": brokers}
	lb, err := adm.ListBrokers(ctx)
	out["list_brokers"] = M{"error": errJSON(err), "count": len(lb)}
	out["broker_configs"] = configsJSON(adm.DescribeBrokerConfigs(ctx, 1))

	t := o.topic
	if err := createTopic(ctx, adm, t, 2, nil); err != nil {
		out["error"] = errJSON(err)
		return out
	}
	p, err := o.client("franz-cluster-producer", kgo.DefaultProduceTopic(t),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		out["error"] = errJSON(err)
		return out
	}
	defer p.Close()
	var recs []*kgo.Record
	for i := 0; i < 10; i++ {
		recs = append(recs, &kgo.Record{Partition: 0, Value: make([]byte, 1000)})
	}
	out["produce"] = errJSON(p.ProduceSync(ctx, recs...).FirstErr())
	dirs, err := adm.DescribeAllLogDirs(ctx, kadm.TopicsSet{t: {0: {}, 1: {}}})
	if err != nil {
		out["log_dirs"] = M{"error": errJSON(err)}
		return out
	}
	ld := []M{}
	dirs.Each(func(d kadm.DescribedLogDir) {
		parts := M{}
		for _, ps := range d.Topics {
			for part, dp := range ps {
				parts[fmt.Sprint(part)] = M{"size": dp.Size, "offset_lag": dp.OffsetLag, "is_future": dp.IsFuture}
			}
		}
		ld = append(ld, M{"broker": d.Broker, "dir": d.Dir, "error": errJSON(d.Err),
			"total_bytes": d.TotalBytes, "usable_bytes": d.UsableBytes, "partitions": parts})
	})
	out["log_dirs"] = ld
	return out
}

// scenarioFetchLimits reads large batches and many small records through tiny fetch limits:
// the broker must still return the first batch whole when it exceeds them (KIP-74), so the
// consumer keeps making progress.
func scenarioFetchLimits(ctx context.Context, o *opts) M {
	_, acl, err := o.adminWithTopic(ctx, 1, nil)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer acl.Close()
	t := o.topic
	p, err := o.client("franz-limits-producer", kgo.DefaultProduceTopic(t),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer p.Close()
	out := M{}
	var errs []any
	big := make([]byte, 20_000)
	for i := 0; i < 10; i++ {
		// One synchronous produce per record: ten batches of 20 kB.
		for j := range big {
			big[j] = byte(i + j)
		}
		errs = append(errs, errJSON(p.ProduceSync(ctx, &kgo.Record{Value: append([]byte(nil), big...)}).FirstErr()))
	}
	var small []*kgo.Record
	for i := 0; i < 200; i++ {
		small = append(small, &kgo.Record{Value: []byte(fmt.Sprintf("small-%03d-%s", i, strings.Repeat("x", 90)))})
	}
	errs = append(errs, errJSON(p.ProduceSync(ctx, small...).FirstErr()))
	out["produce"] = errs

	c, err := o.client("franz-limits-consumer", kgo.FetchMaxBytes(1024), kgo.FetchMaxPartitionBytes(1024),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{t: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		out["error"] = errJSON(err)
		return out
	}
	defer c.Close()
	recs, ferrs := consume(ctx, c, 210, 20*time.Second)
	offs, sizes := []int64{}, []int{}
	for _, r := range recs {
		offs = append(offs, r.Offset)
		sizes = append(sizes, len(r.Value))
	}
	out["offsets"], out["sizes"], out["fetch_errors"] = offs, sizes, ferrs
	if len(recs) > 10 {
		out["first_small"] = string(recs[10].Value[:9])
		out["last_small"] = string(recs[len(recs)-1].Value[:9])
	}
	return out
}
