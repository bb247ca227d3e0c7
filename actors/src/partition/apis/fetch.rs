//! The Fetch handler (Kafka's `KafkaApis.handleFetchRequest` with `ReplicaManager.fetchMessages`):
//! resolves the fetch session, reads every partition against one byte budget, and parks a
//! fetch that has too little data in the purgatory (long polling).

use super::*;
use crate::partition::actor::now_ms;
use crate::partition::fetch_session::{FINAL_EPOCH, INVALID_SESSION_ID};
use crate::partition::replication_quota::ReplicationQuotas;
use kactor_protocol::errors;

/// One partition a fetch reads, in request (or session) order.
#[derive(Debug, Clone)]
pub struct FetchTarget {
    pub topic: Option<String>,
    pub topic_id: Uuid,
    pub partition: i32,
    pub fetch_offset: i64,
    pub partition_max_bytes: i32,
    pub current_leader_epoch: i32,
    pub last_fetched_epoch: i32,
    /// The fetcher's own log start offset (Fetch v5+; followers send it), -1 if absent.
    pub log_start_offset: i64,
}

struct FetchRead {
    target: FetchTarget,
    result: Result<ReadOutcome, i16>,
}

/// Who a fetch reads for: a consumer (id -1) or a follower, with what the leader needs to know
/// of it (whether it may join the ISR, and the broker epoch it fetched with), and whether a
/// follower may serve it or the leader point it elsewhere (KIP-392).
#[derive(Clone)]
struct Reader {
    replica_id: i32,
    isr_eligible: bool,
    replica_epoch: i64,
    followers_may_serve: bool,
    client_rack: Option<Arc<ClientRack>>,
    /// A follower's fetch while the leader's replication quota is exceeded: its throttled
    /// partitions (when it is outside their ISR) get no records.
    leader_quota_exceeded: bool,
}

/// A follower's fetch while this leader's replication quota is exceeded (KIP-73): its
/// throttled partitions outside the ISR are held back.
fn leader_quota_exceeded(a: &PartitionApis, replica_id: i32) -> bool {
    replica_id >= 0 && a.replication_quotas.leader.is_quota_exceeded(now_ms())
}

async fn read_all(
    t: &PartitionTable,
    quotas: &ReplicationQuotas,
    targets: &[FetchTarget],
    max_bytes: i32,
    isolation: IsolationLevel,
    reader: Reader,
) -> Vec<FetchRead> {
    let Reader {
        replica_id,
        isr_eligible,
        replica_epoch,
        followers_may_serve,
        client_rack,
        leader_quota_exceeded,
    } = reader;
    // Kafka reads partitions in order against one byte budget; the first partition that returns
    // data may exceed it (so a large batch can't stall a consumer), later ones may not.
    // Reading them one after another cost a mailbox round trip per partition, in series, on
    // every fetch; so every partition is read at once as if it came first, and the budget is
    // then applied in order. A read whose result the in-order rule would not have given (it
    // no longer fits what is left of the budget, or it is a first batch over the partition's
    // limit after another partition returned data) is read again with the in-order
    // parameters: rare, since a response rarely reaches `fetch.max.bytes`.
    let budget = max_bytes.max(0) as usize;
    let params = |target: &FetchTarget, max_bytes: usize, min_one_batch: bool| ReadParams {
        fetch_offset: target.fetch_offset,
        max_bytes: (target.partition_max_bytes.max(0) as usize).min(max_bytes),
        min_one_batch,
        isolation,
        current_leader_epoch: target.current_leader_epoch,
        last_fetched_epoch: target.last_fetched_epoch,
        replica_id,
    };
    let read = |target: &FetchTarget, p: ReadParams| {
        let scope = ReadScope {
            followers_may_serve,
            client_rack: client_rack.clone(),
            follower_log_start_offset: target.log_start_offset,
            leader_throttled: leader_quota_exceeded
                && target
                    .topic
                    .as_deref()
                    .is_some_and(|t| quotas.leader.is_throttled(t, target.partition)),
        };
        let replica = target
            .topic
            .as_ref()
            .ok_or(errors::UNKNOWN_TOPIC_ID)
            .and_then(|topic| lookup(t, topic, target.partition));
        async move {
            match replica {
                Err(code) => Err(code),
                Ok(replica) => mailbox(
                    replica
                        .addr
                        .send(ReadRecords {
                            params: p,
                            scope,
                            isr_eligible,
                            replica_epoch,
                        })
                        .await,
                )
                .map_err(|e| e.code()),
            }
        }
    };
    let first_pass = join_all(targets.iter().map(|t| read(t, params(t, budget, true)))).await;
    let mut out = Vec::with_capacity(targets.len());
    let mut remaining = budget;
    let mut min_one = true;
    for (target, mut result) in targets.iter().zip(first_pass) {
        if let (false, Ok(r)) = (min_one, &result) {
            let n = r.records.len();
            if n > remaining || n > params(target, budget, false).max_bytes {
                result = read(target, params(target, remaining, false)).await;
            }
        }
        if let Ok(r) = &result {
            let n = r.records.len();
            if n > 0 {
                min_one = false;
                remaining = remaining.saturating_sub(n);
            }
        }
        out.push(FetchRead {
            target: target.clone(),
            result,
        });
    }
    out
}

