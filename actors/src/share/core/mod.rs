//! The share-partition manager's pure core (Kafka's `SharePartitionManager`): the share-partitions
//! this broker leads, by group, and the share sessions of the members fetching from them.
//!
//! A ShareFetch takes two steps, with the log read between them by the request handler:
//! `begin_fetch` applies the session and the piggybacked acknowledgements and says where to read
//! each partition; `acquire` then acquires what was read. The share-partition decides in the
//! second step, so two members reading the same offsets at once never both acquire them.

pub mod partition;
pub mod session;

#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap};

use kactor_protocol::errors::{INVALID_REQUEST, UNKNOWN_TOPIC_OR_PARTITION};
use kactor_protocol::Uuid;

pub use partition::{AckBatch, AckError, AcquiredRange, Limits, LogBatch, SharePartition};
pub use session::{SessionUse, ShareSessions, TopicIdPartition, FINAL_EPOCH, OPEN_EPOCH};

/// One share-partition: a group's view of one topic partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShareKey {
    pub group: String,
    pub topic_id: Uuid,
    pub partition: i32,
}

impl ShareKey {
    pub fn new(group: &str, tp: TopicIdPartition) -> Self {
        ShareKey {
            group: group.to_string(),
            topic_id: tp.0,
            partition: tp.1,
        }
    }
}

/// The acknowledgements a request carries for one partition.
pub type PartitionAcks = (TopicIdPartition, Vec<AckBatch>);

/// Each partition's acknowledgement outcome.
pub type AckResults = Vec<(TopicIdPartition, Result<(), AckError>)>;

/// A whole request refused: an error code and its message.
pub type RequestError = (i16, String);

/// Who a share request is from.
#[derive(Debug, Clone, Copy)]
pub struct Requester<'a> {
    pub group: &'a str,
    pub member: &'a str,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPlan {
    /// The partitions to read and where: None when the share-partition has no state yet (the
    /// handler finds its start from `share.auto.offset.reset`).
    pub reads: Vec<(TopicIdPartition, Option<i64>)>,
    /// The outcome of each partition's acknowledgements.
    pub acks: Vec<(TopicIdPartition, Result<(), AckError>)>,
}

/// What the handler read of one partition for `acquire`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadBatches {
    pub tp: TopicIdPartition,
    /// The start offset for a share-partition without state (from `share.auto.offset.reset`).
    pub initial_offset: Option<i64>,
    pub log_start_offset: i64,
    /// Each batch read, ascending.
    pub batches: Vec<LogBatch>,
}

/// What the share coordinator is sent for one share-partition (WriteShareGroupState).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersistView {
    pub state_epoch: i32,
    pub start_offset: i64,
    /// Offsets in the window whose delivery is complete.
    pub delivery_complete_count: i32,
    pub batches: Vec<crate::share::coordinator::core::StateBatch>,
}

#[derive(Debug, Default)]
pub struct ShareManager {
    partitions: HashMap<ShareKey, SharePartition>,
    sessions: ShareSessions,
    /// Each group's settings as its last request saw them (lock expiry applies them later).
    limits: HashMap<String, Limits>,
    /// Share-partitions changed since their state was last written to the coordinator.
    dirty: BTreeSet<ShareKey>,
    /// The state epoch each share-partition was loaded with (0 when it started here).
    state_epochs: HashMap<ShareKey, i32>,
    /// Writes under way per share-partition (taken by `persist_view`, ended by `written`).
    writing: HashMap<ShareKey, u32>,
}

impl ShareManager {
    pub fn new(max_sessions: usize) -> Self {
        ShareManager {
            partitions: HashMap::new(),
            sessions: ShareSessions::new(max_sessions),
            limits: HashMap::new(),
            dirty: BTreeSet::new(),
            state_epochs: HashMap::new(),
            writing: HashMap::new(),
        }
    }

    /// Installs a share-partition loaded from its coordinator, unless one appeared meanwhile
    /// (a concurrent fetch loaded or started it first). Returns where to read it next.
    pub fn restore(
        &mut self,
        key: ShareKey,
        state_epoch: i32,
        start_offset: i64,
        batches: &[crate::share::coordinator::core::StateBatch],
    ) -> i64 {
        if !self.partitions.contains_key(&key) {
            self.state_epochs.insert(key.clone(), state_epoch);
        }
        self.partitions
            .entry(key)
            .or_insert_with(|| SharePartition::from_state(start_offset, batches))
            .next_fetch_offset()
    }

