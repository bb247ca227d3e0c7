//! ShareFetch and ShareAcknowledge (Kafka's `KafkaApis.handleShareFetchRequest` /
//! `handleShareAcknowledgeRequest` with `SharePartitionManager`): the handlers check
//! the request, ask the [`SharePartitionManagerActor`] where to read, read the partitions'
//! logs themselves, and have the actor acquire what they read. A fetch that acquired nothing
//! waits in the purgatory for new records (long poll) and tries once more.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::future::join_all;
use kactor_protocol::errors::*;
use kactor_protocol::messages::{
    share_acknowledge_response as sar, share_fetch_response as sfr, ShareAcknowledgeRequest,
    ShareAcknowledgeResponse, ShareFetchRequest, ShareFetchResponse,
};
use kactor_protocol::{ApiKey, Records, RequestBody, ResponseBody, Uuid};
use tokio::sync::oneshot;

use super::actor::SharePartitionManagerActor;
use super::core::partition::{valid_ack_batches, ACK_REJECT, ACK_RENEW};
use super::core::{
    AckBatch, AckError, AcquiredRange, Limits, LogBatch, PartitionAcks, ReadBatches,
};
use super::messages::*;
use crate::group::apis::share::valid_share_member_id;
use crate::metadata::core::image::{ConfigResource, ConfigResourceType, MetadataImage};
use crate::network::{HandlerOutcome, RequestContext, RequestRouter};
use crate::partition::core::{IsolationLevel, ReadParams, TopicPartition};
use crate::partition::messages::{GetOffsetForTimestamp, ReadRecords};
use crate::partition::registry::{PartitionTable, PartitionTableReader};
use crate::purgatory::core::FetchWatch;
use crate::purgatory::{PurgatoryActor, WatchFetch};
use crate::runtime::MeteredAddr;

/// The broker's share settings (group configs override them per group, within bounds).
#[derive(Debug, Clone, Copy)]
pub struct ShareSettings {
    pub limits: Limits,
    /// `group.share.min.record.lock.duration.ms` / `...max...`
    pub lock_duration_bounds: (i64, i64),
    /// `group.share.min.delivery.count.limit` / `...max...`
    pub delivery_count_bounds: (i16, i16),
    /// `group.share.min.partition.max.record.locks` / `...max...`
    pub record_locks_bounds: (i64, i64),
    /// `fetch.max.bytes`
    pub fetch_max_bytes: i32,
}

#[derive(Clone)]
pub struct ShareApis {
    pub manager: MeteredAddr<SharePartitionManagerActor>,
    pub partitions: PartitionTableReader,
    pub purgatory: MeteredAddr<PurgatoryActor>,
    pub settings: ShareSettings,
}

pub fn register(router: &mut RequestRouter, apis: ShareApis) {
    let a = apis.clone();
    router.register(ApiKey::ShareFetch, move |ctx, body| {
        let a = a.clone();
        Box::pin(async move {
            let RequestBody::ShareFetch(r) = body else {
                unreachable!("router dispatches by key")
            };
            let resp = handle_share_fetch(&a, &ctx, r).await;
            ctx.record_error(resp.error_code);
            HandlerOutcome::Respond(ResponseBody::ShareFetch(resp))
        })
    });
    let a = apis;
    router.register(ApiKey::ShareAcknowledge, move |ctx, body| {
        let a = a.clone();
        Box::pin(async move {
            let RequestBody::ShareAcknowledge(r) = body else {
                unreachable!("router dispatches by key")
            };
            let resp = handle_share_acknowledge(&a, &ctx, r).await;
            ctx.record_error(resp.error_code);
            HandlerOutcome::Respond(ResponseBody::ShareAcknowledge(resp))
        })
    });
}

// ---------------------------------------------------------------------------------------------
// Settings

/// Where a share group starts reading a partition it has no state for
/// (`share.auto.offset.reset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoOffsetReset {
    Earliest,
    Latest,
    /// Records no older than this many milliseconds.
    ByDuration(i64),
}

impl AutoOffsetReset {
    pub fn parse(v: &str) -> Option<Self> {
        match v.trim() {
            "earliest" => Some(AutoOffsetReset::Earliest),
            "latest" => Some(AutoOffsetReset::Latest),
            other => other
                .strip_prefix("by_duration:")
                .and_then(iso_duration_ms)
                .map(AutoOffsetReset::ByDuration),
        }
    }

