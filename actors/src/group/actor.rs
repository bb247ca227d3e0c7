//! `GroupCoordinatorActor`: one group coordinator shard (Kafka's `CoordinatorRuntime` around a
//! `GroupCoordinatorShard`) for one `__consumer_offsets` partition this broker leads. It loads
//! the shard by replaying the partition, feeds it requests and timer wake-ups, appends the
//! records each step produces as one batch, and sends that step's responses only once the
//! batch is committed (high watermark past it), in order.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use actix::{
    Actor, ActorContext, ActorFutureExt, AsyncContext, Context, Handler, ResponseFuture,
    SpawnHandle, WrapFuture,
};
use kactor_protocol::errors;
use tokio::sync::oneshot;

use super::core::{
    GroupCoordinatorConfig, GroupCoordinatorShard, GroupRequest, GroupResponse, Output, RequestId,
};
use super::log::{records_batch, replay_batches, TxnProducer};
use super::messages::*;
use super::metrics::{group_metrics, ShardMetrics};
use crate::partition::core::{IsolationLevel, PartitionError, ReadParams};
use crate::partition::messages::{AppendCoordinatorRecords, DescribeReplica, ReadRecords};
use crate::partition::registry::PartitionTableReader;
use crate::runtime::{ActorMetrics, SupervisedActor};

/// A write not committed within this long fails (Kafka's append timeout is similar).
const COMMIT_TIMEOUT_MS: i64 = 30_000;
/// Bytes per read while loading.
const LOAD_READ_BYTES: usize = 1 << 20;
/// How often the shard's group gauges and consumer lag are refreshed.
const METRICS_INTERVAL: Duration = Duration::from_secs(5);

fn now_ms() -> i64 {
    crate::partition::actor::now_ms()
}

/// Kafka's `normalizeException` for coordinator writes.
fn write_error_code(e: &PartitionError) -> i16 {
    match e {
        PartitionError::NotLeaderOrFollower
        | PartitionError::FencedLeaderEpoch { .. }
        | PartitionError::UnknownLeaderEpoch { .. } => errors::NOT_COORDINATOR,
        PartitionError::NotEnoughReplicas { .. } => errors::COORDINATOR_NOT_AVAILABLE,
        PartitionError::MessageTooLarge { .. } => errors::UNKNOWN_SERVER_ERROR,
        // A TxnOffsetCommit's records refused by the producer state (verification guard voided
        // by an abort: INVALID_TXN_STATE; fenced epoch: INVALID_PRODUCER_EPOCH) answer that
        // error, as Kafka's `handleOperationException` passes it through.
        PartitionError::ProducerState(e) => e.code(),
        _ => errors::COORDINATOR_NOT_AVAILABLE,
    }
}

