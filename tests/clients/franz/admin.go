package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func topicJSON(td kadm.TopicDetail) M {
	parts := M{}
	for p, pd := range td.Partitions {
		parts[fmt.Sprint(p)] = M{"leader": pd.Leader, "leader_epoch": pd.LeaderEpoch,
			"replicas": pd.Replicas, "isr": pd.ISR, "offline": pd.OfflineReplicas,
			"error": errJSON(pd.Err)}
	}
	return M{"id": td.ID.String(), "internal": td.IsInternal, "partitions": parts,
		"error": errJSON(td.Err)}
}

func configsJSON(rcs kadm.ResourceConfigs, err error) M {
	if err != nil {
		return M{"error": errJSON(err)}
	}
	if len(rcs) != 1 {
		return M{"error": M{"name": "CLIENT_ERROR", "text": fmt.Sprintf("%d resources", len(rcs))}}
	}
	rc := rcs[0]
	cfgs := M{}
	for _, c := range rc.Configs {
		cfgs[c.Key] = M{"value": c.Value, "source": c.Source.String(), "sensitive": c.Sensitive}
	}
	return M{"error": errJSON(rc.Err), "configs": cfgs}
}

func alterJSON(rs kadm.AlterConfigsResponses, err error) any {
	if err != nil {
		return M{"error": errJSON(err)}
	}
	out := []M{}
	for _, r := range rs {
		out = append(out, M{"name": r.Name, "error": errJSON(r.Err)})
	}
	return out
}

func altered(described M, alter []kadm.AlterConfig) bool {
	cfgs, _ := described["configs"].(M)
	for _, a := range alter {
		c, ok := cfgs[a.Name].(M)
		if !ok {
			return false
		}
		src := c["source"].(string)
		v, _ := c["value"].(*string)
		switch a.Op {
		case kadm.SetConfig:
			if v == nil || *v != *a.Value || src != "DYNAMIC_TOPIC_CONFIG" {
				return false
			}
		case kadm.DeleteConfig:
			if src == "DYNAMIC_TOPIC_CONFIG" {
				return false
			}
		}
	}
	return true
}

// scenarioAdmin walks a topic's life through kadm: create (with configs), list, describe
// configs, incremental alter, add partitions, delete; and the errors each step gives when
// misused.
func scenarioAdmin(ctx context.Context, o *opts) M {
	adm, cl, err := o.admin()
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer cl.Close()
	out := M{}
	t := o.topic

	cfg := parseConfigs(o.configs)
	cr, err := adm.CreateTopic(ctx, int32(o.partitions), 1, cfg, t)
	if err == nil {
		err = cr.Err
	}
	created := M{"error": errJSON(err), "id": cr.ID.String(), "partitions": cr.NumPartitions,
		"replication_factor": cr.ReplicationFactor}
	rcfg := M{}
	for k, c := range cr.Configs {
		rcfg[k] = M{"value": c.Value, "source": c.Source.String()}
	}
	created["configs"] = rcfg
	out["create"] = created
	if err != nil {
		return out
	}
	cr2, err := adm.CreateTopic(ctx, 1, 1, nil, t)
	if err == nil {
		err = cr2.Err
	}
	out["create_again"] = errJSON(err)
	if err := waitTopic(ctx, adm, t, o.partitions); err != nil {
		out["error"] = errJSON(err)
		return out
	}

	tds, err := adm.ListTopics(ctx)
	listed := []string{}
	for name := range tds {
		listed = append(listed, name)
	}
	sort.Strings(listed)
	out["list_all"] = M{"error": errJSON(err), "topics": listed}
	tds, err = adm.ListTopics(ctx, t)
	out["describe"] = M{"error": errJSON(err), "topic": topicJSON(tds[t])}

	out["configs"] = configsJSON(adm.DescribeTopicConfigs(ctx, t))

	alter := []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: strp("7200000")},
		{Op: kadm.DeleteConfig, Name: "cleanup.policy"},
		{Op: kadm.SetConfig, Name: "segment.ms", Value: strp("600000")},
	}
	out["alter"] = alterJSON(adm.AlterTopicConfigs(ctx, alter, t))
	// Kafka applies an alter through its metadata log, so DescribeConfigs may answer with the
	// old values for a moment: poll (bounded) until the alter shows.
	var after M
	for i := 0; i < 50 && ctx.Err() == nil; i++ {
		after = configsJSON(adm.DescribeTopicConfigs(ctx, t))
		if altered(after, alter) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	out["configs_after_alter"] = after
	out["alter_invalid_value"] = alterJSON(adm.AlterTopicConfigs(ctx,
		[]kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: strp("not-a-number")}}, t))
	out["alter_unknown_topic"] = alterJSON(adm.AlterTopicConfigs(ctx,
		[]kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: strp("1000")}}, t+"-missing"))
	out["configs_unknown_topic"] = configsJSON(adm.DescribeTopicConfigs(ctx, t+"-missing"))

	cps, err := adm.CreatePartitions(ctx, 2, t)
	if err == nil {
		err = cps[t].Err
	}
	out["create_partitions"] = errJSON(err)
	grown := o.partitions + 2
	if err := waitTopic(ctx, adm, t, grown); err != nil {
		out["create_partitions_wait"] = errJSON(err)
	}
	tds, err = adm.ListTopics(ctx, t)
	out["describe_after_grow"] = M{"error": errJSON(err), "topic": topicJSON(tds[t])}
	cps, err = adm.UpdatePartitions(ctx, 1, t)
	if err == nil {
		err = cps[t].Err
	}
	out["shrink_partitions"] = errJSON(err)

	dr, err := adm.DeleteTopic(ctx, t)
	if err == nil {
		err = dr.Err
	}
	out["delete"] = errJSON(err)
	// Deletion is asynchronous in Kafka; poll (bounded) until metadata stops showing it.
	var gone any
	for i := 0; i < 100; i++ {
		tds, err = adm.ListTopics(ctx, t)
		if err != nil {
			gone = M{"error": errJSON(err)}
			break
		}
		td := tds[t]
		gone = M{"error": errJSON(td.Err), "partitions": len(td.Partitions)}
		if td.Err != nil || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	out["describe_after_delete"] = gone
	dr, err = adm.DeleteTopic(ctx, t)
	if err == nil {
		err = dr.Err
	}
	out["delete_again"] = errJSON(err)
	return out
}

