//! Share group requests the group coordinator answers (Kafka's
//! `KafkaApis.handleShareGroupHeartbeatRequest` / `handleShareGroupDescribeRequest` /
//! `handle{Describe,Alter,Delete}ShareGroupOffsetsRequest` with `GroupCoordinatorService`):
//! membership, assignment, and the share-partitions' state, which the handlers create, read and
//! delete at the share coordinator (`share/coordinator`) through the [`SharePersister`].
//! ShareFetch and ShareAcknowledge go to partition leaders (`share/apis.rs`).

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::future::join_all;
use kactor_protocol::errors::*;
use kactor_protocol::messages::{
    alter_share_group_offsets_response as asr, delete_share_group_offsets_response as dsr,
    describe_share_group_offsets_response as dso, share_group_describe_response as sgd,
    share_group_heartbeat_response as sgh, AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponse, DescribeShareGroupOffsetsResponse, ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse,
};
use kactor_protocol::{RequestBody, ResponseBody, Uuid};

use crate::runtime::MeteredAddr;
use crate::share::actor::SharePartitionManagerActor;
use crate::share::apis::{high_watermark, share_groups_enabled};
use crate::share::coordinator::actor::{StateAnswer, StateOp};
use crate::share::coordinator::core::StateError;
use crate::share::messages::ForgetShareState;
use crate::share::persister::SharePersister;

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
    let (out, init) = shard_call!(a, &r.group_id, GroupRequest::ShareGroupHeartbeat(input),
        GroupResponse::ShareGroupHeartbeat(o, init) => (o, init));
    if let Some(init) = init {
        // Answered at once, as Kafka: the partitions are assigned at a later heartbeat.
        spawn_initialize(&a, init);
    }
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

// ---------------------------------------------------------------------------------------------
// Share-partition state at the share coordinator

/// What the group coordinator needs for share groups' state (Kafka's `Persister` in the group
/// coordinator): the share coordinator, and this broker's share-partition manager, which drops
/// its copies of state made again or deleted.
#[derive(Clone)]
pub struct ShareStateAdmin {
    pub persister: SharePersister,
    pub manager: MeteredAddr<SharePartitionManagerActor>,
}

/// How long one request waits for a share coordinator being created, loaded or moved.
const STATE_PATIENCE: Duration = Duration::from_secs(10);

/// `op` for each of `partitions` of `group`, at once: each partition's outcome.
async fn state_ops(
    a: &GroupApis,
    group: &str,
    partitions: impl IntoIterator<Item = (Uuid, i32, StateOp)>,
) -> Vec<((Uuid, i32), Result<StateAnswer, StateError>)> {
    let Some(share) = &a.share_state else {
        // No share coordinator in this topology: the share-partition leaders keep the state.
        return partitions
            .into_iter()
            .map(|(id, p, _)| ((id, p), Ok(StateAnswer::Done)))
            .collect();
    };
    join_all(partitions.into_iter().map(|(id, p, op)| async move {
        let answer = share
            .persister
            .admin(group, id, p, op, STATE_PATIENCE)
            .await;
        ((id, p), answer)
    }))
    .await
}

async fn initialize_state(
    a: &GroupApis,
    init: &ShareStateInit,
) -> Vec<((Uuid, i32), Result<StateAnswer, StateError>)> {
    let ops = init.partitions.iter().map(|&(id, p, start_offset)| {
        let op = StateOp::Initialize {
            state_epoch: init.state_epoch,
            start_offset,
        };
        (id, p, op)
    });
    state_ops(a, &init.group_id, ops).await
}

/// Tells the shard which partitions of `init` now have state (or failed to get it).
async fn report_initialized(
    a: &GroupApis,
    init: &ShareStateInit,
    partitions: Vec<(Uuid, i32)>,
    succeeded: bool,
) {
    if partitions.is_empty() {
        return;
    }
    let request = GroupRequest::ShareStateInitialized {
        group_id: init.group_id.clone(),
        partitions,
        succeeded,
        asked_at_ms: init.asked_at_ms,
    };
    let _ = a.call(&init.group_id, request).await;
}

/// The share-partition manager here drops its copies of `partitions` of `group`.
async fn forget_local(a: &GroupApis, group: &str, partitions: Vec<(Uuid, i32)>) {
    if let (Some(share), false) = (&a.share_state, partitions.is_empty()) {
        let _ = share
            .manager
            .send(ForgetShareState {
                group: group.to_string(),
                partitions,
            })
            .await;
    }
}