/// Whether a failed write's code concerns that write's own producer rather than the shard:
/// the writes queued behind it are then not at fault and get a retriable code instead.
fn is_producer_state_code(code: i16) -> bool {
    matches!(
        code,
        errors::OUT_OF_ORDER_SEQUENCE_NUMBER
            | errors::INVALID_PRODUCER_EPOCH
            | errors::INVALID_TXN_STATE
            | errors::TRANSACTION_COORDINATOR_FENCED
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WriteState {
    /// Sent to the partition and not committed yet (no answer, or waiting in the purgatory
    /// for the high watermark to pass it).
    Appending,
    /// Nothing to wait for (no records, or committed).
    Ready,
}

struct PendingWrite {
    seq: u64,
    state: WriteState,
    responses: Vec<(RequestId, GroupResponse)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Loading,
    Active,
    /// A write failed: reloading from the log to drop the state it produced.
    Reloading,
    /// This broker no longer leads the partition: every request gets NOT_COORDINATOR until the
    /// last address is dropped (a supervised actor that stops is restarted, so it stays, inert).
    Resigned,
}

pub struct GroupCoordinatorActor {
    partition_index: i32,
    config: GroupCoordinatorConfig,
    seed: u64,
    shard: GroupCoordinatorShard,
    partition: CoordinatorPartition,
    phase: Phase,
    next_request_id: RequestId,
    waiting: HashMap<RequestId, oneshot::Sender<GroupResponse>>,
    /// Writes in append order; responses leave from the front only.
    writes: VecDeque<PendingWrite>,
    next_write_seq: u64,
    next_offset: i64,
    timer: Option<SpawnHandle>,
    metrics: ActorMetrics,
    /// Where the high watermarks for consumer lag come from.
    partitions: Option<(PartitionTableReader, i32)>,
    /// The partition table version its topics view comes from (None before the first).
    topics_version: Option<u64>,
    group_metrics: ShardMetrics,
    /// A lag refresh is in flight (skip the next tick rather than pile up).
    refreshing: bool,
    /// Topics deleted while the shard was (re)loading: their offsets are tombstoned once the
    /// log has been replayed, since before that the shard does not know them.
    deleted_while_loading: Vec<String>,
}

impl GroupCoordinatorActor {
    pub fn new(
        partition_index: i32,
        config: GroupCoordinatorConfig,
        partition: CoordinatorPartition,
        topics: super::core::TopicsView,
        group_configs: super::core::GroupConfigsView,
    ) -> Self {
        let seed = now_ms() as u64 ^ ((partition_index as u64) << 48);
        let mut shard = GroupCoordinatorShard::new(config.clone(), seed);
        shard.set_topics(topics);
        shard.set_group_configs(group_configs);
        GroupCoordinatorActor {
            partition_index,
            config,
            seed,
            shard,
            partition,
            phase: Phase::Loading,
            next_request_id: 0,
            waiting: HashMap::new(),
            writes: VecDeque::new(),
            next_write_seq: 0,
            next_offset: 0,
            timer: None,
            metrics: ActorMetrics::new("GroupCoordinatorActor"),
            partitions: None,
            topics_version: None,
            group_metrics: ShardMetrics::default(),
            refreshing: false,
            deleted_while_loading: Vec::new(),
        }
    }

    /// Enables consumer-lag metrics: committed offsets are compared with the high watermarks
    /// of the partitions this broker leads.
    pub fn with_partition_table(
        mut self,
        partitions: PartitionTableReader,
        broker_id: i32,
    ) -> Self {
        self.partitions = Some((partitions, broker_id));
        self
    }

    /// Takes the topics from the newest partition table when the manager's last
    /// `UpdateGroupTopics` is older: a member's heartbeat right after its topic was created
    /// (the client learnt of it from Metadata, served from that same table) gets its
    /// assignment in this very response, as on Kafka, instead of one heartbeat later.
    fn refresh_topics(&mut self) {
        let Some((reader, _)) = &self.partitions else {
            return;
        };
        let table = reader.borrow().clone();
        if self.topics_version.is_some_and(|v| v >= table.version) {
            return;
        }
        self.topics_version = Some(table.version);
        self.shard.set_topics(super::manager::topics_view(&table));
    }

    /// Refreshes this shard's group metrics; lag needs a DescribeReplica per partition led
    /// here, so it completes asynchronously.
    fn refresh_metrics(&mut self, ctx: &mut Context<Self>) {
        if self.phase != Phase::Active || self.refreshing {
            return;
        }
        let committed = self.group_metrics.refresh(&self.shard);
        let Some((table, broker_id)) = self
            .partitions
            .as_ref()
            .map(|(r, id)| (r.borrow().clone(), *id))
        else {
            return;
        };
        let mut asks = Vec::new();
        let wanted: std::collections::BTreeSet<(String, i32)> =
            committed.keys().map(|(_, t, p)| (t.clone(), *p)).collect();
        for (topic, p) in wanted {
            if let Some(h) = table.get(&topic, p).filter(|h| h.leader == broker_id) {
                let fut = h.addr.send(DescribeReplica);
                asks.push(async move { fut.await.ok().map(|i| ((topic, p), i.high_watermark)) });
            }
        }
        self.refreshing = true;
        let all = futures_util::future::join_all(asks);
        ctx.spawn(all.into_actor(self).map(move |hws, act, _| {
            act.refreshing = false;
            let hws: HashMap<(String, i32), i64> = hws.into_iter().flatten().collect();
            act.group_metrics.set_lags(&committed, &hws);
        }));
    }

    pub fn partition_index(&self) -> i32 {
        self.partition_index
    }

    /// Reads the partition from its start and replays it into a fresh shard.
    fn load(&mut self, ctx: &mut Context<Self>) {
        let partition = self.partition.clone();
        let mut shard = GroupCoordinatorShard::new(self.config.clone(), self.seed);
        shard.adopt_views(&self.shard);
        let fut = async move {
            let info = partition
                .describe
                .send(DescribeReplica)
                .await
                .map_err(|e| e.to_string())?;
            let mut next = info.log_start_offset;
            loop {
                let read = partition
                    .read
                    .send(ReadRecords {
                        scope: Default::default(),
                        params: ReadParams {
                            fetch_offset: next,
                            max_bytes: LOAD_READ_BYTES,
                            min_one_batch: true,
                            isolation: IsolationLevel::ReadUncommitted,
                            current_leader_epoch: -1,
                            last_fetched_epoch: -1,
                            // To the log end, as Kafka's coordinator loader reads: a new leader
                            // may not know yet that its tail is committed (its high watermark
                            // trails by a fetch), and the whole log is, under its leadership.
                            replica_id: crate::partition::core::DEBUGGING_REPLICA_ID,
                        },
                        isr_eligible: false,
                        replica_epoch: -1,
                    })
                    .await
                    .map_err(|e| e.to_string())?
                    .map_err(|e| e.to_string())?;
                if next >= read.log_end_offset {
                    break;
                }
                let bytes = read.records.to_bytes().map_err(|e| e.to_string())?;
                if bytes.is_empty() {
                    break;
                }
                let after = replay_batches(&mut shard, bytes, next).map_err(|e| e.to_string())?;
                if after <= next {
                    break;
                }
                next = after;
            }
            Ok::<_, String>((shard, next))
        };
        ctx.spawn(fut.into_actor(self).map(|result, act, ctx| match result {
            Ok((mut shard, next)) => {
                shard.on_loaded(now_ms());
                // Topic and group config changes that arrived during the load went to the shard
                // being replaced.
                shard.adopt_views(&act.shard);
                act.shard = shard;
                act.next_offset = next;
                act.phase = Phase::Active;
                act.refresh_metrics(ctx);
                tracing::info!(partition = act.partition_index, groups = act.shard.groups().count(), next_offset = next, "group coordinator loaded");
                let deleted = std::mem::take(&mut act.deleted_while_loading);
                act.tombstone_deleted_topics(&deleted, ctx);
                act.reschedule_timer(ctx);
            }
            Err(e) => {
                // The partition may have moved: the topology resigns us; until then retry.
                tracing::warn!(partition = act.partition_index, error = %e, "group coordinator load failed; retrying");
                ctx.run_later(Duration::from_millis(500), |act, ctx| act.load(ctx));
            }
        }));
    }

    /// Appends `out.records` (if any) and queues `out.responses` behind every earlier write.
    fn process(&mut self, out: Output, producer: Option<TxnProducer>, ctx: &mut Context<Self>) {
        let seq = self.next_write_seq;
        self.next_write_seq += 1;
        if out.records.is_empty() {
            self.writes.push_back(PendingWrite {
                seq,
                state: WriteState::Ready,
                responses: out.responses,
            });
            self.release();
            return;
        }
        let batch = match records_batch(&out.records, now_ms(), producer) {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(error = %e, "cannot encode coordinator records");
                self.writes.push_back(PendingWrite {
                    seq,
                    state: WriteState::Ready,
                    responses: fail_all(out.responses, errors::UNKNOWN_SERVER_ERROR),
                });
                self.fail_from(seq + 1, errors::UNKNOWN_SERVER_ERROR, ctx);
                return;
            }
        };
        self.writes.push_back(PendingWrite {
            seq,
            state: WriteState::Appending,
            responses: out.responses,
        });
        let append = self.partition.append.send(AppendCoordinatorRecords {
            records: batch,
            required_acks: -1,
        });
        ctx.spawn(
            append
                .into_actor(self)
                .map(move |result, act, ctx| match result {
                    Ok(Ok(outcome)) => {
                        act.next_offset = outcome.last_offset + 1;
                        // Committed by the append itself (a lone replica): no wait.
                        if outcome.high_watermark > outcome.last_offset {
                            act.set_ready(seq);
                        } else {
                            act.await_commit(seq, outcome, ctx);
                        }
                    }
                    Ok(Err(e)) => act.fail_from(seq, write_error_code(&e), ctx),
                    Err(_) => act.fail_from(seq, errors::COORDINATOR_NOT_AVAILABLE, ctx),
                }),
        );
    }

    /// Sends the responses of every leading write that is committed.
    fn release(&mut self) {
        while let Some(front) = self.writes.front() {
            if front.state != WriteState::Ready {
                break;
            }
            let w = self.writes.pop_front().expect("front exists");
            self.deliver(w.responses);
        }
    }

    /// Write `seq` is committed (or had nothing to wait for): answer it once every earlier
    /// write is.
    fn set_ready(&mut self, seq: u64) {
        if let Some(w) = self.writes.iter_mut().find(|w| w.seq == seq) {
            w.state = WriteState::Ready;
        }
        self.release();
    }

    /// Waits in the purgatory for the high watermark to pass write `seq` (Kafka's coordinator
    /// runtime completes writes on the high watermark event): committed, it is answered in
    /// order; if the leadership it was appended under ended, it and every later write answer
    /// NOT_COORDINATOR; past the commit timeout, COORDINATOR_NOT_AVAILABLE.
    fn await_commit(
        &mut self,
        seq: u64,
        outcome: crate::partition::core::AppendOutcome,
        ctx: &mut Context<Self>,
    ) {
        let purgatory = self.partition.replication.clone();
        let tp = crate::partition::core::TopicPartition::new(
            crate::group::apis::OFFSETS_TOPIC,
            self.partition_index,
        );
        let wait = async move {
            crate::purgatory::await_commit(
                purgatory.as_ref(),
                &tp,
                &outcome,
                COMMIT_TIMEOUT_MS as u64,
            )
            .await
        };
        ctx.spawn(wait.into_actor(self).map(move |code, act, ctx| {
            // A write dropped meanwhile (failed with an earlier one, or unloaded) is gone.
            if !act.writes.iter().any(|w| w.seq == seq) {
                return;
            }
            match code {
                kactor_protocol::errors::NONE => act.set_ready(seq),
                kactor_protocol::errors::NOT_LEADER_OR_FOLLOWER => {
                    act.fail_from(seq, errors::NOT_COORDINATOR, ctx)
                }
                _ => act.fail_from(seq, errors::COORDINATOR_NOT_AVAILABLE, ctx),
            }
        }));
    }

    /// The write `seq` failed: it and every later write (their state built on it) answer
    /// `code`, and the shard reloads from the log to drop the state they produced.
    fn fail_from(&mut self, seq: u64, code: i16, ctx: &mut Context<Self>) {
        let mut failed = Vec::new();
        // Kafka writes a transactional write in a batch of its own, so its refusal fails no
        // other request; here the later writes' state was built on it and is dropped with the
        // reload, so they fail too, but retriably.
        let later_code = if is_producer_state_code(code) {
            errors::COORDINATOR_NOT_AVAILABLE
        } else {
            code
        };
        self.writes.retain_mut(|w| {
            if w.seq >= seq {
                let code = if w.seq == seq { code } else { later_code };
                failed.extend(fail_all(std::mem::take(&mut w.responses), code));
                false
            } else {
                true
            }
        });
        // Parked requests belong to the state being dropped too.
        let parked = self.shard.unload();
        failed.extend(fail_all(parked.responses, later_code));
        self.deliver(failed);
        self.release();
        if self.phase != Phase::Reloading {
            self.phase = Phase::Reloading;
            self.load(ctx);
        }
    }

    /// Writes tombstones for every group's offsets on `topics` (deleted from the cluster).
    fn tombstone_deleted_topics(&mut self, topics: &[String], ctx: &mut Context<Self>) {
        let out = self.shard.on_topics_deleted(topics);
        if out.records.is_empty() {
            return;
        }
        tracing::info!(
            partition = self.partition_index,
            ?topics,
            offsets = out.records.len(),
            "deleting the offsets of deleted topics"
        );
        self.process(out, None, ctx);
    }

    fn deliver(&mut self, responses: Vec<(RequestId, GroupResponse)>) {
        for (id, response) in responses {
            if let Some(tx) = self.waiting.remove(&id) {
                // The requester may have gone (connection closed): nothing to do.
                let _ = tx.send(response);
            }
        }
    }

    fn reschedule_timer(&mut self, ctx: &mut Context<Self>) {
        if let Some(h) = self.timer.take() {
            ctx.cancel_future(h);
        }
        if self.phase != Phase::Active {
            return;
        }
        if let Some(deadline) = self.shard.next_deadline() {
            let delay = (deadline - now_ms()).max(0) as u64;
            self.timer = Some(ctx.run_later(Duration::from_millis(delay), |act, ctx| {
                act.timer = None;
                let out = act.shard.fire_timers(now_ms());
                act.process(out, None, ctx);
                act.reschedule_timer(ctx);
            }));
        }
    }
}

fn fail_all(
    responses: Vec<(RequestId, GroupResponse)>,
    code: i16,
) -> Vec<(RequestId, GroupResponse)> {
    responses
        .into_iter()
        .map(|(id, r)| (id, r.into_error(code)))
        .collect()
}

/// A one-line description of a classic membership request (JoinGroup, SyncGroup, Heartbeat,
/// LeaveGroup) for the debug log, so a member that stops getting assignments can be followed
/// request by request on the broker's side; None for every other request.
fn classic_request_summary(request: &GroupRequest) -> Option<String> {
    Some(match request {
        GroupRequest::JoinGroup(r) => format!(
            "JoinGroup v{} group={} member={:?} instance={:?} client={} session={} rebalance={} reason={:?}",
            r.api_version, r.group_id, r.member_id, r.group_instance_id, r.client_id,
            r.session_timeout_ms, r.rebalance_timeout_ms, r.reason
        ),
        GroupRequest::SyncGroup(r) => format!(
            "SyncGroup group={} member={:?} generation={} assignments={}",
            r.group_id,
            r.member_id,
            r.generation_id,
            r.assignments.len()
        ),
        GroupRequest::Heartbeat(r) => format!(
            "Heartbeat group={} member={:?} generation={}",
            r.group_id, r.member_id, r.generation_id
        ),
        GroupRequest::LeaveGroup(r) => format!(
            "LeaveGroup group={} members={:?}",
            r.group_id,
            r.members.iter().map(|m| &m.member_id).collect::<Vec<_>>()
        ),
        _ => return None,
    })
}

fn classic_response_summary(response: &GroupResponse) -> String {
    match response {
        GroupResponse::JoinGroup(r) => format!(
            "error={} member={:?} generation={} leader={:?} members={}",
            r.error_code,
            r.member_id,
            r.generation_id,
            r.leader,
            r.members.len()
        ),
        GroupResponse::SyncGroup(r) => {
            format!(
                "error={} assignment_bytes={}",
                r.error_code,
                r.assignment.len()
            )
        }
        GroupResponse::Heartbeat { error_code } => format!("error={error_code}"),
        GroupResponse::LeaveGroup(r) => format!(
            "error={} members={:?}",
            r.error_code,
            r.members.iter().map(|m| m.error_code).collect::<Vec<_>>()
        ),
        other => format!("{other:?}"),
    }
}

/// `kactor_group_offset_commits_total`: the partitions a commit response reports as stored.
fn count_commits(response: &GroupResponse) {
    let (api, topics) = match response {
        GroupResponse::OffsetCommit { topics } => ("OffsetCommit", topics),
        GroupResponse::TxnOffsetCommit { topics } => ("TxnOffsetCommit", topics),
        _ => return,
    };
    let ok = topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .filter(|(_, code)| *code == errors::NONE)
        .count();
    if ok > 0 {
        group_metrics()
            .offset_commits_total
            .with_label_values(&[api])
            .inc_by(ok as u64);
    }
}

impl Actor for GroupCoordinatorActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        if self.phase == Phase::Resigned {
            return;
        }
        self.load(ctx);
        ctx.run_interval(METRICS_INTERVAL, |act, ctx| act.refresh_metrics(ctx));
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        self.group_metrics.clear();
    }
}

