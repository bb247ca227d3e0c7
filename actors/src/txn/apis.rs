//! Request handlers of the transaction APIs (Kafka's `KafkaApis.handle{InitProducerId,
//! AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, WriteTxnMarkers, DescribeTransactions,
//! ListTransactions, DescribeProducers}Request`), routing transactional ids to the
//! `TransactionCoordinatorActor` shard of their `__transaction_state` partition, and the
//! on-demand creation of `__transaction_state` on FindCoordinator(TRANSACTION) (Kafka's
//! `AutoTopicCreationManager` for internal topics).

use std::collections::BTreeMap;

use futures_util::future::join_all;
use kactor_protocol::errors::*;
use kactor_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kactor_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kactor_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kactor_protocol::messages::{
    describe_producers_response, describe_transactions_response, list_transactions_response,
    DescribeProducersRequest, DescribeProducersResponse,
};
use kactor_protocol::messages::{
    AddOffsetsToTxnResponse, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
    DescribeTransactionsRequest, DescribeTransactionsResponse, EndTxnResponse,
    InitProducerIdRequest, InitProducerIdResponse, ListTransactionsRequest,
    ListTransactionsResponse, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use kactor_protocol::{ApiKey, RequestBody, ResponseBody};

use super::actor::ProducerIdManagerActor;
use super::coordinator::GetTransactions;
use super::coordinator::{
    AddTxnPartitions, EndTransaction, InitTxnProducer, LeaderAddTxnPartitions,
    TransactionCoordinatorActor, VerifyTxnPartitions,
};
use super::core::{TxnMetadata, TxnPartition, TxnState};
use super::markers::LocalMarkers;
use super::messages::GenerateProducerId;
use crate::group::core::hashing::coordinator_partition;
use crate::group::core::INTERNAL_TOPICS;
use crate::network::{HandlerOutcome, RequestContext, RequestRouter};
use crate::partition::messages::DescribeProducerState;
use crate::partition::registry::{PartitionTable, PartitionTableReader};
use crate::producer::partition::TxnMarker;
use crate::runtime::{MeteredAddr, MeteredRecipient};

/// The transaction coordinator's topic.
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

#[derive(Clone)]
pub struct TxnApis {
    pub producer_ids: MeteredAddr<ProducerIdManagerActor>,
}

/// Registers InitProducerId on `router` (also list it in `kactor_protocol::versions::IMPLEMENTED`).
pub fn register(router: &mut RequestRouter, apis: TxnApis) {
    router.register(ApiKey::InitProducerId, move |ctx, body| {
        let a = apis.clone();
        Box::pin(async move {
            let RequestBody::InitProducerId(req) = body else {
                return HandlerOutcome::Close("request body does not match its API key".into());
            };
            HandlerOutcome::Respond(ResponseBody::InitProducerId(
                handle_init_producer_id(&a, &ctx, req).await,
            ))
        })
    });
}

fn response(error_code: i16, producer_id: i64, producer_epoch: i16) -> InitProducerIdResponse {
    InitProducerIdResponse {
        error_code,
        producer_id,
        producer_epoch,
        ongoing_txn_producer_id: -1,
        ongoing_txn_producer_epoch: -1,
        ..Default::default()
    }
}

pub async fn handle_init_producer_id(
    a: &TxnApis,
    _ctx: &RequestContext,
    req: InitProducerIdRequest,
) -> InitProducerIdResponse {
    if req.transactional_id.is_some() {
        return response(COORDINATOR_NOT_AVAILABLE, -1, -1);
    }
    // An idempotent producer always gets a fresh id at epoch 0; a held id/epoch it sends (v3+)
    // only matters for transactional ids.
    match a.producer_ids.send(GenerateProducerId).await {
        Ok(Ok(id)) => response(0, id, 0),
        Ok(Err(code)) => response(code, -1, -1),
        Err(_) => response(COORDINATOR_LOAD_IN_PROGRESS, -1, -1),
    }
}

/// Registers WriteTxnMarkers (sent by transaction coordinators, and by `kafka-transactions
/// abort`; also list it in `kactor_protocol::versions::IMPLEMENTED`).
pub fn register_write_txn_markers(router: &mut RequestRouter, markers: LocalMarkers) {
    router.register(ApiKey::WriteTxnMarkers, move |_ctx, body| {
        let markers = markers.clone();
        Box::pin(async move {
            let RequestBody::WriteTxnMarkers(req) = body else {
                return HandlerOutcome::Close("request body does not match its API key".into());
            };
            HandlerOutcome::Respond(ResponseBody::WriteTxnMarkers(
                handle_write_txn_markers(&markers, req).await,
            ))
        })
    });
}

/// Appends each marker to each of its partitions and answers once they are replicated
/// (Kafka's `handleWriteTxnMarkersRequest`: partitions this broker does not lead answer
/// with their error, the rest are written with acks=all).
pub async fn handle_write_txn_markers(
    markers: &LocalMarkers,
    req: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    let written = req.markers.into_iter().map(|m| async move {
        let marker = TxnMarker {
            producer_id: m.producer_id,
            producer_epoch: m.producer_epoch,
            commit: m.transaction_result,
            coordinator_epoch: m.coordinator_epoch,
        };
        let partitions: Vec<TxnPartition> = m
            .topics
            .iter()
            .flat_map(|t| t.partition_indexes.iter().map(|&p| (t.name.clone(), p)))
            .collect();
        let mut codes = markers.write(marker, &partitions).await.into_iter();
        let topics = m
            .topics
            .into_iter()
            .map(|t| WritableTxnMarkerTopicResult {
                partitions: t
                    .partition_indexes
                    .iter()
                    .map(|&p| WritableTxnMarkerPartitionResult {
                        partition_index: p,
                        error_code: codes.next().unwrap_or(KAFKA_STORAGE_ERROR),
                        ..Default::default()
                    })
                    .collect(),
                name: t.name,
                ..Default::default()
            })
            .collect();
        WritableTxnMarkerResult {
            producer_id: m.producer_id,
            topics,
            ..Default::default()
        }
    });
    WriteTxnMarkersResponse {
        markers: join_all(written).await,
        ..Default::default()
    }
}

/// The coordinator partition of a transactional id or group: the group coordinator's
/// [`coordinator_partition`] (Kafka's `Utils.abs(key.hashCode) % numPartitions`), so markers
/// for a group's offsets land on the partition whose shard holds them.
pub fn partition_for(key: &str, num_partitions: i32) -> i32 {
    coordinator_partition(key, num_partitions.max(1))
}

/// The shards this broker runs, by `__transaction_state` partition (published by whoever starts
/// and stops them as leadership moves).
pub type TxnShards = tokio::sync::watch::Receiver<
    std::sync::Arc<BTreeMap<i32, MeteredAddr<TransactionCoordinatorActor>>>,
>;

/// What the transactional API handlers capture.
#[derive(Clone)]
pub struct TxnCoordinatorApis {
    pub producer_ids: MeteredAddr<ProducerIdManagerActor>,
    pub shards: TxnShards,
    /// `transaction.state.log.num.partitions`
    pub num_partitions: i32,
    /// `offsets.topic.num.partitions` (AddOffsetsToTxn enrolls the group's partition).
    pub offsets_partitions: i32,
    /// Which partitions exist (AddPartitionsToTxn refuses the others).
    pub partitions: PartitionTableReader,
}

impl TxnCoordinatorApis {
    /// The local shard of `transactional_id`'s `__transaction_state` partition, if led here.
    pub fn shard(
        &self,
        transactional_id: &str,
    ) -> Option<MeteredAddr<TransactionCoordinatorActor>> {
        let p = partition_for(transactional_id, self.num_partitions);
        self.shards.borrow().get(&p).cloned()
    }
}

/// Registers InitProducerId (both forms; replaces [`register`]'s), AddPartitionsToTxn,
/// AddOffsetsToTxn and EndTxn (list them in `kactor_protocol::versions::IMPLEMENTED` too).
pub fn register_coordinator(router: &mut RequestRouter, apis: TxnCoordinatorApis) {
    let a = apis.clone();
    router.register(ApiKey::InitProducerId, move |ctx, body| {
        let a = a.clone();
        Box::pin(async move {
            let RequestBody::InitProducerId(req) = body else {
                return wrong_body();
            };
            HandlerOutcome::Respond(ResponseBody::InitProducerId(
                init_producer_id(&a, &ctx, req).await,
            ))
        })
    });
    let a = apis.clone();
    router.register(ApiKey::AddPartitionsToTxn, move |ctx, body| {
        let a = a.clone();
        Box::pin(async move {
            let RequestBody::AddPartitionsToTxn(req) = body else {
                return wrong_body();
            };
            HandlerOutcome::Respond(ResponseBody::AddPartitionsToTxn(
                handle_add_partitions(&a, ctx.api_version, req).await,
            ))
        })
    });
    let a = apis.clone();
    router.register(ApiKey::AddOffsetsToTxn, move |ctx, body| {
        let a = a.clone();
        let version = ctx.api_version;
        Box::pin(async move {
            let RequestBody::AddOffsetsToTxn(req) = body else {
                return wrong_body();
            };
            let tp = (
                "__consumer_offsets".to_string(),
                partition_for(&req.group_id, a.offsets_partitions),
            );
            let code = add(
                &a,
                &req.transactional_id,
                req.producer_id,
                req.producer_epoch,
                vec![tp],
                false,
            )
            .await;
            HandlerOutcome::Respond(ResponseBody::AddOffsetsToTxn(AddOffsetsToTxnResponse {
                error_code: fenced_for_version(code, version),
                ..Default::default()
            }))
        })
    });
    router.register(ApiKey::EndTxn, move |ctx, body| {
        let a = apis.clone();
        Box::pin(async move {
            let RequestBody::EndTxn(req) = body else {
                return wrong_body();
            };
            let result = match a.shard(&req.transactional_id) {
                None => Err(NOT_COORDINATOR),
                Some(shard) => shard
                    .send(EndTransaction {
                        transactional_id: req.transactional_id.clone(),
                        producer_id: req.producer_id,
                        producer_epoch: req.producer_epoch,
                        commit: req.committed,
                        // KIP-890: EndTxn v5+ is only sent by TV2 clients (Kafka's
                        // `TransactionVersion.transactionVersionForEndTxn`).
                        client_transaction_version: if ctx.api_version >= 5 { 2 } else { 0 },
                    })
                    .await
                    .unwrap_or(Err(NOT_COORDINATOR)),
            };
            let result = result.map_err(|code| fenced_for_version(code, ctx.api_version));
            HandlerOutcome::Respond(ResponseBody::EndTxn(end_txn_response(result)))
        })
    });
}

/// InitProducerId once a coordinator serves it (Kafka's `handleInitProducerIdRequest`): a v3+
/// client names the producer it already holds with both fields or neither; the transactional
/// form goes to the id's shard. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v4 (KIP-588).
async fn init_producer_id(
    a: &TxnCoordinatorApis,
    ctx: &RequestContext,
    req: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let expected = match (req.producer_id, req.producer_epoch) {
        (-1, -1) => None,
        (-1, _) | (_, -1) => return response(INVALID_REQUEST, -1, -1),
        held => Some(held),
    };
    let Some(id) = req.transactional_id.clone() else {
        let idem = TxnApis {
            producer_ids: a.producer_ids.clone(),
        };
        return handle_init_producer_id(&idem, ctx, req).await;
    };
    let Some(shard) = a.shard(&id) else {
        return response(NOT_COORDINATOR, -1, -1);
    };
    let init = InitTxnProducer {
        transactional_id: id,
        txn_timeout_ms: req.transaction_timeout_ms,
        expected,
    };
    match shard.send(init).await {
        Ok(Ok(r)) => response(r.error, r.producer_id, r.producer_epoch),
        Ok(Err(code)) if ctx.api_version < 4 && code == PRODUCER_FENCED => {
            response(INVALID_PRODUCER_EPOCH, -1, -1)
        }
        Ok(Err(code)) => response(code, -1, -1),
        Err(_) => response(NOT_COORDINATOR, -1, -1),
    }
}

/// PRODUCER_FENCED (KIP-588) as a client of EndTxn, AddPartitionsToTxn or AddOffsetsToTxn
/// below v2 knows it: those versions predate the code, and their clients (kafkajs, older Java
/// ones) treat INVALID_PRODUCER_EPOCH as the fence; an unknown code would be a generic error
/// to them. Kafka answers the same way.
fn fenced_for_version(code: i16, version: i16) -> i16 {
    if version < 2 && code == PRODUCER_FENCED {
        INVALID_PRODUCER_EPOCH
    } else {
        code
    }
}

/// EndTxn's answer: v5+ carries the producer id and epoch the client continues with (the
/// same ones unless a KIP-890 end bumped the epoch; -1/-1 on error, as Kafka answers). Older
/// versions do not encode those fields.
pub fn end_txn_response(result: Result<(i64, i16), i16>) -> EndTxnResponse {
    let (error_code, producer_id, producer_epoch) = match result {
        Ok((id, epoch)) => (0, id, epoch),
        Err(code) => (code, -1, -1),
    };
    EndTxnResponse {
        error_code,
        producer_id,
        producer_epoch,
        ..Default::default()
    }
}

fn wrong_body() -> HandlerOutcome {
    HandlerOutcome::Close("request body does not match its API key".into())
}

async fn add(
    a: &TxnCoordinatorApis,
    transactional_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    partitions: Vec<TxnPartition>,
    from_leader: bool,
) -> i16 {
    let Some(shard) = a.shard(transactional_id) else {
        return NOT_COORDINATOR;
    };
    let add = AddTxnPartitions {
        transactional_id: transactional_id.to_string(),
        producer_id,
        producer_epoch,
        partitions,
    };
    // v4+ comes from a partition leader adding on a transaction version 2 producer's behalf
    // (KIP-890): it waits out a write of the id in flight, as the local leader path does.
    let answer = if from_leader {
        shard.send(LeaderAddTxnPartitions(add)).await
    } else {
        shard.send(add).await
    };
    match answer {
        Ok(Ok(())) => 0,
        Ok(Err(code)) => code,
        Err(_) => NOT_COORDINATOR,
    }
}

/// One result per partition of `topics`, with the code `code_for(topic, partition)` gives.
pub(crate) fn topic_results(
    topics: &[AddPartitionsToTxnTopic],
    code_for: impl Fn(&str, i32) -> i16,
) -> Vec<AddPartitionsToTxnTopicResult> {
    topics
        .iter()
        .map(|t| AddPartitionsToTxnTopicResult {
            name: t.name.clone(),
            results_by_partition: t
                .partitions
                .iter()
                .map(|&p| AddPartitionsToTxnPartitionResult {
                    partition_index: p,
                    partition_error_code: code_for(&t.name, p),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
        .collect()
}

fn flatten(topics: &[AddPartitionsToTxnTopic]) -> Vec<TxnPartition> {
    topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.name.clone(), *p)))
        .collect()
}

/// Kafka's checks of an AddPartitionsToTxn transaction before its coordinator sees it: every
/// partition must exist, and a client (v0–3) may not name an internal topic (Kafka's
/// authorization leaves those out). Any failure fails the whole transaction: the failing
/// partitions answer their error, the others OPERATION_NOT_ATTEMPTED. None: nothing failed.
fn refused_partitions(
    table: &PartitionTable,
    version: i16,
    partitions: &[TxnPartition],
) -> Option<BTreeMap<TxnPartition, i16>> {
    let codes: BTreeMap<TxnPartition, i16> = partitions
        .iter()
        .map(|(topic, p)| {
            let code = if version < 4 && INTERNAL_TOPICS.contains(&topic.as_str()) {
                TOPIC_AUTHORIZATION_FAILED
            } else if !table.partition_exists(topic, *p) {
                UNKNOWN_TOPIC_OR_PARTITION
            } else {
                OPERATION_NOT_ATTEMPTED
            };
            ((topic.clone(), *p), code)
        })
        .collect();
    codes
        .values()
        .any(|c| *c != OPERATION_NOT_ATTEMPTED)
        .then_some(codes)
}

/// One transaction of an AddPartitionsToTxn request: its per-partition results.
async fn add_partitions_of(
    a: &TxnCoordinatorApis,
    version: i16,
    transactional_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    verify_only: bool,
    topics: &[AddPartitionsToTxnTopic],
) -> Vec<AddPartitionsToTxnTopicResult> {
    let partitions = flatten(topics);
    let table = a.partitions.borrow().clone();
    if let Some(refused) = refused_partitions(&table, version, &partitions) {
        return topic_results(topics, |n, p| refused[&(n.to_string(), p)]);
    }
    if !verify_only {
        let code = add(
            a,
            transactional_id,
            producer_id,
            producer_epoch,
            partitions,
            version >= 4,
        )
        .await;
        let code = fenced_for_version(code, version);
        return topic_results(topics, |_, _| code);
    }
    let verified = match a.shard(transactional_id) {
        None => Err(NOT_COORDINATOR),
        Some(shard) => shard
            .send(VerifyTxnPartitions {
                transactional_id: transactional_id.to_string(),
                producer_id,
                producer_epoch,
                partitions,
            })
            .await
            .unwrap_or(Err(NOT_COORDINATOR)),
    };
    match verified {
        Ok(v) => {
            let codes: BTreeMap<TxnPartition, i16> = v.into_iter().collect();
            topic_results(topics, |n, p| {
                codes.get(&(n.to_string(), p)).copied().unwrap_or(0)
            })
        }
        Err(code) => topic_results(topics, |_, _| code),
    }
}

/// AddPartitionsToTxn: v0–3 one transaction from a client; v4+ a batch, possibly verify-only,
/// from brokers (Kafka's `handleAddPartitionsToTxnRequest`). A coordinator error applies to
/// every partition of its transaction.
pub async fn handle_add_partitions(
    a: &TxnCoordinatorApis,
    version: i16,
    req: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    if version < 4 {
        let results = add_partitions_of(
            a,
            version,
            &req.v3_and_below_transactional_id,
            req.v3_and_below_producer_id,
            req.v3_and_below_producer_epoch,
            false,
            &req.v3_and_below_topics,
        )
        .await;
        return AddPartitionsToTxnResponse {
            results_by_topic_v3_and_below: results,
            ..Default::default()
        };
    }
    let mut results = Vec::with_capacity(req.transactions.len());
    for t in &req.transactions {
        let topic_results = add_partitions_of(
            a,
            version,
            &t.transactional_id,
            t.producer_id,
            t.producer_epoch,
            t.verify_only,
            &t.topics,
        )
        .await;
        results.push(AddPartitionsToTxnResult {
            transactional_id: t.transactional_id.clone(),
            topic_results,
            ..Default::default()
        });
    }
    AddPartitionsToTxnResponse {
        results_by_transaction: results,
        ..Default::default()
    }
}

fn wire_state(m: &TxnMetadata) -> describe_transactions_response::TransactionState {
    describe_transactions_response::TransactionState {
        error_code: 0,
        transactional_id: m.transactional_id.clone(),
        transaction_state: m.state.name().to_string(),
        transaction_timeout_ms: m.txn_timeout_ms,
        transaction_start_time_ms: m.txn_start_timestamp_ms,
        producer_id: m.producer_id,
        producer_epoch: m.producer_epoch,
        topics: super::core::by_topic(&m.partitions)
            .into_iter()
            .map(|(t, ps)| describe_transactions_response::TopicData {
                topic: t.to_string(),
                partitions: ps,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// DescribeTransactions (Kafka's `handleDescribeTransactionsRequest`).
pub async fn handle_describe_transactions(
    a: &TxnCoordinatorApis,
    req: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let mut states = Vec::with_capacity(req.transactional_ids.len());
    for id in req.transactional_ids {
        // An error leaves every other field at its default, as Kafka answers.
        let failed = |code| describe_transactions_response::TransactionState {
            error_code: code,
            transactional_id: id.clone(),
            ..Default::default()
        };
        let state = match a.shard(&id) {
            _ if id.is_empty() => failed(INVALID_REQUEST),
            None => failed(NOT_COORDINATOR),
            Some(shard) => match shard.send(GetTransactions).await {
                Ok(Ok(all)) => match all.iter().find(|m| m.transactional_id == id) {
                    // A Dead id is being expired: already gone for Kafka.
                    Some(m) if m.state != TxnState::Dead => wire_state(m),
                    _ => failed(TRANSACTIONAL_ID_NOT_FOUND),
                },
                Ok(Err(code)) => failed(code),
                Err(_) => failed(NOT_COORDINATOR),
            },
        };
        states.push(state);
    }
    DescribeTransactionsResponse {
        transaction_states: states,
        ..Default::default()
    }
}

/// ListTransactions over every shard this broker runs (Kafka's `handleListTransactionsRequest`):
/// state, producer id and duration filters; unknown state names are echoed back.
pub async fn handle_list_transactions(
    a: &TxnCoordinatorApis,
    req: ListTransactionsRequest,
) -> ListTransactionsResponse {
    let known: Vec<String> = req
        .state_filters
        .iter()
        .filter(|s| (0..8).any(|i| TxnState::from_id(i).is_some_and(|st| st.name() == *s)))
        .cloned()
        .collect();
    let unknown: Vec<String> = req
        .state_filters
        .iter()
        .filter(|s| !known.contains(s))
        .cloned()
        .collect();
    // v2 (KIP-1152): only ids the whole of which match the pattern (Java's `Matcher.matches`);
    // null or empty lists every id.
    let pattern = match req.transactional_id_pattern.as_deref() {
        None | Some("") => None,
        Some(p) => match crate::group::core::regex::TopicRegex::new(p) {
            Ok(r) => Some(r),
            Err(_) => {
                return ListTransactionsResponse {
                    error_code: INVALID_REGULAR_EXPRESSION,
                    unknown_state_filters: unknown,
                    ..Default::default()
                }
            }
        },
    };
    let shards: Vec<_> = a.shards.borrow().values().cloned().collect();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    let mut out = Vec::new();
    let mut error_code = 0;
    for shard in shards {
        match shard.send(GetTransactions).await {
            Ok(Ok(all)) => {
                let mut core = super::core::TxnCoordinatorCore::default();
                for m in all {
                    let id = m.transactional_id.clone();
                    core.replay(&id, Some(m));
                }
                // Only unknown filters: nothing can match (Kafka lists none).
                if !unknown.is_empty() && known.is_empty() {
                    continue;
                }
                for m in core.list(&known, &req.producer_id_filters, req.duration_filter, now) {
                    if pattern
                        .as_ref()
                        .is_some_and(|r| !r.full_match(&m.transactional_id))
                    {
                        continue;
                    }
                    out.push(list_transactions_response::TransactionState {
                        transactional_id: m.transactional_id.clone(),
                        producer_id: m.producer_id,
                        transaction_state: m.state.name().to_string(),
                        ..Default::default()
                    });
                }
            }
            Ok(Err(code)) => error_code = code,
            Err(_) => error_code = NOT_COORDINATOR,
        }
    }
    ListTransactionsResponse {
        error_code,
        unknown_state_filters: unknown,
        transaction_states: out,
        ..Default::default()
    }
}

/// Registers DescribeTransactions and ListTransactions.
pub fn register_admin(router: &mut RequestRouter, apis: TxnCoordinatorApis) {
    let a = apis.clone();
    router.register(ApiKey::DescribeTransactions, move |_ctx, body| {
        let a = a.clone();
        Box::pin(async move {
            let RequestBody::DescribeTransactions(req) = body else {
                return wrong_body();
            };
            HandlerOutcome::Respond(ResponseBody::DescribeTransactions(
                handle_describe_transactions(&a, req).await,
            ))
        })
    });
    router.register(ApiKey::ListTransactions, move |_ctx, body| {
        let a = apis.clone();
        Box::pin(async move {
            let RequestBody::ListTransactions(req) = body else {
                return wrong_body();
            };
            HandlerOutcome::Respond(ResponseBody::ListTransactions(
                handle_list_transactions(&a, req).await,
            ))
        })
    });
}

/// DescribeProducers (Kafka's `handleDescribeProducersRequest`, KIP-664): the producer-state
/// entries of each requested partition this broker leads.
pub async fn handle_describe_producers(
    partitions: &PartitionTableReader,
    req: DescribeProducersRequest,
) -> DescribeProducersResponse {
    use describe_producers_response::{PartitionResponse, ProducerState, TopicResponse};
    let table = partitions.borrow().clone();
    let mut topics = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        // Kafka checks the topic first: an illegal name, then one the metadata does not know,
        // each with its message on every partition; a known topic's partition this broker does
        // not host gets a bare error code.
        let known = table
            .image
            .as_ref()
            .is_none_or(|i| i.topics.get_by_name(&t.name).is_some());
        let topic_error = match crate::controller::core::validate_topic_name(&t.name) {
            Err(e) => Some((e.code, e.message)),
            Ok(()) if !known => Some((
                UNKNOWN_TOPIC_OR_PARTITION,
                Some("This server does not host this topic-partition.".to_string()),
            )),
            Ok(()) => None,
        };
        let mut out = Vec::with_capacity(t.partition_indexes.len());
        for p in t.partition_indexes {
            let mut r = PartitionResponse {
                partition_index: p,
                ..Default::default()
            };
            if let Some((code, message)) = &topic_error {
                r.error_code = *code;
                r.error_message = message.clone();
                out.push(r);
                continue;
            }
            match table.get(&t.name, p).map(|h| h.addr.clone()) {
                None => r.error_code = UNKNOWN_TOPIC_OR_PARTITION,
                Some(addr) => match addr.send(DescribeProducerState).await {
                    Ok(Ok(entries)) => {
                        r.active_producers = entries
                            .iter()
                            .map(|e| ProducerState {
                                producer_id: e.producer_id,
                                producer_epoch: e.producer_epoch as i32,
                                last_sequence: e.last_seq(),
                                last_timestamp: e.last_timestamp,
                                coordinator_epoch: e.coordinator_epoch,
                                current_txn_start_offset: e.current_txn_first_offset.unwrap_or(-1),
                                ..Default::default()
                            })
                            .collect();
                    }
                    Ok(Err(e)) => r.error_code = e.code(),
                    Err(_) => r.error_code = NOT_LEADER_OR_FOLLOWER,
                },
            }
            out.push(r);
        }
        topics.push(TopicResponse {
            name: t.name,
            partitions: out,
            ..Default::default()
        });
    }
    DescribeProducersResponse {
        topics,
        ..Default::default()
    }
}

/// Registers DescribeProducers.
pub fn register_describe_producers(router: &mut RequestRouter, partitions: PartitionTableReader) {
    router.register(ApiKey::DescribeProducers, move |_ctx, body| {
        let partitions = partitions.clone();
        Box::pin(async move {
            let RequestBody::DescribeProducers(req) = body else {
                return wrong_body();
            };
            HandlerOutcome::Respond(ResponseBody::DescribeProducers(
                handle_describe_producers(&partitions, req).await,
            ))
        })
    });
}

/// How to create `__transaction_state` through the controller.
#[derive(Clone)]
pub struct TxnStateTopicCreator {
    pub controller: MeteredRecipient<crate::controller::messages::CreateTopics>,
    /// `transaction.state.log.num.partitions`
    pub num_partitions: i32,
    /// `transaction.state.log.replication.factor`
    pub replication_factor: i16,
    /// `transaction.state.log.min.isr`
    pub min_isr: i32,
    /// `transaction.state.log.segment.bytes`
    pub segment_bytes: i64,
}

impl TxnStateTopicCreator {
    /// Reads Kafka's property names (`transaction.state.log.*`); absent or unparsable values
    /// keep Kafka's defaults except the replication factor and min ISR, whose kactor defaults
    /// are 1 (a single node must be able to create it).
    pub fn from_properties(
        controller: MeteredRecipient<crate::controller::messages::CreateTopics>,
        props: &BTreeMap<String, String>,
    ) -> Self {
        let get = |key: &str| props.get(key).and_then(|v| v.trim().parse::<i64>().ok());
        TxnStateTopicCreator {
            controller,
            num_partitions: get("transaction.state.log.num.partitions").unwrap_or(50) as i32,
            replication_factor: get("transaction.state.log.replication.factor").unwrap_or(1) as i16,
            min_isr: get("transaction.state.log.min.isr").unwrap_or(1) as i32,
            segment_bytes: get("transaction.state.log.segment.bytes").unwrap_or(104_857_600),
        }
    }
}

/// `__transaction_state` as Kafka creates it (`TransactionStateManager.transactionTopicConfigs`):
/// compacted, uncompressed, no unclean leader election, its own min ISR and segment size.
pub fn transaction_state_topic_creation(
    creator: &TxnStateTopicCreator,
) -> crate::controller::core::requests::CreatableTopic {
    crate::controller::core::requests::CreatableTopic {
        name: TRANSACTION_STATE_TOPIC.to_string(),
        num_partitions: creator.num_partitions,
        replication_factor: creator.replication_factor,
        assignments: Vec::new(),
        configs: vec![
            ("cleanup.policy".to_string(), Some("compact".to_string())),
            (
                "compression.type".to_string(),
                Some("uncompressed".to_string()),
            ),
            (
                "unclean.leader.election.enable".to_string(),
                Some("false".to_string()),
            ),
            (
                "min.insync.replicas".to_string(),
                Some(creator.min_isr.to_string()),
            ),
            (
                "segment.bytes".to_string(),
                Some(creator.segment_bytes.to_string()),
            ),
        ],
    }
}

/// Whether a FindCoordinator request asks for transaction coordinators (key type 1, v1+).
fn wants_transaction_coordinator(version: i16, body: &RequestBody) -> bool {
    matches!(body, RequestBody::FindCoordinator(r) if version >= 1 && r.key_type == 1)
}

/// Wraps the FindCoordinator handler already registered (the group APIs' one, which answers
/// both key types) so that a TRANSACTION lookup first creates `__transaction_state` when the
/// cluster has none, as Kafka does: the lookup itself answers COORDINATOR_NOT_AVAILABLE until
/// the topic has a leader and the client retries. Call after `group::apis::register`; returns
/// false (and changes nothing) when no FindCoordinator handler is registered.
pub fn wrap_find_coordinator(
    router: &mut RequestRouter,
    partitions: PartitionTableReader,
    creator: TxnStateTopicCreator,
) -> bool {
    let Some(inner) = router.route(ApiKey::FindCoordinator).cloned() else {
        return false;
    };
    let responder = inner.on_unsupported_version;
    let inner = inner.handler;
    router.register(ApiKey::FindCoordinator, move |ctx, body| {
        if wants_transaction_coordinator(ctx.api_version, &body) {
            let missing = partitions
                .borrow()
                .image
                .as_ref()
                .is_some_and(|i| i.topics.get_by_name(TRANSACTION_STATE_TOPIC).is_none());
            if missing {
                // A concurrent creation fails harmlessly with TOPIC_ALREADY_EXISTS.
                let topic = transaction_state_topic_creation(&creator);
                let controller = creator.controller.clone();
                actix::spawn(async move {
                    let _ = controller
                        .send(crate::controller::messages::CreateTopics {
                            topics: vec![topic],
                            validate_only: false,
                        })
                        .await;
                });
            }
        }
        inner(ctx, body)
    });
    if let Some(r) = responder {
        router.on_unsupported_version(ApiKey::FindCoordinator, r);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_for_matches_kafkas_utils_abs() {
        assert_eq!(partition_for("hello", 50), 22);
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        // "txn-abc".hashCode() = -885233025: Utils.abs gives 25, where `& 0x7fffffff` (the
        // partitioner's toPositive) would give 23, a different coordinator.
        assert_eq!(partition_for("txn-abc", 50), 25);
    }
}
