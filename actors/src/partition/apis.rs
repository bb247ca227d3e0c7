//! Request handlers for the partition APIs (Kafka's `KafkaApis.handleProduceRequest`,
//! `handleFetchRequest`, `handleListOffsetRequest`, `handleDeleteRecordsRequest`,
//! `handleOffsetForLeaderEpochRequest`, `handleDescribeLogDirsRequest` with the
//! `ReplicaManager` fan-out): each looks partitions up in the published [`PartitionTable`],
//! sends one message per partition, and parks acks=all produces and long polls in the purgatory.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use kactor_protocol::errors;
use kactor_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kactor_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kactor_protocol::messages::fetch_response::{self, FetchableTopicResponse, PartitionData};
use kactor_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kactor_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset as WireEpochEndOffset, OffsetForLeaderTopicResult,
};
use kactor_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kactor_protocol::messages::{
    DeleteRecordsRequest, DeleteRecordsResponse, DescribeLogDirsRequest, DescribeLogDirsResponse,
    FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse,
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, ProduceRequest, ProduceResponse,
};
use kactor_protocol::{ApiKey, FileSlice, Records, RequestBody, ResponseBody, Uuid};
use tokio::sync::oneshot;

use super::core::{
    ClientRack, IsolationLevel, LogSlice, PartitionError, ReadOutcome, ReadParams, ReadScope,
    TopicPartition,
};
use super::fetch_session::{
    summary_of, FetchSessions, SessionOutcome, SessionPartition, INITIAL_EPOCH,
};
use super::messages::*;
use super::registry::{HostedReplica, PartitionTable, PartitionTableReader};
use crate::network::{HandlerOutcome, RequestContext, RequestRouter};
use crate::purgatory::core::{FetchWatch, ProduceWatch};
use crate::purgatory::{await_replication, PurgatoryActor, WatchFetch};
use crate::runtime::MeteredAddr;

mod fetch;
use fetch::handle_fetch;
pub(crate) use fetch::partition_error as fetch_partition_error;
pub use fetch::FetchTarget;

/// What the partition API handlers capture (cloned into every request's future).
#[derive(Clone)]
pub struct PartitionApis {
    pub partitions: PartitionTableReader,
    pub purgatory: MeteredAddr<PurgatoryActor>,
    pub fetch_sessions: FetchSessions,
    /// `replica.selector.class` names the rack-aware selector: leaders point consumers at a
    /// replica in their rack (KIP-392).
    pub rack_aware_reads: bool,
    /// This broker's replication throttles (the leader side applies here).
    pub replication_quotas: Arc<super::replication_quota::ReplicationQuotas>,
}

/// Registers Produce, Fetch, ListOffsets, DeleteRecords, OffsetForLeaderEpoch and
/// DescribeLogDirs on `router`.
pub fn register(router: &mut RequestRouter, apis: PartitionApis) {
    let a = apis.clone();
    router.register(ApiKey::Produce, move |ctx, body| {
        let a = a.clone();
        // The connection runs every handler as its own task, so a produce is carried out even
        // if the client hangs up right after sending it (acks=0 producers do), as Kafka does.
        Box::pin(async move {
            let RequestBody::Produce(req) = body else {
                return wrong_body();
            };
            handle_produce(&a, &ctx, req).await
        })
    });
    let a = apis.clone();
    router.register(ApiKey::Fetch, move |ctx, body| {
        let a = a.clone();
        Box::pin(async move {
            let RequestBody::Fetch(req) = body else {
                return wrong_body();
            };
            HandlerOutcome::Respond(ResponseBody::Fetch(handle_fetch(&a, &ctx, req).await))
        })
    });
    let a = apis.clone();
    router.register(ApiKey::ListOffsets, move |ctx, body| {
        let a = a.clone();
        Box::pin(async move {
            let RequestBody::ListOffsets(req) = body else {
                return wrong_body();
            };
            HandlerOutcome::Respond(ResponseBody::ListOffsets(
                handle_list_offsets(&a, &ctx, req).await,
            ))
        })
    });
    let a = apis.clone();
    router.register(ApiKey::DeleteRecords, move |_ctx, body| {
        let a = a.clone();
        Box::pin(async move {
            let RequestBody::DeleteRecords(req) = body else {
                return wrong_body();
            };
            HandlerOutcome::Respond(ResponseBody::DeleteRecords(
                handle_delete_records(&a, req).await,
            ))
        })
    });
    let a = apis.clone();
    router.register(ApiKey::OffsetForLeaderEpoch, move |_ctx, body| {
        let a = a.clone();
        Box::pin(async move {
            let RequestBody::OffsetForLeaderEpoch(req) = body else {
                return wrong_body();
            };
            HandlerOutcome::Respond(ResponseBody::OffsetForLeaderEpoch(
                handle_offset_for_leader_epoch(&a, req).await,
            ))
        })
    });
    let a = apis;
    router.register(ApiKey::DescribeLogDirs, move |_ctx, body| {
        let a = a.clone();
        Box::pin(async move {
            let RequestBody::DescribeLogDirs(req) = body else {
                return wrong_body();
            };
            HandlerOutcome::Respond(ResponseBody::DescribeLogDirs(
                handle_describe_log_dirs(&a, req).await,
            ))
        })
    });
}

