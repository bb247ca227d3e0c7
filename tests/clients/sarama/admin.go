package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/IBM/sarama"
)

func topicMetaJSON(tm *sarama.TopicMetadata) M {
	parts := M{}
	for _, p := range tm.Partitions {
		parts[fmt.Sprint(p.ID)] = M{"leader": p.Leader, "leader_epoch": p.LeaderEpoch,
			"replicas": p.Replicas, "isr": p.Isr, "offline": p.OfflineReplicas,
			"error": kerrJSON(p.Err)}
	}
	return M{"name": tm.Name, "error": kerrJSON(tm.Err), "internal": tm.IsInternal,
		"id": tm.Uuid.String(), "partitions": parts}
}

func describeTopicsJSON(adm sarama.ClusterAdmin, topics ...string) M {
	tms, err := adm.DescribeTopics(topics)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	out := M{}
	for _, tm := range tms {
		out[tm.Name] = topicMetaJSON(tm)
	}
	return M{"error": nil, "topics": out}
}

func configEntriesJSON(entries []sarama.ConfigEntry) M {
	out := M{}
	for _, e := range entries {
		c := M{"value": e.Value, "source": e.Source.String(), "default": e.Default,
			"read_only": e.ReadOnly, "sensitive": e.Sensitive}
		if len(e.Synonyms) > 0 {
			syn := []M{}
			for _, s := range e.Synonyms {
				syn = append(syn, M{"name": s.ConfigName, "value": s.ConfigValue,
					"source": s.Source.String()})
			}
			c["synonyms"] = syn
		}
		out[e.Name] = c
	}
	return out
}

func describeConfigJSON(adm sarama.ClusterAdmin, typ sarama.ConfigResourceType, name string) M {
	entries, err := adm.DescribeConfig(sarama.ConfigResource{Type: typ, Name: name})
	if err != nil {
		return M{"error": errJSON(err)}
	}
	return M{"error": nil, "configs": configEntriesJSON(entries)}
}

// describedAs reports whether DescribeConfig shows every key in want with that value (a nil
// want value: back to its default).
func describedAs(d M, want map[string]*string) bool {
	cfgs, _ := d["configs"].(M)
	for k, v := range want {
		c, ok := cfgs[k].(M)
		if !ok {
			return false
		}
		if v == nil {
			if c["source"] == sarama.SourceTopic.String() {
				return false
			}
		} else if c["value"] != *v || c["source"] != sarama.SourceTopic.String() {
			return false
		}
	}
	return true
}

// pollConfigs re-describes (bounded) until the alter shows: Kafka applies an alter through its
// metadata log, so DescribeConfigs may answer with the old values for a moment.
func pollConfigs(ctx context.Context, adm sarama.ClusterAdmin, topic string, want map[string]*string) M {
	var d M
	for i := 0; i < 50; i++ {
		d = describeConfigJSON(adm, sarama.TopicResource, topic)
		if describedAs(d, want) || !sleepCtx(ctx, 100*time.Millisecond) {
			break
		}
	}
	return d
}

