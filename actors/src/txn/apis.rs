//! Request handlers of the transaction APIs (Kafka's `KafkaApis.handleInitProducerIdRequest`
//! and the `TransactionCoordinator.handleInitProducerId` branch for idempotent producers).
//! Transactional producers are not served yet: they get COORDINATOR_NOT_AVAILABLE (retriable).

use futures_util::future::join_all;
use kactor_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kactor_protocol::messages::{
    InitProducerIdRequest, InitProducerIdResponse, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use kactor_protocol::{ApiKey, RequestBody, ResponseBody};

use super::actor::{ProducerIdManagerActor, COORDINATOR_LOAD_IN_PROGRESS};
use super::messages::GenerateProducerId;
use crate::network::{HandlerOutcome, RequestContext, RequestRouter};
use crate::partition::messages::AppendTxnMarker;
use crate::partition::registry::PartitionTableReader;
use crate::producer::partition::TxnMarker;
use crate::runtime::MeteredAddr;

pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
pub const KAFKA_STORAGE_ERROR: i16 = 56;

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
pub fn register_write_txn_markers(router: &mut RequestRouter, partitions: PartitionTableReader) {
    router.register(ApiKey::WriteTxnMarkers, move |_ctx, body| {
        let partitions = partitions.clone();
        Box::pin(async move {
            let RequestBody::WriteTxnMarkers(req) = body else {
                return HandlerOutcome::Close("request body does not match its API key".into());
            };
            HandlerOutcome::Respond(ResponseBody::WriteTxnMarkers(
                handle_write_txn_markers(&partitions, req).await,
            ))
        })
    });
}

/// Appends each marker to each of its partitions (Kafka's `handleWriteTxnMarkersRequest`:
/// partitions this broker does not lead answer with their error, the rest are written).
pub async fn handle_write_txn_markers(
    partitions: &PartitionTableReader,
    req: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    let table = partitions.borrow().clone();
    let mut markers = Vec::with_capacity(req.markers.len());
    for m in req.markers {
        let marker = TxnMarker {
            producer_id: m.producer_id,
            producer_epoch: m.producer_epoch,
            commit: m.transaction_result,
            coordinator_epoch: m.coordinator_epoch,
        };
        let mut topics = Vec::with_capacity(m.topics.len());
        for t in m.topics {
            let sends = t.partition_indexes.iter().map(|&p| {
                let hosted = table.get(&t.name, p).map(|h| h.addr.clone());
                async move {
                    let code = match hosted {
                        None => UNKNOWN_TOPIC_OR_PARTITION,
                        Some(addr) => match addr.send(AppendTxnMarker { marker }).await {
                            Ok(Ok(_)) => 0,
                            Ok(Err(e)) => e.code(),
                            Err(_) => KAFKA_STORAGE_ERROR,
                        },
                    };
                    WritableTxnMarkerPartitionResult {
                        partition_index: p,
                        error_code: code,
                        ..Default::default()
                    }
                }
            });
            topics.push(WritableTxnMarkerTopicResult {
                name: t.name.clone(),
                partitions: join_all(sends).await,
                ..Default::default()
            });
        }
        markers.push(WritableTxnMarkerResult {
            producer_id: m.producer_id,
            topics,
            ..Default::default()
        });
    }
    WriteTxnMarkersResponse {
        markers,
        ..Default::default()
    }
}
