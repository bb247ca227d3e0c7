//! `TransactionCoordinatorActor` (Kafka's `TransactionCoordinator`, `TransactionStateManager`
//! and `TransactionMarkerChannelManager` for one `__transaction_state` partition): loads the
//! partition by replay, then runs [`TxnCoordinatorCore`] with write-then-respond (every state
//! change is appended to the partition and answered only once the append succeeded), sends
//! commit/abort markers to the transaction's partitions through their PartitionActors, and
//! aborts transactions past their timeout on a tick.

use std::collections::BTreeMap;
use std::time::Duration;

use actix::prelude::*;
use bytes::Bytes;
use kactor_protocol::records::{batches, BatchBuilder};
use tokio::sync::oneshot;

use super::actor::ProducerIdManagerActor;
use super::core::{
    InitDecision, InitResult, MarkerJob, Transit, TxnCoordinatorConfig, TxnCoordinatorCore,
    TxnMetadata, TxnPartition,
};
use super::log::{decode, encode_key, encode_value};
use super::messages::GenerateProducerId;
use crate::partition::core::{IsolationLevel, ReadParams};
use crate::partition::messages::{AppendRecords, AppendTxnMarker, ReadRecords};
use crate::partition::registry::PartitionTableReader;
use crate::partition::PartitionActor;
use crate::producer::partition::TxnMarker;
use crate::runtime::{ActorMetrics, MeteredAddr};

/// `transaction.abort.timed.out.transaction.cleanup.interval.ms` default.
pub const ABORT_TIMED_OUT_INTERVAL: Duration = Duration::from_secs(10);
/// Wire code while loading or when the partition write fails (clients retry / rediscover).
pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
pub const NOT_COORDINATOR: i16 = 16;
/// Markers are retried this often while a partition refuses them (e.g. no leader yet).
const MARKER_RETRY: Duration = Duration::from_millis(200);

type Reply<T> = oneshot::Sender<Result<T, i16>>;

/// InitProducerId with a transactional id. Lost: the client times out and retries.
#[derive(Debug, Message)]
#[rtype(result = "Result<InitResult, i16>")]
pub struct InitTxnProducer {
    pub transactional_id: String,
    pub txn_timeout_ms: i32,
    pub expected: (i64, i16),
    pub client_transaction_version: i16,
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

/// EndTxn: answered after the Prepare state is written (markers follow). Lost: client retries.
#[derive(Debug, Message)]
#[rtype(result = "Result<(), i16>")]
pub struct EndTransaction {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
}

/// AddPartitionsToTxn v4+ `verify_only` (partition leaders asking before a transactional
/// append): per partition NONE or INVALID_TXN_STATE. Lost: the produce times out.
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

/// Internal: the periodic timeout scan.
#[derive(Debug, Message)]
#[rtype(result = "()")]
struct AbortTimedOutTick;

enum Answer {
    Init(Reply<InitResult>, InitResult),
    Unit(Reply<()>),
    None,
}

pub struct TransactionCoordinatorActor {
    core: TxnCoordinatorCore,
    loaded: bool,
    /// The `__transaction_state` partition this shard owns.
    log: MeteredAddr<PartitionActor>,
    producer_ids: MeteredAddr<ProducerIdManagerActor>,
    partitions: PartitionTableReader,
    /// Markers still owed per transactional id: partitions not yet acknowledged.
    owed: BTreeMap<String, (MarkerJob, Vec<TxnPartition>)>,
    metrics: ActorMetrics,
}

impl TransactionCoordinatorActor {
    pub fn new(
        config: TxnCoordinatorConfig,
        log: MeteredAddr<PartitionActor>,
        producer_ids: MeteredAddr<ProducerIdManagerActor>,
        partitions: PartitionTableReader,
    ) -> Self {
        TransactionCoordinatorActor {
            core: TxnCoordinatorCore::new(config),
            loaded: false,
            log,
            producer_ids,
            partitions,
            owed: BTreeMap::new(),
            metrics: ActorMetrics::new("TransactionCoordinatorActor"),
        }
    }

