//! Transaction-coordinator test helpers: a controller stand-in that only hands out producer-id
//! blocks (the coordinator's one call to the controller), and a metadata image in which broker 1
//! is registered, which the producer-id manager waits for before asking.
#![allow(dead_code)]

use std::sync::Arc;

use actix::prelude::*;
use kactor_actors::controller::core::errors::ApiError;
use kactor_actors::controller::core::requests::AllocateProducerIdsReply;
use kactor_actors::controller::messages::{AllocateProducerIds, Committed, ControllerReply};
use kactor_actors::metadata::core::{BrokerRegistration, MetadataImage};
use kactor_protocol::Uuid;

/// Hands out blocks of 1000 producer ids, starting at its value.
pub struct FakeController(pub i64);

impl Actor for FakeController {
    type Context = Context<Self>;
}

impl kactor_actors::runtime::SupervisedActor for FakeController {
    const MAILBOX_CAPACITY: usize = 64;
}

kactor_actors::supervised_mailbox!(FakeController);

impl Handler<AllocateProducerIds> for FakeController {
    type Result = MessageResult<AllocateProducerIds>;
    fn handle(&mut self, _: AllocateProducerIds, _: &mut Context<Self>) -> Self::Result {
        let start = self.0;
        self.0 += 1000;
        let r: ControllerReply<AllocateProducerIdsReply> = Ok(Committed {
            response: AllocateProducerIdsReply {
                error: ApiError::NONE,
                producer_id_start: start,
                producer_id_len: 1000,
            },
            offset: 0,
        });
        MessageResult(r)
    }
}

/// An image in which broker 1 is registered (unfenced) at `broker_epoch`.
pub fn image_with_broker(broker_epoch: i64) -> Arc<MetadataImage> {
    let mut image = MetadataImage::default();
    image.brokers.insert(
        1,
        BrokerRegistration {
            id: 1,
            epoch: broker_epoch,
            incarnation_id: Uuid([1; 16]),
            listeners: vec![],
            supported_features: vec![],
            rack: None,
            fenced: false,
            in_controlled_shutdown: false,
            log_dirs: vec![],
        },
    );
    Arc::new(image)
}

/// The partition leader's KIP-890 steps before a transactional append (what
/// `txn::leader_verify` does around the coordinator's answer): start the producer's
/// verification on the partition, then confirm its guard. Returns the guard.
pub async fn verify_txn(
    addr: &kactor_actors::runtime::MeteredAddr<kactor_actors::partition::PartitionActor>,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
) -> kactor_actors::producer::VerificationGuard {
    use kactor_actors::partition::messages::{ConfirmTxnVerification, StartTxnVerification};
    let guard = addr
        .send(StartTxnVerification {
            producer_id,
            producer_epoch,
            base_sequence,
            supports_epoch_bump: false,
        })
        .await
        .unwrap()
        .unwrap();
    addr.send(ConfirmTxnVerification { producer_id, guard })
        .await
        .unwrap()
        .unwrap();
    guard
}
