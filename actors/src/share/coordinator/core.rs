//! The share coordinator's pure core for one `__share_group_state` partition (Kafka's
//! `ShareCoordinatorShard`): the durable state of every share-partition whose key hashes here,
//! rebuilt by replaying ShareSnapshot / ShareUpdate records, and the records each request
//! writes. The actor appends the records and answers once they are committed.
//!
//! A share-partition's state is its start offset (SPSO), its state and leader epochs, and
//! the in-flight ranges past the start offset with their delivery state and count. Writes
//! carry only the ranges that changed; they are merged over what is there, and every
//! `share.coordinator.snapshot.update.records.per.snapshot` updates a full snapshot is written
//! instead, so a load replays at most that many updates per share-partition.

use std::collections::{BTreeMap, HashMap};

use kactor_protocol::errors::{
    FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH, INVALID_REQUEST, UNKNOWN_TOPIC_OR_PARTITION,
};
use kactor_protocol::Uuid;

/// `share.coordinator.snapshot.update.records.per.snapshot` default.
pub const DEFAULT_UPDATES_PER_SNAPSHOT: i32 = 500;

/// Persisted delivery states (the in-memory Acquired state is never written).
pub const STATE_AVAILABLE: i8 = 0;
pub const STATE_ACKNOWLEDGED: i8 = 2;
pub const STATE_ARCHIVED: i8 = 4;

/// One share-partition: `group:topicId:partition` is its coordinator key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StateKey {
    pub group: String,
    pub topic_id: Uuid,
    pub partition: i32,
}

impl StateKey {
    pub fn new(group: &str, topic_id: Uuid, partition: i32) -> Self {
        StateKey {
            group: group.to_string(),
            topic_id,
            partition,
        }
    }

    /// The string FindCoordinator (key type SHARE) names and the partition is hashed from.
    pub fn coordinator_key(&self) -> String {
        format!("{}:{}:{}", self.group, self.topic_id, self.partition)
    }
}

/// A range of offsets in one delivery state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateBatch {
    pub first_offset: i64,
    pub last_offset: i64,
    pub delivery_state: i8,
    pub delivery_count: i16,
}

/// The same four fields appear in every state message and record Kafka defines (each its own
/// generated struct): one conversion each way for all of them.
macro_rules! wire_state_batches {
    ($($wire:ty),* $(,)?) => {$(
        impl From<&$wire> for StateBatch {
            fn from(b: &$wire) -> Self {
                StateBatch {
                    first_offset: b.first_offset,
                    last_offset: b.last_offset,
                    delivery_state: b.delivery_state,
                    delivery_count: b.delivery_count,
                }
            }
        }

        impl From<&StateBatch> for $wire {
            fn from(b: &StateBatch) -> Self {
                Self {
                    first_offset: b.first_offset,
                    last_offset: b.last_offset,
                    delivery_state: b.delivery_state,
                    delivery_count: b.delivery_count,
                    ..Default::default()
                }
            }
        }
    )*};
}

wire_state_batches!(
    kactor_protocol::coordinator::share_snapshot_value::StateBatch,
    kactor_protocol::coordinator::share_update_value::StateBatch,
    kactor_protocol::messages::read_share_group_state_response::StateBatch,
    kactor_protocol::messages::write_share_group_state_request::StateBatch,
);

/// A share-partition's durable state (Kafka's `ShareGroupOffset`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareState {
    pub snapshot_epoch: i32,
    pub state_epoch: i32,
    pub leader_epoch: i32,
    /// -1 until the share-partition leader first sets it.
    pub start_offset: i64,
    pub delivery_complete_count: i32,
    pub create_timestamp: i64,
    pub write_timestamp: i64,
    pub batches: Vec<StateBatch>,
}

/// A change over the last snapshot (ShareUpdateValue).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateUpdate {
    pub snapshot_epoch: i32,
    pub leader_epoch: i32,
    /// -1: unchanged.
    pub start_offset: i64,
    pub delivery_complete_count: i32,
    pub batches: Vec<StateBatch>,
}

/// What a request appends to the partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateRecord {
    Snapshot(StateKey, ShareState),
    Update(StateKey, StateUpdate),
    /// The share-partition's state is deleted (both record keys get a tombstone).
    Tombstone(StateKey),
}

/// A refused request: error code and message.
pub type StateError = kactor_protocol::errors::CodedError;