// scenarioOffsets produces records with chosen timestamps to one partition and asks ListOffsets
// for the start, end, max-timestamp and by-timestamp offsets, before and after DeleteRecords.
func scenarioOffsets(ctx context.Context, o *opts) M {
	adm, acl, err := o.adminWithTopic(ctx, 1, nil)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer acl.Close()
	t := o.topic
	out := M{}
	cl, err := o.client("franz-offsets", kgo.DefaultProduceTopic(t),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer cl.Close()

	// Ten records one second apart an hour ago, except the 8th (offset 7), which carries the
	// largest timestamp so max-timestamp and by-time lookups have a non-trivial answer.
	base := time.Now().Add(-time.Hour).Truncate(time.Second).UnixMilli()
	var recs []*kgo.Record
	for i := 0; i < 10; i++ {
		ts := base + int64(i)*1000
		if i == 7 {
			ts = base + 100_000
		}
		recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("v%d", i)), Timestamp: time.UnixMilli(ts)})
	}
	out["base"] = base
	out["produce"] = produceResultsJSON(cl.ProduceSync(ctx, recs...))

	out["start"] = listedJSON(adm.ListStartOffsets(ctx, t))
	out["end"] = listedJSON(adm.ListEndOffsets(ctx, t))
	out["committed_lso"] = listedJSON(adm.ListCommittedOffsets(ctx, t))
	out["max_timestamp"] = listedJSON(adm.ListMaxTimestampOffsets(ctx, t))
	out["after_3500"] = listedJSON(adm.ListOffsetsAfterMilli(ctx, base+3500, t))
	out["after_7500"] = listedJSON(adm.ListOffsetsAfterMilli(ctx, base+7500, t))
	out["after_base"] = listedJSON(adm.ListOffsetsAfterMilli(ctx, base, t))
	// kadm replaces "no such offset" (-1) by the end offset; ask on the wire too to see the
	// broker's own answer.
	out["raw_after_all"] = rawListOffsets(ctx, cl, t, base+200_000)

	dr, err := adm.DeleteRecords(ctx, kadm.Offsets{t: {0: {Topic: t, Partition: 0, At: 3}}})
	out["delete_records"] = deleteRecordsJSON(dr, err)
	out["start_after_delete"] = listedJSON(adm.ListStartOffsets(ctx, t))
	out["after_base_after_delete"] = listedJSON(adm.ListOffsetsAfterMilli(ctx, base, t))
	dr, err = adm.DeleteRecords(ctx, kadm.Offsets{t: {0: {Topic: t, Partition: 0, At: 50}}})
	out["delete_records_past_end"] = deleteRecordsJSON(dr, err)
	out["unknown_topic"] = listedJSON(adm.ListEndOffsets(ctx, t+"-missing"))
	return out
}

func deleteRecordsJSON(dr kadm.DeleteRecordsResponses, err error) any {
	if err != nil {
		return M{"error": errJSON(err)}
	}
	out := M{}
	dr.Each(func(r kadm.DeleteRecordsResponse) {
		out[fmt.Sprint(r.Partition)] = M{"low_watermark": r.LowWatermark, "error": errJSON(r.Err)}
	})
	return out
}

func rawListOffsets(ctx context.Context, cl *kgo.Client, topic string, ts int64) M {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition = 0
	rp.Timestamp = ts
	rp.CurrentLeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return M{"error": M{"name": "CLIENT_ERROR", "text": "unexpected response shape"}}
	}
	p := resp.Topics[0].Partitions[0]
	return M{"version": resp.Version, "offset": p.Offset, "timestamp": p.Timestamp,
		"error": errJSON(kerr.ErrorForCode(p.ErrorCode))}
}