fn wrong_body() -> HandlerOutcome {
    HandlerOutcome::Close("request body does not match its API key".into())
}

fn table(a: &PartitionApis) -> Arc<PartitionTable> {
    a.partitions.borrow().clone()
}

/// The error for a partition this node does not serve: KAFKA_STORAGE_ERROR if its log dir is
/// offline here, NOT_LEADER_OR_FOLLOWER if the cluster knows it (another broker leads it), else
/// UNKNOWN_TOPIC_OR_PARTITION.
fn not_hosted(t: &PartitionTable, topic: &str, partition: i32) -> i16 {
    if t.offline
        .contains_key(&TopicPartition::new(topic, partition))
    {
        errors::KAFKA_STORAGE_ERROR
    } else if t.partition_exists(topic, partition) {
        errors::NOT_LEADER_OR_FOLLOWER
    } else {
        errors::UNKNOWN_TOPIC_OR_PARTITION
    }
}

fn lookup<'t>(
    t: &'t PartitionTable,
    topic: &str,
    partition: i32,
) -> Result<&'t HostedReplica, i16> {
    t.get(topic, partition)
        .ok_or_else(|| not_hosted(t, topic, partition))
}

/// A mailbox failure means the partition actor is gone (deleted mid-request).
fn mailbox<T>(
    r: Result<Result<T, PartitionError>, actix::MailboxError>,
) -> Result<T, PartitionError> {
    r.unwrap_or(Err(PartitionError::NotLeaderOrFollower))
}

// ---------------------------------------------------------------- Produce

/// Kafka's `AdminUtils.ADMIN_CLIENT_ID`: the one client id allowed to write to internal topics.
const ADMIN_CLIENT_ID: &str = "__admin_client";

