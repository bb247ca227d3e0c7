package main

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// member is one group consumer and what its rebalance callbacks told it.
type member struct {
	name     string
	cl       *kgo.Client
	mu       sync.Mutex
	assigned map[int32]bool
	events   []M
	recs     []*kgo.Record
	start    time.Time
}

func (m *member) onChange(kind string) func(context.Context, *kgo.Client, map[string][]int32) {
	return func(_ context.Context, _ *kgo.Client, tps map[string][]int32) {
		m.mu.Lock()
		defer m.mu.Unlock()
		var ps []int32
		for _, parts := range tps {
			ps = append(ps, parts...)
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		for _, p := range ps {
			m.assigned[p] = kind == "assigned"
		}
		m.events = append(m.events, M{kind: ps, "at_ms": time.Since(m.start).Milliseconds()})
	}
}

func (m *member) owned() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ps []int32
	for p, ok := range m.assigned {
		if ok {
			ps = append(ps, p)
		}
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return ps
}

func (m *member) json() M {
	m.mu.Lock()
	defer m.mu.Unlock()
	offs := map[string][]int64{}
	for _, r := range m.recs {
		k := fmt.Sprint(r.Partition)
		offs[k] = append(offs[k], r.Offset)
	}
	return M{"events": m.events, "offsets": offs, "records": len(m.recs)}
}

func newMember(o *opts, name string, extra ...kgo.Opt) (*member, error) {
	m := &member{name: name, assigned: map[int32]bool{}, start: time.Now()}
	gopts := []kgo.Opt{
		kgo.ConsumerGroup(o.group), kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(m.onChange("assigned")),
		kgo.OnPartitionsRevoked(m.onChange("revoked")),
		kgo.OnPartitionsLost(m.onChange("lost")),
	}
	if o.regex {
		// Anchored and escaped: the pattern must match this test's topic only.
		gopts = append(gopts, kgo.ConsumeRegex(), kgo.ConsumeTopics("^"+regexp.QuoteMeta(o.topic)+"$"))
	} else {
		gopts = append(gopts, kgo.ConsumeTopics(o.topic))
	}
	if o.protocol == "consumer" {
		// KIP-848: the broker assigns; franz-go needs a range or sticky balancer to opt in
		// (sticky maps to the broker's "uniform" assignor).
		gopts = append(gopts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()))
	}
	cl, err := o.client(name, append(gopts, extra...)...)
	if err != nil {
		return nil, err
	}
	m.cl = cl
	return m, nil
}

