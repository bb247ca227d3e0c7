//! `TransactionCoordinatorActor` (Kafka's `TransactionCoordinator`, `TransactionStateManager`
//! and `TransactionMarkerChannelManager` for one `__transaction_state` partition): loads the
//! partition by replay, then runs [`TxnCoordinatorCore`] with write-then-respond (every state
//! change is appended to the partition and answered only once the append succeeded), sends
//! commit/abort markers to the transaction's partitions through their PartitionActors, and
//! aborts transactions past their timeout on a tick.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use actix::prelude::*;
use bytes::Bytes;
use kactor_protocol::errors::{COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR};
use kactor_protocol::records::BatchBuilder;
use tokio::sync::oneshot;

use super::actor::ProducerIdManagerActor;
use super::core::{
    EndDecision, InitDecision, InitResult, MarkerJob, TimeoutAbort, Transit, TxnCoordinatorConfig,
    TxnCoordinatorCore, TxnMetadata, TxnPartition, TxnState,
};
use super::log::{decode, encode_key, encode_value};
use super::markers::{MarkerOutcome, MarkerSender};
use super::messages::GenerateProducerId;
use super::metrics::{txn_metrics, ShardMetrics};
use crate::partition::messages::AppendRecords;
use crate::partition::PartitionActor;
use crate::runtime::{ActorMetrics, MeteredAddr, SupervisedActor};

/// `transactional.id.expiration.ms` default (7 days).
pub const DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS: i64 = 604_800_000;
/// `transaction.remove.expired.transaction.cleanup.interval.ms` default (1 hour).
pub const DEFAULT_REMOVE_EXPIRED_INTERVAL_MS: u64 = 3_600_000;

/// `transaction.abort.timed.out.transaction.cleanup.interval.ms` default.
pub const ABORT_TIMED_OUT_INTERVAL: Duration = Duration::from_secs(10);
/// Markers are retried this often while a partition refuses them (e.g. no leader yet).
const MARKER_RETRY: Duration = Duration::from_millis(200);
/// How long a state write may wait for the ISR (Kafka bounds it by `request.timeout.ms`).
const WRITE_COMMIT_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause before a failed load is tried again.
const LOAD_RETRY: Duration = Duration::from_secs(1);
/// How often the shard's transaction gauges are refreshed.
const METRICS_INTERVAL: Duration = Duration::from_secs(1);

pub use super::markers::GroupTxnCompletion;

type Reply<T> = oneshot::Sender<Result<T, i16>>;

/// InitProducerId with a transactional id. Lost: the client times out and retries.
#[derive(Debug, Message)]
#[rtype(result = "Result<InitResult, i16>")]
pub struct InitTxnProducer {
    pub transactional_id: String,
    pub txn_timeout_ms: i32,
    /// The (producer id, epoch) a v3+ client already holds.
    pub expected: Option<(i64, i16)>,
}

/// AddPartitionsToTxn / AddOffsetsToTxn. Lost: the client times out and retries.
#[derive(Debug, Message)]
#[rtype(result = "Result<(), i16>")]
pub struct AddTxnPartitions {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub partitions: Vec<TxnPartition>,
}

/// Partition leader (KIP-890 part 2: a TV2 transactional Produce or TxnOffsetCommit v5 for a
/// partition not yet in the transaction) → shard: add the partitions. Unlike a client's
/// AddPartitionsToTxn, a request arriving while another write of the same id is in flight
/// waits for it instead of failing with CONCURRENT_TRANSACTIONS: a producer's pipelined
/// produce requests each add their partitions (Kafka's `AddPartitionsToTxnManager` sends one
/// request per coordinator at a time, which serialises them the same way). Lost: the produce
/// times out.
#[derive(Debug, Message)]
#[rtype(result = "Result<(), i16>")]
pub struct LeaderAddTxnPartitions(pub AddTxnPartitions);

/// Adds waiting for a write of their id, per id (beyond it they fail as a client's would).
const MAX_DEFERRED_ADDS_PER_ID: usize = 1024;

/// EndTxn: answered after the Prepare state is written (markers follow) with the producer id
/// and epoch the client continues with (changed only by a KIP-890 end). Lost: client retries.
#[derive(Debug, Message)]
#[rtype(result = "Result<(i64, i16), i16>")]
pub struct EndTransaction {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    /// The client's transaction version as the request tells it (EndTxn v5+: 2, older: 0).
    pub client_transaction_version: i16,
}

