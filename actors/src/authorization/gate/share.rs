//! Share group rules (Kafka's `KafkaApis.handleShareGroupHeartbeat`, `handleShareFetchRequest`,
//! `handleShareAcknowledgeRequest`, `handleShareGroupDescribe`,
//! `handleDescribeShareGroupOffsetsRequest`): READ on the group to take part, READ on a topic to
//! fetch or acknowledge its records, DESCRIBE on the group and its topics to look at it.

use kactor_protocol::errors::*;
use kactor_protocol::messages::{self as m, *};
use kactor_protocol::{RequestBody, ResponseBody, Uuid};

use super::{message, post, serve_rest, Check, Pre};
use crate::authorization::{AclOperation as Op, ResourceType as R, AUTHORIZED_OPERATIONS_OMITTED};

pub(super) fn heartbeat(c: &Check, r: ShareGroupHeartbeatRequest) -> Pre {
    let code = if !c.allow(Op::Read, R::Group, &r.group_id) {
        GROUP_AUTHORIZATION_FAILED
    } else if r
        .subscribed_topic_names
        .iter()
        .flatten()
        .any(|t| !c.allow(Op::Describe, R::Topic, t))
    {
        TOPIC_AUTHORIZATION_FAILED
    } else {
        return Pre::Serve(RequestBody::ShareGroupHeartbeat(r), None);
    };
    Pre::Refuse(ResponseBody::ShareGroupHeartbeat(
        ShareGroupHeartbeatResponse {
            error_code: code,
            ..Default::default()
        },
    ))
}

/// Whether the requester may read the topic `id` names (an unknown id is left to the handler,
/// which answers UNKNOWN_TOPIC_ID).
fn readable(c: &Check, id: &Uuid) -> bool {
    c.topic_name(id)
        .is_none_or(|name| c.allow(Op::Read, R::Topic, &name))
}

/// READ on the share group, when the request names one (a null group is the handler's
/// INVALID_REQUEST).
fn group_readable(c: &Check, group: Option<&str>) -> bool {
    group.is_none_or(|g| c.allow(Op::Read, R::Group, g))
}