fn to_records(slice: LogSlice) -> Records {
    match slice {
        LogSlice::Memory(b) => Records::Memory(b),
        LogSlice::File {
            file,
            position,
            len,
        } => Records::File(FileSlice {
            file,
            position,
            len,
        }),
    }
}

fn fetch_response_topics(
    reads: Vec<FetchRead>,
    isolation: IsolationLevel,
    t: &PartitionTable,
    version: i16,
) -> Vec<FetchableTopicResponse> {
    let mut topics: Vec<FetchableTopicResponse> = Vec::new();
    for r in reads {
        let mut pd = PartitionData {
            partition_index: r.target.partition,
            high_watermark: -1,
            last_stable_offset: -1,
            log_start_offset: -1,
            preferred_read_replica: -1,
            ..Default::default()
        };
        match r.result {
            Ok(out) => {
                pd.high_watermark = out.high_watermark;
                pd.last_stable_offset = out.last_stable_offset;
                // Fields a version lacks must keep their defaults to encode.
                if version >= 5 {
                    pd.log_start_offset = out.log_start_offset;
                }
                pd.preferred_read_replica = out.preferred_read_replica;
                if let Some(d) = out.diverging_epoch {
                    pd.diverging_epoch = fetch_response::EpochEndOffset {
                        epoch: d.epoch,
                        end_offset: d.end_offset,
                        ..Default::default()
                    };
                }
                pd.aborted_transactions = (isolation == IsolationLevel::ReadCommitted).then(|| {
                    out.aborted_transactions
                        .iter()
                        .map(|a| fetch_response::AbortedTransaction {
                            producer_id: a.producer_id,
                            first_offset: a.first_offset,
                            ..Default::default()
                        })
                        .collect()
                });
                pd.records = Some(to_records(out.records));
            }
            Err(code) => {
                pd.error_code = code;
                // Kafka answers a partition it refuses before reading (unknown topic id,
                // unknown topic or partition) with an empty AbortedTransactions list, and one
                // whose read fails (offset out of range, fenced epoch, not the leader) with null.
                if !matches!(
                    code,
                    errors::UNKNOWN_TOPIC_ID | errors::UNKNOWN_TOPIC_OR_PARTITION
                ) {
                    pd.aborted_transactions = None;
                }
                pd.records = Some(Records::default());
                if version >= 12
                    && (code == errors::NOT_LEADER_OR_FOLLOWER
                        || code == errors::FENCED_LEADER_EPOCH)
                {
                    if let Some(h) = r
                        .target
                        .topic
                        .as_deref()
                        .and_then(|n| t.get(n, r.target.partition))
                    {
                        pd.current_leader = fetch_response::LeaderIdAndEpoch {
                            leader_id: h.leader,
                            leader_epoch: h.leader_epoch,
                            ..Default::default()
                        };
                    }
                }
            }
        }
        let same_topic = topics.last().is_some_and(|last| {
            last.topic_id == r.target.topic_id && Some(&last.topic) == r.target.topic.as_ref()
        });
        if !same_topic {
            topics.push(FetchableTopicResponse {
                topic: r.target.topic.clone().unwrap_or_default(),
                topic_id: r.target.topic_id,
                ..Default::default()
            });
        }
        topics.last_mut().expect("pushed").partitions.push(pd);
    }
    topics
}

