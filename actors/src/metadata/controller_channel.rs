//! ControllerChannelActor (Kafka's `NodeToControllerChannelManager` as the broker lifecycle
//! uses it): carries this broker's RegisterBroker and ProcessBrokerHeartbeat to the active
//! controller wherever it is. When this node's Raft is the leader the co-located
//! QuorumControllerActor answers; otherwise the request goes as BrokerRegistration /
//! BrokerHeartbeat over one connection to the leader's controller listener (the Raft leader
//! is the active controller). With no leader known, the answer is NOT_CONTROLLER and the
//! lifecycle retries, as it does against an activating controller.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use kactor_protocol::messages::{RequestBody, ResponseBody};
use tokio::sync::watch;
use tracing::{debug, info};

use crate::controller::actor::QuorumControllerActor;
use crate::controller::broker_apis::{
    allocate_producer_ids_reply_from_wire, alter_partition_reply_from_wire,
    alter_partition_to_wire, heartbeat_reply_from_wire, heartbeat_to_wire,
    registration_reply_from_wire, registration_to_wire,
};
use crate::controller::core::requests::{
    AllocateProducerIdsReply, AlterPartition, AlterPartitionReply, BrokerHeartbeatReply,
    BrokerRegistrationReply,
};
use crate::controller::messages::{
    AllocateProducerIds, Committed, ControllerError, ControllerReply, CreateTopics,
    ProcessAlterPartition, ProcessBrokerHeartbeat, RegisterBroker,
};
use crate::network::client::KafkaConnection;
use crate::runtime::{ActorMetrics, MeteredAddr, SupervisedActor};

pub struct ControllerChannelActor {
    node_id: i32,
    local: Option<MeteredAddr<QuorumControllerActor>>,
    /// The Raft leader (the active controller), from the RaftActor.
    leader: watch::Receiver<Option<i32>>,
    /// host:port of each controller's listener, as the RaftActor knows them.
    endpoints: watch::Receiver<Arc<BTreeMap<i32, String>>>,
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
        endpoints: watch::Receiver<Arc<BTreeMap<i32, String>>>,
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

