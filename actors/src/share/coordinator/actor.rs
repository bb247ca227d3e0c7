//! The share coordinator's actors (Kafka's `ShareCoordinatorService` over its runtime): one
//! [`ShareCoordinatorActor`] per `__share_group_state` partition this broker leads, loaded by
//! replay, answering each request only once its records are committed; and the
//! [`ShareCoordinatorManagerActor`] that starts and resigns them as leadership moves and
//! publishes the table requests are routed by.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use bytes::Bytes;
use kactor_protocol::errors::{COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR};
use kactor_protocol::records::BatchBuilder;
use kactor_protocol::Uuid;
use tokio::sync::watch;

use super::core::{
    ReadState, ShareCoordinatorShard, StateError, StateKey, StateRecord, StateSummary, WriteState,
};
use super::log::{decode, encode};
use crate::partition::core::TopicPartition;
use crate::partition::messages::{AppendRecords, DeleteRecordsBefore};
use crate::partition::registry::PartitionTableReader;
use crate::partition::PartitionActor;
use crate::purgatory::PurgatoryActor;
use crate::runtime::{follow_watch, ActorMetrics, MeteredAddr, SupervisedActor};

pub const SHARE_STATE_TOPIC: &str = "__share_group_state";

/// Pause before a failed load is tried again.
const LOAD_RETRY: Duration = Duration::from_secs(1);

/// One share-partition's request to its coordinator shard.
#[derive(Debug, Clone)]
pub enum StateOp {
    Initialize { state_epoch: i32, start_offset: i64 },
    Read { leader_epoch: i32 },
    Write(WriteState),
    Delete,
    Summary,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateAnswer {
    Done,
    Read(ReadState),
    Summary(StateSummary),
}

/// API handler / share-partition leader → shard. Lost (shard gone): the caller answers
/// NOT_COORDINATOR and the share-partition leader retries.
#[derive(Debug, Message)]
#[rtype(result = "Result<StateAnswer, StateError>")]
pub struct ShareStateRequest {
    pub key: StateKey,
    pub op: StateOp,
}

/// Manager → shard: this broker no longer leads the partition.
#[derive(Debug, Message, Clone, Copy)]
#[rtype(result = "()")]
pub struct ResignShareCoordinator;

pub struct ShareCoordinatorActor {
    core: ShareCoordinatorShard,
    updates_per_snapshot: i32,
    write_timeout_ms: u64,
    prune_interval: Duration,
    cold_interval: Duration,
    /// The log start offset the last prune set.
    pruned_to: i64,
    loaded: bool,
    resigned: bool,
    partition_index: i32,
    log: MeteredAddr<PartitionActor>,
    purgatory: Option<MeteredAddr<PurgatoryActor>>,
    /// Topic ids and partition counts (requests for unknown ones are refused).
    partitions: PartitionTableReader,
    metrics: ActorMetrics,
}

impl ShareCoordinatorActor {
    pub fn new(
        partition_index: i32,
        config: &ShareCoordinatorConfig,
        log: MeteredAddr<PartitionActor>,
        purgatory: Option<MeteredAddr<PurgatoryActor>>,
        partitions: PartitionTableReader,
    ) -> Self {
        ShareCoordinatorActor {
            core: ShareCoordinatorShard::new(config.updates_per_snapshot),
            updates_per_snapshot: config.updates_per_snapshot,
            write_timeout_ms: config.write_timeout_ms,
            prune_interval: Duration::from_millis(config.prune_interval_ms.max(1)),
            cold_interval: Duration::from_millis(config.cold_snapshot_interval_ms.max(1)),
            pruned_to: 0,
            loaded: false,
            resigned: false,
            partition_index,
            log,
            purgatory,
            partitions,
            metrics: ActorMetrics::new("ShareCoordinatorActor"),
        }
    }

    fn load(&mut self, ctx: &mut Context<Self>) {
        let log = self.log.clone();
        ctx.wait(
            crate::partition::replay::read_log_records(log)
                .into_actor(self)
                .map(|records, act, ctx| match records {
                    Ok(records) => {
                        act.core = ShareCoordinatorShard::new(act.updates_per_snapshot);
                        for (offset, k, v) in records {
                            match decode(&k, v.as_ref()) {
                                Ok(r) => act.core.replay(&r, offset),
                                Err(e) => tracing::warn!(error = %e, "skipping share state record"),
                            }
                        }
                        act.loaded = true;
                        tracing::info!(
                            partition = act.partition_index,
                            share_partitions = act.core.len(),
                            "share coordinator shard loaded"
                        );
                    }
                    Err(e) => {
                        tracing::error!(partition = act.partition_index, error = %e,
                        "cannot load __share_group_state; retrying");
                        ctx.run_later(LOAD_RETRY, |act, ctx| act.load(ctx));
                    }
                }),
        );
    }

