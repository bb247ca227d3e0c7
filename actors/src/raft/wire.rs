//! The Raft RPCs between the wire messages (generated from schemas/messages/) and the core's
//! view of them (`core::rpc`), in both directions: a voter's controller listener decodes
//! requests and encodes answers, and its outbound peer connections encode requests and decode
//! answers. Every KRaft RPC names one topic and partition, `__cluster_metadata-0` (Kafka's
//! `RaftUtil`); a request for anything else is refused with a top-level INVALID_REQUEST, as
//! Kafka's `KafkaRaftClient` does.

use bytes::Bytes;
use kactor_protocol::errors::INVALID_REQUEST;
use kactor_protocol::messages::{self as m, RequestBody, ResponseBody};
use kactor_protocol::Uuid;

use super::batch::{control_records, decode_batches};
use super::core::rpc::*;
use super::core::{Endpoint, Endpoints, KRaftVersionRange, OffsetAndEpoch, ReplicaKey};

/// The metadata topic (Kafka's `Topic.CLUSTER_METADATA_TOPIC_NAME`).
pub const METADATA_TOPIC: &str = "__cluster_metadata";

fn key(id: i32, dir: Uuid) -> ReplicaKey {
    ReplicaKey::of(id, Some(dir))
}

fn cluster(id: Option<String>) -> Option<String> {
    id.filter(|c| !c.is_empty())
}

fn is_metadata(topic: &str, partition: i32) -> bool {
    topic == METADATA_TOPIC && partition == 0
}