// scenarioAdmin walks a topic's life through sarama's ClusterAdmin: create (with configs),
// list, describe, describe configs, alter (whole-set and incremental), add partitions, delete
// records, delete; and the errors each step gives when misused.
func scenarioAdmin(ctx context.Context, o *opts) M {
	adm, err := o.admin()
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer adm.Close()
	out := M{}
	t := o.topic

	brokers, controller, err := adm.DescribeCluster()
	bs := []M{}
	for _, b := range brokers {
		bs = append(bs, M{"id": b.ID(), "addr": b.Addr()})
	}
	out["cluster"] = M{"error": errJSON(err), "brokers": bs, "controller": controller}

	out["create"] = errJSON(adm.CreateTopic(t, &sarama.TopicDetail{NumPartitions: int32(o.partitions),
		ReplicationFactor: 1, ConfigEntries: parseConfigs(o.configs)}, false))
	if out["create"] != nil {
		return out
	}
	out["create_again"] = errJSON(adm.CreateTopic(t, &sarama.TopicDetail{NumPartitions: 1,
		ReplicationFactor: 1}, false))
	out["create_validate_only"] = errJSON(adm.CreateTopic(t+"-v", &sarama.TopicDetail{
		NumPartitions: 2, ReplicationFactor: 1}, true))
	out["create_bad_config_value"] = errJSON(adm.CreateTopic(t+"-badv", &sarama.TopicDetail{
		NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"retention.ms": strp("soon")}}, false))
	out["create_unknown_config"] = errJSON(adm.CreateTopic(t+"-badk", &sarama.TopicDetail{
		NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"no.such.config": strp("1")}}, false))
	out["create_bad_replication"] = errJSON(adm.CreateTopic(t+"-rf", &sarama.TopicDetail{
		NumPartitions: 1, ReplicationFactor: 3}, false))
	out["create_zero_partitions"] = errJSON(adm.CreateTopic(t+"-p0", &sarama.TopicDetail{
		NumPartitions: 0, ReplicationFactor: 1}, false))
	out["create_invalid_name"] = errJSON(adm.CreateTopic(t+"/bad", &sarama.TopicDetail{
		NumPartitions: 1, ReplicationFactor: 1}, false))
	out["create_bad_assignment"] = errJSON(adm.CreateTopic(t+"-ra", &sarama.TopicDetail{
		NumPartitions: -1, ReplicationFactor: -1,
		ReplicaAssignment: map[int32][]int32{0: {1}, 1: {7}}}, false))
	// An explicit assignment (partitions and replication factor -1).
	out["create_with_assignment"] = errJSON(adm.CreateTopic(t+"-as", &sarama.TopicDetail{
		NumPartitions: -1, ReplicationFactor: -1,
		ReplicaAssignment: map[int32][]int32{0: {1}, 1: {1}}}, false))
	if out["create_with_assignment"] == nil {
		if err := waitTopic(ctx, adm, t+"-as", 2); err != nil {
			out["create_with_assignment"] = errJSON(err)
		}
		out["delete_with_assignment"] = errJSON(adm.DeleteTopic(t + "-as"))
	}
	if err := waitTopic(ctx, adm, t, o.partitions); err != nil {
		out["error"] = errJSON(err)
		return out
	}

	all, err := adm.ListTopics()
	names := []string{}
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	listed := M{"error": errJSON(err), "names": names}
	if td, ok := all[t]; ok {
		assign := M{}
		for p, rs := range td.ReplicaAssignment {
			assign[fmt.Sprint(p)] = rs
		}
		cfg := M{}
		for k, v := range td.ConfigEntries {
			cfg[k] = v
		}
		listed["topic"] = M{"partitions": td.NumPartitions, "replication_factor": td.ReplicationFactor,
			"assignment": assign, "configs": cfg}
	}
	out["list_topics"] = listed
	out["describe"] = describeTopicsJSON(adm, t, t+"-missing", t+"-v")

	out["configs"] = describeConfigJSON(adm, sarama.TopicResource, t)
	out["configs_unknown_topic"] = describeConfigJSON(adm, sarama.TopicResource, t+"-missing")
	// Named keys with synonyms: the override and where the default comes from.
	rs, err := adm.DescribeConfigs([]*sarama.ConfigResource{{Type: sarama.TopicResource, Name: t,
		ConfigNames: []string{"retention.ms", "segment.bytes"}}},
		sarama.DescribeConfigsOptions{IncludeSynonyms: true})
	if err != nil || len(rs) != 1 {
		out["configs_synonyms"] = M{"error": errJSON(err), "results": len(rs)}
	} else {
		out["configs_synonyms"] = M{"error": kerrJSON(rs[0].ErrorCode),
			"configs": configEntriesJSON(rs[0].Configs)}
	}
	broker := describeConfigJSON(adm, sarama.BrokerResource, "1")
	if cfgs, ok := broker["configs"].(M); ok {
		picked := M{}
		for _, k := range []string{"message.max.bytes", "num.partitions", "auto.create.topics.enable",
			"log.retention.hours", "offsets.topic.replication.factor", "node.id"} {
			picked[k] = cfgs[k]
		}
		broker = M{"error": nil, "configs": picked, "count": len(cfgs)}
	}
	out["broker_configs"] = broker

	// AlterConfigs replaces the topic's whole dynamic config set: keys not named fall back
	// to their defaults.
	set := map[string]*string{"retention.ms": strp("7200000"), "segment.ms": strp("600000")}
	out["alter"] = errJSON(adm.AlterConfig(sarama.TopicResource, t, set, false))
	out["configs_after_alter"] = pollConfigs(ctx, adm, t, map[string]*string{
		"retention.ms": strp("7200000"), "segment.ms": strp("600000"), "cleanup.policy": nil,
		"max.message.bytes": nil})
	out["alter_invalid_value"] = errJSON(adm.AlterConfig(sarama.TopicResource, t,
		map[string]*string{"retention.ms": strp("not-a-number")}, false))
	out["alter_unknown_topic"] = errJSON(adm.AlterConfig(sarama.TopicResource, t+"-missing",
		map[string]*string{"retention.ms": strp("1000")}, false))

	inc := map[string]sarama.IncrementalAlterConfigsEntry{
		"cleanup.policy": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: strp("compact")},
		"retention.ms":   {Operation: sarama.IncrementalAlterConfigsOperationDelete},
	}
	out["incremental_alter"] = errJSON(adm.IncrementalAlterConfig(sarama.TopicResource, t, inc, false))
	out["configs_after_incremental"] = pollConfigs(ctx, adm, t, map[string]*string{
		"cleanup.policy": strp("compact"), "retention.ms": nil, "segment.ms": strp("600000")})
	out["incremental_validate_only"] = errJSON(adm.IncrementalAlterConfig(sarama.TopicResource, t,
		map[string]sarama.IncrementalAlterConfigsEntry{"segment.ms": {
			Operation: sarama.IncrementalAlterConfigsOperationSet, Value: strp("700000")}}, true))
	out["incremental_invalid_value"] = errJSON(adm.IncrementalAlterConfig(sarama.TopicResource, t,
		map[string]sarama.IncrementalAlterConfigsEntry{"retention.ms": {
			Operation: sarama.IncrementalAlterConfigsOperationSet, Value: strp("x")}}, false))
	out["incremental_unknown_key"] = errJSON(adm.IncrementalAlterConfig(sarama.TopicResource, t,
		map[string]sarama.IncrementalAlterConfigsEntry{"no.such.config": {
			Operation: sarama.IncrementalAlterConfigsOperationSet, Value: strp("1")}}, false))
	out["incremental_unknown_topic"] = errJSON(adm.IncrementalAlterConfig(sarama.TopicResource, t+"-missing",
		inc, false))
	// The validate-only alter must not have changed anything.
	out["configs_final"] = describeConfigJSON(adm, sarama.TopicResource, t)

	out["create_partitions"] = errJSON(adm.CreatePartitions(t, int32(o.partitions+2), nil, false))
	if err := waitTopic(ctx, adm, t, o.partitions+2); err != nil {
		out["create_partitions_wait"] = errJSON(err)
	}
	out["describe_after_grow"] = describeTopicsJSON(adm, t)
	out["shrink_partitions"] = errJSON(adm.CreatePartitions(t, 1, nil, false))
	out["create_partitions_validate_only"] = errJSON(adm.CreatePartitions(t, int32(o.partitions+5), nil, true))
	out["create_partitions_unknown_topic"] = errJSON(adm.CreatePartitions(t+"-missing", 4, nil, false))
	out["create_partitions_bad_assignment"] = errJSON(adm.CreatePartitions(t, int32(o.partitions+3),
		[][]int32{{7}}, false))

	deleteRecordsSteps(ctx, o, adm, t, out)

	out["delete"] = errJSON(adm.DeleteTopic(t))
	// Deletion is asynchronous in Kafka; poll (bounded) until metadata stops showing it.
	var gone M
	for i := 0; i < 100; i++ {
		gone = describeTopicsJSON(adm, t)
		tm, _ := gone["topics"].(M)[t].(M)
		if gone["error"] != nil || tm == nil || tm["error"] != nil || !sleepCtx(ctx, 100*time.Millisecond) {
			break
		}
	}
	out["describe_after_delete"] = gone
	out["delete_again"] = errJSON(adm.DeleteTopic(t))
	return out
}

