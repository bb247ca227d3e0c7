//! Request handlers for the group APIs (Kafka's `KafkaApis.handle{FindCoordinator, JoinGroup,
//! SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete,
//! DescribeGroups, ListGroups, DeleteGroups, ConsumerGroupHeartbeat, ConsumerGroupDescribe}`
//! with `GroupCoordinatorService`'s routing): each request is converted from its wire version,
//! sent to the shard owning `abs(hash(group.id)) % offsets.topic.num.partitions` (split per
//! group when it names several), and the shard's answer converted back at the request's
//! version. The conversions are pure functions, tested without actors.

use std::collections::HashMap;
use std::sync::Arc;

use crate::runtime::MeteredRecipient;
use futures_util::future::join_all;
use kactor_protocol::errors::*;
use kactor_protocol::messages::{
    consumer_group_describe_response as cgd, consumer_group_heartbeat_response as cgh,
    delete_groups_response as dgr, describe_groups_response as dsr,
    find_coordinator_response as fcr, join_group_response as jgr, leave_group_response as lgr,
    list_groups_response as lsr, offset_commit_response as ocr, offset_delete_response as odr,
    offset_fetch_response as ofr, txn_offset_commit_response as tcr, ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, DeleteGroupsResponse,
    DescribeGroupsResponse, FindCoordinatorRequest, FindCoordinatorResponse, HeartbeatResponse,
    JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse, ListGroupsResponse,
    OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteResponse, OffsetFetchRequest,
    OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse, TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
};
use kactor_protocol::{ApiKey, RequestBody, ResponseBody, Uuid};
use tokio::sync::watch;

use super::core::api::*;
use super::core::hashing::{coordinator_partition, group_partition, transaction_partition};
use super::messages::HandleGroupRequest;
use crate::authorization::{authorized_operations, ResourceType, AUTHORIZED_OPERATIONS_OMITTED};
use crate::network::{HandlerOutcome, RequestContext, RequestRouter};
use crate::partition::registry::PartitionTableReader;

/// The shards this broker runs, by `__consumer_offsets` partition (published by whoever
/// starts and stops them as leadership moves).
#[derive(Clone, Default)]
pub struct GroupShardTable {
    pub offsets_topic_num_partitions: i32,
    pub shards: HashMap<i32, MeteredRecipient<HandleGroupRequest>>,
    /// The same shards, told when a transaction marker lands in their partition.
    pub txn_completions: HashMap<i32, MeteredRecipient<super::messages::CompleteGroupTransaction>>,
}

pub type GroupShardTableReader = watch::Receiver<Arc<GroupShardTable>>;

/// What the group API handlers capture.
#[derive(Clone)]
pub struct GroupApis {
    pub shards: GroupShardTableReader,
    /// Topic ids and names (OffsetCommit/OffsetFetch v10), leaders and brokers
    /// (FindCoordinator).
    pub partitions: PartitionTableReader,
    /// `transaction.state.log.num.partitions`
    pub transaction_state_num_partitions: i32,
    /// Creates `__consumer_offsets` on the first FindCoordinator that needs it, as Kafka
    /// does (None: created elsewhere, e.g. at start-up).
    pub offsets_topic: Option<OffsetsTopicCreator>,
    /// `share.coordinator.state.topic.num.partitions`
    pub share_state_num_partitions: i32,
    /// Creates `__share_group_state` on the first FindCoordinator for a share key.
    pub share_state_topic: Option<crate::share::coordinator::apis::ShareStateTopicCreator>,
    /// Share groups' state at the share coordinator (None: share-partition leaders keep it).
    pub share_state: Option<share::ShareStateAdmin>,
}

/// How to create `__consumer_offsets` through the controller.
#[derive(Clone)]
pub struct OffsetsTopicCreator {
    pub controller: MeteredRecipient<crate::controller::messages::CreateTopics>,
    /// `offsets.topic.replication.factor`
    pub replication_factor: i16,
    /// `offsets.topic.segment.bytes`
    pub segment_bytes: i64,
}

/// `__consumer_offsets` as Kafka creates it: compacted, producer compression.
pub fn offsets_topic_creation(
    num_partitions: i32,
    replication_factor: i16,
    segment_bytes: i64,
) -> crate::controller::core::requests::CreatableTopic {
    crate::controller::core::requests::CreatableTopic {
        name: OFFSETS_TOPIC.to_string(),
        num_partitions,
        replication_factor,
        assignments: Vec::new(),
        configs: vec![
            ("cleanup.policy".to_string(), Some("compact".to_string())),
            ("compression.type".to_string(), Some("producer".to_string())),
            ("segment.bytes".to_string(), Some(segment_bytes.to_string())),
        ],
    }
}

pub const OFFSETS_TOPIC: &str = "__consumer_offsets";
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

impl GroupApis {
    fn shard_for(&self, group_id: &str) -> Option<MeteredRecipient<HandleGroupRequest>> {
        let table = self.shards.borrow().clone();
        if table.offsets_topic_num_partitions <= 0 {
            return None;
        }
        let p = group_partition(group_id, table.offsets_topic_num_partitions);
        table.shards.get(&p).cloned()
    }

    /// Sends to the group's shard; NOT_COORDINATOR when this broker does not run it.
    async fn call(&self, group_id: &str, request: GroupRequest) -> GroupResponse {
        match self.shard_for(group_id) {
            Some(shard) => {
                let fallback = request.error_response(NOT_COORDINATOR);
                shard
                    .send(HandleGroupRequest { request })
                    .await
                    .unwrap_or(fallback)
            }
            None => request.error_response(NOT_COORDINATOR),
        }
    }

    fn topic_name(&self, id: &Uuid) -> Option<String> {
        self.partitions.borrow().topic_name(id)
    }

    fn topic_id(&self, name: &str) -> Uuid {
        self.partitions.borrow().topic_id(name).unwrap_or_default()
    }
}

// ---------------------------------------------------------------------------------------------
// Conversions (pure)

/// `value` when the field exists at `version` (it was added in version `first`), else
/// `absent`: what an older request means by the missing field, or what an older response
/// carries instead.
fn since<T>(version: i16, first: i16, value: T, absent: T) -> T {
    if version >= first {
        value
    } else {
        absent
    }
}

pub fn join_group_input(
    version: i16,
    r: &JoinGroupRequest,
    client_id: &str,
    client_host: &str,
) -> JoinGroupInput {
    JoinGroupInput {
        api_version: version,
        group_id: r.group_id.clone(),
        session_timeout_ms: r.session_timeout_ms,
        // v0 has no rebalance timeout: Kafka uses the session timeout.
        rebalance_timeout_ms: if version == 0 {
            r.session_timeout_ms
        } else {
            r.rebalance_timeout_ms
        },
        member_id: r.member_id.clone(),
        group_instance_id: r.group_instance_id.clone(),
        protocol_type: r.protocol_type.clone(),
        protocols: r
            .protocols
            .iter()
            .map(|p| (p.name.clone(), p.metadata.clone()))
            .collect(),
        reason: r.reason.clone(),
        client_id: client_id.to_string(),
        client_host: client_host.to_string(),
    }
}

