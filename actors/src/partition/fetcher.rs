//! ReplicaFetcherActor (Kafka's `ReplicaFetcherThread` with its `AbstractFetcherThread` loop):
//! one per (leader broker, fetcher id), it fetches for every partition this broker follows on
//! that leader, hands the leader's batches to the follower `PartitionActor`s as they are, and
//! applies the leader's answers: a diverging epoch truncates (KIP-320), an offset outside the
//! leader's log resets to it (asked with ListOffsets), leadership errors back the partition off
//! until the metadata moves it.
//!
//! One fetch is in flight at a time; the leader long-polls it (`replica.fetch.wait.max.ms`), so
//! an idle fetcher costs one request per wait. Fetches are full requests without a session
//! (session id 0, epoch -1), which every Kafka leader serves.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use actix::prelude::*;
use futures_util::future::join_all;
use kactor_protocol::codec::Records;
use kactor_protocol::errors;
use kactor_protocol::messages::fetch_request::{
    FetchPartition, FetchTopic, ForgottenTopic, ReplicaState,
};
use kactor_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kactor_protocol::messages::{
    ApiKey, FetchRequest, FetchResponse, ListOffsetsRequest, RequestBody, ResponseBody,
};
use kactor_protocol::Uuid;
use tracing::{debug, info, warn};

use super::actor::PartitionActor;
use super::core::{FollowerPosition, PartitionError, TopicPartition};
use super::fetch_session::{FINAL_EPOCH, INVALID_SESSION_ID};
use super::fetcher_session::{FollowerSession, SentPartition, SessionAnswer, SessionRequest};
use super::messages::{
    AppendAsFollower, GetFollowerPosition, ResetToLeaderRange, TruncateToDivergingEpoch,
};
use crate::network::client::KafkaConnection;
use crate::runtime::{ActorMetrics, MeteredAddr, SupervisedActor};

/// The `replica.fetch.*` settings a fetcher uses.
#[derive(Debug, Clone)]
pub struct FetcherConfig {
    pub broker_id: i32,
    /// This broker's epoch as the metadata shows its registration (-1 until then), sent in
    /// every fetch (`ReplicaState.ReplicaEpoch`, KIP-903) so that a leader can tell this
    /// process from an earlier one of the same broker. Shared by the manager with its fetchers.
    pub broker_epoch: std::sync::Arc<std::sync::atomic::AtomicI64>,
    /// `replica.fetch.wait.max.ms`
    pub max_wait_ms: i32,
    /// `replica.fetch.min.bytes`
    pub min_bytes: i32,
    /// `replica.fetch.response.max.bytes`
    pub response_max_bytes: i32,
    /// `replica.fetch.max.bytes`
    pub partition_max_bytes: i32,
    /// `replica.fetch.backoff.ms`
    pub backoff: Duration,
    /// `replica.socket.timeout.ms`
    pub socket_timeout: Duration,
    /// This broker's replication throttles (the follower side applies here).
    pub quotas: std::sync::Arc<super::replication_quota::ReplicationQuotas>,
}

impl FetcherConfig {
    pub fn from_broker_config(
        broker_id: i32,
        config: &std::collections::BTreeMap<String, String>,
    ) -> Self {
        let num = |key: &str, default: i64| super::broker_num(config, key, default);
        FetcherConfig {
            broker_id,
            broker_epoch: std::sync::Arc::new(std::sync::atomic::AtomicI64::new(-1)),
            max_wait_ms: num("replica.fetch.wait.max.ms", 500) as i32,
            min_bytes: num("replica.fetch.min.bytes", 1) as i32,
            response_max_bytes: num("replica.fetch.response.max.bytes", 10 * 1024 * 1024) as i32,
            partition_max_bytes: num("replica.fetch.max.bytes", 1024 * 1024) as i32,
            backoff: Duration::from_millis(num("replica.fetch.backoff.ms", 1000).max(0) as u64),
            socket_timeout: Duration::from_millis(
                num("replica.socket.timeout.ms", 30_000).max(1) as u64
            ),
            quotas: std::sync::Arc::new(
                super::replication_quota::ReplicationQuotas::from_broker_config(broker_id, config),
            ),
        }
    }
}