    /// Reads the partition from the start and replays every record (load by replay).
    async fn read_all(
        log: MeteredAddr<PartitionActor>,
    ) -> Result<Vec<(Bytes, Option<Bytes>)>, String> {
        let mut out = Vec::new();
        let mut offset = 0;
        loop {
            let read = log
                .send(ReadRecords {
                    params: ReadParams {
                        fetch_offset: offset,
                        max_bytes: 1 << 20,
                        min_one_batch: true,
                        isolation: IsolationLevel::ReadUncommitted,
                        current_leader_epoch: -1,
                        last_fetched_epoch: -1,
                        replica_id: -1,
                    },
                })
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
            if offset == 0 && read.log_start_offset > 0 {
                offset = read.log_start_offset;
                continue;
            }
            let bytes = read.records.to_bytes().map_err(|e| e.to_string())?;
            if bytes.is_empty() {
                return Ok(out);
            }
            let before = offset;
            for batch in batches(bytes) {
                let batch = batch.map_err(|e| e.to_string())?;
                if batch.header.is_control() || batch.header.last_offset() < offset {
                    offset = offset.max(batch.header.next_offset());
                    continue;
                }
                for record in batch.records().map_err(|e| e.to_string())? {
                    let r = record.map_err(|e| e.to_string())?;
                    if let Some(k) = r.key {
                        out.push((k, r.value));
                    }
                }
                offset = batch.header.next_offset();
            }
            if offset == before {
                return Ok(out);
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
        let log = self.log.clone();
        let send = async move {
            log.send(AppendRecords {
                records,
                required_acks: -1,
            })
            .await
        };
        ctx.spawn(send.into_actor(self).map(move |res, act, ctx| {
            let ok = matches!(res, Ok(Ok(_)));
            let job = act.core.complete_write(&transit, ok);
            if !ok {
                tracing::warn!(txn = %transit.target.transactional_id, "transaction state write failed");
                answer_err(answer, NOT_COORDINATOR);
                return;
            }
            match answer {
                Answer::Init(tx, r) => {
                    let _ = tx.send(Ok(r));
                }
                Answer::Unit(tx) => {
                    let _ = tx.send(Ok(()));
                }
                Answer::None => {}
            }
            if let Some(job) = job {
                act.start_markers(job, ctx);
            }
        }));
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
        let marker = TxnMarker {
            producer_id: job.producer_id,
            producer_epoch: job.producer_epoch,
            commit: job.commit,
            coordinator_epoch: job.coordinator_epoch,
        };
        let table = self.partitions.borrow().clone();
        let sends: Vec<_> = left
            .iter()
            .map(|(t, p)| {
                let addr = table.get(t, *p).map(|h| h.addr.clone());
                let tp = (t.clone(), *p);
                async move {
                    let ok = match addr {
                        // A partition that no longer exists needs no marker (Kafka drops it).
                        None => true,
                        Some(a) => match a.send(AppendTxnMarker { marker }).await {
                            Ok(Ok(_)) => true,
                            // The producer already moved past this epoch: nothing to complete.
                            Ok(Err(e)) if e.code() == 47 => true,
                            _ => false,
                        },
                    };
                    (tp, ok)
                }
            })
            .collect();
        let fut = futures_util::future::join_all(sends);
        ctx.spawn(fut.into_actor(self).map(move |results, act, ctx| {
            let remaining: Vec<TxnPartition> = results
                .into_iter()
                .filter(|(_, ok)| !ok)
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
            msg.client_transaction_version,
            fresh,
            now_ms(),
        );
        match decision {
            Err(e) => {
                let _ = tx.send(Err(e.code()));
            }
            Ok(InitDecision::Write(t, r)) => self.write(t, Answer::Init(tx, r), ctx),
            Ok(InitDecision::NeedProducerId) => {
                if fresh.is_some() {
                    let _ = tx.send(Err(COORDINATOR_LOAD_IN_PROGRESS));
                    return;
                }
                let ids = self.producer_ids.clone();
                let send = async move { ids.send(GenerateProducerId).await };
                ctx.spawn(send.into_actor(self).map(move |res, act, ctx| match res {
                    Ok(Ok(id)) => act.init(msg, Some(id), tx, ctx),
                    Ok(Err(code)) => {
                        let _ = tx.send(Err(code));
                    }
                    Err(_) => {
                        let _ = tx.send(Err(COORDINATOR_LOAD_IN_PROGRESS));
                    }
                }));
            }
        }
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
        let log = self.log.clone();
        ctx.wait(
            Self::read_all(log)
                .into_actor(self)
                .map(|records, act, ctx| {
                    match records {
                        Ok(records) => {
                            for (k, v) in records {
                                match decode(&k, v.as_ref()) {
                                    Ok((id, m)) => act.core.replay(&id, m),
                                    Err(e) => tracing::warn!(error = %e, "skipping transaction log record"),
                                }
                            }
                            act.loaded = true;
                            // Transactions loaded mid-end get their markers again.
                            for job in act.core.pending_marker_jobs() {
                                act.start_markers(job, ctx);
                            }
                        }
                        Err(e) => tracing::error!(error = %e, "cannot load __transaction_state"),
                    }
                }),
        );
        ctx.run_interval(ABORT_TIMED_OUT_INTERVAL, |_, ctx| {
            ctx.notify(AbortTimedOutTick);
        });
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
        for t in self.core.abort_timed_out(now_ms()) {
            tracing::info!(txn = %t.target.transactional_id, "aborting timed-out transaction");
            self.write(t, Answer::None, ctx);
        }
    }
}

impl Handler<InitTxnProducer> for TransactionCoordinatorActor {
    type Result = ResponseFuture<Result<InitResult, i16>>;
    fn handle(&mut self, msg: InitTxnProducer, ctx: &mut Context<Self>) -> Self::Result {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        let (tx, rx) = oneshot::channel();
        if !self.loaded {
            let _ = tx.send(Err(COORDINATOR_LOAD_IN_PROGRESS));
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
        if !self.loaded {
            let _ = tx.send(Err(COORDINATOR_LOAD_IN_PROGRESS));
            return reply(rx);
        }
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
            Err(e) => {
                let _ = tx.send(Err(e.code()));
            }
        }
        reply(rx)
    }
}

impl Handler<EndTransaction> for TransactionCoordinatorActor {
    type Result = ResponseFuture<Result<(), i16>>;
    fn handle(&mut self, msg: EndTransaction, ctx: &mut Context<Self>) -> Self::Result {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        let (tx, rx) = oneshot::channel();
        if !self.loaded {
            let _ = tx.send(Err(COORDINATOR_LOAD_IN_PROGRESS));
            return reply(rx);
        }
        match self.core.end_txn(
            &msg.transactional_id,
            msg.producer_id,
            msg.producer_epoch,
            msg.commit,
            now_ms(),
        ) {
            Ok(Some(t)) => self.write(t, Answer::Unit(tx), ctx),
            Ok(None) => {
                let _ = tx.send(Ok(()));
            }
            Err(e) => {
                let _ = tx.send(Err(e.code()));
            }
        }
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
        if !self.loaded {
            return MessageResult(Err(COORDINATOR_LOAD_IN_PROGRESS));
        }
        MessageResult(Ok(self.core.transactions().cloned().collect()))
    }
}