async fn handle_produce(
    a: &PartitionApis,
    ctx: &RequestContext,
    req: ProduceRequest,
) -> HandlerOutcome {
    let version = ctx.api_version;
    let t = table(a);
    let acks = req.acks;
    let valid_acks = matches!(acks, -1..=1);
    let internal_topics_allowed = ctx.client_id() == ADMIN_CLIENT_ID;

    // Kafka keys a produce request by partition: a partition named twice is appended and
    // answered once, with the records named last. The response keeps a topic row per request
    // topic (the transaction verification wrapper merges by that position).
    struct Entry {
        topic_index: usize,
        slot: usize,
        name: Option<String>,
        records: Option<Records>,
    }
    let mut responses: Vec<TopicProduceResponse> = Vec::with_capacity(req.topic_data.len());
    let mut entries: Vec<Entry> = Vec::new();
    let mut entry_of: HashMap<(String, Uuid, i32), usize> = HashMap::new();
    for (ti, topic) in req.topic_data.into_iter().enumerate() {
        // v13+ names topics by id only.
        let name = if version >= 13 {
            t.topic_name(&topic.topic_id)
        } else {
            Some(topic.name.clone())
        };
        let mut tr = TopicProduceResponse {
            name: topic.name.clone(),
            topic_id: topic.topic_id,
            ..Default::default()
        };
        for p in topic.partition_data {
            let key = (topic.name.clone(), topic.topic_id, p.index);
            if let Some(&e) = entry_of.get(&key) {
                entries[e].records = p.records;
                continue;
            }
            entry_of.insert(key, entries.len());
            entries.push(Entry {
                topic_index: ti,
                slot: tr.partition_responses.len(),
                name: name.clone(),
                records: p.records,
            });
            tr.partition_responses.push(PartitionProduceResponse {
                index: p.index,
                base_offset: -1,
                log_append_time_ms: -1,
                log_start_offset: -1,
                ..Default::default()
            });
        }
        responses.push(tr);
    }

    // One AppendRecords per partition, all in flight at once. The checks before it run in
    // Kafka's order: the partition exists, the records' shape, acks, internal topics, then
    // leadership.
    struct Pending {
        topic_index: usize,
        slot: usize,
        tp: TopicPartition,
    }
    let mut pending = Vec::new();
    let mut sends = Vec::new();
    for e in entries {
        let pr = &mut responses[e.topic_index].partition_responses[e.slot];
        let index = pr.index;
        let Some(name) = e.name.as_deref() else {
            pr.error_code = errors::UNKNOWN_TOPIC_ID;
            continue;
        };
        if !t.partition_exists(name, index) {
            pr.error_code = errors::UNKNOWN_TOPIC_OR_PARTITION;
            continue;
        }
        let records = match e.records {
            Some(Records::Memory(b)) => b,
            Some(Records::File(f)) => f.read_to_bytes().unwrap_or_default(),
            None => bytes::Bytes::new(),
        };
        if let Err(err) = super::core::validate::check_produce_records(&records, version) {
            pr.error_code = err.code();
            continue;
        }
        if !valid_acks {
            pr.error_code = errors::INVALID_REQUIRED_ACKS;
            continue;
        }
        if crate::metadata::is_internal_topic(name) && !internal_topics_allowed {
            pr.error_code = errors::INVALID_TOPIC_EXCEPTION;
            continue;
        }
        match t.get(name, index) {
            // KAFKA_STORAGE_ERROR for a replica in an offline dir, else another broker leads.
            None => pr.error_code = not_hosted(&t, name, index),
            Some(replica) => {
                pending.push(Pending {
                    topic_index: e.topic_index,
                    slot: e.slot,
                    tp: TopicPartition::new(name, index),
                });
                sends.push(replica.addr.send(AppendRecords {
                    records,
                    required_acks: acks,
                }));
            }
        }
    }
    let results = join_all(sends).await;

    let mut watches = Vec::new();
    let mut failed = None;
    for (p, result) in pending.iter().zip(results) {
        let pr = &mut responses[p.topic_index].partition_responses[p.slot];
        // The partition actor is gone (deleted mid-request).
        let result = result.unwrap_or(Err(AppendFailure {
            error: PartitionError::NotLeaderOrFollower,
            log_start_offset: -1,
        }));
        match result {
            Ok(out) => {
                pr.base_offset = out.base_offset;
                pr.log_append_time_ms = out.log_append_time_ms;
                // Fields a version lacks must keep their defaults to encode.
                if version >= 5 {
                    pr.log_start_offset = out.log_start_offset;
                }
                // With ISR = {leader} the append already moved the high watermark past the
                // batch: nothing to wait for, so no round trip through the purgatory.
                if acks == -1 && out.high_watermark <= out.last_offset {
                    watches.push(ProduceWatch {
                        tp: p.tp.clone(),
                        required_offset: out.last_offset + 1,
                        observed_high_watermark: out.high_watermark,
                        leader_epoch: out.leader_epoch,
                    });
                }
            }
            Err(AppendFailure {
                error: e,
                log_start_offset,
            }) => {
                pr.error_code = e.code();
                // Fields a version lacks must keep their defaults to encode.
                if version >= 5 {
                    pr.log_start_offset = log_start_offset;
                }
                if version >= 8 {
                    pr.error_message = e.produce_error_message();
                    pr.record_errors = e
                        .record_errors()
                        .iter()
                        .map(|r| BatchIndexAndErrorMessage {
                            batch_index: r.batch_index,
                            batch_index_error_message: r.message.clone(),
                            ..Default::default()
                        })
                        .collect();
                }
                failed.get_or_insert_with(|| format!("{}: {e}", p.tp));
            }
        }
    }

    if failed.is_none() {
        failed = responses
            .iter()
            .flat_map(|t| t.partition_responses.iter().map(move |p| (t, p)))
            .find(|(_, p)| p.error_code != errors::NONE)
            .map(|(t, p)| format!("{}-{}: error {}", t.name, p.index, p.error_code));
    }
    if acks == 0 {
        // Kafka can't answer an acks=0 produce, so it closes the connection on error to make
        // the producer notice and refresh its metadata.
        return match failed {
            Some(reason) => HandlerOutcome::Close(format!("acks=0 produce failed: {reason}")),
            None => HandlerOutcome::NoResponse,
        };
    }

    let waited = await_replication(&a.purgatory, watches, req.timeout_ms.max(0) as u64).await;
    for p in &pending {
        if let Some(code) = waited.get(&p.tp).copied().filter(|c| *c != errors::NONE) {
            responses[p.topic_index].partition_responses[p.slot].error_code = code;
        }
    }
    for tr in &responses {
        for pr in &tr.partition_responses {
            ctx.record_error(pr.error_code);
        }
    }
    HandlerOutcome::Respond(ResponseBody::Produce(ProduceResponse {
        responses,
        ..Default::default()
    }))
}