    /// The ListOffsets timestamp that finds the start offset.
    fn timestamp(self, now_ms: i64) -> i64 {
        match self {
            AutoOffsetReset::Earliest => -2,
            AutoOffsetReset::Latest => -1,
            AutoOffsetReset::ByDuration(ms) => now_ms - ms,
        }
    }
}

/// `PnDTnHnMn.nS` (Java's `Duration.parse` subset Kafka's validator accepts) in milliseconds.
pub fn iso_duration_ms(s: &str) -> Option<i64> {
    let rest = s.strip_prefix('P')?;
    let (days, time) = match rest.split_once('T') {
        Some((d, t)) => (d, Some(t)),
        None => (rest, None),
    };
    let mut ms: f64 = 0.0;
    if !days.is_empty() {
        ms += days.strip_suffix('D')?.parse::<f64>().ok()? * 86_400_000.0;
    }
    if let Some(mut t) = time {
        if t.is_empty() {
            return None;
        }
        for (unit, scale) in [('H', 3_600_000.0), ('M', 60_000.0), ('S', 1_000.0)] {
            if let Some(i) = t.find(unit) {
                ms += t[..i].parse::<f64>().ok()? * scale;
                t = &t[i + 1..];
            }
        }
        if !t.is_empty() {
            return None;
        }
    }
    Some(ms as i64)
}

/// What one share group's reads follow besides its limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadSettings {
    /// `share.auto.offset.reset`
    pub reset: AutoOffsetReset,
    /// `share.isolation.level`
    pub isolation: IsolationLevel,
}

/// One group's settings: its group configs within the broker's bounds, else the broker's.
fn group_settings(
    image: Option<&MetadataImage>,
    group: &str,
    s: &ShareSettings,
) -> (Limits, ReadSettings) {
    let configs = image.and_then(|i| {
        i.configs.get(&ConfigResource {
            resource_type: ConfigResourceType::Group,
            name: group.to_string(),
        })
    });
    let int = |k: &str| -> Option<i64> { configs?.get(k)?.trim().parse().ok() };
    let mut limits = s.limits;
    if let Some(v) = int("share.record.lock.duration.ms") {
        limits.lock_duration_ms = v.clamp(s.lock_duration_bounds.0, s.lock_duration_bounds.1);
    }
    if let Some(v) = int("share.delivery.count.limit") {
        let (lo, hi) = s.delivery_count_bounds;
        limits.delivery_count_limit = v.clamp(lo as i64, hi as i64) as i16;
    }
    if let Some(v) = int("share.partition.max.record.locks") {
        limits.max_in_flight = v.clamp(s.record_locks_bounds.0, s.record_locks_bounds.1);
    }
    let value = |k: &str| configs.and_then(|c| c.get(k)).map(|v| v.trim());
    let reset = value("share.auto.offset.reset")
        .and_then(AutoOffsetReset::parse)
        .unwrap_or(AutoOffsetReset::Latest);
    let isolation = match value("share.isolation.level") {
        Some("read_committed") => IsolationLevel::ReadCommitted,
        _ => IsolationLevel::ReadUncommitted,
    };
    (limits, ReadSettings { reset, isolation })
}

/// Whether share groups are enabled (`share.version` >= 1), as Kafka's handlers check.
pub(crate) fn share_groups_enabled(t: &PartitionTable) -> bool {
    t.image
        .as_ref()
        .is_some_and(|i| i.features.get("share.version").copied().unwrap_or(0) >= 1)
}

/// Kafka's checks ahead of a ShareFetch or ShareAcknowledge, answered with a code alone: share
/// groups enabled, a group id, a valid member id. Returns (group, member).
fn requester(
    t: &PartitionTable,
    group_id: &Option<String>,
    member_id: &Option<String>,
) -> Result<(String, String), i16> {
    if !share_groups_enabled(t) {
        return Err(UNSUPPORTED_VERSION);
    }
    let Some(group) = group_id.clone() else {
        return Err(INVALID_REQUEST);
    };
    if !valid_share_member_id(member_id.as_deref()) {
        return Err(INVALID_REQUEST);
    }
    Ok((group, member_id.clone().unwrap_or_default()))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------------------------
// Records

/// One whole v2 batch of a read: its offsets, where it lies in the buffer, and what
/// `read_committed` needs of its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub base_offset: i64,
    pub last_offset: i64,
    pub start: usize,
    pub end: usize,
    pub producer_id: i64,
    pub transactional: bool,
    pub control: bool,
}

/// The fixed header of a v2 batch (through `records_count`).
const BATCH_HEADER_LEN: usize = 61;