/// A partition this broker follows: where its leader is and the replica that appends.
#[derive(Clone)]
pub struct FollowedPartition {
    pub tp: TopicPartition,
    pub topic_id: Uuid,
    pub leader_epoch: i32,
    pub replica: MeteredAddr<PartitionActor>,
}

/// Manager → fetcher: fetch for these partitions too (or again, with a new leader epoch).
#[derive(Message)]
#[rtype(result = "()")]
pub struct AddFollowedPartitions(pub Vec<FollowedPartition>);

/// Manager → fetcher: stop fetching these; answers how many partitions the fetcher still has.
#[derive(Message)]
#[rtype(result = "usize")]
pub struct RemoveFollowedPartitions(pub Vec<TopicPartition>);

/// Manager → fetcher: the leader's address changed (it registered again elsewhere).
#[derive(Message)]
#[rtype(result = "()")]
pub struct SetLeaderAddress(pub String);

struct Slot {
    partition: FollowedPartition,
    position: Option<FollowerPosition>,
    retry_at: Option<Instant>,
    /// Bumped when the slot is replaced, so a round's result for an older slot is dropped.
    generation: u64,
    /// Records behind the leader's high watermark at the last answer (Kafka's fetch state
    /// lag): 0 is in sync, which a replication throttle never holds back.
    lag: Option<i64>,
}

/// A partition ready for this round: its slot's partition, position, generation and whether
/// it was in sync at the last answer.
type Ready = (FollowedPartition, Option<FollowerPosition>, u64, bool);

/// What one round did to one partition.
struct SlotResult {
    tp: TopicPartition,
    generation: u64,
    position: Option<FollowerPosition>,
    back_off: bool,
    /// Records behind the leader's high watermark after applying its answer, if it answered.
    lag: Option<i64>,
}

impl SlotResult {
    /// A partition the round did not move: its position stands (`back_off`: wait first).
    fn unmoved(
        p: FollowedPartition,
        pos: FollowerPosition,
        generation: u64,
        back_off: bool,
    ) -> Self {
        SlotResult {
            tp: p.tp,
            generation,
            position: Some(pos),
            back_off,
            lag: None,
        }
    }
}

/// Every partition of the round, not moved (the request or its answer failed as a whole).
fn unmoved_all(
    fetching: Vec<(FollowedPartition, FollowerPosition, u64)>,
    back_off: bool,
) -> impl Iterator<Item = SlotResult> {
    fetching
        .into_iter()
        .map(move |(p, pos, generation)| SlotResult::unmoved(p, pos, generation, back_off))
}

pub struct ReplicaFetcherActor {
    leader: i32,
    fetcher_id: usize,
    address: String,
    cfg: FetcherConfig,
    slots: HashMap<TopicPartition, Slot>,
    next_generation: u64,
    conn: Option<KafkaConnection>,
    /// The incremental fetch session with the leader (KIP-227), carried from round to round.
    session: FollowerSession,
    in_flight: bool,
    /// No connection attempt before this (after a failure).
    reconnect_at: Option<Instant>,
    metrics: ActorMetrics,
}

impl ReplicaFetcherActor {
    pub fn new(
        leader: i32,
        fetcher_id: usize,
        address: String,
        cfg: FetcherConfig,
        metrics: ActorMetrics,
    ) -> Self {
        ReplicaFetcherActor {
            leader,
            fetcher_id,
            address,
            cfg,
            slots: HashMap::new(),
            next_generation: 0,
            conn: None,
            session: FollowerSession::default(),
            in_flight: false,
            reconnect_at: None,
            metrics,
        }
    }