// ---------------------------------------------------------------- ListOffsets

/// The first ListOffsets version that knows a special (negative) timestamp, `None` for a
/// negative value that names nothing (Kafka's `ReplicaManager.timestampMinSupportedVersion`).
fn list_offsets_min_version(timestamp: i64) -> Option<i16> {
    use super::core::*;
    match timestamp {
        LATEST_TIMESTAMP | EARLIEST_TIMESTAMP => Some(1),
        MAX_TIMESTAMP => Some(7),
        EARLIEST_LOCAL_TIMESTAMP => Some(8),
        LATEST_TIERED_TIMESTAMP => Some(9),
        EARLIEST_PENDING_UPLOAD_TIMESTAMP => Some(11),
        _ => None,
    }
}

async fn handle_list_offsets(
    a: &PartitionApis,
    ctx: &RequestContext,
    req: ListOffsetsRequest,
) -> ListOffsetsResponse {
    let t = table(a);
    let version = ctx.api_version;
    // Consumers (replica id -1) see offsets bounded by their isolation level; brokers see the
    // log end.
    let isolation = (req.replica_id < 0).then(|| IsolationLevel::from_wire(req.isolation_level));
    // Kafka answers per partition, keyed by partition: one named twice gets one row,
    // INVALID_REQUEST, and is not looked up (`ListOffsetsRequest.duplicatePartitions`).
    let mut named: HashMap<(&str, i32), usize> = HashMap::new();
    for topic in &req.topics {
        for p in &topic.partitions {
            *named.entry((&topic.name, p.partition_index)).or_default() += 1;
        }
    }
    let mut topics: Vec<ListOffsetsTopicResponse> = Vec::with_capacity(req.topics.len());
    let mut answered: std::collections::HashSet<(&str, i32)> = Default::default();
    for topic in &req.topics {
        let asked: Vec<_> = topic
            .partitions
            .iter()
            .filter(|p| answered.insert((&topic.name, p.partition_index)))
            .collect();
        let futures = asked.iter().map(|p| {
            let duplicate = named[&(topic.name.as_str(), p.partition_index)] > 1;
            let unsupported = p.timestamp < 0
                && list_offsets_min_version(p.timestamp).is_none_or(|min| version < min);
            let replica = if duplicate {
                Err(errors::INVALID_REQUEST)
            } else if unsupported {
                Err(errors::UNSUPPORTED_VERSION)
            } else if req.replica_id < 0 && !matches!(req.isolation_level, 0 | 1) {
                // Kafka reads a consumer's isolation level per partition
                // (`IsolationLevel.forId`): one it does not know fails each partition.
                Err(errors::UNKNOWN_SERVER_ERROR)
            } else {
                lookup(&t, &topic.name, p.partition_index).map(|r| r.addr.clone())
            };
            let msg = GetOffsetForTimestamp {
                timestamp: p.timestamp,
                isolation,
                current_leader_epoch: if version >= 4 {
                    p.current_leader_epoch
                } else {
                    -1
                },
            };
            async move {
                match replica {
                    Err(code) => Err(code),
                    Ok(addr) => mailbox(addr.send(msg).await).map_err(|e| e.code()),
                }
            }
        });
        let results = join_all(futures).await;
        let partitions = asked.iter().zip(results).map(|(p, r)| {
            let mut pr = ListOffsetsPartitionResponse {
                partition_index: p.partition_index,
                timestamp: -1,
                offset: -1,
                leader_epoch: -1,
                ..Default::default()
            };
            match r {
                Ok(Some(found)) => {
                    pr.timestamp = found.timestamp;
                    pr.offset = found.offset;
                    // LeaderEpoch exists from v4.
                    if version >= 4 {
                        pr.leader_epoch = found.leader_epoch.unwrap_or(-1);
                    }
                }
                Ok(None) => {}
                Err(code) => {
                    ctx.record_error(code);
                    pr.error_code = code;
                }
            }
            pr
        });
        // A topic named twice is one topic in Kafka's answer.
        match topics.iter_mut().find(|x| x.name == topic.name) {
            Some(existing) => existing.partitions.extend(partitions),
            None => topics.push(ListOffsetsTopicResponse {
                name: topic.name.clone(),
                partitions: partitions.collect(),
                ..Default::default()
            }),
        }
    }
    ListOffsetsResponse {
        topics,
        ..Default::default()
    }
}

