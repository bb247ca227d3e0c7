//! Incremental fetch sessions (KIP-227; Kafka's `FetchSessionCache` / `FetchManager` /
//! `FullFetchContext` / `IncrementalFetchContext`): the broker remembers each consumer's and
//! follower's partition set so later fetches send only changes, and answers only for
//! partitions with news. [`FetchSessionCache`] is the pure core; [`FetchSessions`] shares it
//! between connections.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use kactor_protocol::errors;
use kactor_protocol::Uuid;

use super::apis::FetchTarget;
use super::core::ReadOutcome;

/// Fetch request session epochs (Kafka's `FetchMetadata`).
pub const INVALID_SESSION_ID: i32 = 0;
pub const INITIAL_EPOCH: i32 = 0;
pub const FINAL_EPOCH: i32 = -1;

/// A partition named in a session (by name before v13, by topic id from v13).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionPartition {
    pub topic: Option<String>,
    pub topic_id: Uuid,
    pub partition: i32,
}

/// How a session finds a partition: by topic id from Fetch v13 (copied, not allocated, on
/// every lookup), by name before.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum PartitionKey {
    Id(Uuid, i32),
    Name(Option<String>, i32),
}

impl PartitionKey {
    fn new(topic: &Option<String>, topic_id: Uuid, partition: i32, uses_topic_ids: bool) -> Self {
        if uses_topic_ids {
            PartitionKey::Id(topic_id, partition)
        } else {
            PartitionKey::Name(topic.clone(), partition)
        }
    }
    fn of(t: &FetchTarget, uses_topic_ids: bool) -> Self {
        Self::new(&t.topic, t.topic_id, t.partition, uses_topic_ids)
    }
}

/// What the last response told the client about a partition (Kafka's `CachedPartition`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PartitionSnapshot {
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
}

/// What one partition's read tells the client, as the session compares it with the last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadSummary {
    pub snapshot: Option<PartitionSnapshot>,
    /// Records, an error, a diverging epoch or a preferred replica: always answered.
    pub news: bool,
    /// Records: in an incremental fetch the partition moves to the end of the session's
    /// order, as in Kafka, so that busy partitions early in the order do not take every
    /// response's byte budget from the ones after them.
    pub has_records: bool,
}

#[derive(Debug)]
struct Session {
    epoch: i32,
    uses_topic_ids: bool,
    /// A follower's session (Kafka's "privileged"): it may evict a consumer's session when the
    /// cache is full, so replication keeps its sessions under a crowd of consumers.
    privileged: bool,
    created_ms: i64,
    /// In the order fetches read them.
    partitions: Vec<(FetchTarget, Option<PartitionSnapshot>)>,
    /// Where each partition sits in `partitions`: a follower's session holds every partition
    /// it replicates from this broker, and each fetch looks each of them up.
    index: HashMap<PartitionKey, usize>,
    last_used_ms: i64,
}

impl Session {
    fn new(uses_topic_ids: bool, privileged: bool, now_ms: i64) -> Self {
        Session {
            epoch: 1,
            uses_topic_ids,
            privileged,
            created_ms: now_ms,
            partitions: Vec::new(),
            index: HashMap::new(),
            last_used_ms: now_ms,
        }
    }

    /// Adds a partition at the end, or takes its new fetch state in place.
    fn upsert(&mut self, t: FetchTarget) {
        let key = PartitionKey::of(&t, self.uses_topic_ids);
        match self.index.get(&key) {
            Some(&i) => self.partitions[i].0 = t,
            None => {
                self.index.insert(key, self.partitions.len());
                self.partitions.push((t, None));
            }
        }
    }

    fn forget(&mut self, forgotten: &[SessionPartition]) {
        let ids = self.uses_topic_ids;
        let gone: HashSet<PartitionKey> = forgotten
            .iter()
            .map(|f| PartitionKey::new(&f.topic, f.topic_id, f.partition, ids))
            .filter(|k| self.index.contains_key(k))
            .collect();
        if gone.is_empty() {
            return;
        }
        self.partitions
            .retain(|(t, _)| !gone.contains(&PartitionKey::of(t, ids)));
        self.reindex();
    }

    fn reindex(&mut self) {
        let ids = self.uses_topic_ids;
        self.index = self
            .partitions
            .iter()
            .enumerate()
            .map(|(i, (t, _))| (PartitionKey::of(t, ids), i))
            .collect();
    }

    fn targets(&self) -> Vec<FetchTarget> {
        self.partitions.iter().map(|(t, _)| t.clone()).collect()
    }
}