/// AddPartitionsToTxn v4+ `verify_only` (partition leaders asking before a transactional
/// append): per partition NONE or TRANSACTION_ABORTABLE. Lost: the produce times out.
#[derive(Debug, Message)]
#[rtype(result = "Result<Vec<(TxnPartition, i16)>, i16>")]
pub struct VerifyTxnPartitions {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub partitions: Vec<TxnPartition>,
}

/// DescribeTransactions / ListTransactions source: a copy of every transactional id's state.
#[derive(Debug, Message)]
#[rtype(result = "Result<Vec<TxnMetadata>, i16>")]
pub struct GetTransactions;

/// Manager → shard: this broker no longer leads the shard's `__transaction_state` partition
/// (or is shutting down). The shard stops; requests waiting on it get NOT_COORDINATOR and
/// owed markers are sent again by the next leader after its load. Lost: the shard keeps
/// answering until its writes fail.
#[derive(Debug, Message, Clone, Copy)]
#[rtype(result = "()")]
pub struct ResignTxnCoordinator;

/// Tests / admin → shard: how it is doing.
#[derive(Debug, Message, Clone, Copy)]
#[rtype(result = "TxnCoordinatorStatus")]
pub struct DescribeTxnCoordinator;

#[derive(Debug, Clone, Copy, PartialEq, Eq, actix::MessageResponse)]
pub struct TxnCoordinatorStatus {
    pub partition: i32,
    pub loaded: bool,
    pub coordinator_epoch: i32,
    pub transactional_ids: usize,
    /// Transactions whose markers are still being written.
    pub markers_owed: usize,
}

/// Internal: the periodic timeout scan.
#[derive(Debug, Message)]
#[rtype(result = "()")]
struct AbortTimedOutTick;

/// Internal: the periodic scan for transactional ids idle past `transactional.id.expiration.ms`.
#[derive(Debug, Message)]
#[rtype(result = "()")]
struct RemoveExpiredTick;

enum Answer {
    Init(Reply<InitResult>, InitResult),
    Unit(Reply<()>),
    End(Reply<(i64, i16)>),
    None,
}

/// Why a transaction is being aborted (the abort counter's label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AbortReason {
    Client,
    Timeout,
    Fenced,
}

impl AbortReason {
    fn label(self) -> &'static str {
        match self {
            AbortReason::Client => "client",
            AbortReason::Timeout => "timeout",
            AbortReason::Fenced => "fenced",
        }
    }
}

pub struct TransactionCoordinatorActor {
    core: TxnCoordinatorCore,
    loaded: bool,
    /// This broker no longer leads the partition: everything gets NOT_COORDINATOR until the
    /// last address is dropped (a supervised actor that stops is restarted, so it stays).
    resigned: bool,
    /// The `__transaction_state` partition this shard owns.
    log: MeteredAddr<PartitionActor>,
    producer_ids: MeteredAddr<ProducerIdManagerActor>,
    /// Markers still owed per transactional id: partitions not yet acknowledged.
    owed: BTreeMap<String, (MarkerJob, Vec<TxnPartition>)>,
    /// Why each transaction now in PrepareAbort is aborted (for the abort counter).
    abort_reasons: HashMap<String, AbortReason>,
    /// Leader adds waiting for the in-flight write of their id ([`LeaderAddTxnPartitions`]).
    deferred_adds: HashMap<String, Vec<(AddTxnPartitions, Reply<()>)>>,
    partition_index: i32,
    abort_interval: Duration,
    /// `transactional.id.expiration.ms`
    expiration_ms: i64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`
    remove_expired_interval: Duration,
    /// Writes the markers of finished transactions, here or at other brokers.
    markers: MarkerSender,
    shard_metrics: ShardMetrics,
    metrics: ActorMetrics,
}

impl TransactionCoordinatorActor {
    pub fn new(
        config: TxnCoordinatorConfig,
        log: MeteredAddr<PartitionActor>,
        producer_ids: MeteredAddr<ProducerIdManagerActor>,
        markers: MarkerSender,
    ) -> Self {
        TransactionCoordinatorActor {
            core: TxnCoordinatorCore::new(config),
            loaded: false,
            resigned: false,
            log,
            producer_ids,
            owed: BTreeMap::new(),
            abort_reasons: HashMap::new(),
            deferred_adds: HashMap::new(),
            partition_index: -1,
            abort_interval: ABORT_TIMED_OUT_INTERVAL,
            expiration_ms: DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS,
            remove_expired_interval: Duration::from_millis(DEFAULT_REMOVE_EXPIRED_INTERVAL_MS),
            markers,
            shard_metrics: ShardMetrics::default(),
            metrics: ActorMetrics::new("TransactionCoordinatorActor"),
        }
    }

    /// The `__transaction_state` partition this shard serves (logs and status).
    pub fn with_partition_index(mut self, partition: i32) -> Self {
        self.partition_index = partition;
        self
    }

    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`
    pub fn with_abort_interval(mut self, interval: Duration) -> Self {
        self.abort_interval = interval;
        self
    }