// ---------------------------------------------------------------- DeleteRecords

async fn handle_delete_records(
    a: &PartitionApis,
    req: DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let t = table(a);
    // Kafka keys the request by partition: one named twice is deleted and answered once, with
    // the offset named last; a topic named twice is one topic.
    let mut wanted: Vec<(String, Vec<(i32, i64)>)> = Vec::new();
    for topic in req.topics {
        let at = match wanted.iter().position(|(n, _)| *n == topic.name) {
            Some(i) => i,
            None => {
                wanted.push((topic.name, Vec::new()));
                wanted.len() - 1
            }
        };
        let parts = &mut wanted[at].1;
        for p in topic.partitions {
            match parts.iter_mut().find(|(i, _)| *i == p.partition_index) {
                Some(existing) => existing.1 = p.offset,
                None => parts.push((p.partition_index, p.offset)),
            }
        }
    }
    let mut topics = Vec::with_capacity(wanted.len());
    for (name, parts) in wanted {
        let futures = parts.iter().map(|&(partition, offset)| {
            let replica = if !t.partition_exists(&name, partition) {
                Err(errors::UNKNOWN_TOPIC_OR_PARTITION)
            } else if crate::metadata::is_internal_topic(&name) {
                // Kafka's `ReplicaManager.deleteRecordsOnLocalLog`: never on internal topics.
                Err(errors::INVALID_TOPIC_EXCEPTION)
            } else {
                lookup(&t, &name, partition).map(|r| r.addr.clone())
            };
            async move {
                match replica {
                    Err(code) => Err(code),
                    Ok(addr) => mailbox(addr.send(DeleteRecordsBefore { offset }).await)
                        .map_err(|e| e.code()),
                }
            }
        });
        let results = join_all(futures).await;
        let partitions = parts
            .iter()
            .zip(results)
            .map(|(&(partition, _), r)| DeleteRecordsPartitionResult {
                partition_index: partition,
                low_watermark: *r.as_ref().unwrap_or(&-1),
                error_code: r.err().unwrap_or(errors::NONE),
                ..Default::default()
            })
            .collect();
        topics.push(DeleteRecordsTopicResult {
            name,
            partitions,
            ..Default::default()
        });
    }
    DeleteRecordsResponse {
        topics,
        ..Default::default()
    }
}

// ---------------------------------------------------------------- OffsetForLeaderEpoch