/// Kafka's answer (INVALID_REQUEST) to a write for a key without state: never initialized, or
/// deleted by the group coordinator. A share-partition leader reads it as "my copy is stale".
pub const WRITE_UNINITIALIZED: &str =
    "Write operation on uninitialized share partition not allowed.";

/// WriteShareGroupState for one share-partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteState {
    pub state_epoch: i32,
    pub leader_epoch: i32,
    /// -1: unchanged.
    pub start_offset: i64,
    pub delivery_complete_count: i32,
    pub batches: Vec<StateBatch>,
}

/// What ReadShareGroupState answers for one share-partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadState {
    pub state_epoch: i32,
    pub start_offset: i64,
    pub batches: Vec<StateBatch>,
}

/// What ReadShareGroupStateSummary answers for one share-partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateSummary {
    pub state_epoch: i32,
    pub leader_epoch: i32,
    pub start_offset: i64,
    pub delivery_complete_count: i32,
}

/// How many partitions a topic id has, if the topic exists (requests for unknown topics or
/// partitions are refused with UNKNOWN_TOPIC_OR_PARTITION).
pub trait TopicPartitions {
    fn partition_count(&self, topic_id: &Uuid) -> Option<i32>;
}

impl<F: Fn(&Uuid) -> Option<i32>> TopicPartitions for F {
    fn partition_count(&self, topic_id: &Uuid) -> Option<i32> {
        self(topic_id)
    }
}

#[derive(Debug, Clone)]
pub struct ShareCoordinatorShard {
    states: HashMap<StateKey, ShareState>,
    /// Highest leader / state epoch seen per key: older writers are fenced.
    leader_epochs: HashMap<StateKey, i32>,
    state_epochs: HashMap<StateKey, i32>,
    /// Updates since the last snapshot per key.
    update_counts: HashMap<StateKey, i32>,
    updates_per_snapshot: i32,
    /// The offset of each key's latest snapshot: every record before the lowest of them is
    /// superseded (Kafka's `ShareCoordinatorOffsetsManager`).
    snapshot_offsets: HashMap<StateKey, i64>,
    last_redundant: i64,
}

impl ShareCoordinatorShard {
    pub fn new(updates_per_snapshot: i32) -> Self {
        ShareCoordinatorShard {
            states: HashMap::new(),
            leader_epochs: HashMap::new(),
            state_epochs: HashMap::new(),
            update_counts: HashMap::new(),
            updates_per_snapshot: updates_per_snapshot.max(0),
            snapshot_offsets: HashMap::new(),
            last_redundant: i64::MAX,
        }
    }

    /// The offset below which the partition holds only superseded records (it can be deleted
    /// up to there), if any.
    pub fn last_redundant_offset(&self) -> Option<i64> {
        (self.last_redundant > 0 && self.last_redundant != i64::MAX).then_some(self.last_redundant)
    }

    fn track_snapshot(&mut self, key: &StateKey, offset: i64, deleted: bool) {
        self.last_redundant = self.last_redundant.min(offset);
        self.snapshot_offsets.insert(key.clone(), offset);
        if let Some(lowest) = self.snapshot_offsets.values().min() {
            self.last_redundant = *lowest;
        }
        if deleted {
            self.snapshot_offsets.remove(key);
        }
    }

