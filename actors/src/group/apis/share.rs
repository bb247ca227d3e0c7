//! Share group requests the group coordinator answers (Kafka's
//! `KafkaApis.handleShareGroupHeartbeatRequest` / `handleShareGroupDescribeRequest`): membership
//! and assignment. ShareFetch and ShareAcknowledge go to partition leaders (`share/apis.rs`).

use kactor_protocol::errors::*;
use kactor_protocol::messages::{
    share_group_describe_response as sgd, share_group_heartbeat_response as sgh,
    ShareGroupDescribeResponse, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse,
};
use kactor_protocol::{RequestBody, ResponseBody, Uuid};

use super::{client_host, group_authorized_operations, per_group, respond, GroupApis};
use crate::group::core::api::*;
use crate::network::{HandlerOutcome, RequestContext};

/// Kafka's check of a share member id at the API layer: set, not empty, at most 36 characters
/// (a UUID's string form).
pub fn valid_share_member_id(member_id: Option<&str>) -> bool {
    member_id.is_some_and(|m| !m.is_empty() && m.chars().count() <= 36)
}

pub fn share_group_heartbeat_input(
    r: &ShareGroupHeartbeatRequest,
    client_id: &str,
    client_host: &str,
) -> ShareGroupHeartbeatInput {
    ShareGroupHeartbeatInput {
        group_id: r.group_id.clone(),
        member_id: r.member_id.clone(),
        member_epoch: r.member_epoch,
        rack_id: r.rack_id.clone(),
        subscribed_topic_names: r.subscribed_topic_names.clone(),
        client_id: client_id.to_string(),
        client_host: client_host.to_string(),
    }
}

pub fn share_group_heartbeat_response(o: ShareGroupHeartbeatOutput) -> ShareGroupHeartbeatResponse {
    ShareGroupHeartbeatResponse {
        error_code: o.error_code,
        error_message: o.error_message,
        member_id: o.member_id,
        member_epoch: o.member_epoch,
        heartbeat_interval_ms: o.heartbeat_interval_ms,
        assignment: o.assignment.map(|tps| sgh::Assignment {
            topic_partitions: tps
                .into_iter()
                .map(|(id, ps)| sgh::TopicPartitions {
                    topic_id: id,
                    partitions: ps,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn described_share_group(
    include_operations: bool,
    g: DescribedShareGroup,
) -> sgd::DescribedGroup {
    let authorized_operations = group_authorized_operations(g.error_code, include_operations);
    let assignment = |tps: Vec<(Uuid, String, Vec<i32>)>| sgd::Assignment {
        topic_partitions: tps
            .into_iter()
            .map(|(id, name, ps)| sgd::TopicPartitions {
                topic_id: id,
                topic_name: name,
                partitions: ps,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    sgd::DescribedGroup {
        error_code: g.error_code,
        error_message: g.error_message,
        group_id: g.group_id,
        group_state: g.group_state,
        group_epoch: g.group_epoch,
        assignment_epoch: g.assignment_epoch,
        assignor_name: g.assignor_name,
        members: g
            .members
            .into_iter()
            .map(|m| sgd::Member {
                member_id: m.member_id,
                rack_id: m.rack_id,
                member_epoch: m.member_epoch,
                client_id: m.client_id,
                client_host: m.client_host,
                subscribed_topic_names: m.subscribed_topic_names,
                assignment: assignment(m.assignment),
                ..Default::default()
            })
            .collect(),
        authorized_operations,
        ..Default::default()
    }
}

pub(super) async fn handle_share_group_heartbeat(
    a: GroupApis,
    ctx: RequestContext,
    body: RequestBody,
) -> HandlerOutcome {
    let r = request_body!(body, ShareGroupHeartbeat);
    if !valid_share_member_id(Some(&r.member_id)) {
        // KafkaApis refuses it before the coordinator, without a message.
        let resp = ShareGroupHeartbeatResponse {
            error_code: INVALID_REQUEST,
            ..Default::default()
        };
        return respond(
            &ctx,
            INVALID_REQUEST,
            ResponseBody::ShareGroupHeartbeat(resp),
        );
    }
    let input = share_group_heartbeat_input(&r, ctx.client_id(), &client_host(&ctx));
    let out = shard_call!(a, &r.group_id, GroupRequest::ShareGroupHeartbeat(input),
        GroupResponse::ShareGroupHeartbeat(o) => o);
    let code = out.error_code;
    respond(
        &ctx,
        code,
        ResponseBody::ShareGroupHeartbeat(share_group_heartbeat_response(out)),
    )
}

pub(super) async fn handle_share_group_describe(
    a: GroupApis,
    ctx: RequestContext,
    body: RequestBody,
) -> HandlerOutcome {
    let r = request_body!(body, ShareGroupDescribe);
    let (empty, named): (Vec<&String>, Vec<&String>) =
        r.group_ids.iter().partition(|g| g.is_empty());
    let requests = named
        .into_iter()
        .map(|g| {
            let request = GroupRequest::ShareGroupDescribe {
                group_ids: vec![g.clone()],
            };
            (g.clone(), request)
        })
        .collect();
    let described = per_group(&a, requests, |resp| match resp {
        GroupResponse::ShareGroupDescribe { groups } => groups,
        other => unreachable!("ShareGroupDescribe answered with {other:?}"),
    })
    .await;
    let groups = empty
        .into_iter()
        .map(|_| DescribedShareGroup::error(INVALID_GROUP_ID, None, ""))
        .chain(described)
        .map(|g| described_share_group(r.include_authorized_operations, g))
        .collect();
    respond(
        &ctx,
        NONE,
        ResponseBody::ShareGroupDescribe(ShareGroupDescribeResponse {
            groups,
            ..Default::default()
        }),
    )
}
