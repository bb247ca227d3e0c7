package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

var strategies = map[string]func() sarama.BalanceStrategy{
	"range":              sarama.NewBalanceStrategyRange,
	"roundrobin":         sarama.NewBalanceStrategyRoundRobin,
	"sticky":             sarama.NewBalanceStrategySticky,
	"cooperative-sticky": sarama.NewBalanceStrategyCooperativeSticky,
}

// member is one sarama.ConsumerGroup and its handler: what each session (generation) was
// given, what it read, and the errors the group reported.
type member struct {
	name  string
	topic string
	cg    sarama.ConsumerGroup
	stop  context.CancelFunc
	done  chan struct{}

	mu       sync.Mutex
	session  sarama.ConsumerGroupSession
	sessions []M
	claimed  []M
	offsets  map[int32][]int64
	errs     []any
	start    time.Time
}

func (m *member) Setup(s sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.session = s
	m.sessions = append(m.sessions, M{"generation": s.GenerationID(), "member_id": s.MemberID(),
		"claims": sortedInt32(s.Claims()[m.topic]), "at_ms": time.Since(m.start).Milliseconds()})
	return nil
}

func (m *member) Cleanup(s sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.session = nil
	return nil
}

// ConsumeClaim marks every message (the commit happens when the scenario asks for it) and
// returns when the claim ends (rebalance) or the session is over.
func (m *member) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	m.mu.Lock()
	m.claimed = append(m.claimed, M{"partition": c.Partition(), "generation": s.GenerationID(),
		"initial_offset": c.InitialOffset()})
	m.mu.Unlock()
	for {
		select {
		case msg, ok := <-c.Messages():
			if !ok {
				return nil
			}
			m.mu.Lock()
			m.offsets[msg.Partition] = append(m.offsets[msg.Partition], msg.Offset)
			m.mu.Unlock()
			s.MarkMessage(msg, "by-"+m.name)
		case <-s.Context().Done():
			return nil
		}
	}
}

// current is the live session, its claims and generation. Read from the session itself, not
// from Setup: with cooperative-sticky one session lives across rebalances and its claims
// change inside it.
func (m *member) current() (sarama.ConsumerGroupSession, []int32, int32) {
	m.mu.Lock()
	s := m.session
	m.mu.Unlock()
	if s == nil {
		return nil, nil, -1
	}
	return s, sortedInt32(s.Claims()[m.topic]), s.GenerationID()
}

func (m *member) consumed() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, offs := range m.offsets {
		n += len(offs)
	}
	return n
}

// commit flushes the marked offsets of the current session (OffsetCommit); errors come back
// on the group's Errors channel, collected in m.errs.
func (m *member) commit() bool {
	s, _, _ := m.current()
	if s == nil {
		return false
	}
	s.Commit()
	return true
}

func (m *member) json() M {
	m.mu.Lock()
	defer m.mu.Unlock()
	// Claims start in goroutines: order them so runs compare.
	sort.Slice(m.claimed, func(i, j int) bool {
		a, b := m.claimed[i], m.claimed[j]
		if a["generation"] != b["generation"] {
			return a["generation"].(int32) < b["generation"].(int32)
		}
		return a["partition"].(int32) < b["partition"].(int32)
	})
	offs := M{}
	for p, os := range m.offsets {
		offs[fmt.Sprint(p)] = os
	}
	return M{"sessions": m.sessions, "claimed": m.claimed, "offsets": offs, "errors": m.errs}
}

func (o *opts) groupConfig(clientID string) (*sarama.Config, error) {
	cfg, err := o.config(clientID)
	if err != nil {
		return nil, err
	}
	mk, ok := strategies[o.strategy]
	if !ok {
		return nil, fmt.Errorf("unknown strategy %q", o.strategy)
	}
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{mk()}
	// Kafka's group.min.session.timeout.ms is 6 s; a fast heartbeat makes members notice a
	// rebalance (REBALANCE_IN_PROGRESS) within half a second.
	cfg.Consumer.Group.Session.Timeout = 6 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 300 * time.Millisecond
	cfg.Consumer.Group.Rebalance.Timeout = 6 * time.Second
	cfg.Consumer.Group.Rebalance.Retry.Backoff = 200 * time.Millisecond
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	// Commits happen only when the scenario calls session.Commit(), so the committed offsets
	// are exactly the marked ones at that moment.
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	return cfg, nil
}

