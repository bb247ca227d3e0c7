//! KIP-890 on the partition leader's side (Kafka's
//! `ReplicaManager.maybeSendPartitionsToTransactionCoordinator`, `AddPartitionsToTxnManager`
//! and `UnifiedLog.maybeStartTransactionVerification`): before a transactional Produce or
//! TxnOffsetCommit is appended, the leader makes sure the partition is in the producer's
//! transaction. Produce v12+ / TxnOffsetCommit v5+ (transaction version 2 clients, which send
//! no AddPartitionsToTxn / AddOffsetsToTxn) have the coordinator add it; older versions only
//! verify it was added (part 1, `transaction.partition.verification.enable`). A partition whose
//! producer state already holds an open transaction of that producer id and epoch needs
//! neither, so a long transaction asks the coordinator once per partition.
//!
//! The check runs in front of the Produce and TxnOffsetCommit handlers ([`wrap_produce`],
//! [`wrap_txn_offset_commit`]): refused partitions are taken out of the request, answered with
//! the mapped error, and the rest goes to the wrapped handler unchanged. The shard is called
//! directly (single node: the coordinator of every transactional id this broker can verify
//! runs here), with [`LeaderAddTxnPartitions`] / [`VerifyTxnPartitions`].
//!
//! Kafka handles one request per connection at a time; kactor pipelines them, so a
//! producer's transactional Produce requests on one connection are dispatched to the wrapped
//! handler in arrival order ([`DispatchOrder`]): one waiting for the coordinator must not be
//! overtaken by a later one that needs no round trip (its batches would arrive out of
//! sequence).
//!
//! Verification guard (Kafka's `VerificationGuard` / `VerificationStateEntry`): before the
//! coordinator is asked, each partition creates (or reuses) the producer's verification entry
//! ([`StartTxnVerification`]); after the coordinator's OK the guard is confirmed at the
//! partition ([`ConfirmTxnVerification`]), ahead of the append in the same mailbox. The
//! transaction's marker clears the entry, so an abort that completes between the
//! coordinator's answer and the append (the Produce's, or the group coordinator's append of the
//! TxnOffsetCommit offsets to `__consumer_offsets`) fails the append with INVALID_TXN_STATE
//! instead of leaving a hanging transaction. A request whose transactional batches carry more than one
//! producer id (or epoch) is refused whole with INVALID_PRODUCER_ID_MAPPING, as Kafka's
//! `ReplicaManager.handleProduceAppend` does.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::task::Poll;

use futures_util::future::join_all;
use kactor_protocol::errors::{self, ErrorCode};
use kactor_protocol::messages::produce_response::PartitionProduceResponse;
use kactor_protocol::messages::txn_offset_commit_response as tcr;
use kactor_protocol::messages::{
    ProduceRequest, ProduceResponse, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};
use kactor_protocol::records::{batches, BatchHeader};
use kactor_protocol::{ApiKey, Records, RequestBody, ResponseBody};
use tokio::sync::oneshot;

use super::apis::{partition_for, TxnCoordinatorApis, TRANSACTION_STATE_TOPIC};
use super::coordinator::TransactionCoordinatorActor;
use super::coordinator::{AddTxnPartitions, LeaderAddTxnPartitions, VerifyTxnPartitions};
use super::core::TxnPartition;
use crate::network::inter_broker::{InterBrokerClient, InterBrokerError};
use crate::network::{HandlerOutcome, RequestRouter};
use crate::partition::core::PartitionError;
use crate::partition::messages::{ConfirmTxnVerification, StartTxnVerification};
use crate::partition::registry::PartitionTableReader;
use crate::producer::VerificationGuard;
use crate::runtime::MeteredAddr;
use kactor_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};

/// What a request version lets the leader do about a partition not yet in the transaction
/// (Kafka's `TransactionSupportedOperation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnOperation {
    /// Verify only; the client knows no TRANSACTION_ABORTABLE.
    DefaultError,
    /// Verify only; the client handles TRANSACTION_ABORTABLE.
    GenericErrorSupported,
    /// Add the partition to the transaction (transaction version 2 clients).
    AddPartition,
}

impl TxnOperation {
    /// Kafka's `produceRequestVersionToTransactionSupportedOperation`: v12+ add, v11 generic
    /// errors, older the default errors.
    pub fn for_produce(version: i16) -> Self {
        match version {
            v if v > 11 => TxnOperation::AddPartition,
            v if v > 10 => TxnOperation::GenericErrorSupported,
            _ => TxnOperation::DefaultError,
        }
    }

    /// Kafka's `txnOffsetCommitRequestVersionToTransactionSupportedOperation`: v5+ add, v4
    /// generic errors, older the default errors.
    pub fn for_txn_offset_commit(version: i16) -> Self {
        match version {
            v if v > 4 => TxnOperation::AddPartition,
            v if v > 3 => TxnOperation::GenericErrorSupported,
            _ => TxnOperation::DefaultError,
        }
    }