    /// `transactional.id.expiration.ms` and how often idle ids are looked for
    /// (`transaction.remove.expired.transaction.cleanup.interval.ms`).
    pub fn with_expiration(mut self, expiration_ms: i64, interval: Duration) -> Self {
        self.expiration_ms = expiration_ms;
        self.remove_expired_interval = interval;
        self
    }

    /// Appends `records` to the state partition; true once the write is committed (the high
    /// watermark passed it: on a replicated `__transaction_state` the write is only durable
    /// once the ISR has it), false if it failed, lost its leadership or timed out. The wait is
    /// the purgatory's high watermark events, not polling.
    fn write_committed(&self, records: Bytes) -> impl std::future::Future<Output = bool> {
        let log = self.log.clone();
        let purgatory = self.markers.local.purgatory.clone();
        let tp = crate::partition::core::TopicPartition::new(
            super::apis::TRANSACTION_STATE_TOPIC,
            self.partition_index,
        );
        async move {
            match log
                .send(AppendRecords {
                    records,
                    required_acks: -1,
                })
                .await
            {
                Ok(Ok(out)) => {
                    let timeout = WRITE_COMMIT_TIMEOUT.as_millis() as u64;
                    crate::purgatory::await_commit(purgatory.as_ref(), &tp, &out, timeout).await
                        == kactor_protocol::errors::NONE
                }
                _ => false,
            }
        }
    }

    /// Appends `transit` to the partition; on success applies it, answers, and sends markers.
    fn write(&mut self, transit: Transit, answer: Answer, ctx: &mut Context<Self>) {
        let record = (|| {
            let key = encode_key(&transit.target.transactional_id).ok()?;
            let value = encode_value(&transit.target).ok()?;
            let mut b = BatchBuilder::new(0);
            b.append(
                transit.target.txn_last_update_timestamp_ms,
                Some(&key),
                Some(&value),
                &[],
            )
            .ok()?;
            b.build().ok()
        })();
        let Some(records) = record else {
            self.core.complete_write(&transit, false);
            answer_err(answer, COORDINATOR_LOAD_IN_PROGRESS);
            return;
        };
        let send = self.write_committed(records);
        ctx.spawn(send.into_actor(self).map(move |ok, act, ctx| {
            let job = act.core.complete_write(&transit, ok);
            let id = &transit.target.transactional_id;
            if !ok {
                tracing::warn!(txn = %id, "transaction state write failed");
                answer_err(answer, NOT_COORDINATOR);
                act.run_deferred_adds(id, ctx);
                return;
            }
            act.count_completion(&transit);
            match answer {
                Answer::Init(tx, r) => {
                    let _ = tx.send(Ok(r));
                }
                Answer::Unit(tx) => {
                    let _ = tx.send(Ok(()));
                }
                Answer::End(tx) => {
                    let _ = tx.send(Ok(transit.target.completed_producer()));
                }
                Answer::None => {}
            }
            if let Some(job) = job {
                act.start_markers(job, ctx);
            }
            act.run_deferred_adds(id, ctx);
        }));
    }