/// A request as the core takes it, or the top-level error to answer it with.
pub fn request_from_wire(body: RequestBody, version: i16) -> Result<Request, i16> {
    let one = |ok: bool| if ok { Ok(()) } else { Err(INVALID_REQUEST) };
    match body {
        RequestBody::Vote(r) => {
            let [t] = &r.topics[..] else {
                return Err(INVALID_REQUEST);
            };
            let [p] = &t.partitions[..] else {
                return Err(INVALID_REQUEST);
            };
            one(is_metadata(&t.topic_name, p.partition_index))?;
            Ok(Request::Vote(VoteRequest {
                cluster_id: cluster(r.cluster_id.clone()),
                voter_key: (version >= 1).then(|| key(r.voter_id, p.voter_directory_id)),
                candidate: key(p.replica_id, p.replica_directory_id),
                candidate_epoch: p.replica_epoch,
                last_offset_epoch: p.last_offset_epoch,
                last_offset: p.last_offset,
                pre_vote: version >= 2 && p.pre_vote,
            }))
        }
        RequestBody::BeginQuorumEpoch(r) => {
            let [t] = &r.topics[..] else {
                return Err(INVALID_REQUEST);
            };
            let [p] = &t.partitions[..] else {
                return Err(INVALID_REQUEST);
            };
            one(is_metadata(&t.topic_name, p.partition_index))?;
            Ok(Request::BeginQuorumEpoch(BeginQuorumEpochRequest {
                cluster_id: cluster(r.cluster_id.clone()),
                voter_key: (version >= 1).then(|| key(r.voter_id, p.voter_directory_id)),
                leader_id: p.leader_id,
                leader_epoch: p.leader_epoch,
                leader_endpoints: r
                    .leader_endpoints
                    .iter()
                    .map(|e| Endpoint {
                        listener: e.name.clone(),
                        host: e.host.clone(),
                        port: e.port,
                    })
                    .collect(),
            }))
        }
        RequestBody::EndQuorumEpoch(r) => {
            let [t] = &r.topics[..] else {
                return Err(INVALID_REQUEST);
            };
            let [p] = &t.partitions[..] else {
                return Err(INVALID_REQUEST);
            };
            one(is_metadata(&t.topic_name, p.partition_index))?;
            let preferred_candidates = if version >= 1 {
                p.preferred_candidates
                    .iter()
                    .map(|c| key(c.candidate_id, c.candidate_directory_id))
                    .collect()
            } else {
                p.preferred_successors
                    .iter()
                    .map(|id| ReplicaKey::without_dir(*id))
                    .collect()
            };
            Ok(Request::EndQuorumEpoch(EndQuorumEpochRequest {
                cluster_id: cluster(r.cluster_id.clone()),
                leader_id: p.leader_id,
                leader_epoch: p.leader_epoch,
                preferred_candidates,
                leader_endpoints: r
                    .leader_endpoints
                    .iter()
                    .map(|e| Endpoint {
                        listener: e.name.clone(),
                        host: e.host.clone(),
                        port: e.port,
                    })
                    .collect(),
            }))
        }
        RequestBody::Fetch(r) => {
            let [t] = &r.topics[..] else {
                return Err(INVALID_REQUEST);
            };
            let [p] = &t.partitions[..] else {
                return Err(INVALID_REQUEST);
            };
            let named = if version >= 13 {
                t.topic_id == Uuid::METADATA_TOPIC_ID
            } else {
                t.topic == METADATA_TOPIC
            };
            one(named && p.partition == 0)?;
            // v15 moved the replica id into ReplicaState.
            let replica_id = if version >= 15 {
                r.replica_state.replica_id
            } else {
                r.replica_id
            };
            Ok(Request::Fetch(FetchRequest {
                cluster_id: cluster(r.cluster_id.clone()),
                replica: key(replica_id, p.replica_directory_id),
                max_wait_ms: r.max_wait_ms,
                max_bytes: p.partition_max_bytes,
                current_leader_epoch: p.current_leader_epoch,
                fetch_offset: p.fetch_offset,
                last_fetched_epoch: p.last_fetched_epoch,
                high_watermark: if version >= 18 { p.high_watermark } else { -1 },
            }))
        }
        RequestBody::FetchSnapshot(r) => {
            let [t] = &r.topics[..] else {
                return Err(INVALID_REQUEST);
            };
            let [p] = &t.partitions[..] else {
                return Err(INVALID_REQUEST);
            };
            one(is_metadata(&t.name, p.partition))?;
            Ok(Request::FetchSnapshot(FetchSnapshotRequest {
                cluster_id: cluster(r.cluster_id.clone()),
                replica: key(r.replica_id, p.replica_directory_id),
                max_bytes: r.max_bytes,
                current_leader_epoch: p.current_leader_epoch,
                snapshot_id: OffsetAndEpoch::new(p.snapshot_id.end_offset, p.snapshot_id.epoch),
                position: p.position,
            }))
        }
        RequestBody::UpdateRaftVoter(r) => Ok(Request::UpdateRaftVoter(UpdateRaftVoterRequest {
            cluster_id: cluster(r.cluster_id.clone()),
            current_leader_epoch: r.current_leader_epoch,
            voter: key(r.voter_id, r.voter_directory_id),
            listeners: endpoints(&r.listeners, |l| (&l.name, &l.host, l.port)),
            kraft_version: KRaftVersionRange {
                min: r.k_raft_version_feature.min_supported_version,
                max: r.k_raft_version_feature.max_supported_version,
            },
        })),
        RequestBody::AddRaftVoter(r) => Ok(Request::AddRaftVoter(AddRaftVoterRequest {
            cluster_id: cluster(r.cluster_id.clone()),
            timeout_ms: r.timeout_ms,
            voter: key(r.voter_id, r.voter_directory_id),
            listeners: endpoints(&r.listeners, |l| (&l.name, &l.host, l.port)),
            // v0 has no such field: its answers always waited for the commit.
            ack_when_committed: version < 1 || r.ack_when_committed,
        })),
        RequestBody::RemoveRaftVoter(r) => Ok(Request::RemoveRaftVoter(RemoveRaftVoterRequest {
            cluster_id: cluster(r.cluster_id.clone()),
            voter: key(r.voter_id, r.voter_directory_id),
        })),
        _ => Err(INVALID_REQUEST),
    }
}

/// A request's listener list as core endpoints.
fn endpoints<L>(listeners: &[L], parts: impl Fn(&L) -> (&String, &String, u16)) -> Endpoints {
    listeners
        .iter()
        .map(|l| {
            let (name, host, port) = parts(l);
            Endpoint {
                listener: name.clone(),
                host: host.clone(),
                port,
            }
        })
        .collect()
}