    /// Starts a round unless one is in flight; with every partition backed off, retries when
    /// the first back-off ends.
    fn maybe_fetch(&mut self, ctx: &mut Context<Self>) {
        if self.in_flight || self.slots.is_empty() {
            return;
        }
        let now = Instant::now();
        if let Some(at) = self.reconnect_at.filter(|at| *at > now) {
            ctx.run_later(at - now, |act, ctx| act.maybe_fetch(ctx));
            return;
        }
        let ready: Vec<Ready> = self
            .slots
            .values()
            .filter(|s| s.retry_at.is_none_or(|at| at <= now))
            .map(|s| {
                let in_sync = s.lag == Some(0);
                (s.partition.clone(), s.position, s.generation, in_sync)
            })
            .collect();
        if ready.is_empty() {
            let next = self
                .slots
                .values()
                .filter_map(|s| s.retry_at)
                .min()
                .map_or(self.cfg.backoff, |at| at.saturating_duration_since(now));
            ctx.run_later(next, |act, ctx| act.maybe_fetch(ctx));
            return;
        }
        self.in_flight = true;
        let conn = self.conn.take();
        let session = std::mem::take(&mut self.session);
        let address = self.address.clone();
        let cfg = self.cfg.clone();
        let leader = self.leader;
        let round = fetch_round(conn, session, address, cfg, ready);
        ctx.spawn(round.into_actor(self).map(move |(round, session), act, ctx| {
            let (conn, results, failed) = round;
            act.in_flight = false;
            act.conn = conn;
            act.session = session;
            let now = Instant::now();

            for r in results {
                let Some(slot) = act.slots.get_mut(&r.tp) else {
                    continue;
                };
                if slot.generation != r.generation {
                    continue;
                }
                slot.position = r.position;
                slot.retry_at = r.back_off.then(|| now + act.cfg.backoff);
                if r.lag.is_some() {
                    slot.lag = r.lag;
                }
            }
            // Over every partition's last known lag: an incremental answer leaves out the
            // partitions with nothing new, whose lag stands (Kafka's `MaxLag` is over all).
            if let Some(lag) = act.slots.values().filter_map(|s| s.lag).max() {
                super::metrics::partition_metrics()
                    .fetcher_max_lag
                    .with_label_values(&[&leader.to_string(), &act.fetcher_id.to_string()])
                    .set(lag);
            }
            if let Some(why) = failed {
                warn!(leader, address = %act.address, error = %why, "replica fetch failed; retrying after the backoff");
                act.conn = None;
                act.reconnect_at = Some(now + act.cfg.backoff);
            } else {
                act.reconnect_at = None;
            }
            act.maybe_fetch(ctx);
        }));
    }
}

/// One round: learn positions not known yet, send one Fetch, apply every partition's answer.
/// Returns the connection (if still usable), each partition's outcome, and a request-level
/// failure.
async fn fetch_round(
    conn: Option<KafkaConnection>,
    mut session: FollowerSession,
    address: String,
    cfg: FetcherConfig,
    ready: Vec<Ready>,
) -> (RoundOutcome, FollowerSession) {
    let outcome = fetch_round_in(conn, &mut session, address, cfg, ready).await;
    (outcome, session)
}

/// The connection (if still usable), each partition's outcome, and a request-level failure.
type RoundOutcome = (Option<KafkaConnection>, Vec<SlotResult>, Option<String>);