    /// Appends `record` and waits for its commit; the handler holds the mailbox meanwhile so
    /// the next request is computed from the state this one leaves (a write's update count
    /// and merged ranges depend on the previous write).
    fn append(
        &mut self,
        record: StateRecord,
        answer: StateAnswer,
    ) -> ResponseActFuture<Self, Result<StateAnswer, StateError>> {
        Box::pin(
            self.append_all(vec![record])
                .map(move |r, _, _| r.map(|()| answer)),
        )
    }

    /// Appends `records` as one batch; once committed, replays each at its offset.
    fn append_all(
        &mut self,
        records: Vec<StateRecord>,
    ) -> ResponseActFuture<Self, Result<(), StateError>> {
        let batch = (|| {
            let mut b = BatchBuilder::new(0);
            let now = now_ms();
            for r in &records {
                let (k, v) = encode(r).ok()?;
                b.append(now, Some(&k), v.as_deref(), &[]).ok()?;
            }
            b.build().ok()
        })();
        let Some(batch) = batch else {
            return Box::pin(fut::ready(Err(coordinator_error(
                COORDINATOR_LOAD_IN_PROGRESS,
            ))));
        };
        let log = self.log.clone();
        let purgatory = self.purgatory.clone();
        let tp = TopicPartition::new(SHARE_STATE_TOPIC, self.partition_index);
        let timeout = self.write_timeout_ms;
        Box::pin(
            async move { write_committed(log, purgatory, tp, batch, timeout).await }
                .into_actor(self)
                .map(move |offset, act, _| {
                    let Some(base) = offset else {
                        tracing::warn!(partition = act.partition_index, "share state write failed");
                        return Err(coordinator_error(NOT_COORDINATOR));
                    };
                    for (i, r) in records.iter().enumerate() {
                        act.core.replay(r, base + i as i64);
                    }
                    Ok(())
                }),
        )
    }
}

fn coordinator_error(code: i16) -> StateError {
    kactor_protocol::errors::with_default_message(code)
}

async fn write_committed(
    log: MeteredAddr<PartitionActor>,
    purgatory: Option<MeteredAddr<PurgatoryActor>>,
    tp: TopicPartition,
    records: Bytes,
    timeout_ms: u64,
) -> Option<i64> {
    match log
        .send(AppendRecords {
            records,
            required_acks: -1,
        })
        .await
    {
        Ok(Ok(out)) => {
            let code =
                crate::purgatory::await_commit(purgatory.as_ref(), &tp, &out, timeout_ms).await;
            (code == kactor_protocol::errors::NONE).then_some(out.base_offset)
        }
        _ => None,
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Actor for ShareCoordinatorActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        if !self.resigned {
            self.load(ctx);
            ctx.run_interval(self.prune_interval, |act, ctx| act.prune(ctx));
            ctx.run_interval(self.cold_interval, |_, ctx| ctx.notify(SnapshotCold));
        }
    }
}

impl ShareCoordinatorActor {
    /// Deletes the records every key's latest snapshot supersedes (Kafka's prune job: the
    /// partition is `cleanup.policy=delete` with no retention, so nothing else bounds it).
    fn prune(&mut self, ctx: &mut Context<Self>) {
        if !self.loaded {
            return;
        }
        let Some(offset) = self.core.last_redundant_offset() else {
            return;
        };
        if offset <= self.pruned_to {
            return;
        }
        let log = self.log.clone();
        ctx.spawn(
            async move { log.send(DeleteRecordsBefore { offset }).await }
                .into_actor(self)
                .map(move |r, act, _| match r {
                    Ok(Ok(start)) => {
                        act.pruned_to = start;
                        tracing::debug!(
                            partition = act.partition_index,
                            start,
                            "share state records pruned"
                        );
                    }
                    other => tracing::warn!(
                        partition = act.partition_index,
                        ?other,
                        "share state prune failed; trying again next interval"
                    ),
                }),
        );
    }
}

impl actix::Supervised for ShareCoordinatorActor {
    /// After a caught panic the state may be half-updated: `started` loads it again.
    fn restarting(&mut self, _: &mut Context<Self>) {
        self.loaded = false;
    }
}

impl SupervisedActor for ShareCoordinatorActor {
    const MAILBOX_CAPACITY: usize = 1024;
}

crate::supervised_mailbox!(ShareCoordinatorActor);

/// Shard → itself: snapshot the keys not snapshotted for the cold interval.
#[derive(Debug, Message, Clone, Copy)]
#[rtype(result = "()")]
struct SnapshotCold;

impl Handler<SnapshotCold> for ShareCoordinatorActor {
    /// Atomic like the writes: the snapshots are computed from and applied to one state.
    type Result = AtomicResponse<Self, ()>;
    fn handle(&mut self, _: SnapshotCold, _: &mut Context<Self>) -> Self::Result {
        let cold = if self.loaded && !self.resigned {
            self.core
                .cold_snapshots(now_ms(), self.cold_interval.as_millis() as i64)
        } else {
            Vec::new()
        };
        if cold.is_empty() {
            return AtomicResponse::new(Box::pin(fut::ready(())));
        }
        let n = cold.len();
        AtomicResponse::new(Box::pin(self.append_all(cold).map(move |r, act, _| {
            if r.is_ok() {
                tracing::debug!(
                    partition = act.partition_index,
                    keys = n,
                    "cold share-partitions snapshotted"
                );
            }
        })))
    }
}

impl Handler<ResignShareCoordinator> for ShareCoordinatorActor {
    type Result = ();
    fn handle(&mut self, _: ResignShareCoordinator, ctx: &mut Context<Self>) {
        tracing::info!(
            partition = self.partition_index,
            "share coordinator shard unloading"
        );
        self.loaded = false;
        self.resigned = true;
        ctx.stop();
    }
}

impl Handler<ShareStateRequest> for ShareCoordinatorActor {
    /// Atomic: the mailbox is held while a write commits (see `append`).
    type Result = AtomicResponse<Self, Result<StateAnswer, StateError>>;