    /// Like [`Self::remote`], with a body built for the version the connection negotiated.
    fn remote_versioned(
        &mut self,
        to: i32,
        key: kactor_protocol::messages::ApiKey,
        build: impl FnOnce(i16) -> RequestBody + 'static,
    ) -> impl ActorFuture<Self, Output = Result<ResponseBody, ControllerError>> {
        let conn = match self.conn.take() {
            Some((id, c)) if id == to => Some(c),
            _ => None,
        };
        let address = self.endpoints.borrow().get(&to).cloned();
        let timeout = self.timeout;
        async move {
            let Some(address) = address else {
                return Err("no endpoint".to_string());
            };
            let mut conn = match conn {
                Some(c) => c,
                None => KafkaConnection::connect(&address, "broker-to-controller", timeout)
                    .await
                    .map_err(|e| e.to_string())?,
            };
            let version = conn
                .version_for(key)
                .ok_or_else(|| format!("the controller does not serve {key:?}"))?;
            match conn.send_at(build(version), version, timeout).await {
                Ok(resp) => Ok((conn, resp)),
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
        let address = self.endpoints.borrow().get(&to).cloned();
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

/// AlterPartitionManagerActor → its channel: one (batched) AlterPartition for the active
/// controller. Lost: every leader in it proposes again.
#[derive(Message, Debug)]
#[rtype(result = "Result<AlterPartitionReply, ControllerError>")]
pub struct SendAlterPartition {
    pub request: AlterPartition,
}

impl Handler<SendAlterPartition> for ControllerChannelActor {
    type Result = AtomicResponse<Self, Result<AlterPartitionReply, ControllerError>>;

    fn handle(&mut self, msg: SendAlterPartition, _: &mut Context<Self>) -> Self::Result {
        let _m = self.metrics.handle();
        let request = msg.request;
        match self.route() {
            Ok(None) => {
                let local = self.local.clone().expect("route checked");
                AtomicResponse::new(Box::pin(
                    async move {
                        local
                            .send(ProcessAlterPartition { request })
                            .await
                            .unwrap_or(Err(ControllerError::NotController))
                            .map(|c| c.response)
                    }
                    .into_actor(self),
                ))
            }
            Ok(Some(to)) => AtomicResponse::new(Box::pin(
                self.remote_versioned(
                    to,
                    kactor_protocol::messages::ApiKey::AlterPartition,
                    move |v| alter_partition_to_wire(&request, v),
                )
                .map(move |r, _, _| {
                    r.and_then(|b| {
                        alter_partition_reply_from_wire(b).ok_or(ControllerError::NotController)
                    })
                }),
            )),
            Err(e) => AtomicResponse::new(Box::pin(fut::ready(Err(e)))),
        }
    }
}

impl Handler<AllocateProducerIds> for ControllerChannelActor {
    type Result = AtomicResponse<Self, ControllerReply<AllocateProducerIdsReply>>;

    /// A block of producer ids for this broker's InitProducerId (Kafka's
    /// `RPCProducerIdManager`): from the co-located controller, or AllocateProducerIds on the
    /// active controller's listener.
    fn handle(&mut self, msg: AllocateProducerIds, _: &mut Context<Self>) -> Self::Result {
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
                let body = RequestBody::AllocateProducerIds(
                    kactor_protocol::messages::AllocateProducerIdsRequest {
                        broker_id: msg.broker_id,
                        broker_epoch: msg.broker_epoch,
                        ..Default::default()
                    },
                );
                AtomicResponse::new(Box::pin(self.remote(to, body).map(|r, _, _| {
                    let reply = allocate_producer_ids_reply_from_wire(r?)
                        .ok_or(ControllerError::NotController)?;
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

/// CreateTopics for the active controller's listener (auto-created and internal topics a broker creates on
/// demand: `__consumer_offsets`, `__transaction_state`).
fn create_topics_to_wire(msg: &CreateTopics, timeout: Duration) -> RequestBody {
    use kactor_protocol::messages::create_topics_request as w;
    RequestBody::CreateTopics(w::CreateTopicsRequest {
        topics: msg
            .topics
            .iter()
            .map(|t| w::CreatableTopic {
                name: t.name.clone(),
                num_partitions: t.num_partitions,
                replication_factor: t.replication_factor,
                assignments: t
                    .assignments
                    .iter()
                    .map(|(p, ids)| w::CreatableReplicaAssignment {
                        partition_index: *p,
                        broker_ids: ids.clone(),
                        ..Default::default()
                    })
                    .collect(),
                configs: t
                    .configs
                    .iter()
                    .map(|(name, value)| w::CreatableTopicConfig {
                        name: name.clone(),
                        value: value.clone(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        timeout_ms: timeout.as_millis().min(i32::MAX as u128) as i32,
        validate_only: msg.validate_only,
        ..Default::default()
    })
}

fn create_topics_reply_from_wire(
    body: ResponseBody,
) -> Option<Vec<crate::controller::core::requests::CreatableTopicResult>> {
    let ResponseBody::CreateTopics(r) = body else {
        return None;
    };
    Some(
        r.topics
            .into_iter()
            .map(
                |t| crate::controller::core::requests::CreatableTopicResult {
                    name: t.name,
                    topic_id: t.topic_id,
                    error: crate::controller::core::errors::ApiError {
                        code: t.error_code,
                        message: t.error_message,
                    },
                    num_partitions: t.num_partitions,
                    replication_factor: t.replication_factor,
                    configs: Vec::new(),
                },
            )
            .collect(),
    )
}

impl Handler<CreateTopics> for ControllerChannelActor {
    type Result = AtomicResponse<
        Self,
        ControllerReply<Vec<crate::controller::core::requests::CreatableTopicResult>>,
    >;

    /// A topic this broker creates itself (auto-created, or internal on first use), at the active
    /// controller wherever it is.
    fn handle(&mut self, msg: CreateTopics, _: &mut Context<Self>) -> Self::Result {
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
                let body = create_topics_to_wire(&msg, self.timeout);
                AtomicResponse::new(Box::pin(self.remote(to, body).map(|r, _, _| {
                    let reply =
                        create_topics_reply_from_wire(r?).ok_or(ControllerError::NotController)?;
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