async fn fetch_round_in(
    conn: Option<KafkaConnection>,
    session: &mut FollowerSession,
    address: String,
    cfg: FetcherConfig,
    ready: Vec<Ready>,
) -> RoundOutcome {
    // Positions first (a new slot, or one reset after an error).
    let positions = join_all(ready.iter().map(|(p, known, _, _)| {
        let replica = p.replica.clone();
        let known = *known;
        async move {
            match known {
                Some(k) => Ok(k),
                None => flatten(replica.send(GetFollowerPosition).await),
            }
        }
    }))
    .await;
    let mut results = Vec::new();
    let mut fetching = Vec::new();
    // Kafka's `shouldFollowerThrottle`: while this broker's follower quota is exceeded, a
    // throttled partition that is not in sync sits this round out (and backs off).
    let quotas = cfg.quotas.clone();
    let follower_quota_exceeded = quotas.follower.is_quota_exceeded(super::actor::now_ms());
    let throttled =
        |p: &FollowedPartition| quotas.follower.is_throttled(&p.tp.topic, p.tp.partition);
    for ((p, _, generation, in_sync), pos) in ready.into_iter().zip(positions) {
        match pos {
            Ok(pos) if follower_quota_exceeded && !in_sync && throttled(&p) => {
                results.push(SlotResult::unmoved(p, pos, generation, true))
            }
            Ok(pos) => fetching.push((p, pos, generation)),
            // Not a follower any more (the metadata moved it); the manager removes it.
            Err(_) => results.push(SlotResult {
                tp: p.tp,
                generation,
                position: None,
                back_off: true,
                lag: None,
            }),
        }
    }
    if fetching.is_empty() {
        return (conn, results, None);
    }
    let mut conn = match conn {
        Some(c) => c,
        None => {
            match KafkaConnection::connect(&address, "replica-fetcher", cfg.socket_timeout).await {
                Ok(c) => {
                    info!(%address, "replica fetcher connected to the leader");
                    c
                }
                Err(e) => {
                    results.extend(unmoved_all(fetching, false));
                    return (None, results, Some(e.to_string()));
                }
            }
        }
    };
    let Some(version) = conn.version_for(ApiKey::Fetch) else {
        return (
            None,
            results,
            Some("the leader serves no Fetch version".into()),
        );
    };
    // Sessions need Fetch v7+; older leaders get full, sessionless fetches as before.
    let plan = (version >= 7).then(|| {
        let next: Vec<(TopicPartition, SentPartition)> = fetching
            .iter()
            .map(|(p, pos, _)| (p.tp.clone(), sent_partition(p, pos, version)))
            .collect();
        session.build(&next)
    });
    let request = build_fetch(&cfg, version, &fetching, plan.as_ref());
    let kind = match &plan {
        None => "sessionless",
        Some(plan) if plan.is_full() => "full",
        Some(_) => "incremental",
    };
    super::metrics::partition_metrics()
        .replica_fetch_requests_total
        .with_label_values(&[kind])
        .inc();
    let timeout = cfg.socket_timeout + Duration::from_millis(cfg.max_wait_ms.max(0) as u64);
    let response = match conn
        .send_at(RequestBody::Fetch(request), version, timeout)
        .await
    {
        Ok(ResponseBody::Fetch(r)) => r,
        Ok(_) => {
            // The leader may or may not have taken the request into its session.
            session.failed();
            return (None, results, Some("not a Fetch answer".into()));
        }
        Err(e) => {
            session.failed();
            results.extend(unmoved_all(fetching, false));
            return (None, results, Some(e.to_string()));
        }
    };
    let answer = match &plan {
        Some(plan) => session.handle_response(plan, response.error_code, response.session_id),
        None if response.error_code == errors::NONE => SessionAnswer::Use,
        None => SessionAnswer::Refused,
    };
    if answer != SessionAnswer::Use {
        // A lost session or a wrong epoch: the next round, at once, is a full fetch in a new
        // session. Any other error: back off, as the leader refused the fetch.
        let back_off = answer == SessionAnswer::Refused;
        if back_off {
            warn!(%address, error = response.error_code, "the leader refused the replica fetch");
        } else {
            debug!(%address, error = response.error_code, "fetch session lost; starting a new one");
        }
        results.extend(unmoved_all(fetching, back_off));
        return (Some(conn), results, None);
    }
    let answers = answers_by_partition(response, version, &fetching);
    // What throttled partitions brought counts against this broker's follower quota.
    quotas.follower.record_throttled(
        fetching.iter().filter_map(|(p, _, _)| {
            let bytes = answers.get(&p.tp)?.records.as_ref()?.len();
            Some((p.tp.topic.as_str(), p.tp.partition, bytes))
        }),
        super::actor::now_ms(),
    );
    let mut out_of_range = Vec::new();
    let applied = join_all(fetching.into_iter().map(|(p, pos, generation)| {
        let answer = answers.get(&p.tp).cloned();
        async move {
            let Some(answer) = answer else {
                // Not in the answer (the leader's byte budget ran out): fetch it next round.
                return (
                    p,
                    pos,
                    generation,
                    Applied::Position(Some(pos), false),
                    None,
                );
            };
            let leader_hw = (answer.error_code == errors::NONE).then_some(answer.high_watermark);
            let applied = apply_answer(&p, pos, answer).await;
            (p, pos, generation, applied, leader_hw)
        }
    }))
    .await;
    for (p, pos, generation, applied, leader_hw) in applied {
        // An answer that was an error or did not apply: list the partition again next time.
        if !matches!(applied, Applied::Position(Some(_), false)) {
            session.answer_failed(&p.tp);
        }
        match applied {
            Applied::Position(position, back_off) => results.push(SlotResult {
                tp: p.tp,
                generation,
                lag: leader_hw
                    .zip(position)
                    .map(|(hw, at)| (hw - at.log_end_offset).max(0)),
                position,
                back_off,
            }),
            Applied::OutOfRange => out_of_range.push((p, pos, generation)),
        }
    }
    for (p, pos, generation) in out_of_range {
        let position = match leader_range(&mut conn, &cfg, &p).await {
            Ok((start, end)) => {
                info!(tp = %p.tp, leader_log_start = start, leader_log_end = end, follower_log_end = pos.log_end_offset, "the follower's offset is outside the leader's log");
                flatten(
                    p.replica
                        .send(ResetToLeaderRange {
                            leader_log_start_offset: start,
                            leader_log_end_offset: end,
                        })
                        .await,
                )
                .ok()
            }
            Err(_) => None,
        };
        let back_off = position.is_none();
        results.push(SlotResult {
            tp: p.tp,
            generation,
            position,
            back_off,
            lag: None,
        });
    }
    (Some(conn), results, None)
}

