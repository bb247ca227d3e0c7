//! Incremental fetch sessions (KIP-227; Kafka's `FetchSessionCache` / `FetchManager` /
//! `FullFetchContext` / `IncrementalFetchContext`): the broker remembers each consumer's partition
//! set so later fetches send only changes, and answers only for partitions with news.
//! [`FetchSessionCache`] is the pure core; [`FetchSessions`] shares it between connections.

use std::collections::HashMap;
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

impl SessionPartition {
    fn of(t: &FetchTarget) -> Self {
        SessionPartition {
            topic: t.topic.clone(),
            topic_id: t.topic_id,
            partition: t.partition,
        }
    }
    fn key(&self, uses_topic_ids: bool) -> (Option<String>, Uuid, i32) {
        if uses_topic_ids {
            (None, self.topic_id, self.partition)
        } else {
            (self.topic.clone(), Uuid::ZERO, self.partition)
        }
    }
}

/// What the last response told the client about a partition (Kafka's `CachedPartition`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PartitionSnapshot {
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
}

#[derive(Debug)]
struct Session {
    epoch: i32,
    uses_topic_ids: bool,
    partitions: Vec<(FetchTarget, Option<PartitionSnapshot>)>,
    last_used_ms: i64,
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
}

impl FetchSessionCache {
    pub fn new(max_slots: usize) -> Self {
        FetchSessionCache {
            max_slots,
            eviction_ms: 120_000,
            sessions: HashMap::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.sessions.len()
    }
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    fn new_session_id(&self) -> i32 {
        loop {
            let id: i32 = rand::random::<i32>() & i32::MAX;
            if id != INVALID_SESSION_ID && !self.sessions.contains_key(&id) {
                return id;
            }
        }
    }

    /// Decides the fetch context (Kafka's `FetchManager.newContext`).
    pub fn new_context(
        &mut self,
        session_id: i32,
        epoch: i32,
        requested: Vec<FetchTarget>,
        forgotten: Vec<SessionPartition>,
        uses_topic_ids: bool,
        now_ms: i64,
    ) -> SessionOutcome {
        if epoch == INITIAL_EPOCH || epoch == FINAL_EPOCH {
            if session_id != INVALID_SESSION_ID {
                self.sessions.remove(&session_id);
            }
            if epoch == FINAL_EPOCH || self.max_slots == 0 {
                return SessionOutcome::Sessionless;
            }
            if self.sessions.len() >= self.max_slots && !self.evict_one(now_ms) {
                // No room: a full, sessionless answer (the client keeps sending full fetches).
                return SessionOutcome::Sessionless;
            }
            let id = self.new_session_id();
            let partitions = requested.iter().cloned().map(|t| (t, None)).collect();
            self.sessions.insert(
                id,
                Session {
                    epoch: 1,
                    uses_topic_ids,
                    partitions,
                    last_used_ms: now_ms,
                },
            );
            return SessionOutcome::Session {
                id,
                partitions: requested,
            };
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
        for f in forgotten {
            let key = f.key(uses_topic_ids);
            session
                .partitions
                .retain(|(t, _)| SessionPartition::of(t).key(uses_topic_ids) != key);
        }
        for t in requested {
            let key = SessionPartition::of(&t).key(uses_topic_ids);
            match session
                .partitions
                .iter_mut()
                .find(|(p, _)| SessionPartition::of(p).key(uses_topic_ids) == key)
            {
                Some((p, _)) => *p = t,
                None => session.partitions.push((t, None)),
            }
        }
        session.epoch = session.epoch.wrapping_add(1).max(1);
        session.last_used_ms = now_ms;
        SessionOutcome::Session {
            id: session_id,
            partitions: session.partitions.iter().map(|(t, _)| t.clone()).collect(),
        }
    }

    /// Evicts the least recently used session if it has been idle long enough.
    fn evict_one(&mut self, now_ms: i64) -> bool {
        let oldest = self
            .sessions
            .iter()
            .min_by_key(|(_, s)| s.last_used_ms)
            .map(|(id, s)| (*id, s.last_used_ms));
        match oldest {
            Some((id, used)) if now_ms - used >= self.eviction_ms => {
                self.sessions.remove(&id);
                true
            }
            _ => false,
        }
    }

    /// Records what the response says per partition and returns, in the same order, whether
    /// each partition belongs in an incremental response (records, an error, or a changed high
    /// watermark / last stable offset / log start offset). `full` responses include all.
    pub fn record_results(
        &mut self,
        session_id: i32,
        results: &[(FetchTarget, Option<PartitionSnapshot>, bool)],
        full: bool,
    ) -> Vec<bool> {
        let Some(session) = self.sessions.get_mut(&session_id) else {
            return vec![true; results.len()];
        };
        let ids = session.uses_topic_ids;
        results
            .iter()
            .map(|(t, snapshot, has_data_or_error)| {
                let key = SessionPartition::of(t).key(ids);
                let cached = session
                    .partitions
                    .iter_mut()
                    .find(|(p, _)| SessionPartition::of(p).key(ids) == key);
                let Some((_, cached)) = cached else {
                    return true;
                };
                let changed = *snapshot != *cached;
                *cached = *snapshot;
                full || *has_data_or_error || changed
            })
            .collect()
    }
}

/// A read's snapshot for the session cache and whether it has data or an error.
pub fn snapshot_of(result: &Result<ReadOutcome, i16>) -> (Option<PartitionSnapshot>, bool) {
    match result {
        Ok(r) => (
            Some(PartitionSnapshot {
                high_watermark: r.high_watermark,
                last_stable_offset: r.last_stable_offset,
                log_start_offset: r.log_start_offset,
            }),
            // A named preferred replica (KIP-392) is news too, as in Kafka's
            // `CachedPartition.maybeUpdateResponseData`: without it a Java consumer in a
            // session would never hear where to fetch from.
            !r.records.is_empty() || r.diverging_epoch.is_some() || r.preferred_read_replica >= 0,
        ),
        Err(_) => (None, true),
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
    ) -> SessionOutcome {
        self.lock().new_context(
            session_id,
            epoch,
            requested,
            forgotten,
            uses_topic_ids,
            super::actor::now_ms(),
        )
    }

    /// What the response tells the client (see [`FetchSessionCache::record_results`]).
    pub fn record_results(
        &self,
        session_id: i32,
        results: &[(FetchTarget, Option<PartitionSnapshot>, bool)],
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
            })
        };
        assert_eq!(snapshot_of(&outcome(-1)), (snap(5), false));
        assert_eq!(snapshot_of(&outcome(3)), (snap(5), true));
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
                    (target(0, 0), snap(5), true),
                    (target(1, 0), snap(0), false)
                ],
                true
            ),
            vec![true, true]
        );
        // Epoch 1: only partition 0 moved; partition 1 stays in the session.
        let SessionOutcome::Session { partitions, .. } =
            c.new_context(id, 1, vec![target(0, 5)], vec![], false, 1)
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
                    (target(0, 5), snap(5), false),
                    (target(1, 0), snap(0), false)
                ],
                false
            ),
            vec![false, false]
        );
        // Wrong epoch, unknown id.
        assert!(matches!(
            c.new_context(id, 7, vec![], vec![], false, 2),
            SessionOutcome::Error(errors::INVALID_FETCH_SESSION_EPOCH)
        ));
        assert!(matches!(
            c.new_context(id + 1, 1, vec![], vec![], false, 2),
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
            3,
        ) else {
            panic!()
        };
        assert_eq!(partitions.len(), 1);
        // Close: sessionless, the session is gone.
        assert!(matches!(
            c.new_context(id, FINAL_EPOCH, vec![], vec![], false, 4),
            SessionOutcome::Sessionless
        ));
        assert!(c.is_empty());
    }

    #[test]
    fn full_cache_falls_back_to_sessionless_unless_a_session_is_idle() {
        let mut c = FetchSessionCache::new(1);
        assert!(matches!(
            c.new_context(0, 0, vec![target(0, 0)], vec![], false, 0),
            SessionOutcome::Session { .. }
        ));
        assert!(matches!(
            c.new_context(0, 0, vec![target(0, 0)], vec![], false, 10),
            SessionOutcome::Sessionless
        ));
        assert!(matches!(
            c.new_context(0, 0, vec![target(0, 0)], vec![], false, 200_000),
            SessionOutcome::Session { .. }
        ));
        assert_eq!(c.len(), 1);
        let mut none = FetchSessionCache::new(0);
        assert!(matches!(
            none.new_context(0, 0, vec![], vec![], false, 0),
            SessionOutcome::Sessionless
        ));
    }
}