// startMember joins the group and keeps calling Consume (each call is one session; it returns
// at every rebalance) until stopped; bounded by the scenario's context and a call count.
func startMember(ctx context.Context, o *opts, name string) (*member, error) {
	return startMemberAs(ctx, o, name, "")
}

// startMemberAs is startMember with a static group.instance.id (KIP-345) when instance != "",
// and the given assignors, in preference order, when any.
func startMemberAs(ctx context.Context, o *opts, name, instance string, assignors ...string) (*member, error) {
	cfg, err := o.groupConfig(name)
	if err != nil {
		return nil, err
	}
	cfg.Consumer.Group.InstanceId = instance
	if len(assignors) > 0 {
		cfg.Consumer.Group.Rebalance.GroupStrategies = nil
		for _, a := range assignors {
			cfg.Consumer.Group.Rebalance.GroupStrategies = append(
				cfg.Consumer.Group.Rebalance.GroupStrategies, strategies[a]())
		}
	}
	cg, err := sarama.NewConsumerGroup([]string{o.bootstrap}, o.group, cfg)
	if err != nil {
		return nil, err
	}
	mctx, stop := context.WithCancel(ctx)
	m := &member{name: name, topic: o.topic, cg: cg, stop: stop, done: make(chan struct{}),
		offsets: map[int32][]int64{}, start: time.Now()}
	go func() {
		for e := range cg.Errors() {
			m.mu.Lock()
			m.errs = append(m.errs, errJSON(e))
			m.mu.Unlock()
		}
	}()
	go func() {
		defer close(m.done)
		for i := 0; i < 200 && mctx.Err() == nil; i++ {
			if err := cg.Consume(mctx, []string{o.topic}, m); err != nil {
				if errors.Is(err, sarama.ErrClosedConsumerGroup) {
					return
				}
				m.mu.Lock()
				m.errs = append(m.errs, M{"consume": errJSON(err)})
				m.mu.Unlock()
				sleepCtx(mctx, 200*time.Millisecond)
			}
		}
	}()
	return m, nil
}

// close leaves the group (LeaveGroup) and waits for the Consume loop to end.
func (m *member) close() any {
	m.stop()
	err := m.cg.Close()
	select {
	case <-m.done:
	case <-time.After(15 * time.Second):
		return M{"name": "CLIENT_ERROR", "text": "consume loop did not end"}
	}
	return errJSON(err)
}

// waitSplit waits until the members' current sessions are of one generation and their claims
// cover 0..parts-1 disjointly, each member holding want[i] partitions.
func waitSplit(ctx context.Context, parts int, want []int, ms ...*member) bool {
	for i := 0; i < 300; i++ {
		seen := map[int32]int{}
		gens := map[int32]bool{}
		ok := true
		for j, m := range ms {
			s, claims, gen := m.current()
			ok = ok && s != nil && len(claims) == want[j]
			gens[gen] = true
			for _, p := range claims {
				seen[p]++
			}
		}
		for p := 0; p < parts; p++ {
			ok = ok && seen[int32(p)] == 1
		}
		if ok && len(gens) == 1 {
			return true
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return false
		}
	}
	return false
}

func waitConsumed(ctx context.Context, want int, ms ...*member) int {
	n := 0
	for i := 0; i < 300; i++ {
		n = 0
		for _, m := range ms {
			n += m.consumed()
		}
		if n >= want || !sleepCtx(ctx, 100*time.Millisecond) {
			break
		}
	}
	// Anything more (a duplicate, a record read twice across a rebalance) shows up shortly.
	sleepCtx(ctx, 300*time.Millisecond)
	n = 0
	for _, m := range ms {
		n += m.consumed()
	}
	return n
}