enum Applied {
    /// The new position (`None`: ask the replica again) and whether to back off.
    Position(Option<FollowerPosition>, bool),
    OutOfRange,
}

/// One partition's part of a Fetch answer, applied to the follower replica.
async fn apply_answer(
    p: &FollowedPartition,
    pos: FollowerPosition,
    answer: kactor_protocol::messages::fetch_response::PartitionData,
) -> Applied {
    match answer.error_code {
        errors::NONE => {}
        errors::OFFSET_OUT_OF_RANGE => return Applied::OutOfRange,
        code => {
            // NOT_LEADER_OR_FOLLOWER, FENCED / UNKNOWN_LEADER_EPOCH, unknown topic...: wait for
            // the metadata to say where the partition is now.
            debug!(tp = %p.tp, code, "the leader refused the partition's fetch");
            return Applied::Position(Some(pos), true);
        }
    }
    if answer.diverging_epoch.epoch >= 0 {
        let r = flatten(
            p.replica
                .send(TruncateToDivergingEpoch {
                    epoch: answer.diverging_epoch.epoch,
                    end_offset: answer.diverging_epoch.end_offset,
                })
                .await,
        );
        return match r {
            Ok(pos) => Applied::Position(Some(pos), false),
            Err(_) => Applied::Position(None, true),
        };
    }
    let records = match answer.records {
        Some(Records::Memory(b)) => b,
        // Answers decoded from the network are in memory; a file slice only if a local
        // leader handed one over.
        Some(Records::File(f)) => match read_file_slice(&f) {
            Ok(b) => b,
            Err(_) => return Applied::Position(Some(pos), true),
        },
        None => bytes::Bytes::new(),
    };
    let r = flatten(
        p.replica
            .send(AppendAsFollower {
                records,
                leader_high_watermark: answer.high_watermark,
                leader_log_start_offset: answer.log_start_offset,
                fetched_from: pos,
            })
            .await,
    );
    match r {
        Ok(pos) => Applied::Position(Some(pos), false),
        Err(e) => {
            warn!(tp = %p.tp, error = %e, "the follower could not append the leader's batches");
            Applied::Position(None, true)
        }
    }
}

fn read_file_slice(f: &kactor_protocol::codec::FileSlice) -> std::io::Result<bytes::Bytes> {
    use std::os::unix::fs::FileExt;
    let mut v = vec![0u8; f.len as usize];
    f.file.read_exact_at(&mut v, f.position)?;
    Ok(bytes::Bytes::from(v))
}

fn flatten<T>(
    r: Result<Result<T, PartitionError>, actix::MailboxError>,
) -> Result<T, PartitionError> {
    r.map_err(|_| PartitionError::NotLeaderOrFollower)?
}