/// A heartbeat's initialization, in the background (Kafka's `persisterInitialize` timer task).
fn spawn_initialize(a: &GroupApis, init: ShareStateInit) {
    let a = a.clone();
    actix::spawn(async move {
        let mut done = Vec::new();
        let mut failed = Vec::new();
        for (tp, answer) in initialize_state(&a, &init).await {
            match answer {
                Ok(_) => done.push(tp),
                Err((code, message)) => {
                    tracing::warn!(group = %init.group_id, topic_id = %tp.0, partition = tp.1,
                        code, %message, "share-partition state not initialized; asked again at a later heartbeat");
                    failed.push(tp);
                }
            }
        }
        report_initialized(&a, &init, done, true).await;
        report_initialized(&a, &init, failed, false).await;
    });
}

/// Before DeleteGroups deletes a share group: its share-partitions' state is deleted at the
/// share coordinator. Err: the group stays, with this code.
pub(super) async fn delete_share_group_state(a: &GroupApis, group: &str) -> Result<(), i16> {
    let request = GroupRequest::DeleteShareGroupState {
        group_id: group.to_string(),
    };
    let found = match a.call(group, request).await {
        GroupResponse::DeleteShareGroupState(found) => found?,
        other => unreachable!("DeleteShareGroupState answered with {other:?}"),
    };
    let ops = found
        .iter()
        .flat_map(|(id, ps)| ps.iter().map(move |p| (*id, *p, StateOp::Delete)));
    let answers = state_ops(a, group, ops).await;
    if let Some((_, Err((code, _)))) = answers.iter().find(|(_, r)| r.is_err()) {
        return Err(*code);
    }
    forget_local(a, group, answers.into_iter().map(|(tp, _)| tp).collect()).await;
    Ok(())
}

pub(super) async fn handle_describe_share_group_offsets(
    a: GroupApis,
    ctx: RequestContext,
    body: RequestBody,
) -> HandlerOutcome {
    let r = request_body!(body, DescribeShareGroupOffsets);
    let enabled = share_groups_enabled(&a.partitions.borrow());
    let described = r.groups.into_iter().map(|g| {
        let a = a.clone();
        async move {
            if !enabled {
                return dso::DescribeShareGroupOffsetsResponseGroup {
                    group_id: g.group_id,
                    error_code: UNSUPPORTED_VERSION,
                    ..Default::default()
                };
            }
            describe_group_offsets(&a, g.group_id, g.topics).await
        }
    });
    let groups = join_all(described).await;
    respond(
        &ctx,
        NONE,
        ResponseBody::DescribeShareGroupOffsets(DescribeShareGroupOffsetsResponse {
            groups,
            ..Default::default()
        }),
    )
}