// waitOwned waits until the members own exactly `want` (member i owns want[i] partitions),
// disjointly, covering 0..P-1.
func waitOwned(ctx context.Context, parts int, want []int, ms ...*member) bool {
	for i := 0; i < 600 && ctx.Err() == nil; i++ {
		seen := map[int32]int{}
		ok := true
		for j, m := range ms {
			ps := m.owned()
			ok = ok && len(ps) == want[j]
			for _, p := range ps {
				seen[p]++
			}
		}
		for p := 0; p < parts; p++ {
			ok = ok && seen[int32(p)] == 1
		}
		if ok && len(seen) == parts {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// pollRound polls every member once (briefly), keeping what each received.
func pollRound(ctx context.Context, errs *[]M, ms ...*member) int {
	n := 0
	for _, m := range ms {
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		fs := m.cl.PollFetches(pctx)
		cancel()
		for _, fe := range fs.Errors() {
			if pctx.Err() != nil && fe.Topic == "" {
				continue
			}
			*errs = append(*errs, M{"member": m.name, "partition": fe.Partition, "error": errJSON(fe.Err)})
		}
		m.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) { m.recs = append(m.recs, r); n++ })
		m.mu.Unlock()
	}
	return n
}

func describeGroupJSON(ctx context.Context, adm *kadm.Client, group string) M {
	dgs, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	g, ok := dgs[group]
	if !ok {
		return M{"error": M{"name": "CLIENT_ERROR", "text": "group missing from response"}}
	}
	members := []M{}
	for _, mem := range g.Members {
		mm := M{"client_id": mem.ClientID, "member_id": mem.MemberID, "client_host": mem.ClientHost,
			"instance_id": mem.InstanceID}
		if a, ok := mem.Assigned.AsConsumer(); ok {
			var ps []int32
			for _, t := range a.Topics {
				ps = append(ps, t.Partitions...)
			}
			sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
			mm["assigned"] = ps
		}
		if j, ok := mem.Join.AsConsumer(); ok {
			mm["subscribed"] = j.Topics
		}
		members = append(members, mm)
	}
	return M{"error": errJSON(g.Err), "state": g.State, "protocol_type": g.ProtocolType,
		"protocol": g.Protocol, "members": members, "coordinator": g.Coordinator.NodeID}
}

func describeConsumerGroupJSON(ctx context.Context, adm *kadm.Client, group string) M {
	dgs, err := adm.DescribeConsumerGroups(ctx, group)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	g, ok := dgs[group]
	if !ok {
		return M{"error": M{"name": "CLIENT_ERROR", "text": "group missing from response"}}
	}
	members := []M{}
	for _, mem := range g.Members {
		var ps []int32
		for _, parts := range mem.Assignment {
			for p := range parts {
				ps = append(ps, p)
			}
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		members = append(members, M{"client_id": mem.ClientID, "member_epoch": mem.MemberEpoch,
			"instance_id": mem.InstanceID, "member_id": mem.MemberID,
			"subscribed": mem.SubscribedTopics, "assigned": ps, "member_type": mem.MemberType})
	}
	return M{"error": errJSON(g.Err), "state": g.State, "epoch": g.Epoch,
		"assignment_epoch": g.AssignmentEpoch, "assignor": g.AssignorName, "members": members}
}

func fetchOffsetsJSON(ctx context.Context, adm *kadm.Client, group string) M {
	rs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	offs := M{}
	rs.Each(func(r kadm.OffsetResponse) {
		offs[fmt.Sprint(r.Partition)] = M{"offset": r.At, "leader_epoch": r.LeaderEpoch,
			"metadata": r.Metadata, "error": errJSON(r.Err)}
	})
	return M{"offsets": offs}
}

func listGroupsJSON(ctx context.Context, adm *kadm.Client, group string) M {
	lgs, err := adm.ListGroups(ctx)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	g, ok := lgs[group]
	if !ok {
		return M{"found": false}
	}
	return M{"found": true, "state": g.State, "type": g.GroupType, "protocol_type": g.ProtocolType,
		"coordinator": g.Coordinator}
}

func commitJSON(rs kadm.OffsetResponses, err error) any {
	if err != nil {
		return M{"error": errJSON(err)}
	}
	out := M{}
	rs.Each(func(r kadm.OffsetResponse) { out[fmt.Sprint(r.Partition)] = errJSON(r.Err) })
	return out
}

func deleteGroupJSON(r kadm.DeleteGroupResponse, err error) any {
	if err == nil {
		err = r.Err
	}
	return errJSON(err)
}

func (o *opts) describe(ctx context.Context, adm *kadm.Client) M {
	if o.protocol == "consumer" {
		return describeConsumerGroupJSON(ctx, adm, o.group)
	}
	return describeGroupJSON(ctx, adm, o.group)
}

// scenarioGroup: member a joins alone and takes every partition; b joins and the group
// rebalances to two partitions each; both consume what was produced and commit; both leave;
// more records are produced and a new member c resumes from the commits.
func scenarioGroup(ctx context.Context, o *opts) M {
	adm, acl, err := o.admin()
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer acl.Close()
	t, parts := o.topic, o.partitions
	if err := createTopic(ctx, adm, t, parts, nil); err != nil {
		return M{"error": errJSON(err)}
	}
	p, err := o.client("franz-group-producer", kgo.DefaultProduceTopic(t),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer p.Close()
	perPart := o.count / parts
	produce := func(round int) any {
		var recs []*kgo.Record
		for i := 0; i < perPart; i++ {
			for q := 0; q < parts; q++ {
				recs = append(recs, &kgo.Record{Partition: int32(q),
					Value: []byte(fmt.Sprintf("r%d-p%d-%d", round, q, i))})
			}
		}
		return errJSON(p.ProduceSync(ctx, recs...).FirstErr())
	}
	out := M{"protocol": o.protocol}
	out["produce_1"] = produce(1)

	a, err := newMember(o, "franz-a")
	if err != nil {
		out["error"] = errJSON(err)
		return out
	}
	closed := map[*member]bool{}
	closeMember := func(m *member) {
		if !closed[m] {
			closed[m] = true
			m.cl.Close()
		}
	}
	defer func() { closeMember(a) }()
	out["a_alone"] = waitOwned(ctx, parts, []int{parts}, a)

	b, err := newMember(o, "franz-b")
	if err != nil {
		out["error"] = errJSON(err)
		return out
	}
	defer func() { closeMember(b) }()
	half := parts / 2
	out["a_b_split"] = waitOwned(ctx, parts, []int{parts - half, half}, a, b)
	out["owned_a"], out["owned_b"] = a.owned(), b.owned()

	out["describe_stable"] = o.describe(ctx, adm)
	if o.protocol == "consumer" {
		// What a tool written for classic groups sees of a KIP-848 group.
		out["describe_classic_api"] = describeGroupJSON(ctx, adm, o.group)
	}
	out["list_stable"] = listGroupsJSON(ctx, adm, o.group)
	// What an operator gets trying to reset offsets or delete the group while it is in use.
	out["admin_commit_active"] = commitJSON(adm.CommitOffsets(ctx, o.group,
		kadm.Offsets{t: {0: {Topic: t, Partition: 0, At: 1, LeaderEpoch: -1}}}))
	out["delete_group_active"] = deleteGroupJSON(adm.DeleteGroup(ctx, o.group))

	var errs []M
	got := 0
	for i := 0; i < 200 && got < perPart*parts && ctx.Err() == nil; i++ {
		got += pollRound(ctx, &errs, a, b)
	}
	// One more round: nothing else may arrive (no duplicates across members).
	got += pollRound(ctx, &errs, a, b)
	out["consumed_1"] = got
	out["commit_a"] = errJSON(a.cl.CommitUncommittedOffsets(ctx))
	out["commit_b"] = errJSON(b.cl.CommitUncommittedOffsets(ctx))
	out["fetch_offsets_1"] = fetchOffsetsJSON(ctx, adm, o.group)
	lag, err := adm.Lag(ctx, o.group)
	if err != nil {
		out["lag"] = M{"error": errJSON(err)}
	} else {
		gl := lag[o.group]
		out["lag"] = M{"total": gl.Lag.Total(), "error": errJSON(gl.Error())}
	}

	closeMember(a)
	closeMember(b)
	out["a"], out["b"] = a.json(), b.json()
	// Leaving is synchronous for the members; the group's state may trail by a moment.
	var empty M
	for i := 0; i < 50 && ctx.Err() == nil; i++ {
		empty = o.describe(ctx, adm)
		if empty["state"] == "Empty" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	out["describe_empty"] = empty
	out["list_empty"] = listGroupsJSON(ctx, adm, o.group)

	out["produce_2"] = produce(2)
	c, err := newMember(o, "franz-c")
	if err != nil {
		out["error"] = errJSON(err)
		return out
	}
	defer func() { closeMember(c) }()
	got = 0
	for i := 0; i < 200 && got < perPart*parts && ctx.Err() == nil; i++ {
		got += pollRound(ctx, &errs, c)
	}
	got += pollRound(ctx, &errs, c)
	out["consumed_2"] = got
	out["commit_c"] = errJSON(c.cl.CommitUncommittedOffsets(ctx))
	out["fetch_offsets_2"] = fetchOffsetsJSON(ctx, adm, o.group)
	closeMember(c)
	out["c"] = c.json()

	// The group is empty again: offsets can be reset and deleted, then the group itself.
	out["admin_commit_empty"] = commitJSON(adm.CommitOffsets(ctx, o.group,
		kadm.Offsets{t: {0: {Topic: t, Partition: 0, At: 3, LeaderEpoch: -1, Metadata: "reset by admin"}}}))
	dor, err := adm.DeleteOffsets(ctx, o.group, kadm.TopicsSet{t: {1: {}}})
	if err == nil {
		err = dor.Error()
	}
	out["delete_offsets"] = errJSON(err)
	out["fetch_offsets_3"] = fetchOffsetsJSON(ctx, adm, o.group)
	out["delete_group"] = deleteGroupJSON(adm.DeleteGroup(ctx, o.group))
	out["describe_deleted"] = o.describe(ctx, adm)
	out["list_deleted"] = listGroupsJSON(ctx, adm, o.group)
	out["fetch_offsets_deleted"] = fetchOffsetsJSON(ctx, adm, o.group)
	out["delete_group_again"] = deleteGroupJSON(adm.DeleteGroup(ctx, o.group))
	out["poll_errors"] = errs
	if ctx.Err() != nil {
		out["error"] = errJSON(ctx.Err())
	}
	return out
}

// scenarioGroupAutocommit is the plainest group consumer: franz-go's defaults (cooperative-sticky,
// autocommit every 5 s and on revoke), polled until everything is read, then closed; Close's
// leave commits what was polled.
func scenarioGroupAutocommit(ctx context.Context, o *opts) M {
	adm, acl, err := o.adminWithTopic(ctx, o.partitions, nil)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer acl.Close()
	t := o.topic
	p, err := o.client("franz-auto-producer", kgo.DefaultProduceTopic(t))
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer p.Close()
	var recs []*kgo.Record
	for i := 0; i < o.count; i++ {
		recs = append(recs, numbered(i))
	}
	out := M{"produce": errJSON(p.ProduceSync(ctx, recs...).FirstErr())}
	c, err := o.client("franz-auto", kgo.ConsumerGroup(o.group), kgo.ConsumeTopics(t))
	if err != nil {
		out["error"] = errJSON(err)
		return out
	}
	got, errs := consume(ctx, c, o.count, 30*time.Second)
	c.Close()
	out["consumed"], out["fetch_errors"] = len(got), errs
	out["fetch_offsets"] = fetchOffsetsJSON(ctx, adm, o.group)
	out["end"] = listedJSON(adm.ListEndOffsets(ctx, t))
	return out
}

// scenarioGroupStatic: a static member (kgo.InstanceID) consumes half the records, commits and
// closes without leaving; a restarted instance with the same id takes its place and resumes.
func scenarioGroupStatic(ctx context.Context, o *opts) M {
	adm, acl, err := o.adminWithTopic(ctx, o.partitions, nil)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer acl.Close()
	t := o.topic
	p, err := o.client("franz-static-producer", kgo.DefaultProduceTopic(t))
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer p.Close()
	produce := func(from, n int) any {
		var recs []*kgo.Record
		for i := from; i < from+n; i++ {
			recs = append(recs, numbered(i))
		}
		return errJSON(p.ProduceSync(ctx, recs...).FirstErr())
	}
	out := M{"produce_1": produce(0, o.count)}
	instance := func(name string) M {
		m, err := newMember(o, name, kgo.InstanceID("franz-static-1"))
		if err != nil {
			return M{"error": errJSON(err)}
		}
		joined := waitOwned(ctx, o.partitions, []int{o.partitions}, m)
		var errs []M
		got := 0
		for i := 0; i < 100 && got < o.count && ctx.Err() == nil; i++ {
			got += pollRound(ctx, &errs, m)
		}
		memberID, gen := m.cl.GroupMetadata()
		r := M{"joined": joined, "consumed": got, "poll_errors": errs, "member_id": memberID,
			"generation": gen, "commit": errJSON(m.cl.CommitUncommittedOffsets(ctx))}
		r["describe_before_close"] = o.describe(ctx, adm)
		m.cl.Close()
		r["describe_after_close"] = o.describe(ctx, adm)
		r["member"] = m.json()
		return r
	}
	out["first"] = instance("franz-static-a")
	out["produce_2"] = produce(o.count, o.count)
	out["second"] = instance("franz-static-b")
	out["fetch_offsets"] = fetchOffsetsJSON(ctx, adm, o.group)
	return out
}