    pub fn len(&self) -> usize {
        self.states.len()
    }

    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }

    pub fn state(&self, key: &StateKey) -> Option<&ShareState> {
        self.states.get(key)
    }

    /// Applies the record at `offset` of the partition (at load, and after each committed
    /// write).
    pub fn replay(&mut self, record: &StateRecord, offset: i64) {
        match record {
            StateRecord::Tombstone(key) => {
                self.track_snapshot(key, offset, true);
                self.states.remove(key);
                self.leader_epochs.remove(key);
                self.state_epochs.remove(key);
                self.update_counts.remove(key);
            }
            StateRecord::Snapshot(key, state) => {
                self.track_snapshot(key, offset, false);
                raise(&mut self.leader_epochs, key, state.leader_epoch);
                raise(&mut self.state_epochs, key, state.state_epoch);
                self.states.insert(key.clone(), state.clone());
                if self.update_counts.get(key).copied().unwrap_or(0) >= self.updates_per_snapshot {
                    self.update_counts.insert(key.clone(), 0);
                }
            }
            StateRecord::Update(key, update) => {
                raise(&mut self.leader_epochs, key, update.leader_epoch);
                let merged = match self.states.get(key) {
                    Some(so_far) => {
                        let start = if update.start_offset == -1 {
                            so_far.start_offset
                        } else {
                            update.start_offset
                        };
                        ShareState {
                            snapshot_epoch: so_far.snapshot_epoch,
                            state_epoch: so_far.state_epoch,
                            leader_epoch: if update.leader_epoch == -1 {
                                so_far.leader_epoch
                            } else {
                                update.leader_epoch
                            },
                            start_offset: start,
                            delivery_complete_count: update.delivery_complete_count,
                            create_timestamp: so_far.create_timestamp,
                            write_timestamp: so_far.write_timestamp,
                            batches: combine(&so_far.batches, &update.batches, start),
                        }
                    }
                    None => ShareState {
                        snapshot_epoch: update.snapshot_epoch,
                        state_epoch: 0,
                        leader_epoch: update.leader_epoch,
                        start_offset: update.start_offset,
                        delivery_complete_count: update.delivery_complete_count,
                        create_timestamp: 0,
                        write_timestamp: 0,
                        batches: update.batches.clone(),
                    },
                };
                self.states.insert(key.clone(), merged);
                *self.update_counts.entry(key.clone()).or_insert(0) += 1;
            }
        }
    }

    /// WriteShareGroupState: the record to append, or why not.
    pub fn write(
        &self,
        key: &StateKey,
        w: &WriteState,
        topics: &dyn TopicPartitions,
        now_ms: i64,
    ) -> Result<StateRecord, StateError> {
        check_partition(key)?;
        if w.leader_epoch < 0 {
            return Err(invalid("The leader epoch cannot be a negative number."));
        }
        if w.state_epoch < 0 {
            return Err(invalid("The state epoch cannot be a negative number."));
        }
        let Some(current) = self.states.get(key) else {
            return Err(invalid(WRITE_UNINITIALIZED));
        };
        self.check_leader_epoch(key, w.leader_epoch)?;
        if self
            .state_epochs
            .get(key)
            .is_some_and(|e| *e > w.state_epoch)
        {
            return Err(fenced_state_epoch());
        }
        check_topic(key, topics)?;
        Ok(self.state_record(key, current, w, w.leader_epoch, now_ms))
    }

    /// ReadShareGroupState: the state, and the record that moves the stored leader epoch to
    /// the reader's (a new share-partition leader announces itself by reading).
    pub fn read(
        &self,
        key: &StateKey,
        leader_epoch: i32,
        topics: &dyn TopicPartitions,
        now_ms: i64,
    ) -> Result<(ReadState, Option<StateRecord>), StateError> {
        check_partition(key)?;
        if leader_epoch < 0 {
            return Err(invalid("The leader epoch cannot be a negative number."));
        }
        let Some(current) = self.states.get(key) else {
            return Err(invalid(
                "Read operation on uninitialized share partition not allowed.",
            ));
        };
        self.check_leader_epoch(key, leader_epoch)?;
        check_topic(key, topics)?;
        let read = ReadState {
            state_epoch: current.state_epoch,
            start_offset: current.start_offset,
            batches: current.batches.clone(),
        };
        if self.leader_epochs.get(key) == Some(&leader_epoch) {
            return Ok((read, None));
        }
        let bump = WriteState {
            state_epoch: current.state_epoch,
            leader_epoch,
            start_offset: current.start_offset,
            delivery_complete_count: current.delivery_complete_count,
            batches: Vec::new(),
        };
        let record = self.state_record(key, current, &bump, leader_epoch, now_ms);
        Ok((read, Some(record)))
    }

    /// ReadShareGroupStateSummary: an unknown share-partition reads as all -1 (not an error).
    pub fn summary(
        &self,
        key: &StateKey,
        topics: &dyn TopicPartitions,
    ) -> Result<StateSummary, StateError> {
        check_partition(key)?;
        check_topic(key, topics)?;
        Ok(match self.states.get(key) {
            Some(s) => StateSummary {
                state_epoch: s.state_epoch,
                leader_epoch: s.leader_epoch,
                start_offset: s.start_offset,
                delivery_complete_count: s.delivery_complete_count,
            },
            None => StateSummary {
                state_epoch: 0,
                leader_epoch: 0,
                start_offset: -1,
                delivery_complete_count: -1,
            },
        })
    }

    /// InitializeShareGroupState: a fresh snapshot (empty ranges) at `state_epoch`.
    pub fn initialize(
        &self,
        key: &StateKey,
        state_epoch: i32,
        start_offset: i64,
        topics: &dyn TopicPartitions,
        now_ms: i64,
    ) -> Result<StateRecord, StateError> {
        check_partition(key)?;
        if state_epoch < 0 {
            return Err(invalid("The state epoch cannot be a negative number."));
        }
        if self.state_epochs.get(key).is_some_and(|e| *e > state_epoch) {
            return Err(fenced_state_epoch());
        }
        check_topic(key, topics)?;
        let snapshot_epoch = self.states.get(key).map_or(0, |s| s.snapshot_epoch + 1);
        Ok(StateRecord::Snapshot(
            key.clone(),
            ShareState {
                snapshot_epoch,
                state_epoch,
                leader_epoch: 0,
                start_offset,
                delivery_complete_count: if start_offset == -1 { -1 } else { 0 },
                create_timestamp: now_ms,
                write_timestamp: now_ms,
                batches: Vec::new(),
            },
        ))
    }

    /// DeleteShareGroupState: a tombstone if there is state (deleting none is not an error).
    pub fn delete(
        &self,
        key: &StateKey,
        topics: &dyn TopicPartitions,
    ) -> Result<Option<StateRecord>, StateError> {
        check_partition(key)?;
        check_topic(key, topics)?;
        Ok(self
            .states
            .contains_key(key)
            .then(|| StateRecord::Tombstone(key.clone())))
    }

    /// Fresh snapshots of the keys last snapshotted `interval_ms` or more before `now_ms`
    /// (Kafka's cold-partition snapshots): a key nobody writes would otherwise keep its old
    /// snapshot, and every record after it, from being pruned. Ordered by key.
    pub fn cold_snapshots(&self, now_ms: i64, interval_ms: i64) -> Vec<StateRecord> {
        let mut cold: Vec<(&StateKey, &ShareState)> = self
            .states
            .iter()
            .filter(|(_, s)| now_ms - s.write_timestamp >= interval_ms)
            .collect();
        cold.sort_by(|a, b| a.0.cmp(b.0));
        cold.into_iter()
            .map(|(k, s)| {
                StateRecord::Snapshot(
                    k.clone(),
                    ShareState {
                        snapshot_epoch: s.snapshot_epoch + 1,
                        write_timestamp: now_ms,
                        ..s.clone()
                    },
                )
            })
            .collect()
    }

    /// Tombstones for the state of share-partitions of deleted topics.
    pub fn deleted_topics(&self, exists: impl Fn(&Uuid) -> bool) -> Vec<StateRecord> {
        let mut keys: Vec<&StateKey> = self
            .states
            .keys()
            .filter(|k| !exists(&k.topic_id))
            .collect();
        keys.sort();
        keys.into_iter()
            .map(|k| StateRecord::Tombstone(k.clone()))
            .collect()
    }

    fn check_leader_epoch(&self, key: &StateKey, leader_epoch: i32) -> Result<(), StateError> {
        if self
            .leader_epochs
            .get(key)
            .is_some_and(|e| *e > leader_epoch)
        {
            return Err(kactor_protocol::errors::with_default_message(
                FENCED_LEADER_EPOCH,
            ));
        }
        Ok(())
    }

    /// A write as a ShareUpdate, or as a new snapshot once enough updates piled up.
    fn state_record(
        &self,
        key: &StateKey,
        current: &ShareState,
        w: &WriteState,
        leader_epoch: i32,
        now_ms: i64,
    ) -> StateRecord {
        let start = w.start_offset.max(current.start_offset);
        let complete = if w.start_offset == current.start_offset {
            w.delivery_complete_count
                .max(current.delivery_complete_count)
        } else if w.start_offset < current.start_offset {
            current.delivery_complete_count
        } else {
            w.delivery_complete_count
        };
        if self.update_counts.get(key).copied().unwrap_or(0) >= self.updates_per_snapshot {
            StateRecord::Snapshot(
                key.clone(),
                ShareState {
                    snapshot_epoch: current.snapshot_epoch + 1,
                    state_epoch: current.state_epoch,
                    leader_epoch,
                    start_offset: start,
                    delivery_complete_count: complete,
                    create_timestamp: now_ms,
                    write_timestamp: now_ms,
                    batches: combine(&current.batches, &w.batches, start),
                },
            )
        } else {
            StateRecord::Update(
                key.clone(),
                StateUpdate {
                    snapshot_epoch: current.snapshot_epoch,
                    leader_epoch,
                    start_offset: start,
                    delivery_complete_count: complete,
                    batches: combine(&[], &w.batches, start),
                },
            )
        }
    }
}

