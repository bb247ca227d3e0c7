package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// setGroupConfig sets one dynamic group config (resource type GROUP) the way franz-go's
// ShareGroup docs tell users to: IncrementalAlterConfigs, there being no kadm helper for it.
func setGroupConfig(ctx context.Context, cl *kgo.Client, group, key, value string) any {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Value, c.Op = key, strp(value), kmsg.IncrementalAlterConfigOpSet
	res.Configs = append(res.Configs, c)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return errJSON(err)
	}
	if len(resp.Resources) != 1 {
		return M{"name": "CLIENT_ERROR", "text": "unexpected response shape"}
	}
	return withMessage(errJSON(kerr.ErrorForCode(resp.Resources[0].ErrorCode)), resp.Resources[0].ErrorMessage)
}

// withMessage adds the broker's own error message to an error's JSON.
func withMessage(e any, msg *string) any {
	if m, ok := e.(M); ok && msg != nil {
		m["message"] = *msg
	}
	return e
}

// scenarioShare consumes a topic through a KIP-932 share group (kgo.ShareGroup), accepting
// every record, then asks kadm for the share group's state and start offsets.
func scenarioShare(ctx context.Context, o *opts) M {
	adm, acl, err := o.adminWithTopic(ctx, 1, nil)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer acl.Close()
	t := o.topic
	out := M{"group_config": setGroupConfig(ctx, acl, o.group, "share.auto.offset.reset", "earliest")}
	p, err := o.client("franz-share-producer", kgo.DefaultProduceTopic(t))
	if err != nil {
		out["error"] = errJSON(err)
		return out
	}
	defer p.Close()
	var recs []*kgo.Record
	for i := 0; i < o.count; i++ {
		recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprintf("job-%d", i))})
	}
	out["produce"] = errJSON(p.ProduceSync(ctx, recs...).FirstErr())

	c, err := o.client("franz-share", kgo.ShareGroup(o.group), kgo.ConsumeTopics(t))
	if err != nil {
		out["error"] = errJSON(err)
		return out
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var offs []int64
	var errs []any
	for i := 0; i < 100 && len(offs) < o.count && cctx.Err() == nil && len(errs) < 5; i++ {
		pctx, pcancel := context.WithTimeout(cctx, 500*time.Millisecond)
		fs := c.PollFetches(pctx)
		pcancel()
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				errs = append(errs, errJSON(fe.Err))
			}
		}
		fs.EachRecord(func(r *kgo.Record) { offs = append(offs, r.Offset) })
		c.MarkAcks(kgo.AckAccept)
	}
	out["offsets"], out["poll_errors"] = offs, errs
	fctx, fcancel := context.WithTimeout(ctx, 5*time.Second)
	out["flush_acks"] = errJSON(c.FlushAcks(fctx))
	fcancel()
	c.Close()

	dsg, err := adm.DescribeShareGroups(ctx, o.group)
	if err != nil {
		out["describe"] = M{"error": errJSON(err)}
	} else {
		g := dsg[o.group]
		out["describe"] = M{"error": errJSON(g.Err), "state": g.GroupState, "assignor": g.Assignor}
	}
	dso, err := adm.DescribeShareGroupOffsets(ctx, o.group)
	if err != nil {
		out["share_offsets"] = M{"error": errJSON(err)}
	} else {
		so := M{}
		for _, ps := range dso[o.group].Offsets {
			for part, s := range ps {
				so[fmt.Sprint(part)] = M{"start_offset": s.StartOffset, "lag": s.Lag, "error": errJSON(s.Err)}
			}
		}
		out["share_offsets"] = M{"error": errJSON(dso[o.group].Err), "offsets": so}
	}
	return out
}

// scenarioGroupConfig sets dynamic group configs (resource type GROUP) and reads them back with
// DescribeConfigs, as an operator tuning one group does.
func scenarioGroupConfig(ctx context.Context, o *opts) M {
	_, cl, err := o.admin()
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer cl.Close()
	out := M{
		"set_session_timeout": setGroupConfig(ctx, cl, o.group, "consumer.session.timeout.ms", "50000"),
		"set_share_reset":     setGroupConfig(ctx, cl, o.group, "share.auto.offset.reset", "earliest"),
		"set_unknown_key":     setGroupConfig(ctx, cl, o.group, "no.such.group.config", "1"),
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, o.group
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		out["describe"] = M{"error": errJSON(err)}
		return out
	}
	if len(resp.Resources) != 1 {
		out["describe"] = M{"error": M{"name": "CLIENT_ERROR", "text": "unexpected response shape"}}
		return out
	}
	r := resp.Resources[0]
	cfgs := M{}
	for _, c := range r.Configs {
		cfgs[c.Name] = M{"value": c.Value, "source": c.Source.String()}
	}
	derr := withMessage(errJSON(kerr.ErrorForCode(r.ErrorCode)), r.ErrorMessage)
	out["describe"] = M{"error": derr, "configs": cfgs}
	return out
}