pub(super) fn fetch(c: &Check, mut r: ShareFetchRequest) -> Pre {
    if !group_readable(c, r.group_id.as_deref()) {
        return Pre::Refuse(ResponseBody::ShareFetch(ShareFetchResponse {
            error_code: GROUP_AUTHORIZATION_FAILED,
            ..Default::default()
        }));
    }
    use m::share_fetch_response::{PartitionData, ShareFetchableTopicResponse};
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut r.topics)
        .into_iter()
        .partition(|t| readable(c, &t.topic_id));
    r.topics = allowed;
    let errors: Vec<ShareFetchableTopicResponse> = refused
        .into_iter()
        .map(|t| ShareFetchableTopicResponse {
            topic_id: t.topic_id,
            partitions: t
                .partitions
                .iter()
                .map(|p| PartitionData {
                    partition_index: p.partition_index,
                    error_code: TOPIC_AUTHORIZATION_FAILED,
                    records: Some(Default::default()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    serve_rest(RequestBody::ShareFetch(r), errors, |resp, errors| {
        if let ResponseBody::ShareFetch(f) = resp {
            if f.error_code == NONE {
                f.responses.extend(errors);
            }
        }
    })
}

pub(super) fn acknowledge(c: &Check, mut r: ShareAcknowledgeRequest) -> Pre {
    if !group_readable(c, r.group_id.as_deref()) {
        return Pre::Refuse(ResponseBody::ShareAcknowledge(ShareAcknowledgeResponse {
            error_code: GROUP_AUTHORIZATION_FAILED,
            ..Default::default()
        }));
    }
    use m::share_acknowledge_response::{PartitionData, ShareAcknowledgeTopicResponse};
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut r.topics)
        .into_iter()
        .partition(|t| readable(c, &t.topic_id));
    r.topics = allowed;
    let errors: Vec<ShareAcknowledgeTopicResponse> = refused
        .into_iter()
        .map(|t| ShareAcknowledgeTopicResponse {
            topic_id: t.topic_id,
            partitions: t
                .partitions
                .iter()
                .map(|p| PartitionData {
                    partition_index: p.partition_index,
                    error_code: TOPIC_AUTHORIZATION_FAILED,
                    error_message: message(TOPIC_AUTHORIZATION_FAILED),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    serve_rest(RequestBody::ShareAcknowledge(r), errors, |resp, errors| {
        if let ResponseBody::ShareAcknowledge(a) = resp {
            if a.error_code == NONE {
                a.responses.extend(errors);
            }
        }
    })
}

pub(super) fn describe(c: &Check, mut r: ShareGroupDescribeRequest) -> Pre {
    use m::share_group_describe_response::DescribedGroup;
    let include = r.include_authorized_operations;
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut r.group_ids)
        .into_iter()
        .partition(|g| c.allow(Op::Describe, R::Group, g));
    let errors: Vec<_> = refused
        .into_iter()
        .map(|group_id| DescribedGroup {
            error_code: GROUP_AUTHORIZATION_FAILED,
            error_message: message(GROUP_AUTHORIZATION_FAILED),
            group_id,
            authorized_operations: AUTHORIZED_OPERATIONS_OMITTED,
            ..Default::default()
        })
        .collect();
    if allowed.is_empty() {
        return Pre::Refuse(ResponseBody::ShareGroupDescribe(
            ShareGroupDescribeResponse {
                groups: errors,
                ..Default::default()
            },
        ));
    }
    r.group_ids = allowed;
    let c = c.clone();
    Pre::Serve(
        RequestBody::ShareGroupDescribe(r),
        post(move |resp| match resp {
            ResponseBody::ShareGroupDescribe(mut d) => {
                for g in &mut d.groups {
                    if g.error_code != NONE {
                        continue;
                    }
                    // Members' topics the requester may not describe hide the group.
                    let hidden = g.members.iter().any(|m| {
                        m.subscribed_topic_names
                            .iter()
                            .chain(m.assignment.topic_partitions.iter().map(|t| &t.topic_name))
                            .any(|t| !c.quietly(Op::Describe, R::Topic, t))
                    });
                    if hidden {
                        g.error_code = TOPIC_AUTHORIZATION_FAILED;
                        g.error_message = message(TOPIC_AUTHORIZATION_FAILED);
                        g.members.clear();
                        g.authorized_operations = AUTHORIZED_OPERATIONS_OMITTED;
                    } else if include {
                        g.authorized_operations = c.ops(R::Group, &g.group_id);
                    }
                }
                d.groups.extend(errors);
                ResponseBody::ShareGroupDescribe(d)
            }
            other => other,
        }),
    )
}

pub(super) fn describe_offsets(c: &Check, mut r: DescribeShareGroupOffsetsRequest) -> Pre {
    use m::describe_share_group_offsets_response::DescribeShareGroupOffsetsResponseGroup;
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut r.groups)
        .into_iter()
        .partition(|g| c.allow(Op::Describe, R::Group, &g.group_id));
    let errors: Vec<_> = refused
        .into_iter()
        .map(|g| DescribeShareGroupOffsetsResponseGroup {
            group_id: g.group_id,
            error_code: GROUP_AUTHORIZATION_FAILED,
            error_message: message(GROUP_AUTHORIZATION_FAILED),
            ..Default::default()
        })
        .collect();
    if allowed.is_empty() {
        return Pre::Refuse(ResponseBody::DescribeShareGroupOffsets(
            DescribeShareGroupOffsetsResponse {
                groups: errors,
                ..Default::default()
            },
        ));
    }
    r.groups = allowed;
    let c = c.clone();
    Pre::Serve(
        RequestBody::DescribeShareGroupOffsets(r),
        post(move |resp| match resp {
            ResponseBody::DescribeShareGroupOffsets(mut d) => {
                for g in &mut d.groups {
                    // A topic the requester may not describe: its partitions answer
                    // TOPIC_AUTHORIZATION_FAILED without offsets.
                    for t in &mut g.topics {
                        if !c.quietly(Op::Describe, R::Topic, &t.topic_name) {
                            for p in &mut t.partitions {
                                p.start_offset = -1;
                                p.lag = -1;
                                p.error_code = TOPIC_AUTHORIZATION_FAILED;
                                p.error_message = message(TOPIC_AUTHORIZATION_FAILED);
                            }
                        }
                    }
                }
                d.groups.extend(errors);
                ResponseBody::DescribeShareGroupOffsets(d)
            }
            other => other,
        }),
    )
}

/// AlterShareGroupOffsets: READ on the group, else the whole request fails; READ on each topic,
/// else its partitions answer TOPIC_AUTHORIZATION_FAILED (Kafka's
/// `handleAlterShareGroupOffsetsRequest`).
pub(super) fn alter_offsets(c: &Check, mut r: AlterShareGroupOffsetsRequest) -> Pre {
    use m::alter_share_group_offsets_response as resp;
    if !c.allow(Op::Read, R::Group, &r.group_id) {
        return Pre::Refuse(ResponseBody::AlterShareGroupOffsets(
            AlterShareGroupOffsetsResponse {
                error_code: GROUP_AUTHORIZATION_FAILED,
                error_message: message(GROUP_AUTHORIZATION_FAILED),
                ..Default::default()
            },
        ));
    }
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut r.topics)
        .into_iter()
        .partition(|t| c.allow(Op::Read, R::Topic, &t.topic_name));
    r.topics = allowed;
    let refused: Vec<_> = refused
        .into_iter()
        .map(|t| resp::AlterShareGroupOffsetsResponseTopic {
            topic_name: t.topic_name,
            topic_id: Uuid::default(),
            partitions: t
                .partitions
                .into_iter()
                .map(|p| resp::AlterShareGroupOffsetsResponsePartition {
                    partition_index: p.partition_index,
                    error_code: TOPIC_AUTHORIZATION_FAILED,
                    error_message: message(TOPIC_AUTHORIZATION_FAILED),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    serve_rest(
        RequestBody::AlterShareGroupOffsets(r),
        refused,
        |resp, e| {
            // A top-level error answers for the whole request, as in Kafka.
            if let ResponseBody::AlterShareGroupOffsets(a) = resp {
                if a.error_code == NONE {
                    a.responses.extend(e);
                }
            }
        },
    )
}

/// DeleteShareGroupOffsets: DELETE on the group; READ on each topic, else that topic answers
/// TOPIC_AUTHORIZATION_FAILED (Kafka's `handleDeleteShareGroupOffsetsRequest`).
pub(super) fn delete_offsets(c: &Check, mut r: DeleteShareGroupOffsetsRequest) -> Pre {
    use m::delete_share_group_offsets_response as resp;
    if !c.allow(Op::Delete, R::Group, &r.group_id) {
        return Pre::Refuse(ResponseBody::DeleteShareGroupOffsets(
            DeleteShareGroupOffsetsResponse {
                error_code: GROUP_AUTHORIZATION_FAILED,
                error_message: message(GROUP_AUTHORIZATION_FAILED),
                ..Default::default()
            },
        ));
    }
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut r.topics)
        .into_iter()
        .partition(|t| c.allow(Op::Read, R::Topic, &t.topic_name));
    r.topics = allowed;
    let refused: Vec<_> = refused
        .into_iter()
        .map(|t| resp::DeleteShareGroupOffsetsResponseTopic {
            topic_name: t.topic_name,
            topic_id: Uuid::default(),
            error_code: TOPIC_AUTHORIZATION_FAILED,
            error_message: message(TOPIC_AUTHORIZATION_FAILED),
            ..Default::default()
        })
        .collect();
    serve_rest(
        RequestBody::DeleteShareGroupOffsets(r),
        refused,
        |resp, e| {
            // Refused topics first, as Kafka lists them; a top-level error answers for all.
            if let ResponseBody::DeleteShareGroupOffsets(d) = resp {
                if d.error_code == NONE {
                    d.responses.splice(0..0, e);
                }
            }
        },
    )
}

/// The share coordinator's state APIs (InitializeShareGroupState ... ReadShareGroupStateSummary)
/// are for brokers: CLUSTER_ACTION on the cluster, else every partition of the request is
/// answered CLUSTER_AUTHORIZATION_FAILED (Kafka's `getErrorResponse`).
pub(super) fn state(c: &Check, body: RequestBody) -> Pre {
    if c.cluster(Op::ClusterAction) {
        return Pre::Serve(body, None);
    }
    let code = CLUSTER_AUTHORIZATION_FAILED;
    macro_rules! refuse {
        ($r:expr, $module:ident, $topic:ident, $variant:ident, $response:ident) => {
            ResponseBody::$variant($response {
                results: $r
                    .topics
                    .iter()
                    .map(|t| m::$module::$topic {
                        topic_id: t.topic_id,
                        partitions: t
                            .partitions
                            .iter()
                            .map(|p| m::$module::PartitionResult {
                                partition: p.partition,
                                error_code: code,
                                error_message: message(code),
                                ..Default::default()
                            })
                            .collect(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
        };
    }
    Pre::Refuse(match body {
        RequestBody::InitializeShareGroupState(r) => refuse!(
            r,
            initialize_share_group_state_response,
            InitializeStateResult,
            InitializeShareGroupState,
            InitializeShareGroupStateResponse
        ),
        RequestBody::ReadShareGroupState(r) => refuse!(
            r,
            read_share_group_state_response,
            ReadStateResult,
            ReadShareGroupState,
            ReadShareGroupStateResponse
        ),
        RequestBody::WriteShareGroupState(r) => refuse!(
            r,
            write_share_group_state_response,
            WriteStateResult,
            WriteShareGroupState,
            WriteShareGroupStateResponse
        ),
        RequestBody::DeleteShareGroupState(r) => refuse!(
            r,
            delete_share_group_state_response,
            DeleteStateResult,
            DeleteShareGroupState,
            DeleteShareGroupStateResponse
        ),
        RequestBody::ReadShareGroupStateSummary(r) => refuse!(
            r,
            read_share_group_state_summary_response,
            ReadStateSummaryResult,
            ReadShareGroupStateSummary,
            ReadShareGroupStateSummaryResponse
        ),
        other => return Pre::Serve(other, None),
    })
}