    /// A share-partition loaded without a start offset: its writes carry `state_epoch`
    /// (unless one was started here meanwhile, with its own).
    pub fn fresh_state_epoch(&mut self, key: &ShareKey, state_epoch: i32) {
        if !self.partitions.contains_key(key) {
            self.state_epochs.insert(key.clone(), state_epoch);
        }
    }

    /// The share-partitions changed since their state was last taken for writing.
    pub fn take_dirty(&mut self) -> Vec<ShareKey> {
        std::mem::take(&mut self.dirty).into_iter().collect()
    }

    /// Marks a share-partition to be written again (a write failed).
    pub fn mark_dirty(&mut self, key: ShareKey) {
        if self.partitions.contains_key(&key) {
            self.dirty.insert(key);
        }
    }

    /// The state to write for `key` now, and clears its dirty mark. A write is then under way
    /// until [`ShareManager::written`].
    pub fn persist_view(&mut self, key: &ShareKey) -> Option<PersistView> {
        self.dirty.remove(key);
        let sp = self.partitions.get(key)?;
        *self.writing.entry(key.clone()).or_default() += 1;
        Some(PersistView {
            state_epoch: self.state_epochs.get(key).copied().unwrap_or(0),
            start_offset: sp.start_offset(),
            delivery_complete_count: sp.terminal_count() as i32,
            batches: sp.state_batches(),
        })
    }

    /// A write taken with `persist_view` ended (whatever its outcome).
    pub fn written(&mut self, key: &ShareKey) {
        if let Some(n) = self.writing.get_mut(key) {
            *n -= 1;
            if *n == 0 {
                self.writing.remove(key);
            }
        }
    }

    /// Drops the share-partitions of groups that have no share session here, nothing
    /// acquired and nothing unwritten: the coordinator holds all they know. The next fetch
    /// loads them again, so an AlterShareGroupOffsets or DeleteShareGroupOffsets made by the
    /// group coordinator meanwhile (the group must be empty for it) is seen even when this
    /// broker is not that coordinator (Kafka's share-partition manager drops a group's
    /// share-partitions when the group has no sessions left, the same way). Returns how many.
    pub fn drop_idle_groups(&mut self) -> usize {
        let active = self.sessions.groups();
        let busy: std::collections::HashSet<String> = self
            .partitions
            .keys()
            .filter(|k| self.is_busy(k))
            .map(|k| k.group.clone())
            .collect();
        let idle = |g: &str| !active.contains(g) && !busy.contains(g);
        self.drop_where(idle)
    }

    /// [`ShareManager::drop_idle_groups`] for one group, as soon as its last session closed
    /// or its last write ended (a member that resets the group's offsets right after closing
    /// must find nothing stale here). Returns how many share-partitions went. While the group
    /// has a session here (every acknowledgement's write ends so) it costs one lookup.
    pub fn drop_group_if_idle(&mut self, group: &str) -> usize {
        if self.sessions.has_group(group)
            || self
                .partitions
                .keys()
                .any(|k| k.group == group && self.is_busy(k))
        {
            return 0;
        }
        self.drop_where(|g| g == group)
    }

    /// Holds something the coordinator does not have yet: acquired records, or a change not
    /// (or not yet) written.
    fn is_busy(&self, k: &ShareKey) -> bool {
        self.dirty.contains(k)
            || self.writing.contains_key(k)
            || self
                .partitions
                .get(k)
                .is_some_and(|sp| sp.acquired_count() > 0)
    }

    /// Drops the share-partitions (and loaded state epochs) of the groups `idle` names.
    fn drop_where(&mut self, idle: impl Fn(&str) -> bool) -> usize {
        let before = self.partitions.len();
        self.partitions.retain(|k, _| !idle(&k.group));
        self.state_epochs.retain(|k, _| !idle(&k.group));
        before - self.partitions.len()
    }

    pub fn partition(&self, key: &ShareKey) -> Option<&SharePartition> {
        self.partitions.get(key)
    }

    pub fn partitions(&self) -> impl Iterator<Item = (&ShareKey, &SharePartition)> {
        self.partitions.iter()
    }

