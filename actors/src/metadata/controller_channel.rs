//! ControllerChannelActor (Kafka's `NodeToControllerChannelManager` as the broker lifecycle
//! uses it): carries this broker's RegisterBroker and ProcessBrokerHeartbeat to the active
//! controller wherever it is. When this node's Raft is the leader the co-located
//! QuorumControllerActor answers; otherwise the request goes as BrokerRegistration /
//! BrokerHeartbeat over one connection to the leader's controller listener (the Raft leader
//! is the active controller). With no leader known, the answer is NOT_CONTROLLER and the
//! lifecycle retries, as it does against an activating controller.

use std::collections::BTreeMap;
use std::time::Duration;

use actix::prelude::*;
use kactor_protocol::messages::{RequestBody, ResponseBody};
use tokio::sync::watch;
use tracing::{debug, info};

use crate::controller::actor::QuorumControllerActor;
use crate::controller::broker_apis::{
    heartbeat_reply_from_wire, heartbeat_to_wire, registration_reply_from_wire,
    registration_to_wire,
};
use crate::controller::core::requests::{BrokerHeartbeatReply, BrokerRegistrationReply};
use crate::controller::messages::{
    Committed, ControllerError, ControllerReply, ProcessBrokerHeartbeat, RegisterBroker,
};
use crate::network::client::KafkaConnection;
use crate::runtime::{ActorMetrics, MeteredAddr, SupervisedActor};

pub struct ControllerChannelActor {
    node_id: i32,
    local: Option<MeteredAddr<QuorumControllerActor>>,
    /// The Raft leader (the active controller), from the RaftActor.
    leader: watch::Receiver<Option<i32>>,
    /// host:port of each controller's listener.
    endpoints: BTreeMap<i32, String>,
    /// The connection and the controller it goes to.
    conn: Option<(i32, KafkaConnection)>,
    /// `controller.quorum.request.timeout.ms`
    timeout: Duration,
    metrics: ActorMetrics,
}

impl ControllerChannelActor {
    pub fn new(
        node_id: i32,
        local: Option<MeteredAddr<QuorumControllerActor>>,
        leader: watch::Receiver<Option<i32>>,
        endpoints: BTreeMap<i32, String>,
        timeout: Duration,
        metrics: ActorMetrics,
    ) -> Self {
        ControllerChannelActor {
            node_id,
            local,
            leader,
            endpoints,
            conn: None,
            timeout,
            metrics,
        }
    }

    /// Sends `body` to the remote active controller `to`, reusing the connection if it goes
    /// there.
    fn remote(
        &mut self,
        to: i32,
        body: RequestBody,
    ) -> impl ActorFuture<Self, Output = Result<ResponseBody, ControllerError>> {
        let conn = match self.conn.take() {
            Some((id, c)) if id == to => Some(c),
            _ => None,
        };
        let address = self.endpoints.get(&to).cloned();
        let timeout = self.timeout;
        async move {
            let Some(address) = address else {
                return Err("no endpoint".to_string());
            };
            let mut conn = match conn {
                Some(c) => c,
                None => {
                    let c = KafkaConnection::connect(&address, "broker-to-controller", timeout)
                        .await
                        .map_err(|e| e.to_string())?;
                    info!(controller = to, %address, "connected to the active controller");
                    c
                }
            };
            match conn.send(body, timeout).await {
                Ok((_, resp)) => Ok((conn, resp)),
                Err(e) => Err(e.to_string()),
            }
        }
        .into_actor(self)
        .map(move |res, act, _| match res {
            Ok((conn, resp)) => {
                act.conn = Some((to, conn));
                Ok(resp)
            }
            Err(why) => {
                debug!(controller = to, error = %why, "request to the active controller failed");
                Err(ControllerError::NotController)
            }
        })
    }

    /// Where the active controller is: `Ok(None)` = here.
    fn route(&self) -> Result<Option<i32>, ControllerError> {
        match *self.leader.borrow() {
            Some(id) if id == self.node_id && self.local.is_some() => Ok(None),
            Some(id) if id != self.node_id => Ok(Some(id)),
            _ => Err(ControllerError::NotController),
        }
    }
}

impl Actor for ControllerChannelActor {
    type Context = Context<Self>;
}

impl Supervised for ControllerChannelActor {
    fn restarting(&mut self, _: &mut Context<Self>) {
        self.conn = None;
    }
}

impl SupervisedActor for ControllerChannelActor {
    const MAILBOX_CAPACITY: usize = 64;
}

crate::supervised_mailbox!(ControllerChannelActor);

impl Handler<RegisterBroker> for ControllerChannelActor {
    type Result = AtomicResponse<Self, ControllerReply<BrokerRegistrationReply>>;

    fn handle(&mut self, msg: RegisterBroker, _: &mut Context<Self>) -> Self::Result {
        let _m = self.metrics.handle();
        match self.route() {
            Ok(None) => {
                let local = self.local.clone().expect("route checked");
                AtomicResponse::new(Box::pin(
                    async move {
                        local
                            .send(msg)
                            .await
                            .unwrap_or(Err(ControllerError::NotController))
                    }
                    .into_actor(self),
                ))
            }
            Ok(Some(to)) => {
                let body = registration_to_wire(&msg.registration);
                AtomicResponse::new(Box::pin(self.remote(to, body).map(|r, _, _| {
                    let reply =
                        registration_reply_from_wire(r?).ok_or(ControllerError::NotController)?;
                    Ok(Committed {
                        response: reply,
                        offset: -1,
                    })
                })))
            }
            Err(e) => AtomicResponse::new(Box::pin(fut::ready(Err(e)))),
        }
    }
}

impl Handler<ProcessBrokerHeartbeat> for ControllerChannelActor {
    type Result = AtomicResponse<Self, ControllerReply<BrokerHeartbeatReply>>;

    fn handle(&mut self, msg: ProcessBrokerHeartbeat, _: &mut Context<Self>) -> Self::Result {
        let _m = self.metrics.handle();
        match self.route() {
            Ok(None) => {
                let local = self.local.clone().expect("route checked");
                AtomicResponse::new(Box::pin(
                    async move {
                        local
                            .send(msg)
                            .await
                            .unwrap_or(Err(ControllerError::NotController))
                    }
                    .into_actor(self),
                ))
            }
            Ok(Some(to)) => {
                let body = heartbeat_to_wire(&msg.heartbeat);
                AtomicResponse::new(Box::pin(self.remote(to, body).map(|r, _, _| {
                    let reply =
                        heartbeat_reply_from_wire(r?).ok_or(ControllerError::NotController)?;
                    Ok(Committed {
                        response: reply,
                        offset: -1,
                    })
                })))
            }
            Err(e) => AtomicResponse::new(Box::pin(fut::ready(Err(e)))),
        }
    }
}