    fn handle(&mut self, msg: ShareStateRequest, _: &mut Context<Self>) -> Self::Result {
        let _m = self.metrics.handle();
        let ready = |r| AtomicResponse::new(Box::pin(fut::ready(r)));
        if self.resigned {
            return ready(Err(coordinator_error(NOT_COORDINATOR)));
        }
        if !self.loaded {
            return ready(Err(coordinator_error(COORDINATOR_LOAD_IN_PROGRESS)));
        }
        let table = self.partitions.borrow().clone();
        let topics = |id: &Uuid| -> Option<i32> {
            table
                .image
                .as_ref()?
                .topics
                .get(id)
                .map(|t| t.partitions.len() as i32)
        };
        let now = now_ms();
        let key = &msg.key;
        let outcome = match msg.op {
            StateOp::Initialize {
                state_epoch,
                start_offset,
            } => self
                .core
                .initialize(key, state_epoch, start_offset, &topics, now)
                .map(|r| (Some(r), StateAnswer::Done)),
            StateOp::Read { leader_epoch } => self
                .core
                .read(key, leader_epoch, &topics, now)
                .map(|(read, r)| (r, StateAnswer::Read(read))),
            StateOp::Write(w) => self
                .core
                .write(key, &w, &topics, now)
                .map(|r| (Some(r), StateAnswer::Done)),
            StateOp::Delete => self
                .core
                .delete(key, &topics)
                .map(|r| (r, StateAnswer::Done)),
            StateOp::Summary => self
                .core
                .summary(key, &topics)
                .map(|s| (None, StateAnswer::Summary(s))),
        };
        match outcome {
            Err(e) => ready(Err(e)),
            Ok((None, answer)) => ready(Ok(answer)),
            Ok((Some(record), answer)) => AtomicResponse::new(self.append(record, answer)),
        }
    }
}

/// The shards this broker runs, by `__share_group_state` partition.
pub type ShareCoordinatorTable =
    watch::Receiver<Arc<BTreeMap<i32, MeteredAddr<ShareCoordinatorActor>>>>;

struct Shard {
    addr: MeteredAddr<ShareCoordinatorActor>,
    leader_epoch: i32,
}

/// The share coordinator's settings, by Kafka's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareCoordinatorConfig {
    /// `share.coordinator.state.topic.num.partitions`
    pub num_partitions: i32,
    /// `share.coordinator.snapshot.update.records.per.snapshot`
    pub updates_per_snapshot: i32,
    /// `share.coordinator.write.timeout.ms`: how long a write may wait for its commit.
    pub write_timeout_ms: u64,
    /// `share.coordinator.state.topic.prune.interval.ms` (a Kafka internal config): how often
    /// superseded records are deleted from the partition.
    pub prune_interval_ms: u64,
    /// `share.coordinator.cold.partition.snapshot.interval.ms` (internal too): a key not
    /// snapshotted for this long gets a fresh snapshot, so it does not hold pruning back.
    pub cold_snapshot_interval_ms: u64,
}

impl Default for ShareCoordinatorConfig {
    fn default() -> Self {
        ShareCoordinatorConfig {
            num_partitions: 50,
            updates_per_snapshot: super::core::DEFAULT_UPDATES_PER_SNAPSHOT,
            write_timeout_ms: 5_000,
            prune_interval_ms: 300_000,
            cold_snapshot_interval_ms: 300_000,
        }
    }
}

