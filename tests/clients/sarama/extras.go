package main

import (
	"context"
	"fmt"
	"time"

	"github.com/IBM/sarama"
)

// scenarioAdminExtras calls the rest of ClusterAdmin a sarama user reaches for on a plain
// single-node cluster (no authorizer, no SCRAM users, no quotas, no reassignments) and records
// each answer: log dirs, ACLs, SCRAM credentials, client quotas, partition reassignments,
// leader election, and the group views of a group that never existed.
func scenarioAdminExtras(ctx context.Context, o *opts) M {
	adm, err := o.adminWithTopic(ctx, 2, nil)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer adm.Close()
	t := o.topic
	out := M{}

	// Kafka creates a new partition's log a moment after metadata already shows its leader:
	// poll (bounded) until both partitions are listed.
	var ld M
	for i := 0; i < 30; i++ {
		var n int
		ld, n = logDirsJSON(adm, t)
		if n == 2 || !sleepCtx(ctx, 100*time.Millisecond) {
			break
		}
	}
	out["log_dirs"] = ld

	_, err = adm.ListAcls(sarama.AclFilter{ResourceType: sarama.AclResourceAny,
		ResourcePatternTypeFilter: sarama.AclPatternAny, Operation: sarama.AclOperationAny,
		PermissionType: sarama.AclPermissionAny})
	out["list_acls"] = errJSON(err)
	err = adm.CreateACL(sarama.Resource{ResourceType: sarama.AclResourceTopic, ResourceName: t,
		ResourcePatternType: sarama.AclPatternLiteral},
		sarama.Acl{Principal: "User:alice", Host: "*", Operation: sarama.AclOperationRead,
			PermissionType: sarama.AclPermissionAllow})
	out["create_acl"] = errJSON(err)

	scram, err := adm.DescribeUserScramCredentials(nil)
	sc := M{"error": errJSON(err), "users": len(scram)}
	out["describe_scram"] = sc

	quotas, err := adm.DescribeClientQuotas(nil, false)
	out["describe_quotas"] = M{"error": errJSON(err), "entries": len(quotas)}

	reass, err := adm.ListPartitionReassignments(t, []int32{0, 1})
	out["list_reassignments"] = M{"error": errJSON(err), "topics": len(reass)}

	el, err := adm.ElectLeaders(sarama.PreferredElection, map[string][]int32{t: {0}})
	elected := M{"error": errJSON(err)}
	for topic, ps := range el {
		for p, r := range ps {
			elected[fmt.Sprintf("%s/%d", topic, p)] = kerrJSON(r.ErrorCode)
		}
	}
	out["elect_leaders"] = elected

	g := "never-" + t
	out["describe_unknown_group"] = describeGroupJSON(adm, g)
	out["offsets_unknown_group"] = fetchOffsetsJSON(adm, g, nil)
	out["delete_unknown_group"] = errJSON(adm.DeleteConsumerGroup(g))
	out["delete_offset_unknown_group"] = errJSON(adm.DeleteConsumerGroupOffset(g, t, 0))
	out["list_unknown_group"] = listGroupJSON(adm, g)

	out["offset_for_time_empty"] = listOffsetsJSON(adm, t, 1, 1_000, sarama.ReadUncommitted)

	// Dynamic broker config: set for broker 1, seen by the broker and inherited by a topic,
	// then removed again (this is the shared broker).
	set := map[string]sarama.IncrementalAlterConfigsEntry{"log.retention.bytes": {
		Operation: sarama.IncrementalAlterConfigsOperationSet, Value: strp("1073741824")}}
	out["broker_alter"] = errJSON(adm.IncrementalAlterConfig(sarama.BrokerResource, "1", set, false))
	var bc, tc M
	for i := 0; i < 50; i++ {
		bc = pickConfigs(describeConfigJSON(adm, sarama.BrokerResource, "1"), "log.retention.bytes")
		tc = pickConfigs(describeConfigJSON(adm, sarama.TopicResource, t), "retention.bytes")
		// Kafka updates the topic's view and the broker's own view of the value separately.
		v, _ := tc["retention.bytes"].(M)
		w, _ := bc["log.retention.bytes"].(M)
		if v != nil && v["value"] == "1073741824" && w != nil && w["value"] == "1073741824" ||
			!sleepCtx(ctx, 100*time.Millisecond) {
			break
		}
	}
	out["broker_after_alter"], out["topic_after_broker_alter"] = bc, tc
	out["broker_alter_delete"] = errJSON(adm.IncrementalAlterConfig(sarama.BrokerResource, "1",
		map[string]sarama.IncrementalAlterConfigsEntry{"log.retention.bytes": {
			Operation: sarama.IncrementalAlterConfigsOperationDelete}}, false))
	for i := 0; i < 50; i++ {
		bc = pickConfigs(describeConfigJSON(adm, sarama.BrokerResource, "1"), "log.retention.bytes")
		v, _ := bc["log.retention.bytes"].(M)
		if v != nil && v["value"] == "-1" && v["source"] == sarama.SourceDefault.String() ||
			!sleepCtx(ctx, 100*time.Millisecond) {
			break
		}
	}
	out["broker_after_delete"] = bc
	out["broker_alter_read_only"] = errJSON(adm.IncrementalAlterConfig(sarama.BrokerResource, "1",
		map[string]sarama.IncrementalAlterConfigsEntry{"log.dirs": {
			Operation: sarama.IncrementalAlterConfigsOperationSet, Value: strp("/tmp/elsewhere")}}, false))
	out["broker_alter_unknown_key"] = errJSON(adm.IncrementalAlterConfig(sarama.BrokerResource, "1",
		map[string]sarama.IncrementalAlterConfigsEntry{"no.such.broker.config": {
			Operation: sarama.IncrementalAlterConfigsOperationSet, Value: strp("1")}}, false))
	// Applied through the metadata log: poll (bounded) until DescribeConfigs shows it.
	var uk M
	for i := 0; i < 50; i++ {
		uk = pickConfigs(describeConfigJSON(adm, sarama.BrokerResource, "1"), "no.such.broker.config")
		if out["broker_alter_unknown_key"] != nil || uk["no.such.broker.config"] != nil ||
			!sleepCtx(ctx, 100*time.Millisecond) {
			break
		}
	}
	out["broker_after_unknown_key"] = uk
	out["broker_alter_unknown_key_delete"] = errJSON(adm.IncrementalAlterConfig(sarama.BrokerResource, "1",
		map[string]sarama.IncrementalAlterConfigsEntry{"no.such.broker.config": {
			Operation: sarama.IncrementalAlterConfigsOperationDelete}}, false))
	return out
}