/// What a fetch says about a partition, as the session compares it from round to round. The
/// follower's high watermark is sent from Fetch v18 only; below that a change of it is no
/// reason to list the partition.
fn sent_partition(p: &FollowedPartition, pos: &FollowerPosition, version: i16) -> SentPartition {
    SentPartition {
        topic_id: p.topic_id,
        fetch_offset: pos.log_end_offset,
        log_start_offset: pos.log_start_offset,
        current_leader_epoch: p.leader_epoch,
        last_fetched_epoch: pos.last_fetched_epoch,
        high_watermark: if version >= 18 {
            pos.high_watermark
        } else {
            -1
        },
    }
}

/// The Fetch for this round: every partition (full, or sessionless when `plan` is `None`) or,
/// in a session, the ones `plan` lists and the ones it forgets.
fn build_fetch(
    cfg: &FetcherConfig,
    version: i16,
    fetching: &[(FollowedPartition, FollowerPosition, u64)],
    plan: Option<&SessionRequest>,
) -> FetchRequest {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for (p, pos, _) in fetching {
        if plan.is_some_and(|plan| !plan.include.contains(&p.tp)) {
            continue;
        }
        // A field the version lacks must keep its default to encode.
        let mut partition = FetchPartition {
            partition: p.tp.partition,
            fetch_offset: pos.log_end_offset,
            partition_max_bytes: cfg.partition_max_bytes,
            ..Default::default()
        };
        if version >= 5 {
            partition.log_start_offset = pos.log_start_offset;
        }
        if version >= 9 {
            partition.current_leader_epoch = p.leader_epoch;
        }
        if version >= 12 {
            partition.last_fetched_epoch = pos.last_fetched_epoch;
        }
        if version >= 18 {
            partition.high_watermark = pos.high_watermark;
        }
        let same_topic = |t: &FetchTopic| {
            if version >= 13 {
                t.topic_id == p.topic_id
            } else {
                t.topic == p.tp.topic
            }
        };
        match topics.iter_mut().find(|t| same_topic(t)) {
            Some(t) => t.partitions.push(partition),
            None => topics.push(FetchTopic {
                topic: p.tp.topic.clone(),
                topic_id: p.topic_id,
                partitions: vec![partition],
                ..Default::default()
            }),
        }
    }
    let mut request = FetchRequest {
        max_wait_ms: cfg.max_wait_ms,
        min_bytes: cfg.min_bytes,
        max_bytes: cfg.response_max_bytes,
        isolation_level: 0,
        session_id: plan.map_or(INVALID_SESSION_ID, |plan| plan.session_id),
        session_epoch: plan.map_or(FINAL_EPOCH, |plan| plan.epoch),
        topics,
        ..Default::default()
    };
    for (tp, topic_id) in plan
        .map(|plan| plan.forgotten.as_slice())
        .unwrap_or_default()
    {
        let same_topic = |t: &ForgottenTopic| {
            if version >= 13 {
                t.topic_id == *topic_id
            } else {
                t.topic == tp.topic
            }
        };
        match request
            .forgotten_topics_data
            .iter_mut()
            .find(|t| same_topic(t))
        {
            Some(t) => t.partitions.push(tp.partition),
            None => request.forgotten_topics_data.push(ForgottenTopic {
                topic: if version >= 13 {
                    String::new()
                } else {
                    tp.topic.clone()
                },
                topic_id: if version >= 13 { *topic_id } else { Uuid::ZERO },
                partitions: vec![tp.partition],
                ..Default::default()
            }),
        }
    }
    // Who is fetching: `replica_state` from v15, the old `replica_id` field before.
    if version >= 15 {
        request.replica_state = ReplicaState {
            replica_id: cfg.broker_id,
            replica_epoch: cfg.broker_epoch.load(std::sync::atomic::Ordering::Relaxed),
            ..Default::default()
        };
    } else {
        request.replica_id = cfg.broker_id;
    }
    request
}