/// One group of DescribeShareGroupOffsets (Kafka's `describeShareGroupOffsets` /
/// `describeShareGroupAllOffsets`): the share coordinator's summary of each partition, and the
/// lag = high watermark - start offset - records already delivered past it. Named topics are
/// read whatever the group (no state: start offset -1); all topics means those with state.
async fn describe_group_offsets(
    a: &GroupApis,
    group_id: String,
    topics: Option<Vec<kactor_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestTopic>>,
) -> dso::DescribeShareGroupOffsetsResponseGroup {
    // Named topics are read at the share coordinator, but only the group's coordinator answers.
    if a.shard_for(&group_id).is_none() {
        return dso::DescribeShareGroupOffsetsResponseGroup {
            group_id,
            error_code: NOT_COORDINATOR,
            error_message: Some(with_default_message(NOT_COORDINATOR).1),
            ..Default::default()
        };
    }
    let asked: Vec<(String, Vec<i32>)> = match topics {
        Some(ts) => ts
            .into_iter()
            .map(|t| (t.topic_name, t.partitions))
            .collect(),
        None => {
            let request = GroupRequest::ShareStatePartitions {
                group_id: group_id.clone(),
            };
            match a.call(&group_id, request).await {
                GroupResponse::ShareStatePartitions(Ok(found)) => found
                    .into_iter()
                    .filter(|(id, _, _)| a.topic_name(id).is_some())
                    .map(|(_, name, ps)| (name, ps))
                    .collect(),
                GroupResponse::ShareStatePartitions(Err(code)) => {
                    return dso::DescribeShareGroupOffsetsResponseGroup {
                        group_id,
                        error_code: code,
                        error_message: Some(with_default_message(code).1),
                        ..Default::default()
                    }
                }
                other => unreachable!("ShareStatePartitions answered with {other:?}"),
            }
        }
    };
    let mut topics = Vec::with_capacity(asked.len());
    for (name, parts) in asked {
        let topic_id = a.partitions.borrow().topic_id(&name);
        let Some(topic_id) = topic_id else {
            topics.push(dso::DescribeShareGroupOffsetsResponseTopic {
                topic_name: name,
                partitions: parts
                    .into_iter()
                    .map(|p| dso::DescribeShareGroupOffsetsResponsePartition {
                        partition_index: p,
                        start_offset: -1,
                        lag: -1,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            });
            continue;
        };
        let ops = parts.iter().map(|p| (topic_id, *p, StateOp::Summary));
        let summaries: BTreeMap<i32, _> = state_ops(a, &group_id, ops)
            .await
            .into_iter()
            .map(|((_, p), answer)| (p, answer))
            .collect();
        let table = a.partitions.borrow().clone();
        let mut partitions = Vec::with_capacity(parts.len());
        for p in parts {
            let mut out = dso::DescribeShareGroupOffsetsResponsePartition {
                partition_index: p,
                start_offset: -1,
                lag: -1,
                ..Default::default()
            };
            // A partition the coordinator could not answer for reads as one without state,
            // as in Kafka.
            if let Some(Ok(StateAnswer::Summary(s))) = summaries.get(&p) {
                out.start_offset = s.start_offset;
                out.leader_epoch = s.leader_epoch;
                if s.start_offset >= 0 && s.delivery_complete_count >= 0 {
                    if let Some(hw) = high_watermark(&table, &name, p).await {
                        // Not clamped: Kafka reports a start offset past the end (an
                        // alter beyond it) as a negative lag.
                        out.lag = hw - s.start_offset - s.delivery_complete_count as i64;
                    }
                }
            }
            partitions.push(out);
        }
        topics.push(dso::DescribeShareGroupOffsetsResponseTopic {
            topic_name: name,
            topic_id,
            partitions,
            ..Default::default()
        });
    }
    dso::DescribeShareGroupOffsetsResponseGroup {
        group_id,
        topics,
        ..Default::default()
    }
}

pub(super) async fn handle_alter_share_group_offsets(
    a: GroupApis,
    ctx: RequestContext,
    body: RequestBody,
) -> HandlerOutcome {
    let r = request_body!(body, AlterShareGroupOffsets);
    let refuse = |(code, message): (i16, String)| {
        respond(
            &ctx,
            code,
            ResponseBody::AlterShareGroupOffsets(AlterShareGroupOffsetsResponse {
                error_code: code,
                error_message: Some(message),
                ..Default::default()
            }),
        )
    };
    if !share_groups_enabled(&a.partitions.borrow()) {
        return refuse(with_default_message(UNSUPPORTED_VERSION));
    }
    // Topics this broker does not know are answered first, before the coordinator's results
    // (Kafka's KafkaApis checks its metadata cache ahead of the coordinator).
    let (known, unknown): (Vec<_>, Vec<_>) = r
        .topics
        .iter()
        .partition(|t| a.partitions.borrow().topic_id(&t.topic_name).is_some());
    let unknown_topics = unknown.into_iter().map(|t| {
        let (code, message) = with_default_message(UNKNOWN_TOPIC_OR_PARTITION);
        asr::AlterShareGroupOffsetsResponseTopic {
            topic_name: t.topic_name.clone(),
            partitions: t
                .partitions
                .iter()
                .map(|p| asr::AlterShareGroupOffsetsResponsePartition {
                    partition_index: p.partition_index,
                    error_code: code,
                    error_message: Some(message.clone()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    });
    let unknown_topics: Vec<_> = unknown_topics.collect();
    let topics = known
        .into_iter()
        .map(|t| {
            let ps = t
                .partitions
                .iter()
                .map(|p| (p.partition_index, p.start_offset))
                .collect();
            (t.topic_name.clone(), ps)
        })
        .collect();
    let request = GroupRequest::AlterShareGroupOffsets {
        group_id: r.group_id.clone(),
        topics,
    };
    let out = shard_call!(a, &r.group_id, request,
        GroupResponse::AlterShareGroupOffsets(o) => o);
    if let Some(e) = out.error {
        return refuse(e);
    }
    let mut failed: BTreeMap<(Uuid, i32), StateError> = BTreeMap::new();
    if let Some(init) = &out.initialize {
        let mut done = Vec::new();
        for (tp, answer) in initialize_state(&a, init).await {
            match answer {
                Ok(_) => done.push(tp),
                Err(e) => {
                    failed.insert(tp, e);
                }
            }
        }
        // The leaders here drop what they hold; one elsewhere finds its copy fenced by the
        // state epoch at its next write and loads the new state.
        forget_local(&a, &r.group_id, done.clone()).await;
        report_initialized(&a, init, done, true).await;
    }
    let responses = unknown_topics
        .into_iter()
        .chain(out.topics.into_iter().map(|(name, id, ps)| {
            asr::AlterShareGroupOffsetsResponseTopic {
                topic_name: name,
                topic_id: id,
                partitions: ps
                    .into_iter()
                    .map(|(p, code, message)| {
                        let (code, message) = match failed.get(&(id, p)) {
                            Some((c, m)) if code == NONE => (*c, Some(m.clone())),
                            _ => (code, message),
                        };
                        asr::AlterShareGroupOffsetsResponsePartition {
                            partition_index: p,
                            error_code: code,
                            error_message: message,
                            ..Default::default()
                        }
                    })
                    .collect(),
                ..Default::default()
            }
        }))
        .collect();
    respond(
        &ctx,
        NONE,
        ResponseBody::AlterShareGroupOffsets(AlterShareGroupOffsetsResponse {
            responses,
            ..Default::default()
        }),
    )
}

pub(super) async fn handle_delete_share_group_offsets(
    a: GroupApis,
    ctx: RequestContext,
    body: RequestBody,
) -> HandlerOutcome {
    let r = request_body!(body, DeleteShareGroupOffsets);
    let refuse = |(code, message): (i16, String)| {
        respond(
            &ctx,
            code,
            ResponseBody::DeleteShareGroupOffsets(DeleteShareGroupOffsetsResponse {
                error_code: code,
                error_message: Some(message),
                ..Default::default()
            }),
        )
    };
    if !share_groups_enabled(&a.partitions.borrow()) {
        return refuse(with_default_message(UNSUPPORTED_VERSION));
    }
    let request = GroupRequest::DeleteShareGroupOffsets {
        group_id: r.group_id.clone(),
        topics: r.topics.iter().map(|t| t.topic_name.clone()).collect(),
    };
    let out = shard_call!(a, &r.group_id, request,
        GroupResponse::DeleteShareGroupOffsets(o) => o);
    if let Some(e) = out.error {
        return refuse(e);
    }
    // The topics whose deletion was attempted, then the refused ones (as Kafka orders them).
    let refused: Vec<_> = out
        .refused
        .into_iter()
        .map(
            |(name, id, code, message)| dsr::DeleteShareGroupOffsetsResponseTopic {
                topic_name: name,
                topic_id: id,
                error_code: code,
                error_message: Some(message),
                ..Default::default()
            },
        )
        .collect();
    let mut responses = Vec::with_capacity(refused.len() + out.delete.len());
    let mut deleted = Vec::new();
    for (name, id, ps) in out.delete {
        let ops = ps.iter().map(|p| (id, *p, StateOp::Delete));
        let answers = state_ops(&a, &r.group_id, ops).await;
        let error = answers.iter().find_map(|(_, r)| r.as_ref().err().cloned());
        forget_local(&a, &r.group_id, ps.iter().map(|p| (id, *p)).collect()).await;
        let (code, message) = match error {
            Some((code, _)) => (code, Some(with_default_message(code).1)),
            None => {
                deleted.push(id);
                (NONE, None)
            }
        };
        responses.push(dsr::DeleteShareGroupOffsetsResponseTopic {
            topic_name: name,
            topic_id: id,
            error_code: code,
            error_message: message,
            ..Default::default()
        });
    }
    responses.extend(refused);
    if !deleted.is_empty() {
        let request = GroupRequest::ShareStateDeleted {
            group_id: r.group_id.clone(),
            topics: deleted,
        };
        let _ = a.call(&r.group_id, request).await;
    }
    respond(
        &ctx,
        NONE,
        ResponseBody::DeleteShareGroupOffsets(DeleteShareGroupOffsetsResponse {
            responses,
            ..Default::default()
        }),
    )
}