/// What a fetch request may read.
#[derive(Debug, Clone)]
pub enum SessionOutcome {
    /// A top-level error (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, ...).
    Error(i16),
    /// No session: read the request's partitions, answer with session id 0.
    Sessionless,
    /// Read these partitions (the session's, in order) and answer with this session id.
    Session {
        id: i32,
        partitions: Vec<FetchTarget>,
    },
}

#[derive(Debug)]
pub struct FetchSessionCache {
    max_slots: usize,
    /// Sessions idle this long may be evicted for a new one
    /// (`min.incremental.fetch.session.eviction.ms` in Kafka).
    eviction_ms: i64,
    sessions: HashMap<i32, Session>,
    /// Partitions held by all sessions (Kafka's `NumIncrementalFetchPartitionsCached`).
    cached_partitions: usize,
}

impl FetchSessionCache {
    pub fn new(max_slots: usize) -> Self {
        FetchSessionCache {
            max_slots,
            eviction_ms: 120_000,
            sessions: HashMap::new(),
            cached_partitions: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.sessions.len()
    }
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }
    pub fn cached_partitions(&self) -> usize {
        self.cached_partitions
    }

    fn new_session_id(&self) -> i32 {
        loop {
            let id: i32 = rand::random::<i32>() & i32::MAX;
            if id != INVALID_SESSION_ID && !self.sessions.contains_key(&id) {
                return id;
            }
        }
    }

    fn remove(&mut self, id: i32) {
        if let Some(old) = self.sessions.remove(&id) {
            self.cached_partitions -= old.partitions.len();
        }
    }

    /// Decides the fetch context (Kafka's `FetchManager.newContext`); `privileged`: the fetch
    /// comes from a follower.
    #[allow(clippy::too_many_arguments)]
    pub fn new_context(
        &mut self,
        session_id: i32,
        epoch: i32,
        requested: Vec<FetchTarget>,
        forgotten: Vec<SessionPartition>,
        uses_topic_ids: bool,
        privileged: bool,
        now_ms: i64,
    ) -> SessionOutcome {
        if epoch == INITIAL_EPOCH || epoch == FINAL_EPOCH {
            if session_id != INVALID_SESSION_ID {
                self.remove(session_id);
            }
            if epoch == FINAL_EPOCH || self.max_slots == 0 {
                return SessionOutcome::Sessionless;
            }
            let size = requested.len();
            if self.sessions.len() >= self.max_slots && !self.evict_one(privileged, size, now_ms) {
                // No room: a full, sessionless answer (the client keeps sending full fetches).
                return SessionOutcome::Sessionless;
            }
            let id = self.new_session_id();
            let mut session = Session::new(uses_topic_ids, privileged, now_ms);
            for t in requested {
                session.upsert(t);
            }
            let partitions = session.targets();
            self.cached_partitions += partitions.len();
            self.sessions.insert(id, session);
            return SessionOutcome::Session { id, partitions };
        }
        let Some(session) = self.sessions.get_mut(&session_id) else {
            return SessionOutcome::Error(errors::FETCH_SESSION_ID_NOT_FOUND);
        };
        if session.epoch != epoch {
            return SessionOutcome::Error(errors::INVALID_FETCH_SESSION_EPOCH);
        }
        if session.uses_topic_ids != uses_topic_ids {
            // Switching between names and ids mid-session is not allowed (KIP-516).
            return SessionOutcome::Error(errors::FETCH_SESSION_TOPIC_ID_ERROR);
        }
        let before = session.partitions.len();
        // Forgotten first, then added (Kafka adds first). By topic id, as fetchers of v13+
        // name partitions, the order changes nothing; by name, it keeps a partition that a
        // request both forgets and lists.
        session.forget(&forgotten);
        for t in requested {
            session.upsert(t);
        }
        session.epoch = session.epoch.wrapping_add(1).max(1);
        session.last_used_ms = now_ms;
        let partitions = session.targets();
        self.cached_partitions = self.cached_partitions - before + partitions.len();
        SessionOutcome::Session {
            id: session_id,
            partitions,
        }
    }