    pub fn max_sessions(&self) -> usize {
        self.sessions.max_sessions()
    }

    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Step one of a ShareFetch: the session, then the acknowledgements, then where to read.
    pub fn begin_fetch(
        &mut self,
        who: Requester<'_>,
        epoch: i32,
        partitions: &[PartitionAcks],
        forgotten: &[TopicIdPartition],
        limits: &Limits,
        now_ms: i64,
    ) -> Result<FetchPlan, RequestError> {
        let Requester { group, member } = who;
        if epoch == OPEN_EPOCH && partitions.iter().any(|(_, acks)| !acks.is_empty()) {
            return Err((
                INVALID_REQUEST,
                "Acknowledge data present on initial epoch".to_string(),
            ));
        }
        self.limits.insert(group.to_string(), *limits);
        let key = (group.to_string(), member.to_string());
        let added: Vec<TopicIdPartition> = partitions.iter().map(|(tp, _)| *tp).collect();
        let session = self
            .sessions
            .fetch(&key, epoch, &added, forgotten, now_ms)?;
        let acks = self.apply_acks(group, member, partitions, limits, now_ms);
        let reads = match session {
            SessionUse::Active(tps) => tps
                .into_iter()
                .map(|tp| {
                    let at = self
                        .partitions
                        .get(&ShareKey::new(group, tp))
                        .map(SharePartition::next_fetch_offset);
                    (tp, at)
                })
                .collect(),
            SessionUse::Closed(tps) => {
                self.release(group, member, &tps, limits);
                Vec::new()
            }
        };
        Ok(FetchPlan { reads, acks })
    }

    /// Step two of a ShareFetch: acquires for `member` what was read, at most `max_records`
    /// over all partitions (whole batches).
    pub fn acquire(
        &mut self,
        group: &str,
        member: &str,
        reads: &[ReadBatches],
        max_records: usize,
        limits: &Limits,
        now_ms: i64,
    ) -> Vec<(TopicIdPartition, Vec<AcquiredRange>)> {
        let mut left = max_records.max(1);
        let mut out = Vec::with_capacity(reads.len());
        for r in reads {
            let key = ShareKey::new(group, r.tp);
            let (sp, before) = match (self.partitions.get_mut(&key), r.initial_offset) {
                (Some(sp), _) => {
                    let before = Some(sp.start_offset());
                    (sp, before)
                }
                (None, Some(start)) => (
                    self.partitions
                        .entry(key.clone())
                        .or_insert_with(|| SharePartition::new(start)),
                    None,
                ),
                (None, None) => {
                    out.push((r.tp, Vec::new()));
                    continue;
                }
            };
            sp.on_log_start(r.log_start_offset);
            if left == 0 {
                out.push((r.tp, Vec::new()));
                continue;
            }
            let ranges = sp.acquire_batches(member, &r.batches, left, limits, now_ms);
            // A new share-partition, or a start offset moved past archived batches: written
            // by the next flush (acquisition itself is not persisted, as in Kafka).
            if before != Some(sp.start_offset()) {
                self.dirty.insert(key);
            }
            let n: i64 = ranges
                .iter()
                .map(|a| a.last_offset - a.first_offset + 1)
                .sum();
            left = left.saturating_sub(n as usize);
            out.push((r.tp, ranges));
        }
        out
    }

    /// A ShareAcknowledge: the session must be open (or closing, at -1).
    pub fn acknowledge(
        &mut self,
        who: Requester<'_>,
        epoch: i32,
        partitions: &[PartitionAcks],
        limits: &Limits,
        now_ms: i64,
    ) -> Result<AckResults, RequestError> {
        let Requester { group, member } = who;
        self.limits.insert(group.to_string(), *limits);
        let key = (group.to_string(), member.to_string());
        let session = self.sessions.acknowledge(&key, epoch, now_ms)?;
        let acks = self.apply_acks(group, member, partitions, limits, now_ms);
        if let SessionUse::Closed(tps) = session {
            self.release(group, member, &tps, limits);
        }
        Ok(acks)
    }