pub struct ShareCoordinatorManagerActor {
    broker_id: i32,
    config: ShareCoordinatorConfig,
    partitions: PartitionTableReader,
    purgatory: Option<MeteredAddr<PurgatoryActor>>,
    shards: HashMap<i32, Shard>,
    last_version: Option<u64>,
    publisher: watch::Sender<Arc<BTreeMap<i32, MeteredAddr<ShareCoordinatorActor>>>>,
    metrics: ActorMetrics,
}

impl ShareCoordinatorManagerActor {
    pub fn new(
        broker_id: i32,
        config: ShareCoordinatorConfig,
        partitions: PartitionTableReader,
        purgatory: Option<MeteredAddr<PurgatoryActor>>,
    ) -> Self {
        let (publisher, _) = watch::channel(Arc::new(BTreeMap::new()));
        ShareCoordinatorManagerActor {
            broker_id,
            config,
            partitions,
            purgatory,
            shards: HashMap::new(),
            last_version: None,
            publisher,
            metrics: ActorMetrics::new("ShareCoordinatorManagerActor"),
        }
    }

    /// What requests are routed by (take it before starting the actor).
    pub fn shard_table(&self) -> ShareCoordinatorTable {
        self.publisher.subscribe()
    }

    fn sync(&mut self) {
        let table = self.partitions.borrow().clone();
        if self.last_version == Some(table.version) {
            return;
        }
        self.last_version = Some(table.version);
        let _m = self.metrics.handle();
        let mut changed = false;
        for p in 0..self.config.num_partitions {
            let hosted = table
                .get(SHARE_STATE_TOPIC, p)
                .filter(|h| h.leader == self.broker_id);
            let current = self.shards.get(&p).map(|s| s.leader_epoch);
            match (hosted, current) {
                (Some(h), Some(epoch)) if h.leader_epoch == epoch => {}
                (Some(h), _) => {
                    if let Some(old) = self.shards.remove(&p) {
                        old.addr.do_send(ResignShareCoordinator);
                    }
                    let shard = ShareCoordinatorActor::new(
                        p,
                        &self.config,
                        h.addr.clone(),
                        self.purgatory.clone(),
                        self.partitions.clone(),
                    );
                    tracing::info!(
                        partition = p,
                        leader_epoch = h.leader_epoch,
                        "share coordinator shard elected"
                    );
                    self.shards.insert(
                        p,
                        Shard {
                            addr: crate::runtime::start_supervised_here(
                                ActorMetrics::new("ShareCoordinatorActor"),
                                move |_| shard,
                            ),
                            leader_epoch: h.leader_epoch,
                        },
                    );
                    changed = true;
                }
                (None, Some(_)) => {
                    if let Some(old) = self.shards.remove(&p) {
                        tracing::info!(partition = p, "share coordinator shard resigned");
                        old.addr.do_send(ResignShareCoordinator);
                    }
                    changed = true;
                }
                (None, None) => {}
            }
        }
        if changed {
            self.publish();
        }
    }

    fn publish(&self) {
        self.publisher.send_replace(Arc::new(
            self.shards
                .iter()
                .map(|(p, s)| (*p, s.addr.clone()))
                .collect(),
        ));
    }
}

impl Actor for ShareCoordinatorManagerActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let changes = self.partitions.clone();
        self.sync();
        follow_watch(
            ctx,
            changes,
            self.metrics.clone(),
            "a partition table change",
            |act, _| act.sync(),
        );
    }
}

impl actix::Supervised for ShareCoordinatorManagerActor {
    /// Its shard map may be half-updated after a caught panic: resign every shard and let
    /// `started` elect them again from the partition table.
    fn restarting(&mut self, _: &mut Context<Self>) {
        for (_, s) in std::mem::take(&mut self.shards) {
            s.addr.do_send(ResignShareCoordinator);
        }
        self.last_version = None;
        self.publish();
    }
}

impl SupervisedActor for ShareCoordinatorManagerActor {
    const MAILBOX_CAPACITY: usize = 256;
}

crate::supervised_mailbox!(ShareCoordinatorManagerActor);

/// Process shutdown → manager: resign every shard.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "()")]
pub struct StopShareCoordinators;

impl Handler<StopShareCoordinators> for ShareCoordinatorManagerActor {
    type Result = ();
    fn handle(&mut self, _: StopShareCoordinators, _: &mut Context<Self>) {
        for (_, s) in self.shards.drain() {
            s.addr.do_send(ResignShareCoordinator);
        }
        self.publish();
    }
}
