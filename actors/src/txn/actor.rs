//! `ProducerIdManagerActor` (Kafka's `RPCProducerIdManager` thread): hands out producer ids from
//! controller-allocated blocks (see [`super::producer_ids`]), asking the QuorumController for
//! the next block off the request path.

use actix::prelude::*;
use kactor_protocol::errors::COORDINATOR_LOAD_IN_PROGRESS;
use tokio::sync::oneshot;

use super::messages::GenerateProducerId;
use super::producer_ids::{
    ProducerIdBlock, ProducerIdManager, ProducerIdUnavailable, RequestBlock,
};
use crate::controller::core::requests::AllocateProducerIdsReply;
use crate::controller::messages::{AllocateProducerIds, ControllerReply};
use crate::metadata::actor::MetadataImageWatch;
use crate::runtime::{ActorMetrics, MeteredRecipient, SupervisedActor};

/// Callers that may wait for a block at once; more get a retriable error.
const MAX_WAITERS: usize = 10_000;

/// A caller waiting for a producer id. While no id can be handed out it gets
/// COORDINATOR_LOAD_IN_PROGRESS, as Kafka answers while its block request is in flight:
/// clients retry it.
type Waiter = oneshot::Sender<Result<i64, i16>>;

pub struct ProducerIdManagerActor {
    node_id: i32,
    controller: MeteredRecipient<AllocateProducerIds>,
    image: MetadataImageWatch,
    core: ProducerIdManager<Waiter>,
    metrics: ActorMetrics,
}

impl ProducerIdManagerActor {
    pub fn new(
        node_id: i32,
        controller: MeteredRecipient<AllocateProducerIds>,
        image: MetadataImageWatch,
    ) -> Self {
        ProducerIdManagerActor {
            node_id,
            controller,
            image,
            core: ProducerIdManager::new(MAX_WAITERS),
            metrics: ActorMetrics::new("ProducerIdManagerActor"),
        }
    }

    fn request_block(&mut self, ctx: &mut Context<Self>) {
        let epoch = self
            .image
            .borrow()
            .brokers
            .get(&self.node_id)
            .map(|b| b.epoch);
        let Some(broker_epoch) = epoch else {
            // Not registered yet: the controller would refuse; let callers retry.
            self.fail_waiters(COORDINATOR_LOAD_IN_PROGRESS);
            return;
        };
        let send = self.controller.send(AllocateProducerIds {
            broker_id: self.node_id,
            broker_epoch,
        });
        ctx.spawn(send.into_actor(self).map(
            |res: Result<ControllerReply<AllocateProducerIdsReply>, MailboxError>, act, ctx| {
                match res {
                    Ok(Ok(c)) if c.response.error.code == 0 => {
                        super::metrics::txn_metrics().producer_id_blocks_total.inc();
                        let (served, again) = act.core.on_block(ProducerIdBlock {
                            first_id: c.response.producer_id_start,
                            size: c.response.producer_id_len,
                        });
                        for (w, id) in served {
                            let _ = w.send(Ok(id));
                        }
                        act.follow(again, ctx);
                    }
                    other => {
                        tracing::warn!(result = ?other.map(|r| r.map(|c| c.response.error)),
                            "producer id block allocation failed");
                        act.fail_waiters(COORDINATOR_LOAD_IN_PROGRESS);
                    }
                }
            },
        ));
    }

    fn fail_waiters(&mut self, code: i16) {
        let (waiters, _) = self.core.on_block_failed(code);
        for w in waiters {
            let _ = w.send(Err(code));
        }
    }

    fn follow(&mut self, req: RequestBlock, ctx: &mut Context<Self>) {
        if req.0 {
            self.request_block(ctx);
        }
    }
}

impl Actor for ProducerIdManagerActor {
    type Context = Context<Self>;
}

impl Supervised for ProducerIdManagerActor {}

impl SupervisedActor for ProducerIdManagerActor {
    const MAILBOX_CAPACITY: usize = 256;
}

crate::supervised_mailbox!(ProducerIdManagerActor);

impl Handler<GenerateProducerId> for ProducerIdManagerActor {
    type Result = ResponseFuture<Result<i64, i16>>;
    fn handle(&mut self, _: GenerateProducerId, ctx: &mut Context<Self>) -> Self::Result {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        let (tx, rx) = oneshot::channel();
        let (result, req) = self.core.generate(tx);
        self.follow(req, ctx);
        match result {
            Ok(Some((tx, id))) => {
                let _ = tx.send(Ok(id));
            }
            Ok(None) => {}
            Err(ProducerIdUnavailable::Busy) | Err(ProducerIdUnavailable::Failed(_)) => {
                return Box::pin(async { Err(COORDINATOR_LOAD_IN_PROGRESS) });
            }
        }
        Box::pin(async move {
            let r = rx.await.unwrap_or(Err(COORDINATOR_LOAD_IN_PROGRESS));
            if r.is_ok() {
                super::metrics::txn_metrics().producer_ids_total.inc();
            }
            r
        })
    }
}

/// Starts the manager supervised on `arbiter` (the topology's one call).
pub fn start_producer_id_manager(
    arbiter: &ArbiterHandle,
    node_id: i32,
    controller: MeteredRecipient<AllocateProducerIds>,
    image: MetadataImageWatch,
) -> crate::runtime::MeteredAddr<ProducerIdManagerActor> {
    let actor = ProducerIdManagerActor::new(node_id, controller, image);
    let metrics = actor.metrics.clone();
    crate::runtime::start_supervised(arbiter, metrics, move |_| actor)
}