    /// Transaction version 2 semantics (the epoch is bumped at every transaction end).
    pub fn supports_epoch_bump(self) -> bool {
        self == TxnOperation::AddPartition
    }
}

/// The coordinator's answer as the leader sees it (Kafka's `AddPartitionsToTxnManager`):
/// a fenced producer is an invalid epoch to the partition; TRANSACTION_ABORTABLE is unknown to
/// default-error clients, which get INVALID_TXN_STATE; an authorization failure of the
/// broker's own request must not reach the client either.
pub fn coordinator_error_for_leader(op: TxnOperation, code: i16) -> i16 {
    match code {
        errors::PRODUCER_FENCED => errors::INVALID_PRODUCER_EPOCH,
        errors::TRANSACTION_ABORTABLE if op == TxnOperation::DefaultError => {
            errors::INVALID_TXN_STATE
        }
        errors::CLUSTER_AUTHORIZATION_FAILED => errors::INVALID_TXN_STATE,
        other => other,
    }
}

/// The Produce partition error for a refused verification / add (Kafka's `ReplicaManager`
/// translation of coordinator errors, after [`coordinator_error_for_leader`]): retriable
/// coordinator trouble becomes NOT_ENOUGH_REPLICAS (retried by every client without a metadata
/// refresh), except CONCURRENT_TRANSACTIONS for transaction version 2 clients, which retry it
/// themselves. Returns the code and the error message Kafka sets.
pub fn produce_error(op: TxnOperation, coordinator_code: i16) -> (i16, Option<String>) {
    let code = coordinator_error_for_leader(op, coordinator_code);
    // Kafka names these codes one by one; other retriable codes (`ErrorCode::is_retriable`,
    // e.g. NOT_ENOUGH_REPLICAS or REQUEST_TIMED_OUT) reach the client unchanged.
    let retriable = match code {
        errors::NETWORK_EXCEPTION
        | errors::COORDINATOR_LOAD_IN_PROGRESS
        | errors::COORDINATOR_NOT_AVAILABLE
        | errors::NOT_COORDINATOR => true,
        errors::CONCURRENT_TRANSACTIONS => !op.supports_epoch_bump(),
        _ => false,
    };
    if retriable {
        return (
            errors::NOT_ENOUGH_REPLICAS,
            Some(format!(
                "Unable to verify the partition has been added to the transaction. Underlying error: {}",
                ErrorCode::for_code(code).name()
            )),
        );
    }
    if code == errors::INVALID_TXN_STATE {
        return (
            code,
            Some("Partition was not added to the transaction".to_string()),
        );
    }
    (code, None)
}

/// The TxnOffsetCommit error for a refused verification / add: the group coordinator's
/// `handleOperationException` translation of the leader's error.
pub fn txn_offset_commit_error(op: TxnOperation, coordinator_code: i16) -> i16 {
    match coordinator_error_for_leader(op, coordinator_code) {
        errors::NOT_ENOUGH_REPLICAS
        | errors::UNKNOWN_TOPIC_OR_PARTITION
        | errors::REQUEST_TIMED_OUT => errors::COORDINATOR_NOT_AVAILABLE,
        errors::NOT_LEADER_OR_FOLLOWER | errors::KAFKA_STORAGE_ERROR => errors::NOT_COORDINATOR,
        other => other,
    }
}

/// The producer of a transactional batch set (its first batch decides, as Kafka's
/// `ProduceRequest` analysis does): (producer id, epoch, base sequence), or None for anything
/// else.
pub fn transactional_producer(records: &[u8]) -> Option<(i64, i16, i32)> {
    let h = BatchHeader::parse(records).ok()?;
    (h.is_transactional() && h.has_producer_id()).then_some((
        h.producer_id,
        h.producer_epoch,
        h.base_sequence,
    ))
}

/// Kafka's `ReplicaManager.handleProduceAppend` refuses a Produce whose transactional batches
/// (every batch of every partition) name more than one (producer id, epoch).
const MORE_THAN_ONE_PRODUCER: &str = "Transactional records contained more than one producer ID";

/// Whether the request's transactional batches carry more than one (producer id, epoch).
pub fn mixes_transactional_producers(req: &ProduceRequest) -> bool {
    let mut seen: Option<(i64, i16)> = None;
    req.topic_data
        .iter()
        .flat_map(|t| &t.partition_data)
        .filter_map(|p| match &p.records {
            Some(Records::Memory(bytes)) => Some(batches(bytes.clone())),
            _ => None,
        })
        // A malformed batch ends its partition's walk; validation answers it at append.
        .flat_map(|it| it.map_while(Result::ok))
        .filter(|b| b.header.is_transactional() && b.header.has_producer_id())
        .any(|b| {
            let producer = (b.header.producer_id, b.header.producer_epoch);
            *seen.get_or_insert(producer) != producer
        })
}