    /// Makes room for a new session of `size` partitions (Kafka's `FetchSessionCache.tryEvict`):
    /// the least recently used session if it has been idle for `eviction_ms`; otherwise the
    /// least valuable one (consumers' before followers', then the fewest partitions) if it is
    /// worth less than the new one. A session younger than `eviction_ms` is safe from all
    /// but a follower's, and a follower's young session from everyone.
    fn evict_one(&mut self, privileged: bool, size: usize, now_ms: i64) -> bool {
        let stale = self
            .sessions
            .iter()
            .min_by_key(|(_, s)| s.last_used_ms)
            .filter(|(_, s)| now_ms - s.last_used_ms > self.eviction_ms)
            .map(|(id, _)| *id);
        let victim = stale.or_else(|| {
            let evictable = |s: &Session| {
                let old = now_ms - s.created_ms > self.eviction_ms;
                old || (privileged && !s.privileged)
            };
            self.sessions
                .iter()
                .filter(|(_, s)| evictable(s))
                .map(|(id, s)| ((s.privileged, s.partitions.len(), *id), *id))
                .min()
                .filter(|((p, n, _), _)| (privileged, size) > (*p, *n))
                .map(|(_, id)| id)
        });
        match victim {
            Some(id) => {
                self.remove(id);
                true
            }
            None => false,
        }
    }

    /// Records what the response says per partition and returns, in the same order, whether
    /// each partition belongs in an incremental response (records, an error, or a changed high
    /// watermark / last stable offset / log start offset). `full` responses include all.
    pub fn record_results(
        &mut self,
        session_id: i32,
        results: &[(&FetchTarget, ReadSummary)],
        full: bool,
    ) -> Vec<bool> {
        let Some(session) = self.sessions.get_mut(&session_id) else {
            return vec![true; results.len()];
        };
        let ids = session.uses_topic_ids;
        let mut busy = Vec::new();
        let include = results
            .iter()
            .map(|(t, read)| {
                let Some(&i) = session.index.get(&PartitionKey::of(t, ids)) else {
                    return true;
                };
                let cached = &mut session.partitions[i].1;
                let changed = read.snapshot != *cached;
                *cached = read.snapshot;
                if read.has_records {
                    busy.push(i);
                }
                full || read.news || changed
            })
            .collect();
        if !full && !busy.is_empty() {
            // Partitions that brought records go last, in their order; the others keep theirs.
            let mut moved = vec![false; session.partitions.len()];
            for i in busy {
                moved[i] = true;
            }
            let (quiet, busy): (Vec<_>, Vec<_>) = std::mem::take(&mut session.partitions)
                .into_iter()
                .enumerate()
                .partition(|(i, _)| !moved[*i]);
            session.partitions = quiet.into_iter().chain(busy).map(|(_, p)| p).collect();
            session.reindex();
        }
        include
    }
}

/// What a read tells the session cache (see [`ReadSummary`]).
pub fn summary_of(result: &Result<ReadOutcome, i16>) -> ReadSummary {
    match result {
        Ok(r) => ReadSummary {
            snapshot: Some(PartitionSnapshot {
                high_watermark: r.high_watermark,
                last_stable_offset: r.last_stable_offset,
                log_start_offset: r.log_start_offset,
            }),
            // A named preferred replica (KIP-392) is news too, as in Kafka's
            // `CachedPartition.maybeUpdateResponseData`: without it a Java consumer in a
            // session would never hear where to fetch from.
            news: !r.records.is_empty()
                || r.diverging_epoch.is_some()
                || r.preferred_read_replica >= 0,
            has_records: !r.records.is_empty(),
        },
        Err(_) => ReadSummary {
            snapshot: None,
            news: true,
            has_records: false,
        },
    }
}

/// The session cache shared by every connection's Fetch handler
/// (`max.incremental.fetch.session.cache.slots`), as Kafka's `FetchSessionCache` is a
/// synchronized structure. It was an actor; but a sessioned fetch consults it twice, each
/// time for a few map operations, and each consultation was a mailbox round trip (a thread
/// wake-up each way) that cost far more than the work and sat in series with the reads.
#[derive(Clone)]
pub struct FetchSessions {
    cache: Arc<Mutex<FetchSessionCache>>,
}

impl FetchSessions {
    pub fn new(max_slots: usize) -> Self {
        FetchSessions {
            cache: Arc::new(Mutex::new(FetchSessionCache::new(max_slots))),
        }
    }

    /// A panic while the lock was held can at worst leave one session half-updated: its
    /// client then gets a session error and starts a new one, so the cache stays usable.
    fn lock(&self) -> MutexGuard<'_, FetchSessionCache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Which partitions this fetch covers (see [`FetchSessionCache::new_context`]).
    pub fn new_context(
        &self,
        session_id: i32,
        epoch: i32,
        requested: Vec<FetchTarget>,
        forgotten: Vec<SessionPartition>,
        uses_topic_ids: bool,
        privileged: bool,
    ) -> SessionOutcome {
        let mut cache = self.lock();
        let outcome = cache.new_context(
            session_id,
            epoch,
            requested,
            forgotten,
            uses_topic_ids,
            privileged,
            super::actor::now_ms(),
        );
        let m = super::metrics::partition_metrics();
        m.fetch_sessions.set(cache.len() as i64);
        m.fetch_session_partitions
            .set(cache.cached_partitions() as i64);
        outcome
    }