func describeGroupJSON(adm sarama.ClusterAdmin, group string) M {
	var g *sarama.GroupDescription
	// sarama's DescribeConsumerGroups doesn't retry: on a fresh cluster the coordinator is
	// still loading its __consumer_offsets partition for a moment (NOT_COORDINATOR /
	// COORDINATOR_LOAD_IN_PROGRESS), so retry those briefly as a user would.
	for i := 0; i < 50; i++ {
		gds, err := adm.DescribeConsumerGroups([]string{group})
		if err != nil {
			return M{"error": errJSON(err)}
		}
		if len(gds) != 1 {
			return M{"error": M{"name": "CLIENT_ERROR", "text": fmt.Sprintf("%d groups", len(gds))}}
		}
		g = gds[0]
		if g.Err != sarama.ErrNotCoordinatorForConsumer && g.Err != sarama.ErrOffsetsLoadInProgress {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	members := []M{}
	for id, mem := range g.Members {
		mm := M{"member_id": id, "client_id": mem.ClientId, "client_host": mem.ClientHost,
			"instance_id": mem.GroupInstanceId}
		if md, err := mem.GetMemberMetadata(); err == nil && md != nil {
			mm["subscribed"] = md.Topics
		} else {
			mm["metadata_error"] = errJSON(err)
		}
		if a, err := mem.GetMemberAssignment(); err == nil && a != nil {
			var ps []int32
			for _, parts := range a.Topics {
				ps = append(ps, parts...)
			}
			mm["assigned"] = sortedInt32(ps)
		} else {
			mm["assignment_error"] = errJSON(err)
		}
		members = append(members, mm)
	}
	sort.Slice(members, func(i, j int) bool {
		return members[i]["client_id"].(string) < members[j]["client_id"].(string)
	})
	return M{"error": kerrJSON(g.Err), "group_id": g.GroupId, "state": g.State,
		"protocol_type": g.ProtocolType, "protocol": g.Protocol, "members": members}
}

func listGroupJSON(adm sarama.ClusterAdmin, group string) M {
	gs, err := adm.ListConsumerGroups()
	if err != nil {
		return M{"error": errJSON(err)}
	}
	pt, ok := gs[group]
	return M{"error": nil, "found": ok, "protocol_type": pt}
}

func fetchOffsetsJSON(adm sarama.ClusterAdmin, group string, topics map[string][]int32) M {
	r, err := adm.ListConsumerGroupOffsets(group, topics)
	if err != nil {
		return M{"error": errJSON(err)}
	}
	blocks, gerr := r.Blocks, r.Err
	if r.Version >= 8 && len(r.Groups) > 0 {
		blocks, gerr = r.Groups[0].Blocks, r.Groups[0].Err
	}
	out := M{}
	for t, parts := range blocks {
		for p, b := range parts {
			out[fmt.Sprintf("%s/%d", t, p)] = M{"offset": b.Offset, "metadata": b.Metadata,
				"leader_epoch": b.LeaderEpoch, "error": kerrJSON(b.Err)}
		}
	}
	return M{"error": kerrJSON(gerr), "version": r.Version, "offsets": out}
}

func produceRound(o *opts, round, parts, perPart int) any {
	cfg, err := o.config("sarama-group-producer")
	if err != nil {
		return errJSON(err)
	}
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	p, err := sarama.NewSyncProducer([]string{o.bootstrap}, cfg)
	if err != nil {
		return errJSON(err)
	}
	defer p.Close()
	var msgs []*sarama.ProducerMessage
	for p := 0; p < parts; p++ {
		for i := 0; i < perPart; i++ {
			msgs = append(msgs, &sarama.ProducerMessage{Topic: o.topic, Partition: int32(p),
				Value: sarama.StringEncoder(fmt.Sprintf("r%d-p%d-%d", round, p, i))})
		}
	}
	return errJSON(p.SendMessages(msgs))
}

// scenarioGroup: member a joins alone and is given every partition; b joins and the group
// splits them; records produced then are read once, each by its partition's owner, marked and
// committed; the operator's view (describe, list, offsets, delete refused) is taken while the
// group is Stable and once it is Empty; a restarted member c resumes at the commits; finally
// the admin resets/deletes offsets and deletes the group.
func scenarioGroup(ctx context.Context, o *opts) M {
	adm, err := o.admin()
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer adm.Close()
	t, parts, perPart := o.topic, o.partitions, o.count/o.partitions
	if err := createTopic(ctx, adm, t, parts, nil); err != nil {
		return M{"error": errJSON(err)}
	}
	out := M{}
	a, err := startMember(ctx, o, "sarama-a")
	if err != nil {
		return M{"error": errJSON(err)}
	}
	out["a_alone"] = waitSplit(ctx, parts, []int{parts}, a)
	b, err := startMember(ctx, o, "sarama-b")
	if err != nil {
		a.close()
		return M{"error": errJSON(err)}
	}
	half := []int{parts / 2, parts - parts/2}
	out["split"] = waitSplit(ctx, parts, half, a, b)
	_, claimsA, genA := a.current()
	_, claimsB, genB := b.current()
	out["claims_a"], out["claims_b"] = claimsA, claimsB
	out["generation_a"], out["generation_b"] = genA, genB

	out["produce_1"] = produceRound(o, 1, parts, perPart)
	out["consumed_1"] = waitConsumed(ctx, parts*perPart, a, b)
	out["commit_a"], out["commit_b"] = a.commit(), b.commit()
	out["offsets_1"] = fetchOffsetsJSON(adm, o.group, nil)
	out["offsets_1_named"] = fetchOffsetsJSON(adm, o.group, map[string][]int32{t: {0, int32(parts)}})

	out["describe_stable"] = describeGroupJSON(adm, o.group)
	out["list_stable"] = listGroupJSON(adm, o.group)
	out["delete_group_active"] = errJSON(adm.DeleteConsumerGroup(o.group))
	out["delete_offset_active"] = errJSON(adm.DeleteConsumerGroupOffset(o.group, t, 0))
	out["alter_offsets_active"] = alterOffsetsJSON(adm.AlterConsumerGroupOffsets(o.group,
		map[string]map[int32]sarama.OffsetAndMetadata{t: {0: {Offset: 3, Metadata: "admin", LeaderEpoch: -1}}}, nil))

	out["close_a"], out["close_b"] = a.close(), b.close()
	out["a"], out["b"] = a.json(), b.json()
	out["describe_empty"] = describeGroupJSON(adm, o.group)
	out["list_empty"] = listGroupJSON(adm, o.group)

	// A restarted consumer resumes exactly at the commits.
	out["produce_2"] = produceRound(o, 2, parts, perPart)
	c, err := startMember(ctx, o, "sarama-c")
	if err != nil {
		out["error"] = errJSON(err)
		return out
	}
	out["c_alone"] = waitSplit(ctx, parts, []int{parts}, c)
	out["consumed_2"] = waitConsumed(ctx, parts*perPart, c)
	out["commit_c"] = c.commit()
	out["close_c"] = c.close()
	out["c"] = c.json()
	out["offsets_2"] = fetchOffsetsJSON(adm, o.group, nil)

	// Operator actions on the empty group.
	out["alter_offsets_empty"] = alterOffsetsJSON(adm.AlterConsumerGroupOffsets(o.group,
		map[string]map[int32]sarama.OffsetAndMetadata{t: {0: {Offset: 3, Metadata: "reset by admin", LeaderEpoch: -1}}}, nil))
	out["delete_offset_empty"] = errJSON(adm.DeleteConsumerGroupOffset(o.group, t, 1))
	// offset.metadata.max.bytes is 4096 by default.
	out["alter_offsets_big_metadata"] = alterOffsetsJSON(adm.AlterConsumerGroupOffsets(o.group,
		map[string]map[int32]sarama.OffsetAndMetadata{t: {2: {Offset: 5, Metadata: strings.Repeat("m", 5000), LeaderEpoch: -1}}}, nil))
	out["offsets_3"] = fetchOffsetsJSON(adm, o.group, nil)
	out["delete_group"] = errJSON(adm.DeleteConsumerGroup(o.group))
	out["list_deleted"] = listGroupJSON(adm, o.group)
	out["describe_deleted"] = describeGroupJSON(adm, o.group)
	out["offsets_deleted"] = fetchOffsetsJSON(adm, o.group, nil)
	out["delete_group_again"] = errJSON(adm.DeleteConsumerGroup(o.group))
	return out
}

func alterOffsetsJSON(r *sarama.OffsetCommitResponse, err error) any {
	if err != nil {
		return M{"error": errJSON(err)}
	}
	out := M{}
	for t, parts := range r.Errors {
		for p, e := range parts {
			out[fmt.Sprintf("%s/%d", t, p)] = kerrJSON(e)
		}
	}
	return M{"error": nil, "partitions": out}
}

// scenarioGroupStatic: a static member (Consumer.Group.InstanceId) reads and commits, closes
// without leaving (sarama skips LeaveGroup for static members), and a new instance with the
// same id takes its place without a rebalance and resumes at the commits; the operator then
// removes it with RemoveMemberFromConsumerGroup (LeaveGroup v3 by instance id).
func scenarioGroupStatic(ctx context.Context, o *opts) M {
	adm, err := o.admin()
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer adm.Close()
	t, parts, perPart := o.topic, o.partitions, o.count/o.partitions
	if err := createTopic(ctx, adm, t, parts, nil); err != nil {
		return M{"error": errJSON(err)}
	}
	out := M{"produce_1": produceRound(o, 1, parts, perPart)}
	const instance = "sarama-static-1"
	run := func(label string) bool {
		m, err := startMemberAs(ctx, o, "sarama-static", instance)
		if err != nil {
			out[label] = M{"error": errJSON(err)}
			return false
		}
		r := M{"joined": waitSplit(ctx, parts, []int{parts}, m)}
		_, _, gen := m.current()
		r["generation"] = gen
		r["consumed"] = waitConsumed(ctx, parts*perPart, m)
		r["commit"] = m.commit()
		r["describe_before_close"] = describeGroupJSON(adm, o.group)
		r["close"] = m.close()
		r["member"] = m.json()
		r["describe_after_close"] = describeGroupJSON(adm, o.group)
		out[label] = r
		return true
	}
	if !run("first") {
		return out
	}
	out["produce_2"] = produceRound(o, 2, parts, perPart)
	if !run("second") {
		return out
	}
	out["offsets"] = fetchOffsetsJSON(adm, o.group, nil)
	out["remove_member"] = leaveJSON(adm.RemoveMemberFromConsumerGroup(o.group, []string{instance}))
	out["describe_after_remove"] = describeGroupJSON(adm, o.group)
	out["remove_unknown_member"] = leaveJSON(adm.RemoveMemberFromConsumerGroup(o.group, []string{"sarama-static-9"}))
	if !o.expire {
		return out
	}
	// A static member that goes away without leaving stays until its session times out
	// (Consumer.Group.Session.Timeout, 6 s): then the coordinator removes it.
	out["produce_3"] = produceRound(o, 3, parts, perPart)
	if !run("third") {
		return out
	}
	start := time.Now()
	var d M
	for i := 0; i < 200; i++ {
		d = describeGroupJSON(adm, o.group)
		if d["state"] != "Stable" || !sleepCtx(ctx, 100*time.Millisecond) {
			break
		}
	}
	out["expired_after_ms"] = time.Since(start).Milliseconds()
	out["describe_after_expiry"] = d
	return out
}

func leaveJSON(r *sarama.LeaveGroupResponse, err error) M {
	if err != nil {
		return M{"error": errJSON(err)}
	}
	members := []M{}
	for _, m := range r.Members {
		members = append(members, M{"member_id": m.MemberId, "instance_id": m.GroupInstanceId,
			"error": kerrJSON(m.Err)})
	}
	return M{"error": kerrJSON(r.Err), "version": r.Version, "members": members}
}

// scenarioGroupProtocols: the coordinator picks the group's assignor among those every member
// supports (JoinGroup protocols, in preference order), and refuses a member that shares none.
func scenarioGroupProtocols(ctx context.Context, o *opts) M {
	adm, err := o.admin()
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer adm.Close()
	if err := createTopic(ctx, adm, o.topic, 2, nil); err != nil {
		return M{"error": errJSON(err)}
	}
	out := M{}
	a, err := startMemberAs(ctx, o, "sarama-a", "", "sticky", "range")
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer a.close()
	out["a_alone"] = waitSplit(ctx, 2, []int{2}, a)
	out["describe_a"] = describeGroupJSON(adm, o.group)
	b, err := startMemberAs(ctx, o, "sarama-b", "", "roundrobin", "range")
	if err != nil {
		return M{"error": errJSON(err)}
	}
	defer b.close()
	out["split"] = waitSplit(ctx, 2, []int{1, 1}, a, b)
	out["describe_ab"] = describeGroupJSON(adm, o.group)
	c, err := startMemberAs(ctx, o, "sarama-c", "", "cooperative-sticky")
	if err != nil {
		return M{"error": errJSON(err)}
	}
	for i := 0; i < 50; i++ {
		c.mu.Lock()
		n := len(c.errs)
		c.mu.Unlock()
		if n > 0 || !sleepCtx(ctx, 100*time.Millisecond) {
			break
		}
	}
	out["close_c"] = c.close()
	out["c"] = c.json()
	out["describe_after_c"] = describeGroupJSON(adm, o.group)
	return out
}