/// Every whole v2 batch in `buf` (a trailing partial batch is left out).
pub fn batch_spans(buf: &[u8]) -> Vec<Span> {
    let be_i64 = |at: usize| i64::from_be_bytes(buf[at..at + 8].try_into().expect("8 bytes"));
    let be_i32 = |at: usize| i32::from_be_bytes(buf[at..at + 4].try_into().expect("4 bytes"));
    let mut out = Vec::new();
    let mut at = 0usize;
    while buf.len() >= at + BATCH_HEADER_LEN {
        let len = be_i32(at + 8);
        if len < (BATCH_HEADER_LEN - 12) as i32 {
            break;
        }
        let end = at + 12 + len as usize;
        if end > buf.len() {
            break;
        }
        let base = be_i64(at);
        let attributes = i16::from_be_bytes([buf[at + 21], buf[at + 22]]);
        out.push(Span {
            base_offset: base,
            last_offset: base + be_i32(at + 23) as i64,
            start: at,
            end,
            producer_id: be_i64(at + 43),
            transactional: attributes & 0x10 != 0,
            control: attributes & 0x20 != 0,
        });
        at = end;
    }
    out
}

/// Whether a batch's records are for a share consumer at `isolation`: under `read_committed`
/// neither control batches nor batches of aborted transactions are (Kafka archives them).
fn deliverable(span: &Span, isolation: IsolationLevel, aborted: &[crate::log::AbortedTxn]) -> bool {
    if isolation != IsolationLevel::ReadCommitted {
        return true;
    }
    let aborted = span.transactional
        && aborted.iter().any(|a| {
            a.producer_id == span.producer_id
                && a.first_offset <= span.base_offset
                && span.base_offset <= a.last_offset
        });
    !span.control && !aborted
}

/// The batches of `buf` that hold an acquired offset (Kafka trims a share fetch's records to
/// the acquired ranges).
/// Usually they lie next to each other and the answer is a slice of the read, not a copy.
fn acquired_batches(buf: &Bytes, spans: &[Span], ranges: &[AcquiredRange]) -> Bytes {
    let held: Vec<&Span> = spans
        .iter()
        .filter(|s| {
            ranges
                .iter()
                .any(|r| r.first_offset <= s.last_offset && r.last_offset >= s.base_offset)
        })
        .collect();
    let (Some(first), Some(last)) = (held.first(), held.last()) else {
        return Bytes::new();
    };
    if held.windows(2).all(|w| w[0].end == w[1].start) {
        return buf.slice(first.start..last.end);
    }
    let mut out = BytesMut::new();
    for s in held {
        out.extend_from_slice(&buf[s.start..s.end]);
    }
    out.freeze()
}

// ---------------------------------------------------------------------------------------------
// ShareFetch

/// One partition of a share fetch, as the request or the session names it.
struct Target {
    tp: (Uuid, i32),
    name: Option<String>,
}

/// What one partition read gave.
struct PartitionRead {
    tp: (Uuid, i32),
    error: i16,
    leader: (i32, i32),
    bytes: Bytes,
    spans: Vec<Span>,
    high_watermark: i64,
    read: Option<ReadBatches>,
}

fn fetch_error(code: i16) -> ShareFetchResponse {
    ShareFetchResponse {
        error_code: code,
        ..Default::default()
    }
}

fn to_acks(batches: impl IntoIterator<Item = (i64, i64, Vec<i8>)>) -> Vec<AckBatch> {
    batches
        .into_iter()
        .map(|(first_offset, last_offset, types)| AckBatch {
            first_offset,
            last_offset,
            types,
        })
        .collect()
}