fn raise(map: &mut HashMap<StateKey, i32>, key: &StateKey, epoch: i32) {
    let e = map.entry(key.clone()).or_insert(epoch);
    if *e < epoch {
        *e = epoch;
    }
}

fn invalid(message: &str) -> StateError {
    (INVALID_REQUEST, message.to_string())
}

fn fenced_state_epoch() -> StateError {
    kactor_protocol::errors::with_default_message(FENCED_STATE_EPOCH)
}

fn check_partition(key: &StateKey) -> Result<(), StateError> {
    if key.partition < 0 {
        return Err(invalid("The partition id cannot be a negative number."));
    }
    Ok(())
}

fn check_topic(key: &StateKey, topics: &dyn TopicPartitions) -> Result<(), StateError> {
    match topics.partition_count(&key.topic_id) {
        Some(n) if n > key.partition => Ok(()),
        _ => Err(kactor_protocol::errors::with_default_message(
            UNKNOWN_TOPIC_OR_PARTITION,
        )),
    }
}

/// Merges `new` ranges over `so_far`, dropping what lies before `start_offset` (-1: keep
/// all). Where ranges overlap, the one delivered more often wins, then the later state
/// (Available < Acknowledged < Archived): states only move forward, so that is the newer
/// one whichever write arrives first. Adjacent equal ranges are coalesced.
pub fn combine(so_far: &[StateBatch], new: &[StateBatch], start_offset: i64) -> Vec<StateBatch> {
    let pruned: Vec<StateBatch> = so_far
        .iter()
        .chain(new.iter())
        .filter(|b| start_offset == -1 || b.last_offset >= start_offset)
        .map(|b| StateBatch {
            first_offset: if start_offset != -1 {
                b.first_offset.max(start_offset)
            } else {
                b.first_offset
            },
            ..*b
        })
        .filter(|b| b.first_offset <= b.last_offset)
        .collect();
    if pruned.len() <= 1 {
        return pruned;
    }
    // A sweep over range starts and ends, keeping the covering ranges' priorities counted.
    let mut events: Vec<(i64, bool, (i16, i8))> = Vec::with_capacity(pruned.len() * 2);
    for b in &pruned {
        let p = (b.delivery_count, b.delivery_state);
        events.push((b.first_offset, true, p));
        events.push((b.last_offset + 1, false, p));
    }
    // Ends before begins at one offset, as ranges are inclusive.
    events.sort_by_key(|e| (e.0, e.1));
    let mut active: BTreeMap<(i16, i8), usize> = BTreeMap::new();
    let mut out: Vec<StateBatch> = Vec::new();
    let mut open: Option<(i64, (i16, i8))> = None;
    let mut i = 0;
    while i < events.len() {
        let at = events[i].0;
        if let Some((from, (count, state))) = open {
            if at > from {
                push_coalesced(&mut out, from, at - 1, state, count);
            }
        }
        while i < events.len() && events[i].0 == at {
            let (_, begin, p) = events[i];
            if begin {
                *active.entry(p).or_insert(0) += 1;
            } else if let Some(n) = active.get_mut(&p) {
                *n -= 1;
                if *n == 0 {
                    active.remove(&p);
                }
            }
            i += 1;
        }
        open = active.keys().next_back().map(|p| (at, *p));
    }
    out
}

