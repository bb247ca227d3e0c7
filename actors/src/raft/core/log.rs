//! The core's own view of the `__cluster_metadata-0` log: where it starts and ends, how far it
//! is durable, the epoch boundaries (Kafka's `LeaderEpochFileCache`), the snapshots, and the
//! history of voter sets and kraft.version read from control records (Kafka's
//! `KRaftControlRecordStateMachine`). With it the core answers diverging-epoch and snapshot
//! questions (`RaftLog.validateOffsetAndEpoch`) without asking the shell.

use std::collections::BTreeMap;

use super::types::{OffsetAndEpoch, VoterSet, BOOTSTRAP_SNAPSHOT_ID};

/// Kafka's `ValidOffsetAndEpoch`: what a leader tells a fetcher about its position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValidOffsetAndEpoch {
    Valid,
    /// The fetcher must truncate to this end offset of this epoch.
    Diverging(OffsetAndEpoch),
    /// The fetcher must load this snapshot first.
    Snapshot(OffsetAndEpoch),
}

/// One epoch boundary: `epoch` starts at `start_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

/// A snapshot on disk: its id (end offset, epoch) and size in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotInfo {
    pub id: OffsetAndEpoch,
    pub size: u64,
}

/// What the shell knows about the log at start-up (or after installing a snapshot).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogState {
    pub start_offset: i64,
    pub end_offset: i64,
    /// Epoch boundaries, ascending (the leader-epoch-checkpoint plus what recovery found).
    pub epochs: Vec<EpochEntry>,
    /// Snapshots on disk, any order.
    pub snapshots: Vec<SnapshotInfo>,
    /// The voter set in effect at the end of the latest snapshot, if it holds a VotersRecord.
    pub snapshot_voters: Option<VoterSet>,
    /// The kraft.version in effect at the end of the latest snapshot.
    pub snapshot_kraft_version: Option<i16>,
    /// VotersRecords in the log after the snapshot, by offset.
    pub voters_records: Vec<(i64, VoterSet)>,
    /// KRaftVersionRecords in the log after the snapshot, by offset.
    pub kraft_version_records: Vec<(i64, i16)>,
}

#[derive(Debug, Clone, Default)]
pub struct LogView {
    pub start_offset: i64,
    pub end_offset: i64,
    /// Durable end (exclusive): what a crash keeps.
    pub flushed_end: i64,
    epochs: Vec<EpochEntry>,
    snapshots: BTreeMap<OffsetAndEpoch, u64>,
    /// (offset of the record, voter set); the entry at `i64::MIN` is the static or snapshot
    /// set (Kafka's `VoterSetHistory` with its "last entry" semantics).
    voters: BTreeMap<i64, VoterSet>,
    kraft_versions: BTreeMap<i64, i16>,
}

impl LogView {
    pub fn from_state(s: &LogState, static_voters: Option<&VoterSet>) -> LogView {
        let mut voters = BTreeMap::new();
        if let Some(v) = s.snapshot_voters.clone().or_else(|| static_voters.cloned()) {
            voters.insert(i64::MIN, v);
        }
        for (o, v) in &s.voters_records {
            voters.insert(*o, v.clone());
        }
        let mut kraft_versions = BTreeMap::new();
        kraft_versions.insert(i64::MIN, s.snapshot_kraft_version.unwrap_or(0));
        for (o, v) in &s.kraft_version_records {
            kraft_versions.insert(*o, *v);
        }
        let mut epochs = s.epochs.clone();
        epochs.sort_by_key(|e| (e.start_offset, e.epoch));
        LogView {
            start_offset: s.start_offset,
            end_offset: s.end_offset,
            flushed_end: s.end_offset,
            epochs,
            snapshots: s.snapshots.iter().map(|i| (i.id, i.size)).collect(),
            voters,
            kraft_versions,
        }
    }

    pub fn epochs(&self) -> &[EpochEntry] {
        &self.epochs
    }