    /// AddPartitionsToTxn (client or leader): write if the transaction changes, answer now if
    /// not. `defer`: a request that only collides with an in-flight write of its id waits.
    fn add_partitions(
        &mut self,
        msg: AddTxnPartitions,
        tx: Reply<()>,
        defer: bool,
        ctx: &mut Context<Self>,
    ) {
        match self.core.add_partitions(
            &msg.transactional_id,
            msg.producer_id,
            msg.producer_epoch,
            &msg.partitions,
            now_ms(),
        ) {
            Ok(Some(t)) => self.write(t, Answer::Unit(tx), ctx),
            Ok(None) => {
                let _ = tx.send(Ok(()));
            }
            Err(super::core::TxnError::ConcurrentTransactions)
                if defer && self.core.is_pending(&msg.transactional_id) =>
            {
                let waiting = self
                    .deferred_adds
                    .entry(msg.transactional_id.clone())
                    .or_default();
                if waiting.len() >= MAX_DEFERRED_ADDS_PER_ID {
                    let _ = tx.send(Err(kactor_protocol::errors::CONCURRENT_TRANSACTIONS));
                } else {
                    waiting.push((msg, tx));
                }
            }
            Err(e) => {
                let _ = tx.send(Err(e.code()));
            }
        }
    }

    /// The write of `id` finished: the adds waiting for it run now, in arrival order (the
    /// first may start a new write; the rest then wait for that one).
    fn run_deferred_adds(&mut self, id: &str, ctx: &mut Context<Self>) {
        let Some(waiting) = self.deferred_adds.remove(id) else {
            return;
        };
        for (msg, tx) in waiting {
            if !self.loaded {
                let _ = tx.send(Err(NOT_COORDINATOR));
                continue;
            }
            self.add_partitions(msg, tx, true, ctx);
        }
    }

    /// Writes one tombstone per expired id (one batch), then forgets the ids (Kafka's
    /// `removeExpiredTransactionalIds`: the ids leave the cache only once the write succeeded).
    fn write_tombstones(&mut self, ids: Vec<String>, ctx: &mut Context<Self>) {
        let records = (|| {
            let mut b = BatchBuilder::new(0);
            let now = now_ms();
            for id in &ids {
                let key = encode_key(id).ok()?;
                b.append(now, Some(&key), None, &[]).ok()?;
            }
            b.build().ok()
        })();
        let Some(records) = records else {
            for id in &ids {
                self.core.complete_expiration(id, false);
            }
            return;
        };
        let send = self.write_committed(records);
        ctx.spawn(send.into_actor(self).map(move |ok, act, ctx| {
            for id in &ids {
                act.core.complete_expiration(id, ok);
                if ok {
                    tracing::info!(txn = %id, "transactional id expired");
                }
                act.run_deferred_adds(id, ctx);
            }
            if !ok {
                tracing::warn!(ids = ids.len(), "transactional id tombstone write failed");
            }
        }));
    }

    /// Loads the partition by replay, holding every other message until done (they would
    /// only get COORDINATOR_LOAD_IN_PROGRESS). A failed read is retried: the shard must not
    /// stay unloaded while it still leads the partition.
    fn load(&mut self, ctx: &mut Context<Self>) {
        let log = self.log.clone();
        ctx.wait(crate::partition::replay::read_log_records(log).into_actor(self).map(|records, act, ctx| {
            match records {
                Ok(records) => {
                    act.core = TxnCoordinatorCore::new(act.core.config());
                    for (_, k, v) in records {
                        match decode(&k, v.as_ref()) {
                            Ok((id, m)) => act.core.replay(&id, m),
                            Err(e) => tracing::warn!(error = %e, "skipping transaction log record"),
                        }
                    }
                    act.loaded = true;
                    tracing::info!(
                        partition = act.partition_index,
                        transactional_ids = act.core.transactions().count(),
                        "transaction coordinator shard loaded"
                    );
                    // Transactions loaded mid-end get their markers again.
                    for job in act.core.pending_marker_jobs() {
                        act.start_markers(job, ctx);
                    }
                }
                Err(e) => {
                    tracing::error!(partition = act.partition_index, error = %e,
                        "cannot load __transaction_state; retrying");
                    ctx.run_later(LOAD_RETRY, |act, ctx| act.load(ctx));
                }
            }
        }));
    }

    /// Counts a transaction that reached CompleteCommit / CompleteAbort.
    fn count_completion(&mut self, transit: &Transit) {
        let id = &transit.target.transactional_id;
        let m = txn_metrics();
        match transit.target.state {
            TxnState::CompleteCommit => m.commits_total.inc(),
            TxnState::CompleteAbort => {
                let reason = self.abort_reasons.remove(id).unwrap_or(AbortReason::Client);
                m.aborts_total.with_label_values(&[reason.label()]).inc();
            }
            _ => {}
        }
    }