fn push_coalesced(out: &mut Vec<StateBatch>, from: i64, to: i64, state: i8, count: i16) {
    if let Some(tail) = out.last_mut() {
        if tail.last_offset + 1 == from
            && tail.delivery_state == state
            && tail.delivery_count == count
        {
            tail.last_offset = to;
            return;
        }
    }
    out.push(StateBatch {
        first_offset: from,
        last_offset: to,
        delivery_state: state,
        delivery_count: count,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(first: i64, last: i64, state: i8, count: i16) -> StateBatch {
        StateBatch {
            first_offset: first,
            last_offset: last,
            delivery_state: state,
            delivery_count: count,
        }
    }

    fn topics(id: &Uuid) -> Option<i32> {
        (*id == Uuid([1; 16])).then_some(3)
    }

    fn key() -> StateKey {
        StateKey::new("g", Uuid([1; 16]), 0)
    }

    #[test]
    fn combine_overrides_by_count_then_state_and_coalesces() {
        // 0-9 delivered once; 3-5 then acknowledged, 7 released and delivered again.
        let so_far = [b(0, 9, STATE_AVAILABLE, 1)];
        let new = [b(3, 5, STATE_ACKNOWLEDGED, 1), b(7, 7, STATE_AVAILABLE, 2)];
        assert_eq!(
            combine(&so_far, &new, -1),
            vec![
                b(0, 2, STATE_AVAILABLE, 1),
                b(3, 5, STATE_ACKNOWLEDGED, 1),
                b(6, 6, STATE_AVAILABLE, 1),
                b(7, 7, STATE_AVAILABLE, 2),
                b(8, 9, STATE_AVAILABLE, 1),
            ]
        );
        // An older write arriving later does not undo a newer state.
        assert_eq!(
            combine(
                &[b(3, 5, STATE_ACKNOWLEDGED, 1)],
                &[b(3, 5, STATE_AVAILABLE, 1)],
                -1
            ),
            vec![b(3, 5, STATE_ACKNOWLEDGED, 1)]
        );
        // The start offset cuts and drops ranges; equal neighbours merge.
        assert_eq!(
            combine(
                &[
                    b(0, 4, STATE_ACKNOWLEDGED, 1),
                    b(5, 9, STATE_ACKNOWLEDGED, 1)
                ],
                &[],
                3
            ),
            vec![b(3, 9, STATE_ACKNOWLEDGED, 1)]
        );
        assert!(combine(&[b(0, 4, STATE_ARCHIVED, 5)], &[], 5).is_empty());
    }

    #[test]
    fn write_before_initialize_is_refused_then_updates_merge_and_snapshot() {
        let mut shard = ShareCoordinatorShard::new(2);
        let k = key();
        let w = |start: i64, batches: Vec<StateBatch>| WriteState {
            state_epoch: 0,
            leader_epoch: 1,
            start_offset: start,
            delivery_complete_count: -1,
            batches,
        };
        assert_eq!(
            shard.write(&k, &w(0, vec![]), &topics, 1).unwrap_err().0,
            INVALID_REQUEST
        );
        let init = shard.initialize(&k, 0, -1, &topics, 1).unwrap();
        shard.replay(&init, 1);
        let (read, bump) = shard.read(&k, 1, &topics, 2).unwrap();
        assert_eq!((read.start_offset, read.state_epoch), (-1, 0));
        shard.replay(&bump.expect("leader epoch 0 -> 1 is written"), 2);
        assert!(shard.read(&k, 1, &topics, 2).unwrap().1.is_none());

        let r = shard
            .write(&k, &w(0, vec![b(0, 9, STATE_AVAILABLE, 1)]), &topics, 3)
            .unwrap();
        assert!(matches!(r, StateRecord::Update(..)), "{r:?}");
        shard.replay(&r, 3);
        // The leader-epoch bump and that write are two updates since the snapshot: the next
        // write is a snapshot holding the merged state.
        let r = shard
            .write(&k, &w(5, vec![b(5, 6, STATE_ACKNOWLEDGED, 1)]), &topics, 4)
            .unwrap();
        let StateRecord::Snapshot(_, ref s) = r else {
            panic!("{r:?}")
        };
        assert_eq!(s.start_offset, 5);
        assert_eq!(
            s.batches,
            vec![b(5, 6, STATE_ACKNOWLEDGED, 1), b(7, 9, STATE_AVAILABLE, 1)]
        );
        shard.replay(&r, 4);
        assert_eq!(shard.state(&k).unwrap().snapshot_epoch, 1);
        let r = shard
            .write(&k, &w(-1, vec![b(9, 9, STATE_ARCHIVED, 1)]), &topics, 5)
            .unwrap();
        assert!(matches!(r, StateRecord::Update(..)), "{r:?}");
        shard.replay(&r, 5);
        assert_eq!(
            shard.state(&k).unwrap().batches,
            vec![
                b(5, 6, STATE_ACKNOWLEDGED, 1),
                b(7, 8, STATE_AVAILABLE, 1),
                b(9, 9, STATE_ARCHIVED, 1)
            ]
        );
    }

    #[test]
    fn older_epochs_unknown_topics_and_deletes() {
        let mut shard = ShareCoordinatorShard::new(500);
        let k = key();
        shard.replay(&shard.initialize(&k, 3, 10, &topics, 1).unwrap(), 6);
        shard.replay(&shard.read(&k, 5, &topics, 1).unwrap().1.unwrap(), 7);
        assert_eq!(
            shard.read(&k, 4, &topics, 1).unwrap_err().0,
            FENCED_LEADER_EPOCH
        );
        let w = WriteState {
            state_epoch: 2,
            leader_epoch: 5,
            start_offset: -1,
            delivery_complete_count: -1,
            batches: vec![],
        };
        assert_eq!(
            shard.write(&k, &w, &topics, 1).unwrap_err().0,
            FENCED_STATE_EPOCH
        );
        assert_eq!(
            shard.initialize(&k, 2, 0, &topics, 1).unwrap_err().0,
            FENCED_STATE_EPOCH
        );
        let other = StateKey::new("g", Uuid([1; 16]), 3);
        assert_eq!(
            shard.summary(&other, &topics).unwrap_err().0,
            UNKNOWN_TOPIC_OR_PARTITION
        );
        let fresh = StateKey::new("h", Uuid([1; 16]), 1);
        assert_eq!(shard.summary(&fresh, &topics).unwrap().start_offset, -1);
        assert_eq!(shard.summary(&k, &topics).unwrap().start_offset, 10);
        assert!(shard.delete(&fresh, &topics).unwrap().is_none());
        let t = shard.delete(&k, &topics).unwrap().unwrap();
        shard.replay(&t, 8);
        assert!(shard.is_empty());
        assert_eq!(
            shard.read(&k, 6, &topics, 1).unwrap_err().0,
            INVALID_REQUEST
        );
    }

    #[test]
    fn records_before_every_keys_latest_snapshot_are_redundant() {
        let mut shard = ShareCoordinatorShard::new(0);
        let (a, b) = (key(), StateKey::new("g", Uuid([1; 16]), 1));
        assert_eq!(shard.last_redundant_offset(), None);
        shard.replay(&shard.initialize(&a, 0, 0, &topics, 1).unwrap(), 0);
        shard.replay(&shard.initialize(&b, 0, 0, &topics, 1).unwrap(), 1);
        // Offset 0 is a's latest snapshot: nothing before it to drop.
        assert_eq!(shard.last_redundant_offset(), None);
        let w = WriteState {
            state_epoch: 0,
            leader_epoch: 0,
            start_offset: 3,
            delivery_complete_count: -1,
            batches: vec![],
        };
        // With no updates allowed between snapshots every write is a snapshot.
        let r = shard.write(&a, &w, &topics, 2).unwrap();
        assert!(matches!(r, StateRecord::Snapshot(..)));
        shard.replay(&r, 2);
        assert_eq!(shard.last_redundant_offset(), Some(1), "b's snapshot at 1");
        shard.replay(&shard.write(&b, &w, &topics, 3).unwrap(), 3);
        assert_eq!(shard.last_redundant_offset(), Some(2));
        // A deleted key no longer holds records back.
        shard.replay(&StateRecord::Tombstone(a.clone()), 4);
        shard.replay(&shard.write(&b, &w, &topics, 5).unwrap(), 5);
        assert_eq!(shard.last_redundant_offset(), Some(5));
    }

    #[test]
    fn cold_keys_get_fresh_snapshots_that_release_pruning() {
        let mut shard = ShareCoordinatorShard::new(500);
        let (a, b) = (key(), StateKey::new("g", Uuid([1; 16]), 1));
        shard.replay(&shard.initialize(&a, 0, 0, &topics, 1_000).unwrap(), 0);
        shard.replay(&shard.initialize(&b, 0, 0, &topics, 5_000).unwrap(), 1);
        // Only a was last snapshotted 10 s or more before 11 s.
        let cold = shard.cold_snapshots(11_000, 10_000);
        assert_eq!(cold.len(), 1);
        let StateRecord::Snapshot(ref k, ref s) = cold[0] else {
            panic!("{cold:?}")
        };
        assert_eq!((k, s.snapshot_epoch, s.write_timestamp), (&a, 1, 11_000));
        assert_eq!(s.start_offset, 0);
        shard.replay(&cold[0], 2);
        assert_eq!(
            shard.last_redundant_offset(),
            Some(1),
            "b's snapshot is the oldest now"
        );
    }
}