/// A partition answered `code` without an append (no offsets), with `message` where the
/// version has ErrorMessage (v8+).
fn refused_partition(
    version: i16,
    index: i32,
    code: i16,
    message: Option<String>,
) -> PartitionProduceResponse {
    PartitionProduceResponse {
        index,
        error_code: code,
        base_offset: -1,
        log_append_time_ms: -1,
        log_start_offset: -1,
        error_message: message.filter(|_| version >= 8),
        ..Default::default()
    }
}

/// Every partition of `req` answered with `code` (Kafka's `ProduceRequest.getErrorResponse`).
fn produce_refused(
    version: i16,
    req: &ProduceRequest,
    code: i16,
    message: &str,
) -> ProduceResponse {
    use kactor_protocol::messages::produce_response::TopicProduceResponse;
    ProduceResponse {
        responses: req
            .topic_data
            .iter()
            .map(|t| TopicProduceResponse {
                name: t.name.clone(),
                topic_id: t.topic_id,
                partition_responses: t
                    .partition_data
                    .iter()
                    .map(|p| refused_partition(version, p.index, code, Some(message.into())))
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// What the wrappers need: the coordinator shards and the partition table.
#[derive(Clone)]
pub struct LeaderVerifier {
    pub coordinator: TxnCoordinatorApis,
    /// Each partition answers for `transaction.partition.verification.enable` itself (a
    /// dynamic broker config its config follows): SENTINEL for a verify-only client while off.
    pub partitions: PartitionTableReader,
    /// Reaches the coordinator when it runs on another broker (Kafka's
    /// `AddPartitionsToTxnManager`); without one only a local coordinator is asked.
    pub inter_broker: Option<InterBrokerClient>,
}

/// Every one of `partitions` refused with `code`.
fn refuse_all(partitions: &[TxnPartition], code: i16) -> BTreeMap<TxnPartition, i16> {
    partitions.iter().map(|p| (p.clone(), code)).collect()
}

/// The local shard's answer for `partitions`: the refused ones with their codes. An add
/// answers for all of them at once, a verification per partition.
async fn ask_local(
    shard: &MeteredAddr<TransactionCoordinatorActor>,
    op: TxnOperation,
    transactional_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    partitions: &[TxnPartition],
) -> BTreeMap<TxnPartition, i16> {
    let add = AddTxnPartitions {
        transactional_id: transactional_id.to_string(),
        producer_id,
        producer_epoch,
        partitions: partitions.to_vec(),
    };
    let answer = if op.supports_epoch_bump() {
        shard
            .send(LeaderAddTxnPartitions(add))
            .await
            .unwrap_or(Err(errors::NETWORK_EXCEPTION))
            .map(|()| Vec::new())
    } else {
        shard
            .send(VerifyTxnPartitions {
                transactional_id: add.transactional_id,
                producer_id,
                producer_epoch,
                partitions: add.partitions,
            })
            .await
            .unwrap_or(Err(errors::NETWORK_EXCEPTION))
    };
    match answer {
        Ok(per_partition) => per_partition
            .into_iter()
            .filter(|(_, code)| *code != errors::NONE)
            .collect(),
        Err(code) => refuse_all(partitions, code),
    }
}

/// One transactional partition of a request: its place, its leader, its producer.
struct Candidate {
    tp: TxnPartition,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
}

impl LeaderVerifier {
    /// Asks the coordinator about the `candidates` whose partition has no open transaction of
    /// their producer yet, then confirms each verified partition's guard. Returns the
    /// coordinator code per refused partition (codes as the shard answers them; the caller
    /// maps them for its API).
    async fn check(
        &self,
        op: TxnOperation,
        transactional_id: &str,
        candidates: Vec<Candidate>,
    ) -> BTreeMap<TxnPartition, i16> {
        let mut refused = BTreeMap::new();
        if candidates.is_empty() {
            return refused;
        }
        let table = self.partitions.borrow().clone();
        let addrs: Vec<_> = candidates
            .iter()
            .map(|c| table.get(&c.tp.0, c.tp.1).map(|h| h.addr.clone()))
            .collect();
        let starts = join_all(candidates.iter().zip(&addrs).map(|(c, addr)| {
            let addr = addr.clone();
            let msg = StartTxnVerification {
                producer_id: c.producer_id,
                producer_epoch: c.producer_epoch,
                base_sequence: c.base_sequence,
                supports_epoch_bump: op.supports_epoch_bump(),
            };
            async move {
                match addr {
                    // Not hosted: the wrapped handler answers the partition's error.
                    None => None,
                    Some(a) => a.send(msg).await.ok(),
                }
            }
        }))
        .await;
        let mut ask: Vec<&Candidate> = Vec::new();
        let mut guards: Vec<(usize, VerificationGuard)> = Vec::new();
        for (i, (c, start)) in candidates.iter().zip(starts).enumerate() {
            match start {
                // A transaction of this epoch is already open here: no round trip.
                Some(Ok(guard)) if guard == VerificationGuard::SENTINEL => {}
                Some(Ok(guard)) => {
                    ask.push(c);
                    guards.push((i, guard));
                }
                // Fenced epoch (Kafka's maybeStartTransactionVerification throws it).
                Some(Err(PartitionError::ProducerState(e))) => {
                    refused.insert(c.tp.clone(), e.code());
                }
                // Not leader, gone, ...: the wrapped handler answers the partition's error.
                _ => {}
            }
        }
        let Some(first) = ask.first() else {
            return refused;
        };
        let (producer_id, producer_epoch) = (first.producer_id, first.producer_epoch);
        let partitions: Vec<TxnPartition> = ask.iter().map(|c| c.tp.clone()).collect();
        let answers = match self.coordinator.shard(transactional_id) {
            Some(shard) => {
                ask_local(
                    &shard,
                    op,
                    transactional_id,
                    producer_id,
                    producer_epoch,
                    &partitions,
                )
                .await
            }
            None => {
                self.ask_remote(
                    op,
                    transactional_id,
                    producer_id,
                    producer_epoch,
                    &partitions,
                )
                .await
            }
        };
        refused.extend(answers);
        // The guards of the verified partitions go to their partitions before the append
        // does (same mailbox, so ahead of it). A failed confirmation is left to the append,
        // which then answers INVALID_TXN_STATE itself (the transaction ended meanwhile).
        join_all(guards.into_iter().filter_map(|(i, guard)| {
            let c = &candidates[i];
            if refused.contains_key(&c.tp) {
                return None;
            }
            let addr = addrs[i].clone()?;
            let msg = ConfirmTxnVerification {
                producer_id: c.producer_id,
                guard,
            };
            Some(async move { addr.send(msg).await })
        }))
        .await;
        refused
    }

    /// Asks the transaction's coordinator on another broker (AddPartitionsToTxn v4+, one
    /// transaction, verify-only unless the request version lets the leader add): the
    /// refused partitions with their codes. A coordinator whose partition has no leader is
    /// COORDINATOR_NOT_AVAILABLE; one that cannot be reached, NETWORK_EXCEPTION (both
    /// retriable for the producer, as with Kafka).
    async fn ask_remote(
        &self,
        op: TxnOperation,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[TxnPartition],
    ) -> BTreeMap<TxnPartition, i16> {
        let table = self.partitions.borrow().clone();
        let state_partition = partition_for(transactional_id, self.coordinator.num_partitions);
        let leader = table.leader_of(TRANSACTION_STATE_TOPIC, state_partition);
        let client = match (&self.inter_broker, leader) {
            (Some(c), Some(l)) if l >= 0 && l != c.node_id() => c,
            // Led here but the shard is not up yet, or no inter-broker client.
            (_, Some(l)) if l >= 0 => return refuse_all(partitions, errors::NOT_COORDINATOR),
            _ => return refuse_all(partitions, errors::COORDINATOR_NOT_AVAILABLE),
        };
        let transaction = AddPartitionsToTxnTransaction {
            transactional_id: transactional_id.to_string(),
            producer_id,
            producer_epoch,
            verify_only: !op.supports_epoch_bump(),
            topics: super::core::by_topic(partitions)
                .into_iter()
                .map(|(name, partitions)| AddPartitionsToTxnTopic {
                    name: name.to_string(),
                    partitions,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let coordinator = leader.expect("matched above");
        match client.add_partitions_to_txn(coordinator, transaction).await {
            Ok(result) => result
                .topic_results
                .into_iter()
                .flat_map(|t| {
                    let name = t.name;
                    t.results_by_partition
                        .into_iter()
                        .map(move |p| ((name.clone(), p.partition_index), p.partition_error_code))
                })
                .filter(|(_, code)| *code != errors::NONE)
                .collect(),
            Err(InterBrokerError::Code(code)) => refuse_all(partitions, code),
            Err(e) => {
                tracing::debug!(transactional_id, coordinator, error = %e,
                    "transaction coordinator not reached");
                refuse_all(partitions, errors::NETWORK_EXCEPTION)
            }
        }
    }

    /// The refused partitions of a transactional Produce, by (topic index in the request,
    /// partition index): the partition's response (error code and message).
    async fn check_produce(
        &self,
        version: i16,
        transactional_id: &str,
        req: &ProduceRequest,
    ) -> BTreeMap<(usize, i32), (i16, Option<String>)> {
        let op = TxnOperation::for_produce(version);
        let table = self.partitions.borrow().clone();
        let mut candidates = Vec::new();
        let mut places: BTreeMap<TxnPartition, Vec<(usize, i32)>> = BTreeMap::new();
        for (ti, topic) in req.topic_data.iter().enumerate() {
            // v13+ names topics by id only.
            let name = if version >= 13 {
                table.topic_name(&topic.topic_id)
            } else {
                Some(topic.name.clone())
            };
            let Some(name) = name else { continue };
            for p in &topic.partition_data {
                let Some(Records::Memory(bytes)) = &p.records else {
                    continue;
                };
                let Some((producer_id, producer_epoch, base_sequence)) =
                    transactional_producer(bytes)
                else {
                    continue;
                };
                let tp = (name.clone(), p.index);
                places.entry(tp.clone()).or_default().push((ti, p.index));
                candidates.push(Candidate {
                    tp,
                    producer_id,
                    producer_epoch,
                    base_sequence,
                });
            }
        }
        self.check(op, transactional_id, candidates)
            .await
            .into_iter()
            .flat_map(|(tp, code)| {
                let answer = produce_error(op, code);
                places
                    .remove(&tp)
                    .unwrap_or_default()
                    .into_iter()
                    .map(move |place| (place, answer.clone()))
            })
            .collect()
    }
}

/// Per connection, the transactional Produce requests not yet handed to the wrapped handler:
/// each waits for the one before it (a chain of oneshots; the map holds each connection's
/// last link). A plain mutex: it is held only to swap a link, never across an await, and the
/// handlers of one connection run on different tasks.
#[derive(Default)]
pub struct DispatchOrder {
    tails: Mutex<HashMap<u64, (u64, oneshot::Receiver<()>)>>,
    next_ticket: std::sync::atomic::AtomicU64,
}

/// A request's place in its connection's [`DispatchOrder`]: `previous` resolves once the
/// request before it was dispatched; dropping the ticket (after dispatch, or when the request
/// is abandoned) lets the next one go.
pub struct DispatchTicket {
    order: Arc<DispatchOrder>,
    connection_id: u64,
    ticket: u64,
    previous: Option<oneshot::Receiver<()>>,
    dispatched: Option<oneshot::Sender<()>>,
}

impl DispatchOrder {
    /// Takes the next place on `connection_id` (call in arrival order).
    pub fn enqueue(self: &Arc<Self>, connection_id: u64) -> DispatchTicket {
        let ticket = self
            .next_ticket
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        let previous = self
            .tails
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(connection_id, (ticket, rx))
            .map(|(_, rx)| rx);
        DispatchTicket {
            order: self.clone(),
            connection_id,
            ticket,
            previous,
            dispatched: Some(tx),
        }
    }

    /// Connections with a transactional Produce not yet dispatched (tests).
    pub fn waiting_connections(&self) -> usize {
        self.tails.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl DispatchTicket {
    /// Waits until the previous request of the connection was dispatched (or abandoned).
    pub async fn turn(&mut self) {
        if let Some(previous) = self.previous.take() {
            let _ = previous.await;
        }
    }
}

impl Drop for DispatchTicket {
    fn drop(&mut self) {
        if let Some(tx) = self.dispatched.take() {
            let _ = tx.send(());
        }
        // The last link of its connection: nothing follows, forget the connection.
        let mut tails = self.order.tails.lock().unwrap_or_else(|e| e.into_inner());
        if tails
            .get(&self.connection_id)
            .is_some_and(|(t, _)| *t == self.ticket)
        {
            tails.remove(&self.connection_id);
        }
    }
}

/// Polls `fut` once (the wrapped Produce handler sends its AppendRecords on its first poll),
/// drops `ticket` so the next request may go, then finishes `fut`.
async fn dispatch<F: Future<Output = HandlerOutcome> + Unpin>(
    mut fut: F,
    ticket: DispatchTicket,
) -> HandlerOutcome {
    let first = std::future::poll_fn(|cx| Poll::Ready(std::pin::Pin::new(&mut fut).poll(cx))).await;
    drop(ticket);
    match first {
        Poll::Ready(outcome) => outcome,
        Poll::Pending => fut.await,
    }
}

/// Puts the verification in front of the registered Produce handler (call after
/// `partition::apis::register`). Non-transactional produces go straight through.
pub fn wrap_produce(router: &mut RequestRouter, verifier: LeaderVerifier) -> bool {
    let Some(inner) = router.route(ApiKey::Produce).cloned() else {
        return false;
    };
    let responder = inner.on_unsupported_version;
    let inner = inner.handler;
    let order = Arc::new(DispatchOrder::default());
    router.register(ApiKey::Produce, move |ctx, body| {
        let transactional_id = match &body {
            RequestBody::Produce(req) => req.transactional_id.clone(),
            _ => None,
        };
        let Some(transactional_id) = transactional_id else {
            return inner(ctx, body);
        };
        let RequestBody::Produce(mut req) = body else {
            return inner(ctx, body);
        };
        let inner = inner.clone();
        let verifier = verifier.clone();
        let mut ticket = order.enqueue(ctx.connection.connection_id);
        Box::pin(async move {
            ticket.turn().await;
            let version = ctx.api_version;
            if mixes_transactional_producers(&req) {
                drop(ticket);
                if req.acks == 0 {
                    return HandlerOutcome::Close(MORE_THAN_ONE_PRODUCER.into());
                }
                let code = errors::INVALID_PRODUCER_ID_MAPPING;
                ctx.record_error(code);
                return HandlerOutcome::Respond(ResponseBody::Produce(produce_refused(
                    version,
                    &req,
                    code,
                    MORE_THAN_ONE_PRODUCER,
                )));
            }
            let refused = verifier
                .check_produce(version, &transactional_id, &req)
                .await;
            if refused.is_empty() {
                return dispatch(inner(ctx, RequestBody::Produce(req)), ticket).await;
            }
            for (code, _) in refused.values() {
                ctx.record_error(*code);
            }
            // The wrapped handler appends the rest; refused partitions are put back into its
            // answer in request order.
            let mut order: Vec<Vec<i32>> = Vec::with_capacity(req.topic_data.len());
            for (ti, topic) in req.topic_data.iter_mut().enumerate() {
                order.push(topic.partition_data.iter().map(|p| p.index).collect());
                topic
                    .partition_data
                    .retain(|p| !refused.contains_key(&(ti, p.index)));
            }
            let acks = req.acks;
            let outcome = dispatch(inner(ctx, RequestBody::Produce(req)), ticket).await;
            if acks == 0 {
                // Kafka cannot answer an acks=0 produce: an error closes the connection.
                return HandlerOutcome::Close(
                    "acks=0 transactional produce refused by transaction verification".into(),
                );
            }
            match outcome {
                HandlerOutcome::Respond(ResponseBody::Produce(resp)) => HandlerOutcome::Respond(
                    ResponseBody::Produce(merge_produce(version, resp, &order, &refused)),
                ),
                other => other,
            }
        })
    });
    if let Some(r) = responder {
        router.on_unsupported_version(ApiKey::Produce, r);
    }
    true
}

/// The wrapped handler's answer with the refused partitions put back in request order.
fn merge_produce(
    version: i16,
    mut resp: ProduceResponse,
    order: &[Vec<i32>],
    refused: &BTreeMap<(usize, i32), (i16, Option<String>)>,
) -> ProduceResponse {
    for (ti, indexes) in order.iter().enumerate() {
        let Some(topic) = resp.responses.get_mut(ti) else {
            continue;
        };
        let mut appended = std::mem::take(&mut topic.partition_responses).into_iter();
        let mut merged = Vec::with_capacity(indexes.len());
        for &index in indexes {
            match refused.get(&(ti, index)) {
                Some((code, message)) => {
                    merged.push(refused_partition(version, index, *code, message.clone()))
                }
                None => merged.extend(appended.next()),
            }
        }
        merged.extend(appended);
        topic.partition_responses = merged;
    }
    resp
}

/// Puts the add / verification of the group's `__consumer_offsets` partition in front of the
/// registered TxnOffsetCommit handler (Kafka 4.4 does it in the group coordinator's
/// transactional write; v5+ clients sent no AddOffsetsToTxn). Call after the group APIs.
pub fn wrap_txn_offset_commit(router: &mut RequestRouter, verifier: LeaderVerifier) -> bool {
    let Some(inner) = router.route(ApiKey::TxnOffsetCommit).cloned() else {
        return false;
    };
    let responder = inner.on_unsupported_version;
    let inner = inner.handler;
    router.register(ApiKey::TxnOffsetCommit, move |ctx, body| {
        let RequestBody::TxnOffsetCommit(req) = body else {
            return inner(ctx, body);
        };
        let inner = inner.clone();
        let verifier = verifier.clone();
        Box::pin(async move {
            let op = TxnOperation::for_txn_offset_commit(ctx.api_version);
            let tp = (
                crate::group::apis::OFFSETS_TOPIC.to_string(),
                partition_for(&req.group_id, verifier.coordinator.offsets_partitions),
            );
            let refused = verifier
                .check(
                    op,
                    &req.transactional_id,
                    vec![Candidate {
                        tp: tp.clone(),
                        producer_id: req.producer_id,
                        producer_epoch: req.producer_epoch,
                        // Offset commits carry no sequence.
                        base_sequence: -1,
                    }],
                )
                .await;
            match refused.get(&tp) {
                None => inner(ctx, RequestBody::TxnOffsetCommit(req)).await,
                Some(&code) => {
                    let code = txn_offset_commit_error(op, code);
                    ctx.record_error(code);
                    HandlerOutcome::Respond(ResponseBody::TxnOffsetCommit(
                        txn_offset_commit_refused(&req, code),
                    ))
                }
            }
        })
    });
    if let Some(r) = responder {
        router.on_unsupported_version(ApiKey::TxnOffsetCommit, r);
    }
    true
}

/// Every partition of the request answered with `code` (Kafka's
/// `TxnOffsetCommitRequest.getErrorResponse`).
pub fn txn_offset_commit_refused(
    req: &TxnOffsetCommitRequest,
    code: i16,
) -> TxnOffsetCommitResponse {
    let mut seen = BTreeSet::new();
    TxnOffsetCommitResponse {
        topics: req
            .topics
            .iter()
            .map(|t| tcr::TxnOffsetCommitResponseTopic {
                name: t.name.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .filter(|p| seen.insert((t.name.clone(), p.partition_index)))
                    .map(|p| tcr::TxnOffsetCommitResponsePartition {
                        partition_index: p.partition_index,
                        error_code: code,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_versions_pick_kafkas_operation() {
        assert_eq!(TxnOperation::for_produce(3), TxnOperation::DefaultError);
        assert_eq!(TxnOperation::for_produce(10), TxnOperation::DefaultError);
        assert_eq!(
            TxnOperation::for_produce(11),
            TxnOperation::GenericErrorSupported
        );
        assert_eq!(TxnOperation::for_produce(12), TxnOperation::AddPartition);
        assert_eq!(TxnOperation::for_produce(13), TxnOperation::AddPartition);
        assert_eq!(
            TxnOperation::for_txn_offset_commit(3),
            TxnOperation::DefaultError
        );
        assert_eq!(
            TxnOperation::for_txn_offset_commit(4),
            TxnOperation::GenericErrorSupported
        );
        assert_eq!(
            TxnOperation::for_txn_offset_commit(5),
            TxnOperation::AddPartition
        );
    }

    #[test]
    fn produce_errors_map_as_kafka() {
        let add = TxnOperation::AddPartition;
        let generic = TxnOperation::GenericErrorSupported;
        let default = TxnOperation::DefaultError;
        let nerr = errors::NOT_ENOUGH_REPLICAS;
        for code in [
            errors::NOT_COORDINATOR,
            errors::COORDINATOR_NOT_AVAILABLE,
            errors::COORDINATOR_LOAD_IN_PROGRESS,
            errors::NETWORK_EXCEPTION,
        ] {
            for op in [add, generic, default] {
                let (c, m) = produce_error(op, code);
                assert_eq!(c, nerr);
                assert!(m.unwrap().ends_with(ErrorCode::for_code(code).name()));
            }
        }
        // CONCURRENT_TRANSACTIONS reaches TV2 clients as is, older ones retry via NER.
        assert_eq!(
            produce_error(add, errors::CONCURRENT_TRANSACTIONS).0,
            errors::CONCURRENT_TRANSACTIONS
        );
        assert_eq!(
            produce_error(default, errors::CONCURRENT_TRANSACTIONS).0,
            nerr
        );
        assert_eq!(
            produce_error(generic, errors::CONCURRENT_TRANSACTIONS).0,
            nerr
        );
        // A fenced producer is an invalid epoch to the partition.
        assert_eq!(
            produce_error(add, errors::PRODUCER_FENCED),
            (errors::INVALID_PRODUCER_EPOCH, None)
        );
        // Not in the transaction.
        assert_eq!(
            produce_error(default, errors::INVALID_TXN_STATE),
            (
                errors::INVALID_TXN_STATE,
                Some("Partition was not added to the transaction".into())
            )
        );
        // TRANSACTION_ABORTABLE only for clients that know it.
        assert_eq!(
            produce_error(default, errors::TRANSACTION_ABORTABLE).0,
            errors::INVALID_TXN_STATE
        );
        assert_eq!(
            produce_error(generic, errors::TRANSACTION_ABORTABLE).0,
            errors::TRANSACTION_ABORTABLE
        );
        assert_eq!(
            produce_error(add, errors::CLUSTER_AUTHORIZATION_FAILED).0,
            errors::INVALID_TXN_STATE
        );
        // Anything else passes through.
        assert_eq!(produce_error(add, 49), (49, None));
    }

    #[test]
    fn txn_offset_commit_errors_map_as_the_group_coordinator() {
        let add = TxnOperation::AddPartition;
        assert_eq!(
            txn_offset_commit_error(add, errors::PRODUCER_FENCED),
            errors::INVALID_PRODUCER_EPOCH
        );
        assert_eq!(
            txn_offset_commit_error(add, errors::NOT_COORDINATOR),
            errors::NOT_COORDINATOR
        );
        assert_eq!(
            txn_offset_commit_error(add, errors::CONCURRENT_TRANSACTIONS),
            errors::CONCURRENT_TRANSACTIONS
        );
        assert_eq!(
            txn_offset_commit_error(add, errors::NOT_LEADER_OR_FOLLOWER),
            errors::NOT_COORDINATOR
        );
        assert_eq!(
            txn_offset_commit_error(TxnOperation::DefaultError, errors::INVALID_TXN_STATE),
            errors::INVALID_TXN_STATE
        );
    }

    #[test]
    fn only_transactional_batches_name_a_producer() {
        use kactor_protocol::records::BatchBuilder;
        let mut b = BatchBuilder::new(0);
        b.append(0, None, Some(b"v"), &[]).unwrap();
        let plain = b.build().unwrap();
        assert_eq!(transactional_producer(&plain), None);
        assert_eq!(transactional_producer(b"short"), None);
    }

    fn produce_of(partitions: Vec<Vec<bytes::Bytes>>) -> ProduceRequest {
        use kactor_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
        ProduceRequest {
            transactional_id: Some("tx".into()),
            acks: -1,
            topic_data: vec![TopicProduceData {
                name: "t".into(),
                partition_data: partitions
                    .into_iter()
                    .enumerate()
                    .map(|(i, batches)| PartitionProduceData {
                        index: i as i32,
                        records: Some(Records::Memory(batches.concat().into())),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn batch(pid: i64, epoch: i16, transactional: bool) -> bytes::Bytes {
        let mut b = kactor_protocol::records::BatchBuilder::new(0)
            .producer(pid, epoch, 0)
            .transactional(transactional);
        b.append(0, None, Some(b"v"), &[]).unwrap();
        b.build().unwrap()
    }

    #[test]
    fn transactional_batches_of_more_than_one_producer_are_refused() {
        let one = produce_of(vec![vec![batch(1, 0, true)], vec![batch(1, 0, true)]]);
        assert!(!mixes_transactional_producers(&one));
        // Another producer's idempotent batch does not count (Kafka looks at transactional
        // batches only).
        let idempotent = produce_of(vec![vec![batch(1, 0, true)], vec![batch(2, 0, false)]]);
        assert!(!mixes_transactional_producers(&idempotent));
        let two = produce_of(vec![vec![batch(1, 0, true)], vec![batch(2, 0, true)]]);
        assert!(mixes_transactional_producers(&two));
        // Same id, another epoch: Kafka collects (id, epoch) pairs.
        let epochs = produce_of(vec![vec![batch(1, 0, true)], vec![batch(1, 1, true)]]);
        assert!(mixes_transactional_producers(&epochs));
        // Every batch of a partition counts, not just the first.
        let within = produce_of(vec![vec![batch(1, 0, true), batch(2, 0, true)]]);
        assert!(mixes_transactional_producers(&within));

        let resp = produce_refused(
            8,
            &two,
            errors::INVALID_PRODUCER_ID_MAPPING,
            MORE_THAN_ONE_PRODUCER,
        );
        let ps = &resp.responses[0].partition_responses;
        assert_eq!(
            ps.iter()
                .map(|p| (p.index, p.error_code))
                .collect::<Vec<_>>(),
            vec![(0, 49), (1, 49)]
        );
        assert_eq!(
            ps[0].error_message.as_deref(),
            Some("Transactional records contained more than one producer ID")
        );
        assert_eq!(ps[0].base_offset, -1);
        // No ErrorMessage before v8.
        let v7 = produce_refused(7, &two, 49, MORE_THAN_ONE_PRODUCER);
        assert_eq!(v7.responses[0].partition_responses[0].error_message, None);
    }

    #[actix_rt::test]
    async fn transactional_produces_of_a_connection_dispatch_in_arrival_order() {
        let order = Arc::new(DispatchOrder::default());
        let mut first = order.enqueue(1);
        let mut second = order.enqueue(1);
        let mut other = order.enqueue(2);
        // Another connection does not wait.
        other.turn().await;
        first.turn().await;
        // The second waits until the first is dispatched.
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(50), second.turn());
        assert!(waiting.await.is_err());
        drop(first);
        second.turn().await;
        drop(second);
        drop(other);
        assert_eq!(
            order.waiting_connections(),
            0,
            "finished connections are forgotten"
        );
        // An abandoned request (dropped before dispatch) does not block the next one.
        let abandoned = order.enqueue(3);
        let mut next = order.enqueue(3);
        drop(abandoned);
        next.turn().await;
    }

    #[test]
    fn refused_partitions_go_back_in_request_order() {
        use kactor_protocol::messages::produce_response::TopicProduceResponse;
        let resp = ProduceResponse {
            responses: vec![TopicProduceResponse {
                name: "t".into(),
                partition_responses: vec![
                    PartitionProduceResponse {
                        index: 0,
                        base_offset: 5,
                        ..Default::default()
                    },
                    PartitionProduceResponse {
                        index: 2,
                        base_offset: 9,
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }],
            ..Default::default()
        };
        let refused = BTreeMap::from([(
            (0, 1),
            (
                errors::INVALID_TXN_STATE,
                Some("Partition was not added".into()),
            ),
        )]);
        let merged = merge_produce(7, resp, &[vec![0, 1, 2]], &refused);
        let ps = &merged.responses[0].partition_responses;
        assert_eq!(
            ps.iter()
                .map(|p| (p.index, p.error_code))
                .collect::<Vec<_>>(),
            vec![(0, 0), (1, errors::INVALID_TXN_STATE), (2, 0)]
        );
        // v7 has no ErrorMessage field.
        assert_eq!(ps[1].error_message, None);
        assert_eq!(ps[1].base_offset, -1);
    }
}