    fn start_markers(&mut self, job: MarkerJob, ctx: &mut Context<Self>) {
        let left = job.partitions.clone();
        let id = job.transactional_id.clone();
        self.owed.insert(id.clone(), (job, left));
        self.send_markers(id, ctx);
    }

    /// Sends the owed markers of `id`; acknowledged partitions are dropped, the rest retried.
    fn send_markers(&mut self, id: String, ctx: &mut Context<Self>) {
        let Some((job, left)) = self.owed.get(&id).cloned() else {
            return;
        };
        if left.is_empty() {
            self.owed.remove(&id);
            if let Some(t) = self.core.markers_written(&id, now_ms()) {
                self.write(t, Answer::None, ctx);
            }
            return;
        }
        let sender = self.markers.clone();
        let fut = async move { sender.send(&job, left).await };
        ctx.spawn(fut.into_actor(self).map(move |results, act, ctx| {
            let m = txn_metrics();
            for (_, outcome) in &results {
                m.markers_total.with_label_values(&[outcome.label()]).inc();
            }
            let remaining: Vec<TxnPartition> = results
                .into_iter()
                .filter(|(_, o)| *o == MarkerOutcome::Failed)
                .map(|(tp, _)| tp)
                .collect();
            let retry = !remaining.is_empty();
            if let Some(entry) = act.owed.get_mut(&id) {
                entry.1 = remaining;
            }
            if retry {
                ctx.run_later(MARKER_RETRY, move |act, ctx| act.send_markers(id, ctx));
            } else {
                act.send_markers(id, ctx);
            }
        }));
    }

    fn init(
        &mut self,
        msg: InitTxnProducer,
        fresh: Option<i64>,
        tx: Reply<InitResult>,
        ctx: &mut Context<Self>,
    ) {
        let decision = self.core.init_producer_id(
            &msg.transactional_id,
            msg.txn_timeout_ms,
            msg.expected,
            fresh,
            now_ms(),
        );
        match decision {
            Err(e) => {
                let _ = tx.send(Err(e.code()));
            }
            Ok(InitDecision::Write(t, r)) => {
                if t.target.state == TxnState::PrepareAbort {
                    // A new producer instance fenced the open transaction.
                    self.abort_reasons
                        .insert(t.target.transactional_id.clone(), AbortReason::Fenced);
                }
                self.write(t, Answer::Init(tx, r), ctx)
            }
            Ok(InitDecision::NeedProducerId) => {
                if fresh.is_some() {
                    let _ = tx.send(Err(COORDINATOR_LOAD_IN_PROGRESS));
                    return;
                }
                self.with_fresh_producer_id(ctx, move |act, id, ctx| match id {
                    Ok(id) => act.init(msg, Some(id), tx, ctx),
                    Err(code) => {
                        let _ = tx.send(Err(code));
                    }
                });
            }
        }
    }

    /// EndTxn, given a fresh producer id once the core asked for one (an end that exhausts
    /// the epoch).
    fn end(
        &mut self,
        msg: EndTransaction,
        fresh: Option<i64>,
        tx: Reply<(i64, i16)>,
        ctx: &mut Context<Self>,
    ) {
        match self.core.end_txn(
            &msg.transactional_id,
            (msg.producer_id, msg.producer_epoch),
            msg.commit,
            msg.client_transaction_version,
            fresh,
            now_ms(),
        ) {
            Ok(EndDecision::Write(t)) => {
                if !msg.commit {
                    self.abort_reasons
                        .insert(msg.transactional_id.clone(), AbortReason::Client);
                }
                self.write(t, Answer::End(tx), ctx)
            }
            Ok(EndDecision::Done(producer_id, producer_epoch)) => {
                // A retried end that already finished: answered with the current id/epoch.
                let _ = tx.send(Ok((producer_id, producer_epoch)));
            }
            Ok(EndDecision::NeedProducerId) => {
                if fresh.is_some() {
                    let _ = tx.send(Err(COORDINATOR_LOAD_IN_PROGRESS));
                    return;
                }
                self.with_fresh_producer_id(ctx, move |act, id, ctx| match id {
                    Ok(id) => act.end(msg, Some(id), tx, ctx),
                    Err(code) => {
                        let _ = tx.send(Err(code));
                    }
                });
            }
            Err(e) => {
                let _ = tx.send(Err(e.code()));
            }
        }
    }