// logDirsJSON is DescribeLogDirs for broker 1, keeping only topic t's partitions; n counts them.
func logDirsJSON(adm sarama.ClusterAdmin, t string) (M, int) {
	dirs, err := adm.DescribeLogDirs([]int32{1})
	ld := M{"error": errJSON(err)}
	n := 0
	for b, ds := range dirs {
		var list []M
		for _, d := range ds {
			parts := M{}
			for _, tp := range d.Topics {
				if tp.Topic != t {
					continue
				}
				for _, p := range tp.Partitions {
					parts[fmt.Sprint(p.PartitionID)] = M{"size": p.Size, "offset_lag": p.OffsetLag,
						"is_temporary": p.IsTemporary}
					n++
				}
			}
			list = append(list, M{"path": d.Path, "error": kerrJSON(d.ErrorCode), "partitions": parts})
		}
		ld[fmt.Sprint(b)] = list
	}
	return ld, n
}

func pickConfigs(d M, keys ...string) M {
	if d["error"] != nil {
		return d
	}
	cfgs, _ := d["configs"].(M)
	out := M{}
	for _, k := range keys {
		if c, ok := cfgs[k].(M); ok {
			out[k] = M{"value": c["value"], "source": c["source"], "sensitive": c["sensitive"]}
		} else {
			out[k] = nil
		}
	}
	return out
}
