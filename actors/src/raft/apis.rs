//! The Raft RPCs on the controller listener (Kafka's `ControllerApis` handing Vote,
//! BeginQuorumEpoch, EndQuorumEpoch, Fetch and FetchSnapshot to the `RaftManager`): each
//! request goes to the RaftActor, which answers once its core has (a Fetch may wait there up to
//! its max wait). Fetch on a broker listener stays the partition Fetch.

use kactor_protocol::messages::ApiKey;

use super::actor::{RaftActor, RaftRequest};
use crate::network::router::{HandlerOutcome, ListenerKind, RequestContext, RequestRouter};
use crate::runtime::MeteredAddr;
use kactor_protocol::messages::RequestBody;

async fn serve(
    raft: MeteredAddr<RaftActor>,
    ctx: RequestContext,
    body: RequestBody,
) -> HandlerOutcome {
    let msg = RaftRequest {
        body,
        api_version: ctx.api_version,
        listener: ctx.connection.listener_name.to_string(),
    };
    match raft.send(msg).await {
        Ok(Some(resp)) => HandlerOutcome::Respond(resp),
        // The Raft actor stopped (the node is shutting down) or dropped the request.
        _ => HandlerOutcome::Close(format!("{:?} not answered by Raft", ctx.api_key)),
    }
}

/// Voter changes (AddRaftVoter, RemoveRaftVoter) go to this node's RaftActor, which answers
/// NOT_LEADER_OR_FOLLOWER unless it leads. Every node registers them, before the forwarding
/// layer: on a broker listener that layer sends them on to the leader, as Kafka's brokers do.
pub fn register_voter_changes(router: &mut RequestRouter, raft: MeteredAddr<RaftActor>) {
    for key in [ApiKey::AddRaftVoter, ApiKey::RemoveRaftVoter] {
        let raft = raft.clone();
        router.register(key, move |ctx, body| {
            Box::pin(serve(raft.clone(), ctx, body))
        });
    }
}

/// Registers the Raft RPCs; call after the partition APIs so Fetch on broker listeners keeps
/// the partition handler.
pub fn register(router: &mut RequestRouter, raft: MeteredAddr<RaftActor>) {
    for key in [
        ApiKey::Vote,
        ApiKey::BeginQuorumEpoch,
        ApiKey::EndQuorumEpoch,
        ApiKey::FetchSnapshot,
        ApiKey::UpdateRaftVoter,
    ] {
        let raft = raft.clone();
        router.register(key, move |ctx, body| {
            Box::pin(serve(raft.clone(), ctx, body))
        });
    }
    let partition_fetch = router.route(ApiKey::Fetch).map(|r| r.handler.clone());
    router.register(ApiKey::Fetch, move |ctx, body| {
        if ctx.connection.listener_kind == ListenerKind::Controller {
            return Box::pin(serve(raft.clone(), ctx, body));
        }
        match &partition_fetch {
            Some(h) => h(ctx, body),
            None => Box::pin(async { HandlerOutcome::Close("Fetch is not served here".into()) }),
        }
    });
}