pub fn join_group_response(version: i16, o: JoinGroupOutput) -> JoinGroupResponse {
    JoinGroupResponse {
        error_code: o.error_code,
        generation_id: o.generation_id,
        // Nullable only from v7.
        protocol_type: since(version, 7, o.protocol_type, None),
        protocol_name: if version >= 7 {
            o.protocol_name
        } else {
            Some(o.protocol_name.unwrap_or_default())
        },
        leader: o.leader,
        skip_assignment: version >= 9 && o.skip_assignment,
        member_id: o.member_id,
        members: o
            .members
            .into_iter()
            .map(|m| jgr::JoinGroupResponseMember {
                member_id: m.member_id,
                group_instance_id: since(version, 5, m.group_instance_id, None),
                metadata: m.metadata,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

pub fn sync_group_input(version: i16, r: &SyncGroupRequest) -> SyncGroupInput {
    SyncGroupInput {
        api_version: version,
        group_id: r.group_id.clone(),
        generation_id: r.generation_id,
        member_id: r.member_id.clone(),
        group_instance_id: r.group_instance_id.clone(),
        protocol_type: r.protocol_type.clone(),
        protocol_name: r.protocol_name.clone(),
        assignments: r
            .assignments
            .iter()
            .map(|a| (a.member_id.clone(), a.assignment.clone()))
            .collect(),
    }
}

pub fn sync_group_response(version: i16, o: SyncGroupOutput) -> SyncGroupResponse {
    SyncGroupResponse {
        error_code: o.error_code,
        protocol_type: since(version, 5, o.protocol_type, None),
        protocol_name: since(version, 5, o.protocol_name, None),
        assignment: o.assignment,
        ..Default::default()
    }
}

pub fn leave_group_input(version: i16, r: &LeaveGroupRequest) -> LeaveGroupInput {
    let members = if version >= 3 {
        r.members
            .iter()
            .map(|m| LeaveGroupMemberInput {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                reason: m.reason.clone(),
            })
            .collect()
    } else {
        vec![LeaveGroupMemberInput {
            member_id: r.member_id.clone(),
            ..Default::default()
        }]
    };
    LeaveGroupInput {
        group_id: r.group_id.clone(),
        members,
    }
}

pub fn leave_group_response(version: i16, o: LeaveGroupOutput) -> LeaveGroupResponse {
    if version < 3 {
        // One member, reported at the top level.
        let code = if o.error_code != NONE {
            o.error_code
        } else {
            o.members.first().map_or(NONE, |m| m.error_code)
        };
        return LeaveGroupResponse {
            error_code: code,
            ..Default::default()
        };
    }
    LeaveGroupResponse {
        error_code: o.error_code,
        members: o
            .members
            .into_iter()
            .map(|m| lgr::MemberResponse {
                member_id: m.member_id,
                group_instance_id: m.group_instance_id,
                error_code: m.error_code,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// Adds `partitions` with `code` to the error rows, under the topic's row if it has one (by
/// id from v10, by name before: Kafka's `OffsetCommitResponse.Builder`).
fn add_commit_errors(
    rows: &mut Vec<CommitTopicOutput>,
    by_id: bool,
    name: &str,
    topic_id: Uuid,
    partitions: impl IntoIterator<Item = (i32, i16)>,
) {
    let i = match rows.iter().position(|t| {
        if by_id {
            t.topic_id == topic_id
        } else {
            t.name == name
        }
    }) {
        Some(i) => i,
        None => {
            rows.push(CommitTopicOutput {
                name: name.to_string(),
                topic_id,
                partitions: Vec::new(),
            });
            rows.len() - 1
        }
    };
    rows[i].partitions.extend(partitions);
}

/// OffsetCommit as the group coordinator gets it, with what Kafka's `KafkaApis` answers
/// before asking the coordinator (in request order): an id the cluster does not know
/// (v10+) is UNKNOWN_TOPIC_ID, a topic or partition it does not have
/// UNKNOWN_TOPIC_OR_PARTITION; neither is committed.
pub fn offset_commit_input(
    version: i16,
    r: &OffsetCommitRequest,
    name_of: &dyn Fn(&Uuid) -> Option<String>,
    partition_exists: &dyn Fn(&str, i32) -> bool,
) -> (OffsetCommitInput, Vec<CommitTopicOutput>) {
    let by_id = version >= 10;
    let mut topics: Vec<CommitTopicInput> = Vec::new();
    let mut errors = Vec::new();
    for t in &r.topics {
        let name = if by_id {
            name_of(&t.topic_id)
        } else {
            Some(t.name.clone())
        };
        let topic_id = if by_id { t.topic_id } else { Uuid::ZERO };
        let Some(name) = name else {
            let failed = t
                .partitions
                .iter()
                .map(|p| (p.partition_index, UNKNOWN_TOPIC_ID));
            add_commit_errors(&mut errors, by_id, "", topic_id, failed);
            continue;
        };
        let mut valid = Vec::new();
        for p in &t.partitions {
            if partition_exists(&name, p.partition_index) {
                valid.push(CommitPartitionInput {
                    partition_index: p.partition_index,
                    committed_offset: p.committed_offset,
                    committed_leader_epoch: since(version, 6, p.committed_leader_epoch, -1),
                    committed_metadata: p.committed_metadata.clone(),
                });
            } else {
                let failed = [(p.partition_index, UNKNOWN_TOPIC_OR_PARTITION)];
                add_commit_errors(&mut errors, by_id, &name, topic_id, failed);
            }
        }
        if !valid.is_empty() {
            topics.push(CommitTopicInput {
                name,
                topic_id,
                partitions: valid,
            });
        }
    }
    (
        OffsetCommitInput {
            api_version: version,
            group_id: r.group_id.clone(),
            generation_id_or_member_epoch: r.generation_id_or_member_epoch,
            member_id: r.member_id.clone(),
            group_instance_id: r.group_instance_id.clone(),
            retention_time_ms: if (2..=4).contains(&version) {
                r.retention_time_ms
            } else {
                -1
            },
            topics,
        },
        errors,
    )
}

/// The coordinator's rows merged into the error rows found before it (Kafka's
/// `OffsetCommitResponse.Builder.merge`): a topic already there gets the partitions appended.
pub fn merge_commit_results(
    version: i16,
    errors: Vec<CommitTopicOutput>,
    results: Vec<CommitTopicOutput>,
) -> Vec<CommitTopicOutput> {
    merge_commit_rows(version >= 10, errors, results)
}

/// As [`merge_commit_results`], rows matched by topic id when `by_id`, else by name.
fn merge_commit_rows(
    by_id: bool,
    errors: Vec<CommitTopicOutput>,
    results: Vec<CommitTopicOutput>,
) -> Vec<CommitTopicOutput> {
    if errors.is_empty() {
        return results;
    }
    let mut rows = errors;
    for t in results {
        add_commit_errors(&mut rows, by_id, &t.name, t.topic_id, t.partitions);
    }
    rows
}

pub fn offset_commit_response(
    version: i16,
    topics: Vec<CommitTopicOutput>,
) -> OffsetCommitResponse {
    OffsetCommitResponse {
        topics: topics
            .into_iter()
            .map(|t| ocr::OffsetCommitResponseTopic {
                name: if version >= 10 { String::new() } else { t.name },
                topic_id: since(version, 10, t.topic_id, Uuid::ZERO),
                partitions: t
                    .partitions
                    .into_iter()
                    .map(|(p, e)| ocr::OffsetCommitResponsePartition {
                        partition_index: p,
                        error_code: e,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// TxnOffsetCommit as the group coordinator gets it, with what Kafka's `KafkaApis` answers
/// before asking the coordinator (as for OffsetCommit): an id the cluster does not know
/// (v6+) is UNKNOWN_TOPIC_ID, a topic or partition it does not have
/// UNKNOWN_TOPIC_OR_PARTITION; neither is committed.
pub fn txn_offset_commit_input(
    version: i16,
    r: &TxnOffsetCommitRequest,
    name_of: &dyn Fn(&Uuid) -> Option<String>,
    partition_exists: &dyn Fn(&str, i32) -> bool,
) -> (TxnOffsetCommitInput, Vec<CommitTopicOutput>) {
    // TxnOffsetCommit names topics by id from v6 (OffsetCommit from v10).
    let by_id = version >= 6;
    let mut topics = Vec::new();
    let mut errors = Vec::new();
    for t in &r.topics {
        let topic_id = if by_id { t.topic_id } else { Uuid::ZERO };
        let name = if by_id {
            name_of(&t.topic_id)
        } else {
            Some(t.name.clone())
        };
        let Some(name) = name else {
            let failed = t
                .partitions
                .iter()
                .map(|p| (p.partition_index, UNKNOWN_TOPIC_ID));
            add_commit_errors(&mut errors, by_id, "", topic_id, failed);
            continue;
        };
        let mut valid = Vec::new();
        for p in &t.partitions {
            if partition_exists(&name, p.partition_index) {
                valid.push(CommitPartitionInput {
                    partition_index: p.partition_index,
                    committed_offset: p.committed_offset,
                    committed_leader_epoch: p.committed_leader_epoch,
                    committed_metadata: p.committed_metadata.clone(),
                });
            } else {
                let failed = [(p.partition_index, UNKNOWN_TOPIC_OR_PARTITION)];
                add_commit_errors(&mut errors, by_id, &name, topic_id, failed);
            }
        }
        if !valid.is_empty() {
            topics.push(CommitTopicInput {
                name,
                topic_id,
                partitions: valid,
            });
        }
    }
    (
        TxnOffsetCommitInput {
            group_id: r.group_id.clone(),
            producer_id: r.producer_id,
            producer_epoch: r.producer_epoch,
            generation_id: r.generation_id_or_member_epoch,
            member_id: r.member_id.clone(),
            group_instance_id: r.group_instance_id.clone(),
            topics,
        },
        errors,
    )
}

/// From v6 the rows carry the topic id the request named (Kafka echoes it), not the name.
pub fn txn_offset_commit_response(
    version: i16,
    topics: Vec<CommitTopicOutput>,
    id_of: &dyn Fn(&str) -> Uuid,
) -> TxnOffsetCommitResponse {
    TxnOffsetCommitResponse {
        topics: topics
            .into_iter()
            .map(|t| tcr::TxnOffsetCommitResponseTopic {
                topic_id: if version < 6 {
                    Uuid::ZERO
                } else if t.topic_id != Uuid::ZERO {
                    t.topic_id
                } else {
                    id_of(&t.name)
                },
                name: if version < 6 { t.name } else { String::new() },
                partitions: t
                    .partitions
                    .into_iter()
                    .map(|(p, e)| tcr::TxnOffsetCommitResponsePartition {
                        partition_index: p,
                        error_code: e,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// The groups an OffsetFetch asks about (v0–v7: one, v8+: many).
pub fn offset_fetch_inputs(
    version: i16,
    r: &OffsetFetchRequest,
    name_of: &dyn Fn(&Uuid) -> Option<String>,
) -> Vec<OffsetFetchGroupInput> {
    if version < 8 {
        return vec![OffsetFetchGroupInput {
            group_id: r.group_id.clone(),
            member_id: None,
            member_epoch: -1,
            topics: r.topics.as_ref().map(|ts| {
                ts.iter()
                    .map(|t| (t.name.clone(), t.partition_indexes.clone()))
                    .collect()
            }),
        }];
    }
    r.groups
        .iter()
        .map(|g| OffsetFetchGroupInput {
            group_id: g.group_id.clone(),
            member_id: g.member_id.clone(),
            member_epoch: g.member_epoch,
            // v10+: ids the cluster does not know are answered by the handler
            // (`unknown_fetch_topic_ids`), not looked up.
            topics: g.topics.as_ref().map(|ts| {
                ts.iter()
                    .filter_map(|t| {
                        let name = if version >= 10 {
                            name_of(&t.topic_id)?
                        } else {
                            t.name.clone()
                        };
                        Some((name, t.partition_indexes.clone()))
                    })
                    .collect()
            }),
        })
        .collect()
}

/// Per group of an OffsetFetch v10+, the topic ids the cluster does not know with their
/// partitions: Kafka's `KafkaApis` answers them UNKNOWN_TOPIC_ID itself, echoing the id.
pub fn unknown_fetch_topic_ids(
    version: i16,
    r: &OffsetFetchRequest,
    name_of: &dyn Fn(&Uuid) -> Option<String>,
) -> Vec<Vec<(Uuid, Vec<i32>)>> {
    if version < 10 {
        return Vec::new();
    }
    r.groups
        .iter()
        .map(|g| {
            g.topics
                .iter()
                .flatten()
                .filter(|t| name_of(&t.topic_id).is_none())
                .map(|t| (t.topic_id, t.partition_indexes.clone()))
                .collect()
        })
        .collect()
}

/// The OffsetFetch answer at `version`. `unknown` (v10+, per group, from
/// `unknown_fetch_topic_ids`) are appended as UNKNOWN_TOPIC_ID rows after the coordinator's
/// topics of a group fetched without error; from v10 a topic whose id is gone (deleted) is
/// left out, as Kafka does.
pub fn offset_fetch_response(
    version: i16,
    groups: Vec<FetchedGroup>,
    unknown: Vec<Vec<(Uuid, Vec<i32>)>>,
    id_of: &dyn Fn(&str) -> Uuid,
) -> OffsetFetchResponse {
    if version < 8 {
        let g = groups.into_iter().next();
        let (error_code, topics) = g.map_or((NONE, Vec::new()), |g| (g.error_code, g.topics));
        let mut resp = OffsetFetchResponse {
            topics: topics
                .into_iter()
                .map(|(name, ps)| ofr::OffsetFetchResponseTopic {
                    name,
                    partitions: ps
                        .into_iter()
                        .map(|p| ofr::OffsetFetchResponsePartition {
                            partition_index: p.partition_index,
                            committed_offset: p.committed_offset,
                            committed_leader_epoch: since(version, 5, p.committed_leader_epoch, -1),
                            metadata: Some(p.metadata),
                            // Before v2 a group error can only be told per partition.
                            error_code: if version < 2 && error_code != NONE {
                                error_code
                            } else {
                                p.error_code
                            },
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        if version >= 2 {
            resp.error_code = error_code;
        }
        return resp;
    }
    let mut unknown = unknown.into_iter();
    OffsetFetchResponse {
        groups: groups
            .into_iter()
            .map(|g| {
                let unknown = unknown.next().unwrap_or_default();
                let mut topics: Vec<ofr::OffsetFetchResponseTopics> = g
                    .topics
                    .into_iter()
                    .map(|(name, ps)| (since(version, 10, id_of(&name), Uuid::ZERO), name, ps))
                    .filter(|(id, _, _)| version < 10 || *id != Uuid::ZERO)
                    .map(|(topic_id, name, ps)| ofr::OffsetFetchResponseTopics {
                        topic_id,
                        name: if version >= 10 { String::new() } else { name },
                        partitions: ps
                            .into_iter()
                            .map(|p| ofr::OffsetFetchResponsePartitions {
                                partition_index: p.partition_index,
                                committed_offset: p.committed_offset,
                                committed_leader_epoch: p.committed_leader_epoch,
                                metadata: Some(p.metadata),
                                error_code: p.error_code,
                                ..Default::default()
                            })
                            .collect(),
                        ..Default::default()
                    })
                    .collect();
                if g.error_code == NONE {
                    topics.extend(unknown.into_iter().map(|(topic_id, partitions)| {
                        ofr::OffsetFetchResponseTopics {
                            topic_id,
                            partitions: partitions
                                .into_iter()
                                .map(|p| ofr::OffsetFetchResponsePartitions {
                                    partition_index: p,
                                    committed_offset: -1,
                                    committed_leader_epoch: -1,
                                    metadata: Some(String::new()),
                                    error_code: UNKNOWN_TOPIC_ID,
                                    ..Default::default()
                                })
                                .collect(),
                            ..Default::default()
                        }
                    }));
                }
                ofr::OffsetFetchResponseGroup {
                    group_id: g.group_id,
                    error_code: g.error_code,
                    topics,
                    ..Default::default()
                }
            })
            .collect(),
        ..Default::default()
    }
}

/// (topic, [(partition, error code)]) rows of an OffsetDelete answer.
pub type TopicPartitionErrors = Vec<(String, Vec<(i32, i16)>)>;

/// (topic, partitions) split into those the cluster has and error rows for the others
/// (UNKNOWN_TOPIC_OR_PARTITION), as Kafka's `KafkaApis.handleOffsetDeleteRequest` does before
/// the coordinator.
pub fn split_unknown_partitions(
    topics: Vec<(String, Vec<i32>)>,
    partition_exists: &dyn Fn(&str, i32) -> bool,
) -> (Vec<(String, Vec<i32>)>, TopicPartitionErrors) {
    let mut valid = Vec::new();
    let mut errors: TopicPartitionErrors = Vec::new();
    for (topic, partitions) in topics {
        let (known, unknown): (Vec<i32>, Vec<i32>) = partitions
            .into_iter()
            .partition(|p| partition_exists(&topic, *p));
        if !unknown.is_empty() {
            let failed = unknown.into_iter().map(|p| (p, UNKNOWN_TOPIC_OR_PARTITION));
            match errors.iter_mut().find(|(t, _)| *t == topic) {
                Some((_, ps)) => ps.extend(failed),
                None => errors.push((topic.clone(), failed.collect())),
            }
        }
        if !known.is_empty() {
            valid.push((topic, known));
        }
    }
    (valid, errors)
}

/// The coordinator's answer merged into the error rows found before it (Kafka's
/// `OffsetDeleteResponse.Builder.merge`): a group-level error replaces everything.
pub fn merge_offset_delete(
    errors: TopicPartitionErrors,
    out: OffsetDeleteOutput,
) -> OffsetDeleteOutput {
    if out.error_code != NONE || errors.is_empty() {
        return out;
    }
    let mut topics = errors;
    for (topic, partitions) in out.topics {
        match topics.iter_mut().find(|(t, _)| *t == topic) {
            Some((_, ps)) => ps.extend(partitions),
            None => topics.push((topic, partitions)),
        }
    }
    OffsetDeleteOutput {
        error_code: NONE,
        topics,
    }
}

pub fn offset_delete_response(o: OffsetDeleteOutput) -> OffsetDeleteResponse {
    OffsetDeleteResponse {
        error_code: o.error_code,
        topics: o
            .topics
            .into_iter()
            .map(|(name, ps)| odr::OffsetDeleteResponseTopic {
                name,
                partitions: ps
                    .into_iter()
                    .map(|(p, e)| odr::OffsetDeleteResponsePartition {
                        partition_index: p,
                        error_code: e,
                    })
                    .collect(),
            })
            .collect(),
        ..Default::default()
    }
}

/// `AuthorizedOperations` of a described group: what a client without restrictions may do on
/// a GROUP resource, only for groups described without error and when asked (Kafka's
/// `KafkaApis.handleDescribeGroupsRequest` / `handleConsumerGroupDescribe`).
fn group_authorized_operations(error_code: i16, requested: bool) -> i32 {
    if requested && error_code == NONE {
        authorized_operations(ResourceType::Group)
    } else {
        AUTHORIZED_OPERATIONS_OMITTED
    }
}

/// One DescribeGroups row; `include_operations` is the request's
/// IncludeAuthorizedOperations, which Kafka honours from v3.
pub fn described_group(
    version: i16,
    include_operations: bool,
    g: DescribedGroup,
) -> dsr::DescribedGroup {
    let authorized_operations =
        group_authorized_operations(g.error_code, version >= 3 && include_operations);
    dsr::DescribedGroup {
        error_code: g.error_code,
        error_message: g.error_message,
        group_id: g.group_id,
        group_state: g.group_state,
        protocol_type: g.protocol_type,
        protocol_data: g.protocol_data,
        members: g
            .members
            .into_iter()
            .map(|m| dsr::DescribedGroupMember {
                member_id: m.member_id,
                group_instance_id: m.group_instance_id,
                client_id: m.client_id,
                client_host: m.client_host,
                member_metadata: m.member_metadata,
                member_assignment: m.member_assignment,
                ..Default::default()
            })
            .collect(),
        authorized_operations,
        ..Default::default()
    }
}

pub fn consumer_group_heartbeat_input(
    version: i16,
    r: &ConsumerGroupHeartbeatRequest,
    client_id: &str,
    client_host: &str,
) -> ConsumerGroupHeartbeatInput {
    ConsumerGroupHeartbeatInput {
        api_version: version,
        group_id: r.group_id.clone(),
        member_id: r.member_id.clone(),
        member_epoch: r.member_epoch,
        instance_id: r.instance_id.clone(),
        rack_id: r.rack_id.clone(),
        rebalance_timeout_ms: r.rebalance_timeout_ms,
        subscribed_topic_names: r.subscribed_topic_names.clone(),
        subscribed_topic_regex: r.subscribed_topic_regex.clone(),
        server_assignor: r.server_assignor.clone(),
        topic_partitions: r.topic_partitions.as_ref().map(|tps| {
            tps.iter()
                .map(|t| (t.topic_id, t.partitions.clone()))
                .collect()
        }),
        client_id: client_id.to_string(),
        client_host: client_host.to_string(),
    }
}

pub fn consumer_group_heartbeat_response(
    o: ConsumerGroupHeartbeatOutput,
) -> ConsumerGroupHeartbeatResponse {
    ConsumerGroupHeartbeatResponse {
        error_code: o.error_code,
        error_message: o.error_message,
        member_id: o.member_id,
        member_epoch: o.member_epoch,
        heartbeat_interval_ms: o.heartbeat_interval_ms,
        assignment: o.assignment.map(|tps| cgh::Assignment {
            topic_partitions: tps
                .into_iter()
                .map(|(id, ps)| cgh::TopicPartitions {
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

pub fn described_consumer_group(
    include_operations: bool,
    g: DescribedConsumerGroup,
) -> cgd::DescribedGroup {
    let authorized_operations = group_authorized_operations(g.error_code, include_operations);
    let assignment = |tps: Vec<(Uuid, String, Vec<i32>)>| cgd::Assignment {
        topic_partitions: tps
            .into_iter()
            .map(|(id, name, ps)| cgd::TopicPartitions {
                topic_id: id,
                topic_name: name,
                partitions: ps,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    cgd::DescribedGroup {
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
            .map(|m| cgd::Member {
                member_id: m.member_id,
                instance_id: m.instance_id,
                rack_id: m.rack_id,
                member_epoch: m.member_epoch,
                client_id: m.client_id,
                client_host: m.client_host,
                subscribed_topic_names: m.subscribed_topic_names,
                subscribed_topic_regex: m.subscribed_topic_regex,
                assignment: assignment(m.assignment),
                target_assignment: assignment(m.target_assignment),
                // KIP-1099: 0 a classic member (mixed group), 1 a consumer protocol member.
                member_type: if m.uses_classic_protocol { 0 } else { 1 },
                ..Default::default()
            })
            .collect(),
        authorized_operations,
        ..Default::default()
    }
}

/// Kafka's `FindCoordinatorRequest.CoordinatorType` ids.
const GROUP_KEY: i8 = 0;
const TRANSACTION_KEY: i8 = 1;
const SHARE_KEY: i8 = 2;
/// Share coordinator keys exist from FindCoordinator v6 (KIP-932).
const SHARE_KEY_MIN_VERSION: i16 = 6;

/// Where one key's coordinator is: the error and the node (Kafka's `Node.noNode()`, -1 "" -1,
/// with an error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    pub error_code: i16,
    pub node_id: i32,
    pub host: String,
    pub port: i32,
}

impl Located {
    fn error(code: i16) -> Self {
        Located {
            error_code: code,
            node_id: -1,
            host: String::new(),
            port: -1,
        }
    }
}

/// Whether `key` is a share coordinator key `groupId:topicId:partition` (Kafka's
/// `SharePartitionKey.getInstance`: the group id may itself hold ':' but not be blank).
fn is_share_partition_key(key: &str) -> bool {
    // Java's String.split drops trailing empty tokens.
    let mut tokens: Vec<&str> = key.split(':').collect();
    while tokens.last() == Some(&"") {
        tokens.pop();
    }
    if key.is_empty() || tokens.len() < 3 {
        return false;
    }
    let n = tokens.len();
    let group = tokens[..n - 2].join(":");
    !group.trim().is_empty()
        && tokens[n - 2].parse::<Uuid>().is_ok()
        && tokens[n - 1].parse::<i32>().is_ok()
}

/// FindCoordinator for one key (Kafka's `KafkaApis.getCoordinator`): the leader of the key's
/// coordinator partition, at the listener the request came in on. Any group id is hashed,
/// the empty one too. `key_type` is one Kafka knows (see `find_coordinator_response`).
pub fn find_coordinator(
    key: &str,
    key_type: i8,
    version: i16,
    num_partitions: i32,
    listener: &str,
    image: Option<&crate::metadata::core::MetadataImage>,
) -> Located {
    let (topic, partition) = match key_type {
        GROUP_KEY => (OFFSETS_TOPIC, group_partition(key, num_partitions.max(1))),
        TRANSACTION_KEY => (
            TRANSACTION_STATE_TOPIC,
            transaction_partition(key, num_partitions.max(1)),
        ),
        SHARE_KEY if version < SHARE_KEY_MIN_VERSION || !is_share_partition_key(key) => {
            return Located::error(INVALID_REQUEST)
        }
        SHARE_KEY => (
            crate::share::coordinator::actor::SHARE_STATE_TOPIC,
            coordinator_partition(key, num_partitions.max(1)),
        ),
        _ => return Located::error(INVALID_REQUEST),
    };
    let Some(image) = image else {
        return Located::error(COORDINATOR_NOT_AVAILABLE);
    };
    let leader = image
        .topics
        .get_by_name(topic)
        .and_then(|t| t.partitions.get(&partition))
        .map(|p| p.leader)
        .filter(|l| *l >= 0);
    let endpoint = leader.and_then(|l| {
        let broker = image.brokers.get(&l).filter(|b| !b.fenced)?;
        let ep = broker.listeners.iter().find(|e| e.name == listener)?;
        Some((l, ep.host.clone(), ep.port as i32))
    });
    match endpoint {
        Some((node_id, host, port)) => Located {
            error_code: NONE,
            node_id,
            host,
            port,
        },
        None => Located::error(COORDINATOR_NOT_AVAILABLE),
    }
}

/// The partition counts of the coordinator topics (`offsets.topic.num.partitions`,
/// `transaction.state.log.num.partitions`, `share.coordinator.state.topic.num.partitions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoordinatorPartitions {
    pub offsets: i32,
    pub transaction: i32,
    pub share: i32,
}

/// FindCoordinator at any version. v4+ answers a row per key whose ErrorMessage Kafka leaves
/// empty; v1–v3 answer one key with `Errors.message()` ("NONE" on success), and an error
/// there carries no node. A key type Kafka does not know fails the whole request with
/// INVALID_REQUEST and its standard message.
pub fn find_coordinator_response(
    version: i16,
    r: &FindCoordinatorRequest,
    partitions: CoordinatorPartitions,
    listener: &str,
    image: Option<&crate::metadata::core::MetadataImage>,
) -> FindCoordinatorResponse {
    let key_type = since(version, 1, r.key_type, GROUP_KEY);
    let partitions = match key_type {
        TRANSACTION_KEY => partitions.transaction,
        SHARE_KEY => partitions.share,
        _ => partitions.offsets,
    };
    let known_type = matches!(key_type, GROUP_KEY | TRANSACTION_KEY | SHARE_KEY);
    if version < 4 {
        let c = if known_type {
            find_coordinator(&r.key, key_type, version, partitions, listener, image)
        } else {
            Located::error(INVALID_REQUEST)
        };
        let c = if c.error_code == NONE {
            c
        } else {
            Located::error(c.error_code)
        };
        return FindCoordinatorResponse {
            error_code: c.error_code,
            error_message: since(
                version,
                1,
                Some(
                    ErrorCode::for_code(c.error_code)
                        .default_message()
                        .to_string(),
                ),
                None,
            ),
            node_id: c.node_id,
            host: c.host,
            port: c.port,
            ..Default::default()
        };
    }
    FindCoordinatorResponse {
        coordinators: r
            .coordinator_keys
            .iter()
            .map(|k| {
                let (c, message) = if known_type {
                    let c = find_coordinator(k, key_type, version, partitions, listener, image);
                    (c, String::new())
                } else {
                    let c = Located::error(INVALID_REQUEST);
                    let message = ErrorCode::for_code(c.error_code)
                        .default_message()
                        .to_string();
                    (c, message)
                };
                fcr::Coordinator {
                    key: k.clone(),
                    node_id: c.node_id,
                    host: c.host,
                    port: c.port,
                    error_code: c.error_code,
                    error_message: Some(message),
                    ..Default::default()
                }
            })
            .collect(),
        ..Default::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Registration

fn client_host(ctx: &RequestContext) -> String {
    format!("/{}", ctx.connection.peer.ip())
}

/// Registers the group APIs on `router`.
pub fn register(router: &mut RequestRouter, apis: GroupApis) {
    macro_rules! route {
        ($key:ident, $handler:path) => {{
            let a = apis.clone();
            router.register(ApiKey::$key, move |ctx, body| {
                let a = a.clone();
                Box::pin(async move { $handler(a, ctx, body).await })
            });
        }};
    }
    route!(FindCoordinator, handle_find_coordinator);
    route!(JoinGroup, handle_join_group);
    route!(SyncGroup, handle_sync_group);
    route!(Heartbeat, handle_heartbeat);
    route!(LeaveGroup, handle_leave_group);
    route!(OffsetCommit, handle_offset_commit);
    route!(TxnOffsetCommit, handle_txn_offset_commit);
    route!(OffsetFetch, handle_offset_fetch);
    route!(OffsetDelete, handle_offset_delete);
    route!(DescribeGroups, handle_describe_groups);
    route!(ListGroups, handle_list_groups);
    route!(DeleteGroups, handle_delete_groups);
    route!(ConsumerGroupHeartbeat, handle_consumer_group_heartbeat);
    route!(ConsumerGroupDescribe, handle_consumer_group_describe);
    route!(ShareGroupHeartbeat, share::handle_share_group_heartbeat);
    route!(ShareGroupDescribe, share::handle_share_group_describe);
    route!(
        DescribeShareGroupOffsets,
        share::handle_describe_share_group_offsets
    );
    route!(
        AlterShareGroupOffsets,
        share::handle_alter_share_group_offsets
    );
    route!(
        DeleteShareGroupOffsets,
        share::handle_delete_share_group_offsets
    );
}

fn respond(ctx: &RequestContext, error_code: i16, body: ResponseBody) -> HandlerOutcome {
    ctx.record_error(error_code);
    HandlerOutcome::Respond(body)
}

/// The request of the key the router dispatched on.
macro_rules! request_body {
    ($body:expr, $variant:ident) => {{
        let RequestBody::$variant(r) = $body else {
            unreachable!("router dispatches by key")
        };
        r
    }};
}

/// One call to the group's shard, taking the output out of the response the shard must give
/// for this request.
macro_rules! shard_call {
    ($a:expr, $group_id:expr, $request:expr, $response:pat => $output:expr) => {
        match $a.call($group_id, $request).await {
            $response => $output,
            other => unreachable!("{} answered with {other:?}", stringify!($request)),
        }
    };
}

pub mod share;

/// One request per group, each to its own group's shard (groups of one request may live on
/// different shards), results concatenated in request order.
async fn per_group<T>(
    a: &GroupApis,
    requests: Vec<(String, GroupRequest)>,
    results: fn(GroupResponse) -> Vec<T>,
) -> Vec<T> {
    let calls = requests.into_iter().map(|(group_id, request)| {
        let a = a.clone();
        async move { results(a.call(&group_id, request).await) }
    });
    join_all(calls).await.into_iter().flatten().collect()
}

async fn handle_find_coordinator(
    a: GroupApis,
    ctx: RequestContext,
    body: RequestBody,
) -> HandlerOutcome {
    let r = request_body!(body, FindCoordinator);
    let table = a.partitions.borrow().clone();
    let offsets_partitions = a.shards.borrow().offsets_topic_num_partitions;
    let wants_groups = if ctx.api_version >= 1 {
        r.key_type == 0
    } else {
        true
    };
    let missing = table
        .image
        .as_ref()
        .is_some_and(|i| i.topics.get_by_name(OFFSETS_TOPIC).is_none());
    if let (true, true, Some(creator)) = (wants_groups, missing, a.offsets_topic.clone()) {
        // Kafka answers COORDINATOR_NOT_AVAILABLE now and creates the topic in the
        // background; the client retries. A concurrent creation fails harmlessly.
        let topic = offsets_topic_creation(
            offsets_partitions,
            creator.replication_factor,
            creator.segment_bytes,
        );
        actix::spawn(async move {
            let _ = creator
                .controller
                .send(crate::controller::messages::CreateTopics {
                    topics: vec![topic],
                    validate_only: false,
                })
                .await;
        });
    }
    if ctx.api_version >= SHARE_KEY_MIN_VERSION && r.key_type == SHARE_KEY {
        if let Some(creator) = &a.share_state_topic {
            creator.ensure(table.image.as_deref());
        }
    }
    let resp = find_coordinator_response(
        ctx.api_version,
        &r,
        CoordinatorPartitions {
            offsets: offsets_partitions,
            transaction: a.transaction_state_num_partitions,
            share: a.share_state_num_partitions,
        },
        &ctx.connection.listener_name,
        table.image.as_deref(),
    );
    respond(&ctx, resp.error_code, ResponseBody::FindCoordinator(resp))
}

async fn handle_join_group(a: GroupApis, ctx: RequestContext, body: RequestBody) -> HandlerOutcome {
    let r = request_body!(body, JoinGroup);
    let input = join_group_input(ctx.api_version, &r, ctx.client_id(), &client_host(&ctx));
    let out = shard_call!(a, &r.group_id, GroupRequest::JoinGroup(input),
        GroupResponse::JoinGroup(o) => o);
    let code = out.error_code;
    let resp = join_group_response(ctx.api_version, out);
    respond(&ctx, code, ResponseBody::JoinGroup(resp))
}

async fn handle_sync_group(a: GroupApis, ctx: RequestContext, body: RequestBody) -> HandlerOutcome {
    let r = request_body!(body, SyncGroup);
    let input = sync_group_input(ctx.api_version, &r);
    let out = shard_call!(a, &r.group_id, GroupRequest::SyncGroup(input),
        GroupResponse::SyncGroup(o) => o);
    let code = out.error_code;
    let resp = sync_group_response(ctx.api_version, out);
    respond(&ctx, code, ResponseBody::SyncGroup(resp))
}

async fn handle_heartbeat(a: GroupApis, ctx: RequestContext, body: RequestBody) -> HandlerOutcome {
    let r = request_body!(body, Heartbeat);
    let input = HeartbeatInput {
        group_id: r.group_id.clone(),
        generation_id: r.generation_id,
        member_id: r.member_id.clone(),
        group_instance_id: r.group_instance_id.clone(),
    };
    let code = shard_call!(a, &r.group_id, GroupRequest::Heartbeat(input),
        GroupResponse::Heartbeat { error_code } => error_code);
    let resp = HeartbeatResponse {
        error_code: code,
        ..Default::default()
    };
    respond(&ctx, code, ResponseBody::Heartbeat(resp))
}

async fn handle_leave_group(
    a: GroupApis,
    ctx: RequestContext,
    body: RequestBody,
) -> HandlerOutcome {
    let r = request_body!(body, LeaveGroup);
    let input = leave_group_input(ctx.api_version, &r);
    let out = shard_call!(a, &r.group_id, GroupRequest::LeaveGroup(input),
        GroupResponse::LeaveGroup(o) => o);
    let resp = leave_group_response(ctx.api_version, out);
    respond(&ctx, resp.error_code, ResponseBody::LeaveGroup(resp))
}

async fn handle_offset_commit(
    a: GroupApis,
    ctx: RequestContext,
    body: RequestBody,
) -> HandlerOutcome {
    let r = request_body!(body, OffsetCommit);
    let table = a.partitions.borrow().clone();
    let (input, errors) = offset_commit_input(
        ctx.api_version,
        &r,
        &|id| table.topic_name(id),
        &|topic, p| table.partition_exists(topic, p),
    );
    // Nothing left to commit: Kafka answers without asking the coordinator (no group is
    // created, no group check made).
    let topics = if input.topics.is_empty() {
        errors
    } else {
        let results = shard_call!(a, &r.group_id, GroupRequest::OffsetCommit(input),
            GroupResponse::OffsetCommit { topics } => topics);
        merge_commit_results(ctx.api_version, errors, results)
    };
    let resp = offset_commit_response(ctx.api_version, topics);
    respond(&ctx, NONE, ResponseBody::OffsetCommit(resp))
}

async fn handle_txn_offset_commit(
    a: GroupApis,
    ctx: RequestContext,
    body: RequestBody,
) -> HandlerOutcome {
    let r = request_body!(body, TxnOffsetCommit);
    let table = a.partitions.borrow().clone();
    let (input, errors) = txn_offset_commit_input(
        ctx.api_version,
        &r,
        &|id| table.topic_name(id),
        &|topic, p| table.partition_exists(topic, p),
    );
    // Nothing left to commit: Kafka answers without asking the coordinator.
    let topics = if input.topics.is_empty() {
        errors
    } else {
        let results = shard_call!(a, &r.group_id, GroupRequest::TxnOffsetCommit(input),
            GroupResponse::TxnOffsetCommit { topics } => topics);
        merge_commit_rows(ctx.api_version >= 6, errors, results)
    };
    let resp = txn_offset_commit_response(ctx.api_version, topics, &|name| a.topic_id(name));
    respond(&ctx, NONE, ResponseBody::TxnOffsetCommit(resp))
}

async fn handle_offset_fetch(
    a: GroupApis,
    ctx: RequestContext,
    body: RequestBody,
) -> HandlerOutcome {
    let r = request_body!(body, OffsetFetch);
    let require_stable = ctx.api_version >= 7 && r.require_stable;
    let requests = offset_fetch_inputs(ctx.api_version, &r, &|id| a.topic_name(id))
        .into_iter()
        .map(|g| {
            let group_id = g.group_id.clone();
            let request = GroupRequest::OffsetFetch {
                groups: vec![g],
                require_stable,
            };
            (group_id, request)
        })
        .collect();
    let groups: Vec<FetchedGroup> = per_group(&a, requests, |resp| match resp {
        GroupResponse::OffsetFetch { groups } => groups,
        other => unreachable!("OffsetFetch answered with {other:?}"),
    })
    .await;
    let code = groups.first().map_or(NONE, |g| g.error_code);
    let unknown = unknown_fetch_topic_ids(ctx.api_version, &r, &|id| a.topic_name(id));
    let resp = offset_fetch_response(ctx.api_version, groups, unknown, &|name| a.topic_id(name));
    respond(&ctx, code, ResponseBody::OffsetFetch(resp))
}

async fn handle_offset_delete(
    a: GroupApis,
    ctx: RequestContext,
    body: RequestBody,
) -> HandlerOutcome {
    let r = request_body!(body, OffsetDelete);
    let table = a.partitions.borrow().clone();
    let requested: Vec<(String, Vec<i32>)> = r
        .topics
        .iter()
        .map(|t| {
            (
                t.name.clone(),
                t.partitions.iter().map(|p| p.partition_index).collect(),
            )
        })
        .collect();
    let (topics, errors) =
        split_unknown_partitions(requested, &|topic, p| table.partition_exists(topic, p));
    let out = if r.group_id.is_empty() {
        // Kafka's GroupCoordinatorService refuses it before any shard.
        OffsetDeleteOutput {
            error_code: INVALID_GROUP_ID,
            topics: Vec::new(),
        }
    } else {
        let request = GroupRequest::OffsetDelete {
            group_id: r.group_id.clone(),
            topics,
        };
        shard_call!(a, &r.group_id, request, GroupResponse::OffsetDelete(o) => o)
    };
    let out = merge_offset_delete(errors, out);
    let code = out.error_code;
    respond(
        &ctx,
        code,
        ResponseBody::OffsetDelete(offset_delete_response(out)),
    )
}

async fn handle_describe_groups(
    a: GroupApis,
    ctx: RequestContext,
    body: RequestBody,
) -> HandlerOutcome {
    let r = request_body!(body, DescribeGroups);
    let api_version = ctx.api_version;
    let requests = r
        .groups
        .iter()
        .map(|g| {
            let request = GroupRequest::DescribeGroups {
                api_version,
                group_ids: vec![g.clone()],
            };
            (g.clone(), request)
        })
        .collect();
    let groups = per_group(&a, requests, |resp| match resp {
        GroupResponse::DescribeGroups { groups } => groups,
        other => unreachable!("DescribeGroups answered with {other:?}"),
    })
    .await
    .into_iter()
    .map(|g| described_group(api_version, r.include_authorized_operations, g))
    .collect();
    respond(
        &ctx,
        NONE,
        ResponseBody::DescribeGroups(DescribeGroupsResponse {
            groups,
            ..Default::default()
        }),
    )
}

async fn handle_list_groups(
    a: GroupApis,
    ctx: RequestContext,
    body: RequestBody,
) -> HandlerOutcome {
    let r = request_body!(body, ListGroups);
    let shards: Vec<_> = a.shards.borrow().shards.values().cloned().collect();
    let request = GroupRequest::ListGroups {
        states_filter: since(ctx.api_version, 4, r.states_filter.clone(), Vec::new()),
        types_filter: since(ctx.api_version, 5, r.types_filter.clone(), Vec::new()),
    };
    let calls = shards.into_iter().map(|s| {
        let request = request.clone();
        async move {
            let fallback = request.error_response(COORDINATOR_NOT_AVAILABLE);
            s.send(HandleGroupRequest { request })
                .await
                .unwrap_or(fallback)
        }
    });
    let mut error_code = NONE;
    let mut groups = Vec::new();
    for r in join_all(calls).await {
        if let GroupResponse::ListGroups {
            error_code: e,
            groups: g,
        } = r
        {
            if e != NONE {
                error_code = e;
            }
            groups.extend(g.into_iter().map(|g| lsr::ListedGroup {
                group_id: g.group_id,
                protocol_type: g.protocol_type,
                group_state: g.group_state,
                group_type: g.group_type,
                ..Default::default()
            }));
        }
    }
    respond(
        &ctx,
        error_code,
        ResponseBody::ListGroups(ListGroupsResponse {
            error_code,
            groups,
            ..Default::default()
        }),
    )
}

async fn handle_delete_groups(
    a: GroupApis,
    ctx: RequestContext,
    body: RequestBody,
) -> HandlerOutcome {
    let r = request_body!(body, DeleteGroups);
    // A group named twice is deleted (and answered) once, as Kafka's `distinct`.
    let mut seen = std::collections::HashSet::new();
    let deletions = r
        .groups_names
        .iter()
        .filter(|g| seen.insert(g.as_str()))
        .map(|g| {
            let a = a.clone();
            async move {
                // A share group's state at the share coordinator goes first; a group whose
                // state could not be deleted stays (Kafka's `deleteShareGroups`).
                if let Err(code) = share::delete_share_group_state(&a, g).await {
                    return vec![(g.clone(), code)];
                }
                let request = GroupRequest::DeleteGroups {
                    group_ids: vec![g.clone()],
                };
                match a.call(g, request).await {
                    GroupResponse::DeleteGroups { results } => results,
                    other => unreachable!("DeleteGroups answered with {other:?}"),
                }
            }
        });
    let results = join_all(deletions)
        .await
        .into_iter()
        .flatten()
        .map(|(group_id, error_code)| dgr::DeletableGroupResult {
            group_id,
            error_code,
            ..Default::default()
        })
        .collect();
    respond(
        &ctx,
        NONE,
        ResponseBody::DeleteGroups(DeleteGroupsResponse {
            results,
            ..Default::default()
        }),
    )
}

async fn handle_consumer_group_heartbeat(
    a: GroupApis,
    ctx: RequestContext,
    body: RequestBody,
) -> HandlerOutcome {
    let r = request_body!(body, ConsumerGroupHeartbeat);
    let input =
        consumer_group_heartbeat_input(ctx.api_version, &r, ctx.client_id(), &client_host(&ctx));
    let out = shard_call!(a, &r.group_id, GroupRequest::ConsumerGroupHeartbeat(input),
        GroupResponse::ConsumerGroupHeartbeat(o) => o);
    let code = out.error_code;
    let resp = consumer_group_heartbeat_response(out);
    respond(&ctx, code, ResponseBody::ConsumerGroupHeartbeat(resp))
}

async fn handle_consumer_group_describe(
    a: GroupApis,
    ctx: RequestContext,
    body: RequestBody,
) -> HandlerOutcome {
    let r = request_body!(body, ConsumerGroupDescribe);
    // Kafka's GroupCoordinatorService answers an empty group id itself (INVALID_GROUP_ID, no
    // message), ahead of the groups its shards describe.
    let (empty, named): (Vec<&String>, Vec<&String>) =
        r.group_ids.iter().partition(|g| g.is_empty());
    let requests = named
        .into_iter()
        .map(|g| {
            let request = GroupRequest::ConsumerGroupDescribe {
                group_ids: vec![g.clone()],
            };
            (g.clone(), request)
        })
        .collect();
    let described = per_group(&a, requests, |resp| match resp {
        GroupResponse::ConsumerGroupDescribe { groups } => groups,
        other => unreachable!("ConsumerGroupDescribe answered with {other:?}"),
    })
    .await;
    let groups = empty
        .into_iter()
        .map(|_| DescribedConsumerGroup::error(INVALID_GROUP_ID, ""))
        .chain(described)
        .map(|g| described_consumer_group(r.include_authorized_operations, g))
        .collect();
    respond(
        &ctx,
        NONE,
        ResponseBody::ConsumerGroupDescribe(ConsumerGroupDescribeResponse {
            groups,
            ..Default::default()
        }),
    )
}

#[cfg(test)]
mod tests {
    const PARTS: CoordinatorPartitions = CoordinatorPartitions {
        offsets: 50,
        transaction: 50,
        share: 50,
    };
    use super::*;
    use crate::metadata::core::{
        BrokerRegistration, MetadataImage, PartitionRegistration, TopicImage,
    };
    use kactor_protocol::messages::{
        join_group_request, leave_group_request, offset_commit_request, offset_fetch_request,
    };
    use kactor_protocol::metadata::register_broker_record::BrokerEndpoint;

    fn no_ids(_: &Uuid) -> Option<String> {
        None
    }

    #[test]
    fn join_group_versions() {
        let r = JoinGroupRequest {
            group_id: "g".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 99,
            protocol_type: "consumer".into(),
            protocols: vec![join_group_request::JoinGroupRequestProtocol {
                name: "range".into(),
                metadata: bytes::Bytes::from_static(b"m"),
                ..Default::default()
            }],
            ..Default::default()
        };
        let v0 = join_group_input(0, &r, "cid", "/1.2.3.4");
        assert_eq!(
            v0.rebalance_timeout_ms, 10_000,
            "v0 uses the session timeout"
        );
        assert_eq!(
            join_group_input(5, &r, "cid", "/h").rebalance_timeout_ms,
            99
        );
        assert_eq!(v0.protocols[0].0, "range");
        let out = JoinGroupOutput::error(MEMBER_ID_REQUIRED, "m-1");
        let v6 = join_group_response(6, out.clone());
        assert_eq!(
            v6.protocol_name.as_deref(),
            Some(""),
            "not nullable before v7"
        );
        assert_eq!(v6.protocol_type, None);
        let v7 = join_group_response(7, out);
        assert_eq!(v7.protocol_name, None);
        assert_eq!(
            (v7.error_code, v7.member_id.as_str()),
            (MEMBER_ID_REQUIRED, "m-1")
        );
    }

    #[test]
    fn leave_group_versions() {
        let r = LeaveGroupRequest {
            group_id: "g".into(),
            member_id: "m".into(),
            members: vec![leave_group_request::MemberIdentity {
                member_id: "a".into(),
                group_instance_id: Some("i".into()),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(leave_group_input(2, &r).members[0].member_id, "m");
        assert_eq!(
            leave_group_input(3, &r).members[0]
                .group_instance_id
                .as_deref(),
            Some("i")
        );
        let out = LeaveGroupOutput {
            error_code: NONE,
            members: vec![LeaveGroupMemberOutput {
                member_id: "m".into(),
                group_instance_id: None,
                error_code: UNKNOWN_MEMBER_ID,
            }],
        };
        assert_eq!(
            leave_group_response(1, out.clone()).error_code,
            UNKNOWN_MEMBER_ID
        );
        let v3 = leave_group_response(3, out);
        assert_eq!(
            (v3.error_code, v3.members[0].error_code),
            (NONE, UNKNOWN_MEMBER_ID)
        );
    }

    #[test]
    fn offset_commit_by_topic_id_from_v10() {
        let r = OffsetCommitRequest {
            group_id: "g".into(),
            generation_id_or_member_epoch: 3,
            retention_time_ms: 5_000,
            topics: vec![
                offset_commit_request::OffsetCommitRequestTopic {
                    name: "t".into(),
                    topic_id: Uuid([1; 16]),
                    partitions: vec![offset_commit_request::OffsetCommitRequestPartition {
                        partition_index: 2,
                        committed_offset: 7,
                        committed_leader_epoch: 4,
                        ..Default::default()
                    }],
                    ..Default::default()
                },
                offset_commit_request::OffsetCommitRequestTopic {
                    topic_id: Uuid([2; 16]),
                    partitions: vec![offset_commit_request::OffsetCommitRequestPartition {
                        partition_index: 0,
                        ..Default::default()
                    }],
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let names = |id: &Uuid| (*id == Uuid([1; 16])).then(|| "orders".to_string());
        let all = |_: &str, _: i32| true;
        let (input, unknown) = offset_commit_input(10, &r, &names, &all);
        assert_eq!(input.topics.len(), 1);
        assert_eq!(input.topics[0].name, "orders");
        assert_eq!(
            input.retention_time_ms, -1,
            "only v2-v4 carry a retention time"
        );
        assert_eq!(unknown[0].partitions, vec![(0, UNKNOWN_TOPIC_ID)]);
        let (v4, _) = offset_commit_input(4, &r, &no_ids, &all);
        assert_eq!((v4.topics.len(), v4.retention_time_ms), (2, 5_000));
        assert_eq!(v4.topics[0].partitions[0].committed_leader_epoch, -1);
        let resp = offset_commit_response(10, unknown);
        assert_eq!(resp.topics[0].topic_id, Uuid([2; 16]));
    }

    #[test]
    fn offset_commit_refuses_unknown_topics_and_partitions() {
        let part = |i: i32| offset_commit_request::OffsetCommitRequestPartition {
            partition_index: i,
            committed_offset: 5,
            ..Default::default()
        };
        let topic = |name: &str, ps: Vec<i32>| offset_commit_request::OffsetCommitRequestTopic {
            name: name.into(),
            partitions: ps.into_iter().map(part).collect(),
            ..Default::default()
        };
        let r = OffsetCommitRequest {
            group_id: "g".into(),
            generation_id_or_member_epoch: -1,
            topics: vec![
                topic("orders", vec![0, 3, 1]),
                topic("missing", vec![0]),
                topic("other", vec![0]),
            ],
            ..Default::default()
        };
        // orders has partitions 0-2, other has 0, missing does not exist.
        let exists = |t: &str, p: i32| match t {
            "orders" => (0..3).contains(&p),
            "other" => p == 0,
            _ => false,
        };
        let (input, errors) = offset_commit_input(9, &r, &no_ids, &exists);
        let sent: Vec<(&str, Vec<i32>)> = input
            .topics
            .iter()
            .map(|t| {
                (
                    t.name.as_str(),
                    t.partitions.iter().map(|p| p.partition_index).collect(),
                )
            })
            .collect();
        assert_eq!(sent, vec![("orders", vec![0, 1]), ("other", vec![0])]);
        // Error rows first, in request order; the coordinator's rows merged into them.
        let results = input
            .topics
            .iter()
            .map(|t| CommitTopicOutput {
                name: t.name.clone(),
                topic_id: Uuid::ZERO,
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| (p.partition_index, NONE))
                    .collect(),
            })
            .collect();
        let rows: Vec<(String, Vec<(i32, i16)>)> = merge_commit_results(9, errors, results)
            .into_iter()
            .map(|t| (t.name, t.partitions))
            .collect();
        assert_eq!(
            rows,
            vec![
                (
                    "orders".to_string(),
                    vec![(3, UNKNOWN_TOPIC_OR_PARTITION), (0, NONE), (1, NONE)]
                ),
                ("missing".to_string(), vec![(0, UNKNOWN_TOPIC_OR_PARTITION)]),
                ("other".to_string(), vec![(0, NONE)]),
            ]
        );
    }

    #[test]
    fn offset_delete_refuses_unknown_topics_and_partitions() {
        let exists = |t: &str, p: i32| t == "t" && p < 2;
        let (valid, errors) = split_unknown_partitions(
            vec![("t".into(), vec![0, 4, 1]), ("missing".into(), vec![0])],
            &exists,
        );
        assert_eq!(valid, vec![("t".to_string(), vec![0, 1])]);
        let ok = OffsetDeleteOutput {
            error_code: NONE,
            topics: vec![("t".into(), vec![(0, NONE), (1, NONE)])],
        };
        let merged = merge_offset_delete(errors.clone(), ok);
        assert_eq!(
            merged.topics,
            vec![
                (
                    "t".to_string(),
                    vec![(4, UNKNOWN_TOPIC_OR_PARTITION), (0, NONE), (1, NONE)]
                ),
                ("missing".to_string(), vec![(0, UNKNOWN_TOPIC_OR_PARTITION)]),
            ]
        );
        let failed = OffsetDeleteOutput {
            error_code: GROUP_ID_NOT_FOUND,
            topics: Vec::new(),
        };
        assert_eq!(
            merge_offset_delete(errors, failed.clone()),
            failed,
            "a group error replaces the partition rows"
        );
    }

    #[test]
    fn offset_fetch_versions() {
        let r = OffsetFetchRequest {
            group_id: "g".into(),
            topics: Some(vec![offset_fetch_request::OffsetFetchRequestTopic {
                name: "t".into(),
                partition_indexes: vec![0],
                ..Default::default()
            }]),
            groups: vec![
                offset_fetch_request::OffsetFetchRequestGroup {
                    group_id: "a".into(),
                    member_epoch: -1,
                    topics: None,
                    ..Default::default()
                },
                offset_fetch_request::OffsetFetchRequestGroup {
                    group_id: "b".into(),
                    member_id: Some("m".into()),
                    member_epoch: 4,
                    topics: Some(vec![]),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let v1 = offset_fetch_inputs(1, &r, &no_ids);
        assert_eq!(v1.len(), 1);
        assert_eq!(v1[0].topics, Some(vec![("t".to_string(), vec![0])]));
        let v9 = offset_fetch_inputs(9, &r, &no_ids);
        assert_eq!(v9.len(), 2);
        assert_eq!(
            (v9[1].member_id.as_deref(), v9[1].member_epoch),
            (Some("m"), 4)
        );
        let fetched = FetchedGroup {
            group_id: "g".into(),
            error_code: COORDINATOR_LOAD_IN_PROGRESS,
            topics: vec![(
                "t".into(),
                vec![FetchedPartition {
                    partition_index: 0,
                    committed_offset: -1,
                    committed_leader_epoch: -1,
                    metadata: String::new(),
                    error_code: NONE,
                }],
            )],
        };
        let ids = |_: &str| Uuid::ZERO;
        let old = offset_fetch_response(1, vec![fetched.clone()], vec![], &ids);
        assert_eq!(
            old.topics[0].partitions[0].error_code,
            COORDINATOR_LOAD_IN_PROGRESS
        );
        let v2 = offset_fetch_response(2, vec![fetched.clone()], vec![], &ids);
        assert_eq!(v2.error_code, COORDINATOR_LOAD_IN_PROGRESS);
        let v8 = offset_fetch_response(8, vec![fetched], vec![], &ids);
        assert_eq!(v8.groups[0].error_code, COORDINATOR_LOAD_IN_PROGRESS);
        assert_eq!(v8.groups[0].topics[0].name, "t");
    }

    #[test]
    fn offset_fetch_v10_answers_unknown_topic_ids_itself() {
        let (known, gone) = (Uuid([1; 16]), Uuid([9; 16]));
        let r = OffsetFetchRequest {
            groups: vec![offset_fetch_request::OffsetFetchRequestGroup {
                group_id: "g".into(),
                member_epoch: -1,
                topics: Some(vec![
                    offset_fetch_request::OffsetFetchRequestTopics {
                        topic_id: gone,
                        partition_indexes: vec![0, 2],
                        ..Default::default()
                    },
                    offset_fetch_request::OffsetFetchRequestTopics {
                        topic_id: known,
                        partition_indexes: vec![1],
                        ..Default::default()
                    },
                ]),
                ..Default::default()
            }],
            ..Default::default()
        };
        let names = |id: &Uuid| (*id == Uuid([1; 16])).then(|| "t".to_string());
        let inputs = offset_fetch_inputs(10, &r, &names);
        assert_eq!(inputs[0].topics, Some(vec![("t".to_string(), vec![1])]));
        let unknown = unknown_fetch_topic_ids(10, &r, &names);
        assert_eq!(unknown, vec![vec![(gone, vec![0, 2])]]);
        let fetched = FetchedGroup {
            group_id: "g".into(),
            error_code: NONE,
            topics: vec![(
                "t".into(),
                vec![FetchedPartition {
                    partition_index: 1,
                    committed_offset: 8,
                    committed_leader_epoch: -1,
                    metadata: String::new(),
                    error_code: NONE,
                }],
            )],
        };
        let ids = |n: &str| if n == "t" { known } else { Uuid::ZERO };
        let resp = offset_fetch_response(10, vec![fetched], unknown, &ids);
        let topics = &resp.groups[0].topics;
        assert_eq!(
            (topics[0].topic_id, topics[0].partitions[0].committed_offset),
            (known, 8)
        );
        assert_eq!(
            topics[1].topic_id, gone,
            "the unknown id is echoed after the rest"
        );
        let errs: Vec<(i32, i64, i16)> = topics[1]
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.committed_offset, p.error_code))
            .collect();
        assert_eq!(
            errs,
            vec![(0, -1, UNKNOWN_TOPIC_ID), (2, -1, UNKNOWN_TOPIC_ID)]
        );
    }

    fn image() -> MetadataImage {
        let mut image = MetadataImage::default();
        let mut partitions = std::collections::BTreeMap::new();
        for p in 0..50 {
            partitions.insert(
                p,
                PartitionRegistration {
                    replicas: vec![1],
                    directories: vec![],
                    isr: vec![1],
                    removing_replicas: vec![],
                    adding_replicas: vec![],
                    elr: vec![],
                    last_known_elr: vec![],
                    leader: if p == 12 { 1 } else { -1 },
                    leader_recovery_state: 0,
                    leader_epoch: 0,
                    partition_epoch: 0,
                },
            );
        }
        let id = Uuid([5; 16]);
        image.topics.by_name.insert(OFFSETS_TOPIC.into(), id);
        image.topics.by_id.insert(
            id,
            Arc::new(TopicImage {
                name: OFFSETS_TOPIC.into(),
                id,
                partitions,
            }),
        );
        image.brokers.insert(
            1,
            BrokerRegistration {
                id: 1,
                epoch: 0,
                incarnation_id: Uuid::ZERO,
                listeners: vec![BrokerEndpoint {
                    name: "PLAINTEXT".into(),
                    host: "localhost".into(),
                    port: 9092,
                    security_protocol: 0,
                    ..Default::default()
                }],
                supported_features: vec![],
                rack: None,
                fenced: false,
                in_controlled_shutdown: false,
                log_dirs: vec![],
            },
        );
        image
    }

    #[test]
    fn offsets_topic_is_created_compacted() {
        let t = offsets_topic_creation(50, 3, 104_857_600);
        assert_eq!(
            (t.name.as_str(), t.num_partitions, t.replication_factor),
            (OFFSETS_TOPIC, 50, 3)
        );
        assert!(t
            .configs
            .contains(&("cleanup.policy".to_string(), Some("compact".to_string()))));
    }

    #[test]
    fn find_coordinator_points_at_the_partition_leader() {
        let image = image();
        // "my-group" hashes to partition 12 of 50, led by broker 1.
        let c = find_coordinator("my-group", 0, 6, 50, "PLAINTEXT", Some(&image));
        assert_eq!(
            (c.error_code, c.node_id, c.host.as_str(), c.port),
            (NONE, 1, "localhost", 9092)
        );
        let c = find_coordinator("test-consumer-group", 0, 6, 50, "PLAINTEXT", Some(&image));
        assert_eq!(
            c.error_code, COORDINATOR_NOT_AVAILABLE,
            "partition 31 has no leader"
        );
        let c = find_coordinator("my-group", 0, 6, 50, "OTHER", Some(&image));
        assert_eq!(c.error_code, COORDINATOR_NOT_AVAILABLE);
        assert_eq!(
            find_coordinator("x", 1, 6, 50, "PLAINTEXT", Some(&image)).error_code,
            COORDINATOR_NOT_AVAILABLE,
            "no __transaction_state"
        );
        let old = find_coordinator_response(
            2,
            &FindCoordinatorRequest {
                key: "my-group".into(),
                ..Default::default()
            },
            PARTS,
            "PLAINTEXT",
            Some(&image),
        );
        assert_eq!((old.node_id, old.port), (1, 9092));
        assert_eq!(old.error_message.as_deref(), Some("NONE"));
        let batched = find_coordinator_response(
            4,
            &FindCoordinatorRequest {
                coordinator_keys: vec!["my-group".into(), "test-consumer-group".into()],
                ..Default::default()
            },
            PARTS,
            "PLAINTEXT",
            Some(&image),
        );
        assert_eq!(batched.coordinators.len(), 2);
        assert_eq!(batched.coordinators[0].node_id, 1);
        assert_eq!(batched.coordinators[0].error_message.as_deref(), Some(""));
        assert_eq!(batched.coordinators[1].node_id, -1);
        assert_eq!(batched.coordinators[1].error_message.as_deref(), Some(""));
    }

    #[test]
    fn find_coordinator_key_types() {
        let image = image();
        let req = |key_type: i8, keys: &[&str]| FindCoordinatorRequest {
            key_type,
            coordinator_keys: keys.iter().map(|k| k.to_string()).collect(),
            ..Default::default()
        };
        // The empty group id is hashed like any other (Kafka finds its coordinator).
        // (It lands on partition 0, which the test image has no leader for.)
        let r = find_coordinator_response(6, &req(0, &[""]), PARTS, "PLAINTEXT", Some(&image));
        assert_eq!(r.coordinators[0].error_code, COORDINATOR_NOT_AVAILABLE);
        assert_eq!(r.coordinators[0].error_message.as_deref(), Some(""));
        // An unknown key type fails the request as a whole, with Kafka's standard message.
        let r = find_coordinator_response(6, &req(7, &["a", "b"]), PARTS, "PLAINTEXT", None);
        for c in &r.coordinators {
            assert_eq!((c.error_code, c.node_id), (INVALID_REQUEST, -1));
            assert_eq!(
                c.error_message.as_deref(),
                Some(ErrorCode::InvalidRequest.default_message())
            );
        }
        // Share keys: malformed ones are INVALID_REQUEST without a message.
        let id = Uuid([7; 16]).to_string();
        for bad in ["g:topicid:0", "g:x", "", " :{id}:0", "g:{id}:x"] {
            let key = bad.replace("{id}", &id);
            let r = find_coordinator_response(6, &req(2, &[&key]), PARTS, "PLAINTEXT", None);
            assert_eq!(r.coordinators[0].error_code, INVALID_REQUEST, "{key}");
            assert_eq!(r.coordinators[0].error_message.as_deref(), Some(""));
        }
        let good = format!("a:b:{id}:3");
        let r = find_coordinator_response(6, &req(2, &[&good]), PARTS, "PLAINTEXT", None);
        assert_eq!(r.coordinators[0].error_code, COORDINATOR_NOT_AVAILABLE);
        let r = find_coordinator_response(5, &req(2, &[&good]), PARTS, "PLAINTEXT", None);
        assert_eq!(
            r.coordinators[0].error_code, INVALID_REQUEST,
            "share keys from v6"
        );
        // v1-v3 errors: no node, the error's standard message.
        let old = find_coordinator_response(
            3,
            &FindCoordinatorRequest {
                key: "x".into(),
                key_type: 9,
                ..Default::default()
            },
            PARTS,
            "PLAINTEXT",
            Some(&image),
        );
        assert_eq!(
            (old.error_code, old.node_id, old.port),
            (INVALID_REQUEST, -1, -1)
        );
        assert_eq!(
            old.error_message.as_deref(),
            Some(ErrorCode::InvalidRequest.default_message())
        );
    }
}