    /// Asks the producer-id manager for an id, then runs `then` on the actor with it (or the
    /// error code to answer).
    fn with_fresh_producer_id(
        &mut self,
        ctx: &mut Context<Self>,
        then: impl FnOnce(&mut Self, Result<i64, i16>, &mut Context<Self>) + 'static,
    ) {
        let ids = self.producer_ids.clone();
        let send = async move { ids.send(GenerateProducerId).await };
        ctx.spawn(send.into_actor(self).map(move |res, act, ctx| {
            let id = match res {
                Ok(Ok(id)) => Ok(id),
                Ok(Err(code)) => Err(code),
                Err(_) => Err(COORDINATOR_LOAD_IN_PROGRESS),
            };
            then(act, id, ctx)
        }));
    }

    /// Writes the fencing abort of a timed-out transaction.
    fn abort_timed_out(&mut self, t: Transit, ctx: &mut Context<Self>) {
        tracing::info!(txn = %t.target.transactional_id, "aborting timed-out transaction");
        self.abort_reasons
            .insert(t.target.transactional_id.clone(), AbortReason::Timeout);
        self.write(t, Answer::None, ctx);
    }
}

fn answer_err(answer: Answer, code: i16) {
    match answer {
        Answer::Init(tx, _) => {
            let _ = tx.send(Err(code));
        }
        Answer::Unit(tx) => {
            let _ = tx.send(Err(code));
        }
        Answer::End(tx) => {
            let _ = tx.send(Err(code));
        }
        Answer::None => {}
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn reply<T: Send + 'static>(
    rx: oneshot::Receiver<Result<T, i16>>,
) -> ResponseFuture<Result<T, i16>> {
    Box::pin(async move { rx.await.unwrap_or(Err(NOT_COORDINATOR)) })
}

impl Actor for TransactionCoordinatorActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        if self.resigned {
            return;
        }
        self.load(ctx);
        ctx.run_interval(self.abort_interval, |_, ctx| {
            ctx.notify(AbortTimedOutTick);
        });
        ctx.run_interval(self.remove_expired_interval, |_, ctx| {
            ctx.notify(RemoveExpiredTick);
        });
        txn_metrics().coordinator_partitions.inc();
        ctx.run_interval(METRICS_INTERVAL, |act, _| {
            if act.loaded {
                act.shard_metrics.refresh(act.core.transactions());
            }
        });
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        txn_metrics().coordinator_partitions.dec();
        self.shard_metrics.clear();
    }
}

impl TransactionCoordinatorActor {
    /// Why a request cannot be served now, if it cannot.
    fn unavailable(&self) -> Option<i16> {
        if self.resigned {
            Some(NOT_COORDINATOR)
        } else if !self.loaded {
            Some(COORDINATOR_LOAD_IN_PROGRESS)
        } else {
            None
        }
    }
}

impl actix::Supervised for TransactionCoordinatorActor {
    /// After a caught panic the in-memory transactions may be half-updated: the load that
    /// `started` runs again replaces them with the partition's content (requests waiting on
    /// the old state were dropped with the context and get NOT_COORDINATOR).
    fn restarting(&mut self, _: &mut Context<Self>) {
        self.loaded = false;
    }
}

impl SupervisedActor for TransactionCoordinatorActor {
    const MAILBOX_CAPACITY: usize = 1024;
}

crate::supervised_mailbox!(TransactionCoordinatorActor);

impl Handler<ResignTxnCoordinator> for TransactionCoordinatorActor {
    type Result = ();
    fn handle(&mut self, _: ResignTxnCoordinator, ctx: &mut Context<Self>) {
        tracing::info!(
            partition = self.partition_index,
            "transaction coordinator shard unloading"
        );
        self.loaded = false;
        self.resigned = true;
        // Waiting requests hold oneshot senders inside spawned futures: stopping drops them and
        // their callers answer NOT_COORDINATOR (see `reply`).
        ctx.stop();
    }
}

impl Handler<DescribeTxnCoordinator> for TransactionCoordinatorActor {
    type Result = TxnCoordinatorStatus;
    fn handle(&mut self, _: DescribeTxnCoordinator, _: &mut Context<Self>) -> Self::Result {
        TxnCoordinatorStatus {
            partition: self.partition_index,
            loaded: self.loaded,
            coordinator_epoch: self.core.coordinator_epoch(),
            transactional_ids: self.core.transactions().count(),
            markers_owed: self.owed.len(),
        }
    }
}

