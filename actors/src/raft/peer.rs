//! RaftPeerActor (the voter-to-voter half of Kafka's `KafkaNetworkChannel` over its
//! `NetworkClient`): one per remote voter, it owns a TCP connection to that voter's controller
//! listener and carries the core's outbound Raft requests to it, one at a time, feeding each
//! answer (or the failure) back to the RaftActor with the request's correlation id.
//!
//! In flight: one request (the mailbox is held while it is out), and at most
//! `MAILBOX_CAPACITY` queued behind it; the core itself keeps at most one request in flight per
//! voter, so the queue only fills if this actor stalls. A request that waited longer than the
//! request timeout is failed without being sent (the core has already timed it out). After a
//! failed connect the peer is not dialled again until a backoff has passed, doubling from
//! `controller.quorum.retry.backoff.ms` up to one second.

use std::time::{Duration, Instant};

use actix::prelude::*;
use tracing::{debug, info};

use super::core::rpc::{Request, Response};
use super::wire::{request_to_wire, response_from_wire};
use crate::network::client::KafkaConnection;
use crate::runtime::{ActorMetrics, MeteredRecipient, SupervisedActor};

const MAX_RECONNECT_BACKOFF: Duration = Duration::from_secs(1);

/// Sent by the RaftActor for each core `Send` to this voter. Lost (mailbox full), the core's
/// request timeout makes the voter ready again.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct SendRaftRequest {
    pub correlation_id: u64,
    pub request: Request,
    pub queued_at: Instant,
}

/// Sent by a RaftPeerActor to the RaftActor: the answer to one request, or why there is none.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct RaftPeerResult {
    pub from: i32,
    pub correlation_id: u64,
    pub result: Result<Response, String>,
}

pub struct RaftPeerActor {
    peer: i32,
    /// host:port of the node's controller listener (a voter, a bootstrap server, the leader
    /// an observer follows, or a voter being added).
    address: String,
    /// That listener's name (the leader's endpoints in answers are named after it).
    listener: String,
    raft: MeteredRecipient<RaftPeerResult>,
    conn: Option<KafkaConnection>,
    request_timeout: Duration,
    retry_backoff: Duration,
    backoff: Duration,
    reconnect_at: Option<Instant>,
    connected_once: bool,
    metrics: ActorMetrics,
}

impl RaftPeerActor {
    #[allow(clippy::too_many_arguments)] // the peer's identity plus the quorum timeouts
    pub fn new(
        peer: i32,
        address: String,
        listener: String,
        raft: MeteredRecipient<RaftPeerResult>,
        request_timeout: Duration,
        retry_backoff: Duration,
        metrics: ActorMetrics,
    ) -> Self {
        RaftPeerActor {
            peer,
            address,
            listener,
            raft,
            conn: None,
            request_timeout,
            retry_backoff,
            backoff: retry_backoff,
            reconnect_at: None,
            connected_once: false,
            metrics,
        }
    }

    fn fail(&self, correlation_id: u64, why: String) {
        self.raft.do_send(RaftPeerResult {
            from: self.peer,
            correlation_id,
            result: Err(why),
        });
    }
}

impl Actor for RaftPeerActor {
    type Context = Context<Self>;
}

impl Supervised for RaftPeerActor {
    fn restarting(&mut self, _: &mut Context<Self>) {
        // The connection may be mid-exchange: start from a fresh one.
        self.conn = None;
    }
}

impl SupervisedActor for RaftPeerActor {
    const MAILBOX_CAPACITY: usize = 16;
}

crate::supervised_mailbox!(RaftPeerActor);

impl Handler<SendRaftRequest> for RaftPeerActor {
    type Result = ();

    fn handle(&mut self, msg: SendRaftRequest, ctx: &mut Context<Self>) {
        let _m = self.metrics.handle();
        let id = msg.correlation_id;
        if msg.queued_at.elapsed() > self.request_timeout {
            return self.fail(id, "timed out in the queue".into());
        }
        let conn = self.conn.take();
        if conn.is_none() && self.reconnect_at.is_some_and(|t| Instant::now() < t) {
            return self.fail(id, format!("backing off from {}", self.address));
        }
        let (address, listener, timeout, peer) = (
            self.address.clone(),
            self.listener.clone(),
            self.request_timeout,
            self.peer,
        );
        let fut = async move {
            let fresh = conn.is_none();
            let mut conn = match conn {
                Some(c) => c,
                None => KafkaConnection::connect(&address, "raft-client", timeout)
                    .await
                    .map_err(|e| (e.to_string(), true))?,
            };
            if let Request::ApiVersions { .. } = msg.request {
                // The connection just asked: its answer is the one wanted.
                let resp =
                    kactor_protocol::messages::ResponseBody::ApiVersions(conn.api_versions.clone());
                let r = response_from_wire(resp, &listener).map_err(|e| (e, false))?;
                return Ok((conn, r, fresh));
            }
            let key = crate::raft::wire::api_key(&msg.request);
            let Some(version) = key.and_then(|k| conn.version_for(k)) else {
                return Err((
                    format!("{} not supported by the peer", msg.request.name()),
                    false,
                ));
            };
            let Some(body) = request_to_wire(&msg.request, peer, version) else {
                return Err((
                    format!("{} is not sent to peers", msg.request.name()),
                    false,
                ));
            };
            let resp = conn
                .send_at(body, version, timeout)
                .await
                .map_err(|e| (e.to_string(), false))?;
            let r = response_from_wire(resp, &listener).map_err(|e| (e, false))?;
            Ok((conn, r, fresh))
        };
        ctx.wait(fut.into_actor(self).map(move |res, act, _| match res {
            Ok((conn, response, fresh)) => {
                if fresh && !act.connected_once {
                    info!(peer = act.peer, address = %act.address, "connected to Raft peer");
                }
                act.connected_once = true;
                act.conn = Some(conn);
                act.backoff = act.retry_backoff;
                act.reconnect_at = None;
                act.raft.do_send(RaftPeerResult {
                    from: act.peer,
                    correlation_id: id,
                    result: Ok(response),
                });
            }
            Err((why, connecting)) => {
                debug!(peer = act.peer, error = %why, "Raft request failed");
                if connecting {
                    act.reconnect_at = Some(Instant::now() + act.backoff);
                    act.backoff = (act.backoff * 2).min(MAX_RECONNECT_BACKOFF);
                }
                act.fail(id, why);
            }
        }));
    }
}