    /// The epoch of the last entry (Kafka's `lastFetchedEpoch`): the log's latest epoch, else
    /// the latest snapshot's epoch, else 0.
    pub fn last_fetched_epoch(&self) -> i32 {
        match self.epochs.last() {
            Some(e) => e.epoch,
            None => self.latest_snapshot().map_or(0, |s| s.epoch),
        }
    }

    /// Kafka's `endOffset()` as an `OffsetAndEpoch` (what votes compare).
    pub fn end_offset_and_epoch(&self) -> OffsetAndEpoch {
        OffsetAndEpoch::new(self.end_offset, self.last_fetched_epoch())
    }

    pub fn latest_snapshot(&self) -> Option<OffsetAndEpoch> {
        self.snapshots.keys().next_back().copied()
    }
    pub fn earliest_snapshot(&self) -> Option<OffsetAndEpoch> {
        self.snapshots.keys().next().copied()
    }
    pub fn snapshot_size(&self, id: OffsetAndEpoch) -> Option<u64> {
        self.snapshots.get(&id).copied()
    }
    pub fn add_snapshot(&mut self, id: OffsetAndEpoch, size: u64) {
        self.snapshots.insert(id, size);
    }
    pub fn remove_snapshot(&mut self, id: OffsetAndEpoch) {
        self.snapshots.remove(&id);
    }

    /// Kafka's `LeaderEpochFileCache.endOffsetFor`: `None` for UNDEFINED.
    fn cache_end_offset_for(&self, epoch: i32) -> Option<OffsetAndEpoch> {
        let latest = self.epochs.last()?;
        if latest.epoch == epoch {
            return Some(OffsetAndEpoch::new(self.end_offset, epoch));
        }
        let higher = self.epochs.iter().find(|e| e.epoch > epoch)?;
        match self.epochs.iter().rev().find(|e| e.epoch <= epoch) {
            Some(floor) => Some(OffsetAndEpoch::new(higher.start_offset, floor.epoch)),
            None => Some(OffsetAndEpoch::new(higher.start_offset, epoch)),
        }
    }