async fn handle_share_fetch(
    a: &ShareApis,
    ctx: &RequestContext,
    r: ShareFetchRequest,
) -> ShareFetchResponse {
    let table = a.partitions.borrow().clone();
    let (group, member) = match requester(&table, &r.group_id, &r.member_id) {
        Ok(who) => who,
        Err(code) => return fetch_error(code),
    };
    if r.is_renew_ack
        && (r.max_bytes != 0 || r.min_bytes != 0 || r.max_records != 0 || r.max_wait_ms != 0)
    {
        return fetch_error(INVALID_REQUEST);
    }
    let (limits, settings) = group_settings(table.image.as_deref(), &group, &a.settings);
    let max_type = if ctx.api_version >= 2 {
        ACK_RENEW
    } else {
        ACK_REJECT
    };

    // Acknowledgements with a bad shape are refused per partition, before the session sees them.
    let mut ack_results: BTreeMap<(Uuid, i32), (i16, Option<String>)> = BTreeMap::new();
    let mut partitions: Vec<PartitionAcks> = Vec::new();
    let mut added: BTreeSet<(Uuid, i32)> = BTreeSet::new();
    for t in &r.topics {
        for p in &t.partitions {
            let tp = (t.topic_id, p.partition_index);
            added.insert(tp);
            let acks = to_acks(
                p.acknowledgement_batches
                    .iter()
                    .map(|b| (b.first_offset, b.last_offset, b.acknowledge_types.clone())),
            );
            if valid_ack_batches(&acks, max_type, r.is_renew_ack) {
                partitions.push((tp, acks));
            } else {
                ack_results.insert(tp, (INVALID_REQUEST, None));
                partitions.push((tp, Vec::new()));
            }
        }
    }
    let forgotten: Vec<(Uuid, i32)> = r
        .forgotten_topics_data
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, *p)))
        .collect();
    let plan = a
        .manager
        .send(BeginShareFetch {
            group: group.clone(),
            member: member.clone(),
            epoch: r.share_session_epoch,
            partitions,
            forgotten,
            limits,
        })
        .await;
    let plan = match plan {
        Ok(Ok(plan)) => plan,
        // Kafka's KafkaApis answers session errors with the code alone.
        Ok(Err((code, _))) => return fetch_error(code),
        Err(_) => return fetch_error(UNKNOWN_SERVER_ERROR),
    };
    let applied: Vec<(Uuid, i32)> = plan
        .acks
        .iter()
        .filter(|(_, r)| r.is_ok())
        .map(|(tp, _)| *tp)
        .collect();
    for (tp, result) in plan.acks {
        ack_results.insert(tp, ack_outcome(result));
    }
    persist_acks(a, &group, applied, &mut ack_results).await;
    let mut targets: Vec<(Target, Option<i64>)> = plan
        .reads
        .iter()
        .map(|(tp, at)| {
            (
                Target {
                    tp: *tp,
                    name: table.topic_name(&tp.0),
                },
                *at,
            )
        })
        .collect();

    let budget = if r.max_bytes <= 0 {
        0
    } else {
        r.max_bytes.min(a.settings.fetch_max_bytes)
    };
    let max_records = if r.max_records > 0 {
        r.max_records as usize
    } else {
        500
    };
    let fetching = !targets.is_empty() && budget > 0 && !r.is_renew_ack;
    let mut reads: Vec<PartitionRead> = Vec::new();
    let mut acquired: BTreeMap<(Uuid, i32), Vec<AcquiredRange>> = BTreeMap::new();
    if fetching {
        let per_partition = (budget as usize / targets.len()).max(1);
        let unavailable = load_starts(a, &group, &mut targets).await;
        reads = read_all(&table, &targets, per_partition, settings).await;
        skip_unloaded(&mut reads, &unavailable);
        acquired = acquire(a, &group, &member, &reads, max_records, limits).await;
        let nothing = acquired.values().all(|v| v.is_empty());
        let all_failed = reads.iter().all(|p| p.error != NONE);
        if nothing && !all_failed && r.max_wait_ms > 0 && ack_results.is_empty() {
            wait_for_records(a, &group, limits, &reads, &targets, r.max_wait_ms).await;
            let tps: Vec<(Uuid, i32)> = targets.iter().map(|(t, _)| t.tp).collect();
            if let Ok(next) = a
                .manager
                .send(NextFetchOffsets {
                    group: group.clone(),
                    partitions: tps,
                })
                .await
            {
                for ((_, at), (_, now_at)) in targets.iter_mut().zip(next) {
                    *at = now_at;
                }
                let unavailable = load_starts(a, &group, &mut targets).await;
                reads = read_all(&table, &targets, per_partition, settings).await;
                skip_unloaded(&mut reads, &unavailable);
                acquired = acquire(a, &group, &member, &reads, max_records, limits).await;
            }
        }
    }

    // The response: every partition at the opening epoch; later, those with news.
    let opening = r.share_session_epoch == 0;
    let mut by_topic: BTreeMap<Uuid, Vec<sfr::PartitionData>> = BTreeMap::new();
    let mut listed: BTreeSet<(Uuid, i32)> = BTreeSet::new();
    for p in &reads {
        let ranges = acquired.remove(&p.tp).unwrap_or_default();
        let ack = ack_results.remove(&p.tp);
        let news = opening
            || added.contains(&p.tp)
            || !ranges.is_empty()
            || p.error != NONE
            || ack.is_some();
        if !news {
            continue;
        }
        listed.insert(p.tp);
        let records = acquired_batches(&p.bytes, &p.spans, &ranges);
        let (ack_code, ack_message) = ack.unwrap_or((NONE, None));
        by_topic
            .entry(p.tp.0)
            .or_default()
            .push(sfr::PartitionData {
                partition_index: p.tp.1,
                error_code: p.error,
                acknowledge_error_code: ack_code,
                acknowledge_error_message: ack_message,
                current_leader: sfr::LeaderIdAndEpoch {
                    leader_id: p.leader.0,
                    leader_epoch: p.leader.1,
                    ..Default::default()
                },
                records: Some(Records::Memory(records)),
                acquired_records: ranges
                    .iter()
                    .map(|a| sfr::AcquiredRecords {
                        first_offset: a.first_offset,
                        last_offset: a.last_offset,
                        delivery_count: a.delivery_count,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            });
    }
    // Partitions that were not read (only acknowledged, or named while not fetching).
    let unread: Vec<(Uuid, i32)> = added
        .iter()
        .chain(ack_results.keys())
        .filter(|tp| !listed.contains(tp))
        .copied()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    for tp in unread {
        let (ack_code, ack_message) = ack_results.remove(&tp).unwrap_or((NONE, None));
        let error = if table.topic_name(&tp.0).is_none() {
            UNKNOWN_TOPIC_ID
        } else {
            NONE
        };
        by_topic.entry(tp.0).or_default().push(sfr::PartitionData {
            partition_index: tp.1,
            error_code: error,
            acknowledge_error_code: ack_code,
            acknowledge_error_message: ack_message,
            current_leader: sfr::LeaderIdAndEpoch {
                leader_id: -1,
                leader_epoch: -1,
                ..Default::default()
            },
            records: Some(Records::Memory(Bytes::new())),
            ..Default::default()
        });
    }
    ShareFetchResponse {
        error_code: NONE,
        acquisition_lock_timeout_ms: limits.lock_duration_ms.min(i32::MAX as i64) as i32,
        responses: by_topic
            .into_iter()
            .map(|(topic_id, partitions)| sfr::ShareFetchableTopicResponse {
                topic_id,
                partitions,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

fn ack_outcome(result: Result<(), AckError>) -> (i16, Option<String>) {
    match result {
        Ok(()) => (NONE, None),
        Err((code, message)) => (code, Some(message)),
    }
}

/// Reads every target at once: from where the share-partition says, or, for one without
/// state, from where `share.auto.offset.reset` says.
async fn read_all(
    table: &PartitionTable,
    targets: &[(Target, Option<i64>)],
    max_bytes: usize,
    settings: ReadSettings,
) -> Vec<PartitionRead> {
    let reads = targets.iter().map(|(t, at)| async move {
        let failed = |error| PartitionRead {
            tp: t.tp,
            error,
            leader: (-1, -1),
            bytes: Bytes::new(),
            spans: Vec::new(),
            high_watermark: -1,
            read: None,
        };
        let Some(name) = &t.name else {
            return failed(UNKNOWN_TOPIC_ID);
        };
        let Some(replica) = table.get(name, t.tp.1) else {
            let code = if table.partition_exists(name, t.tp.1) {
                NOT_LEADER_OR_FOLLOWER
            } else {
                UNKNOWN_TOPIC_OR_PARTITION
            };
            return failed(code);
        };
        let leader = (replica.leader, replica.leader_epoch);
        let offset_of = |timestamp| GetOffsetForTimestamp {
            timestamp,
            isolation: Some(IsolationLevel::ReadUncommitted),
            current_leader_epoch: -1,
        };
        let (fetch_offset, initial) = match at {
            Some(o) => (*o, None),
            None => match replica
                .addr
                .send(offset_of(settings.reset.timestamp(now_ms())))
                .await
            {
                Ok(Ok(Some(found))) => (found.offset, Some(found.offset)),
                // No record that recent: start at the end, as a later ListOffsets would.
                Ok(Ok(None)) => match replica.addr.send(offset_of(-1)).await {
                    Ok(Ok(Some(end))) => (end.offset, Some(end.offset)),
                    _ => return failed(NOT_LEADER_OR_FOLLOWER),
                },
                Ok(Err(e)) => return failed(e.code()),
                Err(_) => return failed(NOT_LEADER_OR_FOLLOWER),
            },
        };
        let read = |fetch_offset| ReadRecords {
            scope: Default::default(),
            params: ReadParams {
                fetch_offset,
                max_bytes,
                min_one_batch: true,
                isolation: settings.isolation,
                current_leader_epoch: -1,
                last_fetched_epoch: -1,
                replica_id: -1,
            },
            isr_eligible: false,
            replica_epoch: -1,
        };
        let mut outcome = replica.addr.send(read(fetch_offset)).await;
        if let Ok(Err(crate::partition::core::PartitionError::OffsetOutOfRange { .. })) = &outcome {
            // Below the log start (retention moved it): Kafka resets to the earliest offset
            // and answers no error.
            if let Ok(Ok(Some(start))) = replica.addr.send(offset_of(-2)).await {
                outcome = replica.addr.send(read(start.offset)).await;
            }
        }
        let o = match outcome {
            Ok(Ok(o)) => o,
            Ok(Err(e)) => return failed(e.code()),
            Err(_) => return failed(NOT_LEADER_OR_FOLLOWER),
        };
        let bytes = match o.records.to_bytes() {
            Ok(b) => b,
            Err(_) => return failed(KAFKA_STORAGE_ERROR),
        };
        let spans = batch_spans(&bytes);
        let batches = spans
            .iter()
            .map(|s| LogBatch {
                base_offset: s.base_offset,
                last_offset: s.last_offset,
                deliver: deliverable(s, settings.isolation, &o.aborted_transactions),
            })
            .collect();
        PartitionRead {
            tp: t.tp,
            error: NONE,
            leader,
            bytes,
            spans,
            high_watermark: o.high_watermark,
            read: Some(ReadBatches {
                tp: t.tp,
                initial_offset: initial,
                log_start_offset: o.log_start_offset,
                batches,
            }),
        }
    });
    join_all(reads).await
}

/// Loads from their share coordinator the share-partitions this broker has no state for
/// (`at` None) and sets where to read them. Returns those whose coordinator cannot answer now:
/// they are not read this time (their first delivery must start from the kept state).
async fn load_starts(
    a: &ShareApis,
    group: &str,
    targets: &mut [(Target, Option<i64>)],
) -> BTreeSet<(Uuid, i32)> {
    let missing: Vec<(Uuid, i32)> = targets
        .iter()
        .filter(|(_, at)| at.is_none())
        .map(|(t, _)| t.tp)
        .collect();
    if missing.is_empty() {
        return BTreeSet::new();
    }
    let loaded = a
        .manager
        .send(LoadSharePartitions {
            group: group.to_string(),
            partitions: missing.clone(),
        })
        .await
        .unwrap_or_default();
    let mut unavailable: BTreeSet<(Uuid, i32)> = missing.into_iter().collect();
    for (tp, at) in loaded {
        if let Some(at) = at {
            unavailable.remove(&tp);
            if let Some((_, slot)) = targets.iter_mut().find(|(t, _)| t.tp == tp) {
                *slot = at;
            }
        }
    }
    unavailable
}

/// Drops what was read of `unavailable` share-partitions (nothing is acquired from them).
fn skip_unloaded(reads: &mut [PartitionRead], unavailable: &BTreeSet<(Uuid, i32)>) {
    for p in reads.iter_mut().filter(|p| unavailable.contains(&p.tp)) {
        p.read = None;
        p.bytes = Bytes::new();
        p.spans.clear();
    }
}

/// Writes the state of share-partitions whose acknowledgements were applied; one that could
/// not be written gets the write's error in place of success (Kafka answers acknowledgements
/// only once its persister wrote them).
async fn persist_acks(
    a: &ShareApis,
    group: &str,
    applied: Vec<(Uuid, i32)>,
    results: &mut BTreeMap<(Uuid, i32), (i16, Option<String>)>,
) {
    if applied.is_empty() {
        return;
    }
    let written = a
        .manager
        .send(PersistShareState {
            group: group.to_string(),
            partitions: applied.clone(),
        })
        .await;
    match written {
        Ok(written) => {
            for (tp, r) in written {
                if let Err((code, message)) = r {
                    results.insert(tp, (code, Some(message)));
                }
            }
        }
        Err(_) => {
            for tp in applied {
                results.insert(tp, (UNKNOWN_SERVER_ERROR, None));
            }
        }
    }
}

async fn acquire(
    a: &ShareApis,
    group: &str,
    member: &str,
    reads: &[PartitionRead],
    max_records: usize,
    limits: Limits,
) -> BTreeMap<(Uuid, i32), Vec<AcquiredRange>> {
    let batches: Vec<ReadBatches> = reads.iter().filter_map(|p| p.read.clone()).collect();
    if batches.is_empty() {
        return BTreeMap::new();
    }
    a.manager
        .send(AcquireRecords {
            group: group.to_string(),
            member: member.to_string(),
            reads: batches,
            max_records,
            limits,
        })
        .await
        .map(|v| v.into_iter().collect())
        .unwrap_or_default()
}

/// Parks the fetch until one of its partitions' high watermark moves, records of its group
/// become deliverable again (acknowledgements, releases, expired locks), or `max_wait_ms`.
async fn wait_for_records(
    a: &ShareApis,
    group: &str,
    limits: Limits,
    reads: &[PartitionRead],
    targets: &[(Target, Option<i64>)],
    max_wait_ms: i32,
) {
    let readable: Vec<(&PartitionRead, &Target)> = reads
        .iter()
        .zip(targets)
        .filter(|(p, _)| p.error == NONE)
        .map(|(p, (t, _))| (p, t))
        .collect();
    let watches: Vec<FetchWatch> = readable
        .iter()
        .filter_map(|(p, t)| {
            Some(FetchWatch {
                tp: TopicPartition::new(t.name.as_ref()?, t.tp.1),
                observed_high_watermark: p.high_watermark,
            })
        })
        .collect();
    let (done, appended) = oneshot::channel();
    let max_wait_ms = max_wait_ms.max(0) as u64;
    a.purgatory.do_send(WatchFetch {
        watches,
        min_bytes: 1,
        accumulated_bytes: 0,
        max_wait_ms,
        follower: false,
        done,
    });
    let (done, freed) = oneshot::channel();
    a.manager.do_send(WatchShareRecords {
        group: group.to_string(),
        partitions: readable
            .iter()
            .map(|(p, t)| (t.tp.0, t.tp.1, p.high_watermark))
            .collect(),
        limits,
        done,
    });
    let either = async {
        tokio::select! {
            _ = appended => {}
            _ = freed => {}
        }
    };
    let _ = tokio::time::timeout(Duration::from_millis(max_wait_ms + 1_000), either).await;
}

// ---------------------------------------------------------------------------------------------
// ShareAcknowledge

fn ack_error(code: i16) -> ShareAcknowledgeResponse {
    ShareAcknowledgeResponse {
        error_code: code,
        ..Default::default()
    }
}

async fn handle_share_acknowledge(
    a: &ShareApis,
    ctx: &RequestContext,
    r: ShareAcknowledgeRequest,
) -> ShareAcknowledgeResponse {
    let table = a.partitions.borrow().clone();
    let (group, member) = match requester(&table, &r.group_id, &r.member_id) {
        Ok(who) => who,
        Err(code) => return ack_error(code),
    };
    let (limits, _) = group_settings(table.image.as_deref(), &group, &a.settings);
    let max_type = if ctx.api_version >= 2 {
        ACK_RENEW
    } else {
        ACK_REJECT
    };
    let mut results: BTreeMap<(Uuid, i32), (i16, Option<String>)> = BTreeMap::new();
    let mut partitions: Vec<PartitionAcks> = Vec::new();
    for t in &r.topics {
        let name = table.topic_name(&t.topic_id);
        for p in &t.partitions {
            let tp = (t.topic_id, p.partition_index);
            let acks = to_acks(
                p.acknowledgement_batches
                    .iter()
                    .map(|b| (b.first_offset, b.last_offset, b.acknowledge_types.clone())),
            );
            let hosted = name.as_ref().and_then(|n| table.get(n, tp.1));
            match (&name, hosted) {
                (None, _) => {
                    results.insert(tp, (UNKNOWN_TOPIC_ID, None));
                }
                (Some(n), None) => {
                    let code = if table.partition_exists(n, tp.1) {
                        NOT_LEADER_OR_FOLLOWER
                    } else {
                        UNKNOWN_TOPIC_OR_PARTITION
                    };
                    results.insert(tp, (code, None));
                }
                _ if !valid_ack_batches(&acks, max_type, r.is_renew_ack) => {
                    results.insert(tp, (INVALID_REQUEST, None));
                }
                _ if acks.is_empty() => {
                    results.insert(tp, (NONE, None));
                }
                _ => partitions.push((tp, acks)),
            }
        }
    }
    let sent: Vec<(Uuid, i32)> = partitions.iter().map(|(tp, _)| *tp).collect();
    let outcome = a
        .manager
        .send(AcknowledgeRecords {
            group: group.clone(),
            member,
            epoch: r.share_session_epoch,
            partitions,
            limits,
        })
        .await;
    match outcome {
        Ok(Ok(acks)) => {
            let applied = acks
                .iter()
                .filter(|(_, r)| r.is_ok())
                .map(|(tp, _)| *tp)
                .collect();
            for (tp, result) in acks {
                results.insert(tp, ack_outcome(result));
            }
            for tp in sent {
                results.entry(tp).or_insert((NONE, None));
            }
            persist_acks(a, &group, applied, &mut results).await;
        }
        Ok(Err((code, _))) => return ack_error(code),
        Err(_) => return ack_error(UNKNOWN_SERVER_ERROR),
    }
    let mut by_topic: BTreeMap<Uuid, Vec<sar::PartitionData>> = BTreeMap::new();
    for ((topic_id, partition), (code, message)) in results {
        let leader = table
            .topic_name(&topic_id)
            .and_then(|n| table.get(&n, partition).map(|h| (h.leader, h.leader_epoch)))
            .unwrap_or((-1, -1));
        by_topic
            .entry(topic_id)
            .or_default()
            .push(sar::PartitionData {
                partition_index: partition,
                error_code: code,
                error_message: message,
                current_leader: sar::LeaderIdAndEpoch {
                    leader_id: leader.0,
                    leader_epoch: leader.1,
                    ..Default::default()
                },
                ..Default::default()
            });
    }
    ShareAcknowledgeResponse {
        error_code: NONE,
        acquisition_lock_timeout_ms: limits.lock_duration_ms.min(i32::MAX as i64) as i32,
        responses: by_topic
            .into_iter()
            .map(
                |(topic_id, partitions)| sar::ShareAcknowledgeTopicResponse {
                    topic_id,
                    partitions,
                    ..Default::default()
                },
            )
            .collect(),
        ..Default::default()
    }
}

/// The high watermark of a partition with a replica here (None: none here, or not readable).
pub(crate) async fn high_watermark(
    table: &PartitionTable,
    topic: &str,
    partition: i32,
) -> Option<i64> {
    let replica = table.get(topic, partition)?;
    let found = replica
        .addr
        .send(GetOffsetForTimestamp {
            timestamp: -1,
            isolation: Some(IsolationLevel::ReadUncommitted),
            current_leader_epoch: -1,
        })
        .await
        .ok()?
        .ok()??;
    Some(found.offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_durations() {
        assert_eq!(iso_duration_ms("PT1H"), Some(3_600_000));
        assert_eq!(iso_duration_ms("P1DT2H3M4.5S"), Some(93_784_500));
        assert_eq!(iso_duration_ms("P2D"), Some(172_800_000));
        assert_eq!(iso_duration_ms("PT"), None);
        assert_eq!(iso_duration_ms("xx"), None);
        assert_eq!(
            AutoOffsetReset::parse("by_duration:PT10M"),
            Some(AutoOffsetReset::ByDuration(600_000))
        );
    }

    #[test]
    fn batch_spans_stop_at_a_partial_batch() {
        use kactor_protocol::records::BatchBuilder;
        let mut buf = BytesMut::new();
        for base in [0i64, 3] {
            let mut b = BatchBuilder::new(base);
            for i in 0..3 {
                b.append(0, None, Some(format!("v{i}").as_bytes()), &[])
                    .unwrap();
            }
            buf.extend_from_slice(&b.build().unwrap());
        }
        let whole = buf.len();
        buf.extend_from_slice(&[0u8; 20]);
        let spans = batch_spans(&buf);
        let offsets: Vec<_> = spans
            .iter()
            .map(|s| (s.base_offset, s.last_offset))
            .collect();
        assert_eq!(offsets, vec![(0, 2), (3, 5)]);
        assert_eq!(spans[1].end, whole);
        assert!(!spans[0].transactional && !spans[0].control);
        let ranges = [AcquiredRange {
            first_offset: 4,
            last_offset: 4,
            delivery_count: 1,
        }];
        let buf = buf.freeze();
        let only_second = acquired_batches(&buf, &spans, &ranges);
        assert_eq!(only_second.len(), whole - spans[1].start);
        // Both batches: one slice of the read, the same bytes.
        let both = [AcquiredRange {
            first_offset: 0,
            last_offset: 5,
            delivery_count: 1,
        }];
        assert_eq!(acquired_batches(&buf, &spans, &both), buf.slice(0..whole));
    }
}