impl actix::Supervised for GroupCoordinatorActor {
    /// After a caught panic the in-memory groups may be half-updated: drop them with every
    /// request waiting on them (their clients get NOT_COORDINATOR and look again) and replay
    /// the coordinator partition, which `started` does once more.
    fn restarting(&mut self, _: &mut Context<Self>) {
        if self.phase == Phase::Resigned {
            return;
        }
        self.waiting.clear();
        self.writes.clear();
        let _ = self.shard.unload();
        self.shard = {
            let mut fresh = GroupCoordinatorShard::new(self.config.clone(), self.seed);
            fresh.adopt_views(&self.shard);
            fresh
        };
        self.timer = None;
        self.refreshing = false;
        self.phase = Phase::Loading;
    }
}

impl SupervisedActor for GroupCoordinatorActor {
    const MAILBOX_CAPACITY: usize = 1024;
}

crate::supervised_mailbox!(GroupCoordinatorActor);

impl Handler<HandleGroupRequest> for GroupCoordinatorActor {
    type Result = ResponseFuture<GroupResponse>;

    fn handle(&mut self, msg: HandleGroupRequest, ctx: &mut Context<Self>) -> Self::Result {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        let request = msg.request;
        if self.phase != Phase::Active {
            let code = if self.phase == Phase::Resigned {
                errors::NOT_COORDINATOR
            } else {
                errors::COORDINATOR_LOAD_IN_PROGRESS
            };
            let response = request.error_response(code);
            return Box::pin(async move { response });
        }
        let fallback = request.error_response(errors::NOT_COORDINATOR);
        let producer = match &request {
            GroupRequest::TxnOffsetCommit(r) => Some(TxnProducer {
                producer_id: r.producer_id,
                producer_epoch: r.producer_epoch,
            }),
            _ => None,
        };
        self.refresh_topics();
        // Who asked what, for the debug log of the answer (classic membership requests only).
        let asked = classic_request_summary(&request);
        let partition = self.partition_index;
        self.next_request_id += 1;
        let id = self.next_request_id;
        let (tx, rx) = oneshot::channel();
        self.waiting.insert(id, tx);
        let out = self.shard.handle(id, request, now_ms());
        self.process(out, producer, ctx);
        self.reschedule_timer(ctx);
        Box::pin(async move {
            let response = rx.await.unwrap_or(fallback);
            count_commits(&response);
            if let Some(asked) = asked {
                tracing::debug!(partition, request = %asked, response = %classic_response_summary(&response), "classic group request answered");
            }
            response
        })
    }
}