    /// Kafka's `KafkaRaftLog.endOffsetForEpoch`.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> OffsetAndEpoch {
        match self.cache_end_offset_for(epoch) {
            Some(found) => match self.earliest_snapshot() {
                Some(s) if found.offset == s.offset && found.epoch == epoch => s,
                _ => found,
            },
            None => self.end_offset_and_epoch(),
        }
    }

    /// Kafka's `RaftLog.validateOffsetAndEpoch`: is (`offset`, `epoch`) a prefix of our log?
    pub fn validate_offset_and_epoch(&self, offset: i64, epoch: i32) -> ValidOffsetAndEpoch {
        if self.start_offset == 0 && offset == 0 {
            return ValidOffsetAndEpoch::Valid;
        }
        if let Some(earliest) = self.earliest_snapshot() {
            if offset < self.start_offset
                || (offset == self.start_offset && epoch != earliest.epoch)
                || epoch < earliest.epoch
            {
                let latest = self.latest_snapshot().unwrap_or(earliest);
                return ValidOffsetAndEpoch::Snapshot(latest);
            }
        }
        let end = self.end_offset_for_epoch(epoch);
        if end.epoch != epoch || end.offset < offset {
            return ValidOffsetAndEpoch::Diverging(end);
        }
        ValidOffsetAndEpoch::Valid
    }

    /// Kafka's `RaftLog.truncateToEndOffset`: the offset a follower truncates to when the
    /// leader says its log diverges at `end`.
    pub fn truncation_offset(&self, end: OffsetAndEpoch) -> i64 {
        if end.epoch == 0 {
            return end.offset.min(self.end_offset);
        }
        let local = self.end_offset_for_epoch(end.epoch);
        if local.epoch == end.epoch {
            local.offset.min(end.offset)
        } else {
            local.offset
        }
    }

    /// Records that a batch of `epoch` was appended at `base_offset..=last_offset`.
    pub fn append(&mut self, base_offset: i64, last_offset: i64, epoch: i32) {
        debug_assert_eq!(base_offset, self.end_offset);
        if self.epochs.last().is_none_or(|e| e.epoch < epoch) {
            self.epochs.push(EpochEntry {
                epoch,
                start_offset: base_offset,
            });
        }
        self.end_offset = last_offset + 1;
    }

    /// Drops everything at and above `offset` (a follower's truncation).
    pub fn truncate_to(&mut self, offset: i64) {
        if offset >= self.end_offset {
            return;
        }
        self.end_offset = offset.max(self.start_offset);
        self.flushed_end = self.flushed_end.min(self.end_offset);
        self.epochs.retain(|e| e.start_offset < offset);
        self.voters.retain(|o, _| *o == i64::MIN || *o < offset);
        self.kraft_versions
            .retain(|o, _| *o == i64::MIN || *o < offset);
    }

    /// The log was replaced by snapshot `id` (Kafka's `truncateToLatestSnapshot`).
    pub fn reset_to_snapshot(
        &mut self,
        id: OffsetAndEpoch,
        voters: Option<VoterSet>,
        kraft_version: Option<i16>,
    ) {
        self.start_offset = id.offset;
        self.end_offset = id.offset;
        self.flushed_end = id.offset;
        self.epochs.clear();
        self.snapshots.retain(|s, _| *s >= id);
        let base_voters = voters.or_else(|| self.voter_set_at(id.offset - 1).cloned());
        self.voters.clear();
        if let Some(v) = base_voters {
            self.voters.insert(i64::MIN, v);
        }
        let base_kv = kraft_version.unwrap_or_else(|| self.kraft_version_at(id.offset - 1));
        self.kraft_versions.clear();
        self.kraft_versions.insert(i64::MIN, base_kv);
    }

    /// The log start moved up to `offset` (segments below a snapshot deleted). Snapshots
    /// older than the log start go too, as Kafka's cleaner deletes them: the earliest snapshot
    /// is then the one at the log start, which `validate_offset_and_epoch` relies on.
    pub fn advance_start(&mut self, offset: i64) {
        if offset > self.start_offset && offset <= self.end_offset {
            self.start_offset = offset;
            self.snapshots.retain(|s, _| s.offset >= offset);
            // The epoch cache's truncateFromStart: the entry covering the new start moves up.
            if let Some(covering) = self
                .epochs
                .iter()
                .rev()
                .find(|e| e.start_offset <= offset)
                .copied()
            {
                self.epochs.retain(|e| e.start_offset > offset);
                self.epochs.insert(
                    0,
                    EpochEntry {
                        epoch: covering.epoch,
                        start_offset: offset,
                    },
                );
            }
        }
    }

    pub fn record_voters(&mut self, offset: i64, voters: VoterSet) {
        self.voters.insert(offset, voters);
    }
    pub fn record_kraft_version(&mut self, offset: i64, version: i16) {
        self.kraft_versions.insert(offset, version);
    }

    /// The latest voter set in the log (uncommitted included), as Kafka's `lastVoterSet`.
    pub fn last_voter_set(&self) -> VoterSet {
        self.voters
            .values()
            .next_back()
            .cloned()
            .unwrap_or_default()
    }
    /// The offset of the latest VotersRecord, if one is in the log (`lastVoterSetOffset`).
    pub fn last_voter_set_offset(&self) -> Option<i64> {
        self.voters
            .keys()
            .next_back()
            .copied()
            .filter(|o| *o != i64::MIN)
    }
    pub fn voter_set_at(&self, offset: i64) -> Option<&VoterSet> {
        self.voters.range(..=offset).next_back().map(|(_, v)| v)
    }
    pub fn last_kraft_version(&self) -> i16 {
        self.kraft_versions
            .values()
            .next_back()
            .copied()
            .unwrap_or(0)
    }
    pub fn kraft_version_at(&self, offset: i64) -> i16 {
        self.kraft_versions
            .range(..=offset)
            .next_back()
            .map_or(0, |(_, v)| *v)
    }

    /// Whether `id` is usable as a snapshot to serve (not the bootstrap checkpoint).
    pub fn is_servable_snapshot(&self, id: OffsetAndEpoch) -> bool {
        id != BOOTSTRAP_SNAPSHOT_ID && self.snapshots.contains_key(&id)
    }
}
