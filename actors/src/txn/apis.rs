//! Request handlers of the transaction APIs (Kafka's `KafkaApis.handleInitProducerIdRequest`
//! and the `TransactionCoordinator.handleInitProducerId` branch for idempotent producers).
//! Transactional producers are not served yet: they get COORDINATOR_NOT_AVAILABLE (retriable).

use kactor_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse};
use kactor_protocol::{ApiKey, RequestBody, ResponseBody};

use super::actor::{ProducerIdManagerActor, COORDINATOR_LOAD_IN_PROGRESS};
use super::messages::GenerateProducerId;
use crate::network::{HandlerOutcome, RequestContext, RequestRouter};
use crate::runtime::MeteredAddr;

pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;

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