// deleteRecordsSteps writes ten records to partition 0 of a fresh topic and moves its log
// start with DeleteRecords, reading the start and end back through ListOffsets; and tries
// DeleteRecords on the (compacted) topic of the scenario.
func deleteRecordsSteps(ctx context.Context, o *opts, adm sarama.ClusterAdmin, compacted string, out M) {
	t := compacted + "-dr"
	if err := createTopic(ctx, adm, t, 1, nil); err != nil {
		out["produce"] = errJSON(err)
		return
	}
	cfg, err := o.config("sarama-admin-producer")
	if err != nil {
		out["produce"] = errJSON(err)
		return
	}
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	p, err := sarama.NewSyncProducer([]string{o.bootstrap}, cfg)
	if err != nil {
		out["produce"] = errJSON(err)
		return
	}
	defer p.Close()
	// Ten records one second apart an hour ago, except the 8th (offset 7), which carries the
	// largest timestamp, so by-time and max-timestamp lookups have a non-trivial answer.
	base := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()
	out["base"] = base
	var msgs []*sarama.ProducerMessage
	for i := 0; i < 10; i++ {
		ts := base + int64(i)*1000
		if i == 7 {
			ts = base + 100_000
		}
		msgs = append(msgs, &sarama.ProducerMessage{Topic: t, Partition: 0,
			Value: sarama.StringEncoder(fmt.Sprintf("r%d", i)), Timestamp: time.UnixMilli(ts)})
	}
	out["produce"] = errJSON(p.SendMessages(msgs))
	out["after_3500"] = listOffsetsJSON(adm, t, 1, base+3500, sarama.ReadUncommitted)
	out["after_7500"] = listOffsetsJSON(adm, t, 1, base+7500, sarama.ReadUncommitted)
	out["after_all"] = listOffsetsJSON(adm, t, 1, base+200_000, sarama.ReadUncommitted)
	// -3 is MAX_TIMESTAMP, which needs ListOffsets v7; sarama sends at most v6.
	out["max_timestamp"] = listOffsetsJSON(adm, t, 1, -3, sarama.ReadUncommitted)
	offs := []int64{}
	for _, m := range msgs {
		offs = append(offs, m.Offset)
	}
	out["produce_offsets"] = offs
	// A compacted topic refuses records without a key, and DeleteRecords.
	_, _, err = p.SendMessage(&sarama.ProducerMessage{Topic: compacted, Partition: 0,
		Value: sarama.StringEncoder("no key")})
	out["produce_keyless_to_compacted"] = errJSON(err)
	out["delete_records_compacted"] = errJSON(adm.DeleteRecords(compacted, map[int32]int64{0: 0}))

	out["earliest"] = listOffsetsJSON(adm, t, 1, sarama.OffsetOldest, sarama.ReadUncommitted)
	out["latest"] = listOffsetsJSON(adm, t, 1, sarama.OffsetNewest, sarama.ReadUncommitted)
	out["delete_records"] = errJSON(adm.DeleteRecords(t, map[int32]int64{0: 4}))
	out["earliest_after_delete"] = listOffsetsJSON(adm, t, 1, sarama.OffsetOldest, sarama.ReadUncommitted)
	out["delete_records_past_end"] = errJSON(adm.DeleteRecords(t, map[int32]int64{0: 50}))
	// -1 means "up to the high watermark".
	out["delete_records_to_hwm"] = errJSON(adm.DeleteRecords(t, map[int32]int64{0: -1}))
	out["earliest_after_hwm_delete"] = listOffsetsJSON(adm, t, 1, sarama.OffsetOldest, sarama.ReadUncommitted)
	out["latest_after_delete"] = listOffsetsJSON(adm, t, 1, sarama.OffsetNewest, sarama.ReadUncommitted)
	out["delete_records_topic"] = errJSON(adm.DeleteTopic(t))
}