    /// What the response tells the client (see [`FetchSessionCache::record_results`]).
    pub fn record_results(
        &self,
        session_id: i32,
        results: &[(&FetchTarget, ReadSummary)],
        full: bool,
    ) -> Vec<bool> {
        self.lock().record_results(session_id, results, full)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(p: i32, offset: i64) -> FetchTarget {
        FetchTarget {
            topic: Some("t".into()),
            topic_id: Uuid::ZERO,
            partition: p,
            fetch_offset: offset,
            partition_max_bytes: 1000,
            current_leader_epoch: -1,
            last_fetched_epoch: -1,
            log_start_offset: -1,
        }
    }

    fn snap(hw: i64) -> Option<PartitionSnapshot> {
        Some(PartitionSnapshot {
            high_watermark: hw,
            last_stable_offset: hw,
            log_start_offset: 0,
        })
    }

    fn read(snapshot: Option<PartitionSnapshot>, has_records: bool) -> ReadSummary {
        ReadSummary {
            snapshot,
            news: has_records,
            has_records,
        }
    }

    fn order(c: &mut FetchSessionCache, id: i32, epoch: i32) -> Vec<i32> {
        let SessionOutcome::Session { partitions, .. } =
            c.new_context(id, epoch, vec![], vec![], false, false, 0)
        else {
            panic!("a session")
        };
        partitions.iter().map(|t| t.partition).collect()
    }

    #[test]
    fn partitions_that_brought_records_go_last_and_are_still_found() {
        let mut c = FetchSessionCache::new(10);
        let targets: Vec<_> = (0..4).map(|p| target(p, 0)).collect();
        let SessionOutcome::Session { id, .. } =
            c.new_context(0, INITIAL_EPOCH, targets.clone(), vec![], false, false, 0)
        else {
            panic!("a session")
        };
        let quiet = |t| (t, read(snap(0), false));
        // A full response keeps the order.
        c.record_results(id, &targets.iter().map(quiet).collect::<Vec<_>>(), true);
        assert_eq!(order(&mut c, id, 1), vec![0, 1, 2, 3]);
        // Partitions 0 and 2 brought records: 1 and 3 are read first next time.
        let answered = [
            (&targets[0], read(snap(1), true)),
            quiet(&targets[1]),
            (&targets[2], read(snap(1), true)),
            quiet(&targets[3]),
        ];
        assert_eq!(
            c.record_results(id, &answered, false),
            vec![true, false, true, false]
        );
        assert_eq!(order(&mut c, id, 2), vec![1, 3, 0, 2]);
        // The index follows the move: forgetting and updating still find the right ones.
        let forget = SessionPartition {
            topic: Some("t".into()),
            topic_id: Uuid::ZERO,
            partition: 3,
        };
        let SessionOutcome::Session { partitions, .. } =
            c.new_context(id, 3, vec![target(0, 9)], vec![forget], false, false, 0)
        else {
            panic!("a session")
        };
        let got: Vec<_> = partitions
            .iter()
            .map(|t| (t.partition, t.fetch_offset))
            .collect();
        assert_eq!(got, vec![(1, 0), (0, 9), (2, 0)]);
        assert_eq!(c.cached_partitions(), 3);
    }

    #[test]
    fn a_named_preferred_replica_is_news() {
        let outcome = |preferred_read_replica| {
            Ok(ReadOutcome {
                records: crate::partition::core::LogSlice::Memory(bytes::Bytes::new()),
                high_watermark: 5,
                last_stable_offset: 5,
                log_start_offset: 0,
                log_end_offset: 5,
                diverging_epoch: None,
                preferred_read_replica,
                aborted_transactions: Vec::new(),
                held_back: false,
            })
        };
        let news = |r| summary_of(&outcome(r)).news;
        assert!(!news(-1));
        assert!(news(3));
        assert_eq!(summary_of(&outcome(3)).snapshot, snap(5));
    }

    #[test]
    fn full_then_incremental_then_close() {
        let mut c = FetchSessionCache::new(10);
        let SessionOutcome::Session { id, partitions } = c.new_context(
            0,
            INITIAL_EPOCH,
            vec![target(0, 0), target(1, 0)],
            vec![],
            false,
            false,
            0,
        ) else {
            panic!("a session")
        };
        assert_ne!(id, 0);
        assert_eq!(partitions.len(), 2);
        assert_eq!(
            c.record_results(
                id,
                &[
                    (&target(0, 0), read(snap(5), true)),
                    (&target(1, 0), read(snap(0), false))
                ],
                true
            ),
            vec![true, true]
        );
        // Epoch 1: only partition 0 moved; partition 1 stays in the session.
        let SessionOutcome::Session { partitions, .. } =
            c.new_context(id, 1, vec![target(0, 5)], vec![], false, false, 1)
        else {
            panic!()
        };
        assert_eq!(
            partitions
                .iter()
                .map(|t| (t.partition, t.fetch_offset))
                .collect::<Vec<_>>(),
            vec![(0, 5), (1, 0)]
        );
        // Nothing new on either: an empty incremental response.
        assert_eq!(
            c.record_results(
                id,
                &[
                    (&target(0, 5), read(snap(5), false)),
                    (&target(1, 0), read(snap(0), false))
                ],
                false
            ),
            vec![false, false]
        );
        // Wrong epoch, unknown id.
        assert!(matches!(
            c.new_context(id, 7, vec![], vec![], false, false, 2),
            SessionOutcome::Error(errors::INVALID_FETCH_SESSION_EPOCH)
        ));
        assert!(matches!(
            c.new_context(id + 1, 1, vec![], vec![], false, false, 2),
            SessionOutcome::Error(errors::FETCH_SESSION_ID_NOT_FOUND)
        ));
        // Forget partition 1.
        let SessionOutcome::Session { partitions, .. } = c.new_context(
            id,
            2,
            vec![],
            vec![SessionPartition {
                topic: Some("t".into()),
                topic_id: Uuid::ZERO,
                partition: 1,
            }],
            false,
            false,
            3,
        ) else {
            panic!()
        };
        assert_eq!(partitions.len(), 1);
        // Close: sessionless, the session is gone.
        assert!(matches!(
            c.new_context(id, FINAL_EPOCH, vec![], vec![], false, false, 4),
            SessionOutcome::Sessionless
        ));
        assert!(c.is_empty());
    }

    #[test]
    fn full_cache_falls_back_to_sessionless_unless_a_session_is_idle() {
        let mut c = FetchSessionCache::new(1);
        assert!(matches!(
            c.new_context(0, 0, vec![target(0, 0)], vec![], false, false, 0),
            SessionOutcome::Session { .. }
        ));
        assert!(matches!(
            c.new_context(0, 0, vec![target(0, 0)], vec![], false, false, 10),
            SessionOutcome::Sessionless
        ));
        assert!(matches!(
            c.new_context(0, 0, vec![target(0, 0)], vec![], false, false, 200_000),
            SessionOutcome::Session { .. }
        ));
        assert_eq!(c.len(), 1);
        let mut none = FetchSessionCache::new(0);
        assert!(matches!(
            none.new_context(0, 0, vec![], vec![], false, false, 0),
            SessionOutcome::Sessionless
        ));
    }
    #[test]
    fn followers_evict_consumers_and_bigger_sessions_evict_smaller_old_ones() {
        let open = |c: &mut FetchSessionCache, n: i32, follower: bool, now: i64| {
            let targets = (0..n).map(|p| target(p, 0)).collect();
            match c.new_context(0, INITIAL_EPOCH, targets, vec![], false, follower, now) {
                SessionOutcome::Session { id, .. } => Some(id),
                _ => None,
            }
        };
        let mut c = FetchSessionCache::new(2);
        let consumer = open(&mut c, 5, false, 0).unwrap();
        let follower = open(&mut c, 1, true, 0).unwrap();
        // Full, nothing idle or old: a consumer gets no session, whatever its size.
        assert_eq!(open(&mut c, 50, false, 10), None);
        // A follower takes the consumer's place at once.
        let second = open(&mut c, 2, true, 10).unwrap();
        assert!(!c.sessions.contains_key(&consumer));
        assert!(c.sessions.contains_key(&follower) && c.sessions.contains_key(&second));
        // Young followers' sessions are safe from everyone; once old (and still in use, so
        // not stale), a follower's session with more partitions takes the smallest one's place.
        let touch = |c: &mut FetchSessionCache, id, now| {
            let epoch = c.sessions[&id].epoch;
            c.new_context(id, epoch, vec![], vec![], false, true, now);
        };
        assert_eq!(open(&mut c, 9, true, 20), None);
        touch(&mut c, follower, 130_000);
        touch(&mut c, second, 130_000);
        assert_eq!(
            open(&mut c, 1, true, 130_001),
            None,
            "not more partitions than 1"
        );
        assert!(open(&mut c, 9, true, 130_002).is_some());
        assert!(!c.sessions.contains_key(&follower) && c.sessions.contains_key(&second));
        assert_eq!(c.cached_partitions(), 11);
    }
}