/// A top-level error answer for `api_key` (a request that names the wrong partition).
pub fn error_response(api_key: m::ApiKey, error_code: i16) -> Option<ResponseBody> {
    Some(match api_key {
        m::ApiKey::Vote => ResponseBody::Vote(m::VoteResponse {
            error_code,
            ..Default::default()
        }),
        m::ApiKey::BeginQuorumEpoch => {
            ResponseBody::BeginQuorumEpoch(m::BeginQuorumEpochResponse {
                error_code,
                ..Default::default()
            })
        }
        m::ApiKey::EndQuorumEpoch => ResponseBody::EndQuorumEpoch(m::EndQuorumEpochResponse {
            error_code,
            ..Default::default()
        }),
        m::ApiKey::Fetch => ResponseBody::Fetch(m::FetchResponse {
            error_code,
            ..Default::default()
        }),
        m::ApiKey::FetchSnapshot => ResponseBody::FetchSnapshot(m::FetchSnapshotResponse {
            error_code,
            ..Default::default()
        }),
        m::ApiKey::UpdateRaftVoter => ResponseBody::UpdateRaftVoter(m::UpdateRaftVoterResponse {
            error_code,
            ..Default::default()
        }),
        m::ApiKey::AddRaftVoter => ResponseBody::AddRaftVoter(m::AddRaftVoterResponse {
            error_code,
            ..Default::default()
        }),
        m::ApiKey::RemoveRaftVoter => ResponseBody::RemoveRaftVoter(m::RemoveRaftVoterResponse {
            error_code,
            ..Default::default()
        }),
        _ => return None,
    })
}

/// The leader's endpoints as the `NodeEndpoints` of a response (v1+ of the quorum RPCs):
/// only the listener the request came in on is named, as Kafka does.
fn node_endpoints<T>(
    leader_id: i32,
    endpoints: &Endpoints,
    listener: &str,
    make: impl Fn(i32, &Endpoint) -> T,
) -> Vec<T> {
    if leader_id < 0 {
        return Vec::new();
    }
    endpoints
        .iter()
        .find(|e| e.listener == listener)
        .map(|e| make(leader_id, e))
        .into_iter()
        .collect()
}

/// The wire answer to a core response. `records` are the log bytes the shell read for a
/// `Records::Read`; `listener` is the name of the listener the request came in on.
pub fn response_to_wire(
    response: Response,
    version: i16,
    listener: &str,
    records: Option<kactor_protocol::Records>,
    snapshot: Option<kactor_protocol::Records>,
) -> ResponseBody {
    without_parts_on_top_level_error(response_body(
        response, version, listener, records, snapshot,
    ))
}

/// Kafka answers a request refused as a whole (INCONSISTENT_CLUSTER_ID, ...) with the error
/// alone: no topics, no endpoints.
fn without_parts_on_top_level_error(body: ResponseBody) -> ResponseBody {
    match body {
        ResponseBody::Vote(r) if r.error_code != 0 => error_response(m::ApiKey::Vote, r.error_code),
        ResponseBody::BeginQuorumEpoch(r) if r.error_code != 0 => {
            error_response(m::ApiKey::BeginQuorumEpoch, r.error_code)
        }
        ResponseBody::EndQuorumEpoch(r) if r.error_code != 0 => {
            error_response(m::ApiKey::EndQuorumEpoch, r.error_code)
        }
        ResponseBody::Fetch(r) if r.error_code != 0 => {
            error_response(m::ApiKey::Fetch, r.error_code)
        }
        ResponseBody::FetchSnapshot(r) if r.error_code != 0 => {
            error_response(m::ApiKey::FetchSnapshot, r.error_code)
        }
        other => Some(other),
    }
    .expect("a quorum RPC has an error response")
}