impl Handler<AbortTimedOutTick> for TransactionCoordinatorActor {
    type Result = ();
    fn handle(&mut self, _: AbortTimedOutTick, ctx: &mut Context<Self>) {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        if !self.loaded {
            return;
        }
        for due in self.core.abort_timed_out(now_ms()) {
            match due {
                TimeoutAbort::Write(t) => self.abort_timed_out(t, ctx),
                TimeoutAbort::NeedProducerId(id) => {
                    self.with_fresh_producer_id(ctx, move |act, fresh, ctx| {
                        // Still due once the id arrives (else the next tick looks again).
                        let t = fresh.ok().and_then(|fresh| {
                            act.core.abort_timed_out_with(&id, Some(fresh), now_ms())
                        });
                        if let Some(t) = t {
                            act.abort_timed_out(t, ctx);
                        }
                    });
                }
            }
        }
    }
}

impl Handler<RemoveExpiredTick> for TransactionCoordinatorActor {
    type Result = ();
    fn handle(&mut self, _: RemoveExpiredTick, ctx: &mut Context<Self>) {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        if !self.loaded {
            return;
        }
        let ids = self.core.begin_expiration(now_ms(), self.expiration_ms);
        if !ids.is_empty() {
            self.write_tombstones(ids, ctx);
        }
    }
}

impl Handler<InitTxnProducer> for TransactionCoordinatorActor {
    type Result = ResponseFuture<Result<InitResult, i16>>;
    fn handle(&mut self, msg: InitTxnProducer, ctx: &mut Context<Self>) -> Self::Result {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        let (tx, rx) = oneshot::channel();
        if let Some(code) = self.unavailable() {
            let _ = tx.send(Err(code));
        } else {
            self.init(msg, None, tx, ctx);
        }
        reply(rx)
    }
}

impl Handler<AddTxnPartitions> for TransactionCoordinatorActor {
    type Result = ResponseFuture<Result<(), i16>>;
    fn handle(&mut self, msg: AddTxnPartitions, ctx: &mut Context<Self>) -> Self::Result {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        let (tx, rx) = oneshot::channel();
        if let Some(code) = self.unavailable() {
            let _ = tx.send(Err(code));
            return reply(rx);
        }
        self.add_partitions(msg, tx, false, ctx);
        reply(rx)
    }
}

impl Handler<LeaderAddTxnPartitions> for TransactionCoordinatorActor {
    type Result = ResponseFuture<Result<(), i16>>;
    fn handle(&mut self, msg: LeaderAddTxnPartitions, ctx: &mut Context<Self>) -> Self::Result {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        let (tx, rx) = oneshot::channel();
        if let Some(code) = self.unavailable() {
            let _ = tx.send(Err(code));
            return reply(rx);
        }
        self.add_partitions(msg.0, tx, true, ctx);
        reply(rx)
    }
}

impl Handler<EndTransaction> for TransactionCoordinatorActor {
    type Result = ResponseFuture<Result<(i64, i16), i16>>;
    fn handle(&mut self, msg: EndTransaction, ctx: &mut Context<Self>) -> Self::Result {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        let (tx, rx) = oneshot::channel();
        if let Some(code) = self.unavailable() {
            let _ = tx.send(Err(code));
            return reply(rx);
        }
        self.end(msg, None, tx, ctx);
        reply(rx)
    }
}

impl Handler<VerifyTxnPartitions> for TransactionCoordinatorActor {
    type Result = MessageResult<VerifyTxnPartitions>;
    fn handle(&mut self, msg: VerifyTxnPartitions, _: &mut Context<Self>) -> Self::Result {
        if !self.loaded {
            return MessageResult(Err(COORDINATOR_LOAD_IN_PROGRESS));
        }
        MessageResult(
            self.core
                .verify_partitions(
                    &msg.transactional_id,
                    msg.producer_id,
                    msg.producer_epoch,
                    &msg.partitions,
                )
                .map_err(|e| e.code()),
        )
    }
}

impl Handler<GetTransactions> for TransactionCoordinatorActor {
    type Result = MessageResult<GetTransactions>;
    fn handle(&mut self, _: GetTransactions, _: &mut Context<Self>) -> Self::Result {
        if let Some(code) = self.unavailable() {
            return MessageResult(Err(code));
        }
        MessageResult(Ok(self.core.transactions().cloned().collect()))
    }
}