async fn handle_offset_for_leader_epoch(
    a: &PartitionApis,
    req: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let t = table(a);
    let mut topics = Vec::with_capacity(req.topics.len());
    for topic in req.topics {
        let futures = topic.partitions.iter().map(|p| {
            let replica = lookup(&t, &topic.topic, p.partition).map(|r| r.addr.clone());
            let msg = GetEndOffsetForEpoch {
                current_leader_epoch: p.current_leader_epoch,
                leader_epoch: p.leader_epoch,
                fetch_only_from_leader: true,
            };
            async move {
                match replica {
                    Err(code) => Err(code),
                    Ok(addr) => mailbox(addr.send(msg).await).map_err(|e| e.code()),
                }
            }
        });
        let results = join_all(futures).await;
        let partitions = topic
            .partitions
            .iter()
            .zip(results)
            .map(|(p, r)| match r {
                Ok(e) => WireEpochEndOffset {
                    partition: p.partition,
                    leader_epoch: e.epoch,
                    end_offset: e.end_offset,
                    ..Default::default()
                },
                Err(code) => WireEpochEndOffset {
                    error_code: code,
                    partition: p.partition,
                    leader_epoch: -1,
                    end_offset: -1,
                    ..Default::default()
                },
            })
            .collect();
        topics.push(OffsetForLeaderTopicResult {
            topic: topic.topic,
            partitions,
            ..Default::default()
        });
    }
    OffsetForLeaderEpochResponse {
        topics,
        ..Default::default()
    }
}

// ---------------------------------------------------------------- DescribeLogDirs

async fn handle_describe_log_dirs(
    a: &PartitionApis,
    req: DescribeLogDirsRequest,
) -> DescribeLogDirsResponse {
    let t = table(a);
    let wanted = |tp: &TopicPartition| match &req.topics {
        None => true,
        Some(topics) => topics
            .iter()
            .any(|w| w.topic == tp.topic && w.partitions.contains(&tp.partition)),
    };
    let mut hosted: Vec<(&TopicPartition, &HostedReplica)> =
        t.partitions.iter().filter(|(tp, _)| wanted(tp)).collect();
    hosted.sort_by(|x, y| x.0.cmp(y.0));
    let infos = join_all(hosted.iter().map(|(_, r)| r.addr.send(DescribeReplica))).await;
    let mut results: Vec<DescribeLogDirsResult> = t
        .log_dirs
        .iter()
        .map(|d| {
            // The file system's size and free space (statvfs), as Kafka reports its
            // FileStore's; -1 (UNKNOWN_VOLUME_BYTES) only if it cannot be read.
            let (total_bytes, usable_bytes) =
                super::log_dirs::volume_bytes(std::path::Path::new(d)).unwrap_or((-1, -1));
            // An offline dir is reported with KAFKA_STORAGE_ERROR and nothing in it, as Kafka
            // reports its offline dirs.
            let offline = t.offline_log_dirs.contains(d);
            DescribeLogDirsResult {
                error_code: if offline {
                    errors::KAFKA_STORAGE_ERROR
                } else {
                    errors::NONE
                },
                log_dir: d.clone(),
                total_bytes: if offline { -1 } else { total_bytes },
                usable_bytes: if offline { -1 } else { usable_bytes },
                ..Default::default()
            }
        })
        .collect();
    for ((tp, replica), info) in hosted.into_iter().zip(infos) {
        let Ok(info) = info else { continue };
        let Some(dir) = results.iter_mut().find(|d| d.log_dir == replica.log_dir) else {
            continue;
        };
        let part = DescribeLogDirsPartition {
            partition_index: tp.partition,
            partition_size: info.size_bytes as i64,
            offset_lag: (info.high_watermark - info.log_end_offset).max(0),
            is_future_key: false,
            ..Default::default()
        };
        match dir.topics.iter_mut().find(|x| x.name == tp.topic) {
            Some(x) => x.partitions.push(part),
            None => dir.topics.push(DescribeLogDirsTopic {
                name: tp.topic.clone(),
                partitions: vec![part],
                ..Default::default()
            }),
        }
    }
    DescribeLogDirsResponse {
        results,
        ..Default::default()
    }
}