impl Handler<UpdateGroupTopics> for GroupCoordinatorActor {
    type Result = ();
    fn handle(&mut self, msg: UpdateGroupTopics, _: &mut Context<Self>) {
        if self.topics_version.is_some_and(|v| v >= msg.version) {
            return;
        }
        self.topics_version = Some(msg.version);
        self.shard.set_topics(msg.topics);
    }
}

impl Handler<UpdateGroupConfigs> for GroupCoordinatorActor {
    type Result = ();
    fn handle(&mut self, msg: UpdateGroupConfigs, _: &mut Context<Self>) {
        self.shard.set_group_configs(msg.configs);
    }
}

impl Handler<TopicsDeleted> for GroupCoordinatorActor {
    type Result = ();
    fn handle(&mut self, msg: TopicsDeleted, ctx: &mut Context<Self>) {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        if self.phase != Phase::Active {
            self.deleted_while_loading.extend(msg.topics);
            return;
        }
        self.tombstone_deleted_topics(&msg.topics, ctx);
    }
}

impl Handler<CompleteGroupTransaction> for GroupCoordinatorActor {
    type Result = ();
    fn handle(&mut self, msg: CompleteGroupTransaction, _: &mut Context<Self>) {
        self.shard
            .replay_end_transaction(msg.producer_id, msg.committed);
    }
}

impl Handler<ResignGroupCoordinator> for GroupCoordinatorActor {
    type Result = ();
    fn handle(&mut self, _: ResignGroupCoordinator, ctx: &mut Context<Self>) {
        let parked = self.shard.unload();
        let mut failed = fail_all(parked.responses, errors::NOT_COORDINATOR);
        for w in self.writes.drain(..) {
            failed.extend(fail_all(w.responses, errors::NOT_COORDINATOR));
        }
        self.deliver(failed);
        self.phase = Phase::Resigned;
        self.group_metrics.clear();
        // Timers and loads stop with the context; `started` keeps a resigned shard idle.
        ctx.stop();
    }
}

impl Handler<DescribeGroupCoordinator> for GroupCoordinatorActor {
    type Result = GroupCoordinatorStatus;
    fn handle(&mut self, _: DescribeGroupCoordinator, _: &mut Context<Self>) -> Self::Result {
        GroupCoordinatorStatus {
            loaded: self.phase == Phase::Active,
            groups: self.shard.groups().count(),
            pending_writes: self.writes.len(),
            next_offset: self.next_offset,
        }
    }
}
