package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func cghJSON(resp *kmsg.ConsumerGroupHeartbeatResponse, err error) M {
	if err != nil {
		return M{"error": errJSON(err)}
	}
	m := M{"error": errJSON(kerr.ErrorForCode(resp.ErrorCode)), "member_epoch": resp.MemberEpoch,
		"member_id":             "",
		"heartbeat_interval_ms": resp.HeartbeatIntervalMillis, "assignment": nil}
	if resp.MemberID != nil {
		m["member_id"] = *resp.MemberID
	}
	if resp.Assignment != nil {
		var ps []int32
		for _, t := range resp.Assignment.Topics {
			ps = append(ps, t.Partitions...)
		}
		m["assignment"] = ps
	}
	return m
}

// scenarioCGHJoin speaks ConsumerGroupHeartbeat directly (as franz-go's KIP-848 consumer does)
// and reads the group back with ConsumerGroupDescribe, to see the epochs and assignment a lone
// member's join, next heartbeat and leave produce.
func scenarioCGHJoin(ctx context.Context, o *opts) M {
	adm, cl, err := o.admin()
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer cl.Close()
	if err := createTopic(ctx, adm, o.topic, o.partitions, nil); err != nil {
		return M{"error": errJSON(err)}
	}
	hb := func(group, member string, epoch int32, full bool) M {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch = group, member, epoch
		if full {
			req.RebalanceTimeoutMillis = 60000
			req.SubscribedTopicNames = []string{o.topic}
			req.ServerAssignor = strp("uniform")
			req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
		resp, err := req.RequestWith(ctx, cl)
		return cghJSON(resp, err)
	}
	newID := func() string {
		var id [16]byte
		rand.Read(id[:])
		return base64.RawURLEncoding.EncodeToString(id[:])
	}
	out := M{}
	// A brand-new topic may reach the group coordinator a moment after Metadata shows it (on
	// Kafka too); a throwaway group's joins wait for that so the measured group starts with the
	// topic known.
	warm, warmErrs, warmStart := 0, []any{}, time.Now()
	for ; warm < 250 && ctx.Err() == nil; warm++ {
		id := newID()
		w := hb(o.group+"-warmup", id, 0, true)
		if w["error"] != nil {
			// e.g. the coordinator still loading on a fresh broker: retry like a client would
			warmErrs = append(warmErrs, w["error"])
		} else {
			hb(o.group+"-warmup", id, -1, false)
			if ps, _ := w["assignment"].([]int32); len(ps) == o.partitions {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	out["warmup_joins"], out["warmup_errors"] = warm+1, warmErrs
	out["warmup_ms"] = time.Since(warmStart).Milliseconds()
	member := newID()
	out["join"] = hb(o.group, member, 0, true)
	epoch, _ := out["join"].(M)["member_epoch"].(int32)
	out["describe_joined"] = describeConsumerGroupJSON(ctx, adm, o.group)
	out["heartbeat"] = hb(o.group, member, epoch, false)
	out["leave"] = hb(o.group, member, -1, false)
	out["describe_left"] = describeConsumerGroupJSON(ctx, adm, o.group)
	out["describe_unknown_raw"] = rawConsumerGroupDescribe(ctx, cl, o.group+"-never-created")
	return out
}

// rawConsumerGroupDescribe shows every field of a ConsumerGroupDescribe answer, including the
// defaults kadm passes through without comment.
func rawConsumerGroupDescribe(ctx context.Context, cl *kgo.Client, group string) M {
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	if len(resp.Groups) != 1 {
		return M{"error": M{"name": "CLIENT_ERROR", "text": "unexpected response shape"}}
	}
	g := resp.Groups[0]
	return M{"version": resp.Version, "error": errJSON(kerr.ErrorForCode(g.ErrorCode)),
		"error_message": g.ErrorMessage, "group": g.Group, "state": g.State, "epoch": g.Epoch,
		"assignment_epoch": g.AssignmentEpoch, "assignor": g.AssignorName, "members": len(g.Members)}
}