/// The partitions of a request, each once (Kafka keys them in an insertion-ordered map): a
/// partition named twice is read once, at its first place, with the parameters named last.
fn dedup_targets(all: impl Iterator<Item = FetchTarget>) -> Vec<FetchTarget> {
    let mut out: Vec<FetchTarget> = Vec::new();
    let mut seen: HashMap<(Option<String>, Uuid, i32), usize> = HashMap::new();
    for target in all {
        let key = (target.topic.clone(), target.topic_id, target.partition);
        match seen.get(&key) {
            Some(&i) => out[i] = target,
            None => {
                seen.insert(key, out.len());
                out.push(target);
            }
        }
    }
    out
}

/// One partition answered with an error and no data (Kafka's
/// `FetchResponse.partitionResponse(tp, error)`).
pub(crate) fn partition_error(index: i32, code: i16) -> PartitionData {
    PartitionData {
        partition_index: index,
        error_code: code,
        high_watermark: -1,
        last_stable_offset: -1,
        log_start_offset: -1,
        preferred_read_replica: -1,
        records: Some(Records::default()),
        ..Default::default()
    }
}

/// A failed request as Kafka's `FetchRequest.getErrorResponse` answers it: the top-level code
/// and the request's session id; before v13, also every requested partition with the code.
fn error_response(req: &FetchRequest, version: i16, code: i16) -> FetchResponse {
    let responses = if version < 13 {
        req.topics
            .iter()
            .map(|topic| FetchableTopicResponse {
                topic: topic.topic.clone(),
                topic_id: topic.topic_id,
                partitions: topic
                    .partitions
                    .iter()
                    .map(|p| partition_error(p.partition, code))
                    .collect(),
                ..Default::default()
            })
            .collect()
    } else {
        Vec::new()
    };
    FetchResponse {
        error_code: code,
        session_id: req.session_id,
        responses,
        ..Default::default()
    }
}

/// KIP-392: the consumer's rack and the rack of every unfenced broker it can reach on the
/// listener it came through (Kafka's `getPartitionReplicaEndpoints`), when
/// `replica.selector.class` is rack-aware and the consumer named a rack (Fetch v11+).
fn client_rack(
    a: &PartitionApis,
    t: &PartitionTable,
    ctx: &RequestContext,
    req: &FetchRequest,
    replica_id: i32,
) -> Option<Arc<ClientRack>> {
    if !a.rack_aware_reads || replica_id >= 0 || ctx.api_version < 11 || req.rack_id.is_empty() {
        return None;
    }
    let image = t.image.as_ref()?;
    let listener = &*ctx.connection.listener_name;
    let broker_racks = image
        .brokers
        .values()
        .filter(|b| !b.fenced && b.listeners.iter().any(|l| l.name == listener))
        .map(|b| (b.id, b.rack.clone()))
        .collect();
    Some(Arc::new(ClientRack {
        rack: req.rack_id.clone(),
        broker_racks,
    }))
}

/// Kafka's `Partition.isReplicaIsrEligible`: a follower joins an ISR only while the metadata
/// shows its broker registered, unfenced and not in controlled shutdown, with the broker epoch
/// it fetched with (KIP-903; -1: the follower did not say). Without this check a leader would
/// propose every fetch of a fenced or stopping broker to the controller, which refuses it
/// (INELIGIBLE_REPLICA). A broker with no metadata image yet has nothing to check against.
fn isr_eligible(t: &PartitionTable, replica_id: i32, replica_epoch: i64) -> bool {
    let Some(image) = &t.image else {
        return true;
    };
    image.brokers.get(&replica_id).is_some_and(|b| {
        !b.fenced && !b.in_controlled_shutdown && (replica_epoch < 0 || replica_epoch == b.epoch)
    })
}