fn answers_by_partition(
    response: FetchResponse,
    version: i16,
    fetching: &[(FollowedPartition, FollowerPosition, u64)],
) -> HashMap<TopicPartition, kactor_protocol::messages::fetch_response::PartitionData> {
    let mut out = HashMap::new();
    for topic in response.responses {
        let name = if version >= 13 {
            fetching
                .iter()
                .find(|(p, _, _)| p.topic_id == topic.topic_id)
                .map(|(p, _, _)| p.tp.topic.clone())
        } else {
            Some(topic.topic.clone())
        };
        let Some(name) = name else { continue };
        for partition in topic.partitions {
            out.insert(
                TopicPartition::new(name.clone(), partition.partition_index),
                partition,
            );
        }
    }
    out
}

/// The leader's log start and end offsets for `p` (ListOffsets EARLIEST and LATEST as this
/// replica), for a fetch offset the leader called out of range.
async fn leader_range(
    conn: &mut KafkaConnection,
    cfg: &FetcherConfig,
    p: &FollowedPartition,
) -> Result<(i64, i64), String> {
    let mut offsets = [0i64; 2];
    for (i, timestamp) in [-2i64, -1].into_iter().enumerate() {
        let req = ListOffsetsRequest {
            replica_id: cfg.broker_id,
            isolation_level: 0,
            topics: vec![ListOffsetsTopic {
                name: p.tp.topic.clone(),
                partitions: vec![ListOffsetsPartition {
                    partition_index: p.tp.partition,
                    current_leader_epoch: p.leader_epoch,
                    timestamp,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let resp = conn
            .send(RequestBody::ListOffsets(req), cfg.socket_timeout)
            .await
            .map_err(|e| e.to_string())?;
        let ResponseBody::ListOffsets(r) = resp.1 else {
            return Err("not a ListOffsets answer".into());
        };
        let part = r
            .topics
            .into_iter()
            .flat_map(|t| t.partitions)
            .next()
            .ok_or("no partition in the answer")?;
        if part.error_code != errors::NONE {
            return Err(format!("ListOffsets error {}", part.error_code));
        }
        offsets[i] = part.offset;
    }
    Ok((offsets[0], offsets[1]))
}

impl Actor for ReplicaFetcherActor {
    type Context = Context<Self>;
}

impl Supervised for ReplicaFetcherActor {
    /// After a caught panic the round in flight is gone: start over from the replicas'
    /// positions on a new connection.
    fn restarting(&mut self, ctx: &mut Context<Self>) {
        self.conn = None;
        self.in_flight = false;
        for s in self.slots.values_mut() {
            s.position = None;
        }
        self.maybe_fetch(ctx);
    }
}

impl SupervisedActor for ReplicaFetcherActor {
    const MAILBOX_CAPACITY: usize = 256;
}

crate::supervised_mailbox!(ReplicaFetcherActor);

impl Handler<AddFollowedPartitions> for ReplicaFetcherActor {
    type Result = ();
    fn handle(&mut self, msg: AddFollowedPartitions, ctx: &mut Context<Self>) {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        for p in msg.0 {
            self.next_generation += 1;
            info!(tp = %p.tp, leader = self.leader, fetcher = self.fetcher_id, leader_epoch = p.leader_epoch, "following the leader");
            self.slots.insert(
                p.tp.clone(),
                Slot {
                    partition: p,
                    position: None,
                    retry_at: None,
                    generation: self.next_generation,
                    lag: None,
                },
            );
        }
        self.maybe_fetch(ctx);
    }
}

impl Handler<RemoveFollowedPartitions> for ReplicaFetcherActor {
    type Result = usize;
    fn handle(&mut self, msg: RemoveFollowedPartitions, _: &mut Context<Self>) -> usize {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        for tp in msg.0 {
            self.slots.remove(&tp);
        }
        if self.slots.is_empty() {
            // Following nothing, it has no lag: its series goes rather than showing the last
            // round's figure for ever.
            let _ = super::metrics::partition_metrics()
                .fetcher_max_lag
                .remove_label_values(&[&self.leader.to_string(), &self.fetcher_id.to_string()]);
        }
        self.slots.len()
    }
}

impl Handler<SetLeaderAddress> for ReplicaFetcherActor {
    type Result = ();
    fn handle(&mut self, msg: SetLeaderAddress, _: &mut Context<Self>) {
        if msg.0 != self.address {
            self.address = msg.0;
            self.conn = None;
            self.session.reset();
        }
    }
}