fn response_body(
    response: Response,
    version: i16,
    listener: &str,
    records: Option<kactor_protocol::Records>,
    snapshot: Option<kactor_protocol::Records>,
) -> ResponseBody {
    match response {
        Response::Vote(v) => {
            let c = v.common;
            ResponseBody::Vote(m::VoteResponse {
                error_code: c.error,
                topics: vec![m::vote_response::TopicData {
                    topic_name: METADATA_TOPIC.into(),
                    partitions: vec![m::vote_response::PartitionData {
                        partition_index: 0,
                        error_code: c.partition_error,
                        leader_id: c.leader_id,
                        leader_epoch: c.leader_epoch,
                        vote_granted: v.vote_granted,
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                node_endpoints: if version >= 1 {
                    node_endpoints(c.leader_id, &c.leader_endpoints, listener, |id, e| {
                        m::vote_response::NodeEndpoint {
                            node_id: id,
                            host: e.host.clone(),
                            port: e.port,
                            ..Default::default()
                        }
                    })
                } else {
                    Vec::new()
                },
                ..Default::default()
            })
        }
        Response::BeginQuorumEpoch(c) => {
            ResponseBody::BeginQuorumEpoch(m::BeginQuorumEpochResponse {
                error_code: c.error,
                topics: vec![m::begin_quorum_epoch_response::TopicData {
                    topic_name: METADATA_TOPIC.into(),
                    partitions: vec![m::begin_quorum_epoch_response::PartitionData {
                        partition_index: 0,
                        error_code: c.partition_error,
                        leader_id: c.leader_id,
                        leader_epoch: c.leader_epoch,
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                node_endpoints: if version >= 1 {
                    node_endpoints(c.leader_id, &c.leader_endpoints, listener, |id, e| {
                        m::begin_quorum_epoch_response::NodeEndpoint {
                            node_id: id,
                            host: e.host.clone(),
                            port: e.port,
                            ..Default::default()
                        }
                    })
                } else {
                    Vec::new()
                },
                ..Default::default()
            })
        }
        Response::EndQuorumEpoch(c) => ResponseBody::EndQuorumEpoch(m::EndQuorumEpochResponse {
            error_code: c.error,
            topics: vec![m::end_quorum_epoch_response::TopicData {
                topic_name: METADATA_TOPIC.into(),
                partitions: vec![m::end_quorum_epoch_response::PartitionData {
                    partition_index: 0,
                    error_code: c.partition_error,
                    leader_id: c.leader_id,
                    leader_epoch: c.leader_epoch,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            node_endpoints: if version >= 1 {
                node_endpoints(c.leader_id, &c.leader_endpoints, listener, |id, e| {
                    m::end_quorum_epoch_response::NodeEndpoint {
                        node_id: id,
                        host: e.host.clone(),
                        port: e.port,
                        ..Default::default()
                    }
                })
            } else {
                Vec::new()
            },
            ..Default::default()
        }),
        Response::Fetch(f) => {
            use m::fetch_response as r;
            ResponseBody::Fetch(m::FetchResponse {
                error_code: f.error,
                responses: vec![r::FetchableTopicResponse {
                    topic: METADATA_TOPIC.into(),
                    topic_id: Uuid::METADATA_TOPIC_ID,
                    partitions: vec![r::PartitionData {
                        partition_index: 0,
                        error_code: f.partition_error,
                        high_watermark: f.high_watermark,
                        last_stable_offset: f.high_watermark,
                        log_start_offset: f.log_start_offset,
                        diverging_epoch: f
                            .diverging_epoch
                            .map(|d| r::EpochEndOffset {
                                epoch: d.epoch,
                                end_offset: d.offset,
                                ..Default::default()
                            })
                            .unwrap_or_default(),
                        current_leader: r::LeaderIdAndEpoch {
                            leader_id: f.leader_id,
                            leader_epoch: f.leader_epoch,
                            ..Default::default()
                        },
                        snapshot_id: f
                            .snapshot_id
                            .map(|s| r::SnapshotId {
                                end_offset: s.offset,
                                epoch: s.epoch,
                                ..Default::default()
                            })
                            .unwrap_or_default(),
                        records: Some(
                            records.unwrap_or(kactor_protocol::Records::Memory(Bytes::new())),
                        ),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                node_endpoints: if version >= 16 {
                    node_endpoints(f.leader_id, &f.leader_endpoints, listener, |id, e| {
                        r::NodeEndpoint {
                            node_id: id,
                            host: e.host.clone(),
                            port: e.port as i32,
                            rack: None,
                            ..Default::default()
                        }
                    })
                } else {
                    Vec::new()
                },
                ..Default::default()
            })
        }
        Response::UpdateRaftVoter(u) => {
            // The leader's endpoint on the listener the request came in on.
            let at = u.leader_endpoints.iter().find(|e| e.listener == listener);
            ResponseBody::UpdateRaftVoter(m::UpdateRaftVoterResponse {
                error_code: u.error,
                current_leader: m::update_raft_voter_response::CurrentLeader {
                    leader_id: u.leader_id,
                    leader_epoch: u.leader_epoch,
                    host: at.map(|e| e.host.clone()).unwrap_or_default(),
                    port: at.map(|e| e.port as i32).unwrap_or(-1),
                    ..Default::default()
                },
                ..Default::default()
            })
        }
        Response::FetchSnapshot(s) => {
            use m::fetch_snapshot_response as r;
            ResponseBody::FetchSnapshot(m::FetchSnapshotResponse {
                error_code: s.error,
                topics: vec![r::TopicSnapshot {
                    name: METADATA_TOPIC.into(),
                    partitions: vec![r::PartitionSnapshot {
                        index: 0,
                        error_code: s.partition_error,
                        snapshot_id: r::SnapshotId {
                            end_offset: s.snapshot_id.offset,
                            epoch: s.snapshot_id.epoch,
                            ..Default::default()
                        },
                        current_leader: r::LeaderIdAndEpoch {
                            leader_id: s.leader_id,
                            leader_epoch: s.leader_epoch,
                            ..Default::default()
                        },
                        size: s.size,
                        position: s.position,
                        unaligned_records: Some(
                            snapshot.unwrap_or(kactor_protocol::Records::Memory(Bytes::new())),
                        ),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                node_endpoints: if version >= 1 {
                    node_endpoints(s.leader_id, &s.leader_endpoints, listener, |id, e| {
                        r::NodeEndpoint {
                            node_id: id,
                            host: e.host.clone(),
                            port: e.port,
                            ..Default::default()
                        }
                    })
                } else {
                    Vec::new()
                },
                ..Default::default()
            })
        }
        Response::AddRaftVoter(r) => ResponseBody::AddRaftVoter(m::AddRaftVoterResponse {
            error_code: r.error,
            error_message: r.error_message,
            ..Default::default()
        }),
        Response::RemoveRaftVoter(r) => ResponseBody::RemoveRaftVoter(m::RemoveRaftVoterResponse {
            error_code: r.error,
            error_message: r.error_message,
            ..Default::default()
        }),
        // DescribeQuorum has its own handler; ApiVersions answers come from the router.
        _ => ResponseBody::Vote(m::VoteResponse {
            error_code: INVALID_REQUEST,
            ..Default::default()
        }),
    }
}

/// The wire request for a core request sent to voter `to` at `version` (fields the version
/// lacks are left at their defaults, as the encoder requires). `None` for requests not sent
/// over a peer connection.
pub fn request_to_wire(request: &Request, to: i32, version: i16) -> Option<RequestBody> {
    let v1 = version >= 1;
    Some(match request {
        Request::Vote(v) => RequestBody::Vote(m::VoteRequest {
            cluster_id: v.cluster_id.clone(),
            voter_id: if v1 {
                v.voter_key.map_or(to, |k| k.id)
            } else {
                -1
            },
            topics: vec![m::vote_request::TopicData {
                topic_name: METADATA_TOPIC.into(),
                partitions: vec![m::vote_request::PartitionData {
                    partition_index: 0,
                    replica_epoch: v.candidate_epoch,
                    replica_id: v.candidate.id,
                    replica_directory_id: if v1 {
                        v.candidate.wire_directory_id()
                    } else {
                        Uuid::ZERO
                    },
                    voter_directory_id: match v.voter_key {
                        Some(k) if v1 => k.wire_directory_id(),
                        _ => Uuid::ZERO,
                    },
                    last_offset_epoch: v.last_offset_epoch,
                    last_offset: v.last_offset,
                    pre_vote: version >= 2 && v.pre_vote,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        Request::BeginQuorumEpoch(b) => RequestBody::BeginQuorumEpoch(m::BeginQuorumEpochRequest {
            cluster_id: b.cluster_id.clone(),
            voter_id: if v1 {
                b.voter_key.map_or(to, |k| k.id)
            } else {
                -1
            },
            topics: vec![m::begin_quorum_epoch_request::TopicData {
                topic_name: METADATA_TOPIC.into(),
                partitions: vec![m::begin_quorum_epoch_request::PartitionData {
                    partition_index: 0,
                    voter_directory_id: match b.voter_key {
                        Some(k) if v1 => k.wire_directory_id(),
                        _ => Uuid::ZERO,
                    },
                    leader_id: b.leader_id,
                    leader_epoch: b.leader_epoch,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            leader_endpoints: b
                .leader_endpoints
                .iter()
                .filter(|_| v1)
                .map(|e| m::begin_quorum_epoch_request::LeaderEndpoint {
                    name: e.listener.clone(),
                    host: e.host.clone(),
                    port: e.port,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }),
        Request::EndQuorumEpoch(e) => RequestBody::EndQuorumEpoch(m::EndQuorumEpochRequest {
            cluster_id: e.cluster_id.clone(),
            topics: vec![m::end_quorum_epoch_request::TopicData {
                topic_name: METADATA_TOPIC.into(),
                partitions: vec![m::end_quorum_epoch_request::PartitionData {
                    partition_index: 0,
                    leader_id: e.leader_id,
                    leader_epoch: e.leader_epoch,
                    preferred_successors: if v1 {
                        Vec::new()
                    } else {
                        e.preferred_candidates.iter().map(|k| k.id).collect()
                    },
                    preferred_candidates: e
                        .preferred_candidates
                        .iter()
                        .filter(|_| v1)
                        .map(|k| m::end_quorum_epoch_request::ReplicaInfo {
                            candidate_id: k.id,
                            candidate_directory_id: k.wire_directory_id(),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            leader_endpoints: e
                .leader_endpoints
                .iter()
                .filter(|_| v1)
                .map(|e| m::end_quorum_epoch_request::LeaderEndpoint {
                    name: e.listener.clone(),
                    host: e.host.clone(),
                    port: e.port,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }),
        Request::Fetch(f) => RequestBody::Fetch(m::FetchRequest {
            cluster_id: f.cluster_id.clone().filter(|_| version >= 12),
            // v15 moved the replica id into ReplicaState.
            replica_id: if version >= 15 { -1 } else { f.replica.id },
            replica_state: m::fetch_request::ReplicaState {
                replica_id: if version >= 15 { f.replica.id } else { -1 },
                replica_epoch: -1,
                ..Default::default()
            },
            max_wait_ms: f.max_wait_ms,
            min_bytes: 0,
            max_bytes: f.max_bytes,
            isolation_level: 0,
            session_id: 0,
            session_epoch: -1,
            topics: vec![m::fetch_request::FetchTopic {
                topic: METADATA_TOPIC.into(),
                topic_id: Uuid::METADATA_TOPIC_ID,
                partitions: vec![m::fetch_request::FetchPartition {
                    partition: 0,
                    current_leader_epoch: f.current_leader_epoch,
                    fetch_offset: f.fetch_offset,
                    last_fetched_epoch: f.last_fetched_epoch,
                    log_start_offset: -1,
                    partition_max_bytes: f.max_bytes,
                    replica_directory_id: if version >= 17 {
                        f.replica.wire_directory_id()
                    } else {
                        Uuid::ZERO
                    },
                    high_watermark: if version >= 18 {
                        f.high_watermark
                    } else {
                        i64::MAX
                    },
                    ..Default::default()
                }],
                ..Default::default()
            }],
            rack_id: String::new(),
            ..Default::default()
        }),
        Request::FetchSnapshot(s) => RequestBody::FetchSnapshot(m::FetchSnapshotRequest {
            cluster_id: s.cluster_id.clone(),
            replica_id: s.replica.id,
            max_bytes: s.max_bytes,
            topics: vec![m::fetch_snapshot_request::TopicSnapshot {
                name: METADATA_TOPIC.into(),
                partitions: vec![m::fetch_snapshot_request::PartitionSnapshot {
                    partition: 0,
                    current_leader_epoch: s.current_leader_epoch,
                    snapshot_id: m::fetch_snapshot_request::SnapshotId {
                        end_offset: s.snapshot_id.offset,
                        epoch: s.snapshot_id.epoch,
                        ..Default::default()
                    },
                    position: s.position,
                    replica_directory_id: if v1 {
                        s.replica.wire_directory_id()
                    } else {
                        Uuid::ZERO
                    },
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        Request::ApiVersions { .. } => RequestBody::ApiVersions(m::ApiVersionsRequest {
            client_software_name: "kactor".into(),
            client_software_version: env!("CARGO_PKG_VERSION").into(),
            ..Default::default()
        }),
        // An auto-joining observer's requests to the leader (KIP-853).
        Request::AddRaftVoter(a) => RequestBody::AddRaftVoter(m::AddRaftVoterRequest {
            cluster_id: a.cluster_id.clone(),
            timeout_ms: a.timeout_ms,
            voter_id: a.voter.id,
            voter_directory_id: a.voter.wire_directory_id(),
            listeners: a
                .listeners
                .iter()
                .map(|e| m::add_raft_voter_request::Listener {
                    name: e.listener.clone(),
                    host: e.host.clone(),
                    port: e.port,
                    ..Default::default()
                })
                .collect(),
            // v0 always waits for the commit.
            ack_when_committed: version < 1 || a.ack_when_committed,
            ..Default::default()
        }),
        Request::RemoveRaftVoter(r) => RequestBody::RemoveRaftVoter(m::RemoveRaftVoterRequest {
            cluster_id: r.cluster_id.clone(),
            voter_id: r.voter.id,
            voter_directory_id: r.voter.wire_directory_id(),
            ..Default::default()
        }),
        _ => return None,
    })
}

/// The API a core request goes out as.
pub fn api_key(request: &Request) -> Option<m::ApiKey> {
    Some(match request {
        Request::Vote(_) => m::ApiKey::Vote,
        Request::BeginQuorumEpoch(_) => m::ApiKey::BeginQuorumEpoch,
        Request::EndQuorumEpoch(_) => m::ApiKey::EndQuorumEpoch,
        Request::Fetch(_) => m::ApiKey::Fetch,
        Request::FetchSnapshot(_) => m::ApiKey::FetchSnapshot,
        Request::ApiVersions { .. } => m::ApiKey::ApiVersions,
        Request::AddRaftVoter(_) => m::ApiKey::AddRaftVoter,
        Request::RemoveRaftVoter(_) => m::ApiKey::RemoveRaftVoter,
        _ => return None,
    })
}

fn quorum(
    error: i16,
    partition: Option<(i16, i32, i32)>,
    endpoints: impl Iterator<Item = (i32, String, u16)>,
    listener: &str,
) -> QuorumResponse {
    let (partition_error, leader_id, leader_epoch) = partition.unwrap_or((error, -1, -1));
    QuorumResponse {
        error,
        partition_error,
        leader_id,
        leader_epoch,
        leader_endpoints: endpoints
            .filter(|(id, _, _)| *id == leader_id)
            .map(|(_, host, port)| Endpoint {
                listener: listener.to_string(),
                host,
                port,
            })
            .collect(),
    }
}

/// Splits fetched record bytes into whole batches as the core appends them; a trailing partial
/// batch (the leader's read stops at a byte limit) is dropped, as Kafka's follower does.
pub fn log_batches(buf: Bytes) -> Result<Vec<LogBatch>, String> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    // A batch's length field (bytes after the offset and length) sits at byte 8.
    while buf.len() >= pos + 12 {
        let len = i32::from_be_bytes(buf[pos + 8..pos + 12].try_into().expect("4 bytes"));
        let end = pos + 12 + len.max(0) as usize;
        if len < 0 || end > buf.len() {
            break;
        }
        let bytes = buf.slice(pos..end);
        pos = end;
        let decoded = decode_batches(bytes.clone()).map_err(|e| e.to_string())?;
        let Some(b) = decoded.into_iter().next() else {
            break;
        };
        let control = if b.is_control {
            control_records(&b).map_err(|e| e.to_string())?
        } else {
            Vec::new()
        };
        out.push(LogBatch {
            base_offset: b.base_offset,
            last_offset: b.last_offset,
            epoch: b.epoch,
            control,
            is_control: b.is_control,
            bytes,
        });
    }
    Ok(out)
}

/// A peer's answer as the core takes it. `listener` is the controller listener the request
/// went to (the leader's endpoint is named after it).
pub fn response_from_wire(body: ResponseBody, listener: &str) -> Result<Response, String> {
    Ok(match body {
        ResponseBody::Vote(r) => {
            let p = r
                .topics
                .first()
                .and_then(|t| t.partitions.first())
                .map(|p| (p.error_code, p.leader_id, p.leader_epoch, p.vote_granted));
            let eps = r
                .node_endpoints
                .into_iter()
                .map(|e| (e.node_id, e.host, e.port));
            Response::Vote(VoteResponse {
                common: quorum(r.error_code, p.map(|p| (p.0, p.1, p.2)), eps, listener),
                vote_granted: p.is_some_and(|p| p.3),
            })
        }
        ResponseBody::BeginQuorumEpoch(r) => {
            let p = r
                .topics
                .first()
                .and_then(|t| t.partitions.first())
                .map(|p| (p.error_code, p.leader_id, p.leader_epoch));
            let eps = r
                .node_endpoints
                .into_iter()
                .map(|e| (e.node_id, e.host, e.port));
            Response::BeginQuorumEpoch(quorum(r.error_code, p, eps, listener))
        }
        ResponseBody::EndQuorumEpoch(r) => {
            let p = r
                .topics
                .first()
                .and_then(|t| t.partitions.first())
                .map(|p| (p.error_code, p.leader_id, p.leader_epoch));
            let eps = r
                .node_endpoints
                .into_iter()
                .map(|e| (e.node_id, e.host, e.port));
            Response::EndQuorumEpoch(quorum(r.error_code, p, eps, listener))
        }
        ResponseBody::Fetch(r) => {
            let p = r
                .responses
                .into_iter()
                .next()
                .and_then(|t| t.partitions.into_iter().next());
            let Some(p) = p else {
                return Ok(Response::Fetch(FetchResponse {
                    error: if r.error_code != 0 {
                        r.error_code
                    } else {
                        INVALID_REQUEST
                    },
                    partition_error: 0,
                    high_watermark: -1,
                    log_start_offset: -1,
                    leader_id: -1,
                    leader_epoch: -1,
                    diverging_epoch: None,
                    snapshot_id: None,
                    records: Records::None,
                    leader_endpoints: Vec::new(),
                }));
            };
            let leader_id = p.current_leader.leader_id;
            let records = match p.records {
                Some(kactor_protocol::Records::Memory(b)) if !b.is_empty() => {
                    Records::Batches(log_batches(b)?)
                }
                Some(kactor_protocol::Records::File(f)) => {
                    Records::Batches(log_batches(f.read_to_bytes().map_err(|e| e.to_string())?)?)
                }
                _ => Records::None,
            };
            Response::Fetch(FetchResponse {
                error: r.error_code,
                partition_error: p.error_code,
                high_watermark: p.high_watermark,
                log_start_offset: p.log_start_offset,
                leader_id,
                leader_epoch: p.current_leader.leader_epoch,
                diverging_epoch: (p.diverging_epoch.epoch >= 0).then(|| {
                    OffsetAndEpoch::new(p.diverging_epoch.end_offset, p.diverging_epoch.epoch)
                }),
                snapshot_id: (p.snapshot_id.epoch >= 0 && p.snapshot_id.end_offset >= 0)
                    .then(|| OffsetAndEpoch::new(p.snapshot_id.end_offset, p.snapshot_id.epoch)),
                records,
                leader_endpoints: r
                    .node_endpoints
                    .into_iter()
                    .filter(|e| e.node_id == leader_id)
                    .map(|e| Endpoint {
                        listener: listener.to_string(),
                        host: e.host,
                        port: e.port as u16,
                    })
                    .collect(),
            })
        }
        ResponseBody::FetchSnapshot(r) => {
            let p = r
                .topics
                .into_iter()
                .next()
                .and_then(|t| t.partitions.into_iter().next());
            let Some(p) = p else {
                return Err("FetchSnapshot response without a partition".into());
            };
            let leader_id = p.current_leader.leader_id;
            let bytes = match p.unaligned_records {
                Some(kactor_protocol::Records::Memory(b)) => SnapshotBytes::Bytes(b),
                Some(kactor_protocol::Records::File(f)) => {
                    SnapshotBytes::Bytes(f.read_to_bytes().map_err(|e| e.to_string())?)
                }
                None => SnapshotBytes::None,
            };
            Response::FetchSnapshot(FetchSnapshotResponse {
                error: r.error_code,
                partition_error: p.error_code,
                leader_id,
                leader_epoch: p.current_leader.leader_epoch,
                snapshot_id: OffsetAndEpoch::new(p.snapshot_id.end_offset, p.snapshot_id.epoch),
                size: p.size,
                position: p.position,
                bytes,
                leader_endpoints: r
                    .node_endpoints
                    .into_iter()
                    .filter(|e| e.node_id == leader_id)
                    .map(|e| Endpoint {
                        listener: listener.to_string(),
                        host: e.host,
                        port: e.port,
                    })
                    .collect(),
            })
        }
        ResponseBody::ApiVersions(r) => Response::ApiVersions {
            error: r.error_code,
            kraft_version: r
                .supported_features
                .iter()
                .find(|f| f.name == "kraft.version")
                .map(|f| KRaftVersionRange {
                    min: f.min_version,
                    max: f.max_version,
                }),
        },
        ResponseBody::AddRaftVoter(r) => Response::AddRaftVoter(VoterChangeResponse {
            error: r.error_code,
            error_message: r.error_message,
        }),
        ResponseBody::RemoveRaftVoter(r) => Response::RemoveRaftVoter(VoterChangeResponse {
            error: r.error_code,
            error_message: r.error_message,
        }),
        other => return Err(format!("unexpected {:?} response", other.api_key())),
    })
}