    fn apply_acks(
        &mut self,
        group: &str,
        member: &str,
        partitions: &[PartitionAcks],
        limits: &Limits,
        now_ms: i64,
    ) -> AckResults {
        partitions
            .iter()
            .filter(|(_, acks)| !acks.is_empty())
            .map(|(tp, acks)| {
                let key = ShareKey::new(group, *tp);
                let result = match self.partitions.get_mut(&key) {
                    Some(sp) => {
                        let r = sp.acknowledge(member, acks, limits, now_ms);
                        if r.is_ok() {
                            self.dirty.insert(key);
                        }
                        r
                    }
                    // Kafka's answer for a share-partition the broker has not loaded.
                    None => Err((
                        UNKNOWN_TOPIC_OR_PARTITION,
                        "This server does not host this topic-partition.".to_string(),
                    )),
                };
                (*tp, result)
            })
            .collect()
    }

    /// Releases what `member` holds in `tps` of `group`.
    fn release(&mut self, group: &str, member: &str, tps: &[TopicIdPartition], limits: &Limits) {
        for tp in tps {
            let key = ShareKey::new(group, *tp);
            if let Some(sp) = self.partitions.get_mut(&key) {
                if sp.release_member(member, limits) > 0 {
                    self.dirty.insert(key);
                }
            }
        }
    }

    /// Releases expired acquisition locks and the records of sessions idle since before
    /// `idle_before_ms`, each group by its own settings (`defaults` for a group not seen).
    /// Returns how many records became deliverable again or were archived.
    pub fn tick(&mut self, defaults: &Limits, idle_before_ms: i64, now_ms: i64) -> usize {
        let mut n = 0;
        let limits = &self.limits;
        let of = |group: &str| *limits.get(group).unwrap_or(defaults);
        let dirty = &mut self.dirty;
        for (group, member) in self.sessions.evict_idle(idle_before_ms) {
            let l = of(&group);
            for (k, sp) in self.partitions.iter_mut() {
                if k.group == group {
                    let released = sp.release_member(&member, &l);
                    if released > 0 {
                        dirty.insert(k.clone());
                    }
                    n += released;
                }
            }
        }
        for (k, sp) in self.partitions.iter_mut() {
            let expired = sp.expire_locks(&of(&k.group), now_ms);
            if expired > 0 {
                dirty.insert(k.clone());
            }
            n += expired;
        }
        n
    }

    /// Whether one of `partitions` of `group` has something to acquire below the given high
    /// watermark (a waiting fetch need not wait).
    pub fn has_acquirable(
        &self,
        group: &str,
        partitions: &[(Uuid, i32, i64)],
        limits: &Limits,
    ) -> bool {
        partitions.iter().any(|&(topic_id, partition, hw)| {
            self.partitions
                .get(&ShareKey::new(group, (topic_id, partition)))
                .is_some_and(|sp| sp.has_acquirable(hw, limits))
        })
    }

    /// Where each of `tps` should be read next for `group` (None: no state yet).
    pub fn next_fetch_offsets(
        &self,
        group: &str,
        tps: &[TopicIdPartition],
    ) -> Vec<(TopicIdPartition, Option<i64>)> {
        tps.iter()
            .map(|tp| {
                let at = self
                    .partitions
                    .get(&ShareKey::new(group, *tp))
                    .map(SharePartition::next_fetch_offset);
                (*tp, at)
            })
            .collect()
    }

    /// The earliest acquisition lock deadline over every share-partition.
    pub fn next_deadline(&self) -> Option<i64> {
        self.partitions
            .values()
            .filter_map(SharePartition::next_deadline)
            .min()
    }

    /// Forgets the share-partitions of topic partitions this broker no longer leads (their
    /// state is rebuilt where they are led).
    pub fn retain_led(&mut self, led: impl Fn(&Uuid, i32) -> bool) {
        self.partitions.retain(|k, _| led(&k.topic_id, k.partition));
        let partitions = &self.partitions;
        self.dirty.retain(|k| partitions.contains_key(k));
        // By leadership, not by presence: a share-partition loaded without a start offset
        // has its state epoch here before the fetch that resolves the offset creates it.
        self.state_epochs
            .retain(|k, _| led(&k.topic_id, k.partition));
    }

    /// Forgets one share-partition (its copy here is stale); the next fetch loads it again.
    pub fn forget(&mut self, key: &ShareKey) {
        self.partitions.remove(key);
        self.dirty.remove(key);
        self.state_epochs.remove(key);
    }
}