pub(super) async fn handle_fetch(
    a: &PartitionApis,
    ctx: &RequestContext,
    req: FetchRequest,
) -> FetchResponse {
    let version = ctx.api_version;
    let t = table(a);
    let replica_id = if version >= 15 {
        req.replica_state.replica_id
    } else {
        req.replica_id
    };
    let replica_epoch = if version >= 15 && replica_id >= 0 {
        req.replica_state.replica_epoch
    } else {
        -1
    };
    let reader = Reader {
        replica_id,
        isr_eligible: replica_id >= 0 && isr_eligible(&t, replica_id, replica_epoch),
        replica_epoch,
        // Kafka's `FetchParams.fetchOnlyLeader`: a consumer's v11+ fetch carries client
        // metadata, and a follower serves it up to its high watermark.
        followers_may_serve: replica_id < 0 && version >= 11,
        client_rack: client_rack(a, &t, ctx, &req, replica_id),
        leader_quota_exceeded: leader_quota_exceeded(a, replica_id),
    };
    let isolation = if version >= 4 {
        IsolationLevel::from_wire(req.isolation_level)
    } else {
        IsolationLevel::ReadUncommitted
    };
    let max_bytes = if version >= 3 {
        req.max_bytes
    } else {
        i32::MAX
    };

    let requested: Vec<FetchTarget> = dedup_targets(req.topics.iter().flat_map(|topic| {
        let name = if version >= 13 {
            t.topic_name(&topic.topic_id)
        } else {
            Some(topic.topic.clone())
        };
        topic.partitions.iter().map(move |p| FetchTarget {
            topic: name.clone(),
            topic_id: topic.topic_id,
            partition: p.partition,
            fetch_offset: p.fetch_offset,
            partition_max_bytes: p.partition_max_bytes,
            current_leader_epoch: if version >= 9 {
                p.current_leader_epoch
            } else {
                -1
            },
            last_fetched_epoch: if version >= 12 {
                p.last_fetched_epoch
            } else {
                -1
            },
            log_start_offset: if version >= 5 { p.log_start_offset } else { -1 },
        })
    }));

    // KIP-227: the session cache decides which partitions this request covers. A sessionless
    // fetch (id 0, final epoch: what librdkafka always sends) leaves the cache as it is, so
    // it does not take the cache's lock.
    let sessionless = req.session_id == INVALID_SESSION_ID && req.session_epoch == FINAL_EPOCH;
    let (session_id, targets) = if version >= 7 && !sessionless {
        let forgotten: Vec<SessionPartition> = req
            .forgotten_topics_data
            .iter()
            .flat_map(|f| {
                let name = if version >= 13 {
                    t.topic_name(&f.topic_id)
                } else {
                    Some(f.topic.clone())
                };
                f.partitions.iter().map(move |p| SessionPartition {
                    topic: name.clone(),
                    topic_id: f.topic_id,
                    partition: *p,
                })
            })
            .collect();
        let outcome = a.fetch_sessions.new_context(
            req.session_id,
            req.session_epoch,
            requested.clone(),
            forgotten,
            version >= 13,
            replica_id >= 0,
        );
        match outcome {
            SessionOutcome::Error(code) => {
                ctx.record_error(code);
                return FetchResponse {
                    error_code: code,
                    ..Default::default()
                };
            }
            SessionOutcome::Sessionless => (0, requested),
            SessionOutcome::Session { id, partitions } => (id, partitions),
        }
    } else {
        (0, requested)
    };

    // A session keeps the partitions it was given; one whose topic id this broker did not
    // know yet (a topic created a moment ago) is looked up again on every fetch, as Kafka
    // resolves a session's topic ids per request, instead of answering UNKNOWN_TOPIC_ID until
    // the client happens to list it again.
    let mut targets = targets;
    if version >= 13 {
        for target in targets.iter_mut().filter(|t| t.topic.is_none()) {
            target.topic = t.topic_name(&target.topic_id);
        }
    }

    // Kafka reads the isolation level only now (after the session), and fails the request on
    // a value it does not know (`IsolationLevel.forId`).
    if version >= 4 && !matches!(req.isolation_level, 0 | 1) {
        let code = errors::UNKNOWN_SERVER_ERROR;
        ctx.record_error(code);
        return error_response(&req, version, code);
    }

    let mut reads = read_all(
        &t,
        &a.replication_quotas,
        &targets,
        max_bytes,
        isolation,
        reader.clone(),
    )
    .await;
    let bytes: usize = reads
        .iter()
        .filter_map(|r| r.result.as_ref().ok())
        .map(|o| o.records.len())
        .sum();
    let any_error = reads.iter().any(|r| r.result.is_err());
    // A follower told to truncate hears it at once (Kafka answers a diverging epoch without
    // waiting): each wait would delay its catch-up by replica.fetch.wait.max.ms.
    // Nor is a consumer kept waiting when it is told to read elsewhere (KIP-392).
    let answer_now = reads.iter().any(|r| {
        r.result
            .as_ref()
            .is_ok_and(|o| o.diverging_epoch.is_some() || o.preferred_read_replica >= 0)
    });
    let min_bytes = req.min_bytes.max(0) as usize;
    if req.max_wait_ms > 0 && !targets.is_empty() && !any_error && !answer_now && bytes < min_bytes
    {
        // Long poll: park until enough bytes arrive, leadership moves, or max wait.
        let watches = reads
            .iter()
            .filter_map(|r| {
                let out = r.result.as_ref().ok().filter(|out| !out.held_back)?;
                Some(FetchWatch {
                    tp: TopicPartition::new(r.target.topic.clone()?, r.target.partition),
                    // A follower reads to the log end, so that is what it waits to move.
                    observed_high_watermark: if replica_id >= 0 {
                        out.log_end_offset
                    } else {
                        out.high_watermark
                    },
                })
            })
            .collect();
        let (tx, rx) = oneshot::channel();
        a.purgatory.do_send(WatchFetch {
            watches,
            min_bytes,
            accumulated_bytes: bytes,
            max_wait_ms: req.max_wait_ms as u64,
            follower: replica_id >= 0,
            done: tx,
        });
        // If the purgatory is gone, answer at the deadline anyway.
        let _ =
            tokio::time::timeout(Duration::from_millis(req.max_wait_ms as u64 + 1000), rx).await;
        let t = table(a);
        // The leader's quota may have freed up (or run out) during the wait: Kafka decides
        // throttling when the delayed fetch completes, not when it arrived.
        let reader = Reader {
            leader_quota_exceeded: leader_quota_exceeded(a, replica_id),
            ..reader.clone()
        };
        reads = read_all(
            &t,
            &a.replication_quotas,
            &targets,
            max_bytes,
            isolation,
            reader,
        )
        .await;
    }
    // In a session the cache remembers what each response said; an incremental response
    // lists only partitions with news (KIP-227), a full one lists all.
    let reads = if session_id != 0 {
        let full = req.session_epoch == INITIAL_EPOCH;
        let results: Vec<_> = reads
            .iter()
            .map(|r| (&r.target, summary_of(&r.result)))
            .collect();
        let include = a.fetch_sessions.record_results(session_id, &results, full);
        reads
            .into_iter()
            .zip(include)
            .filter(|(_, keep)| *keep)
            .map(|(r, _)| r)
            .collect()
    } else {
        reads
    };
    for r in &reads {
        if let Err(code) = r.result {
            ctx.record_error(code);
        }
    }
    // What a follower takes of throttled partitions counts against the leader's quota, in
    // the ISR or not (Kafka's `sizeOfThrottledPartitions`).
    if replica_id >= 0 {
        a.replication_quotas.leader.record_throttled(
            reads.iter().filter_map(|r| {
                let out = r.result.as_ref().ok()?;
                Some((
                    r.target.topic.as_deref()?,
                    r.target.partition,
                    out.records.len(),
                ))
            }),
            now_ms(),
        );
    }
    FetchResponse {
        session_id,
        responses: fetch_response_topics(reads, isolation, &t, version),
        ..Default::default()
    }
}
