//! Replication in the partition core: the leader's view of its followers (Kafka's `Replica`
//! states, `Partition.updateFollowerFetchState`, `maybeExpandIsr`, `maybeShrinkIsr` and the
//! pending-ISR state while an AlterPartition is in flight), and the follower's side (Kafka's
//! `Partition.appendRecordsToFollowerOrFutureReplica` and the fetcher's truncation rules).
//! Pure: the caller passes the clock and carries ISR changes to the controller.

use bytes::Bytes;
use kactor_protocol::records::{batches, RecordBatch};

use super::log::AppendedBatches;
use super::{Partition, PartitionError, PartitionLog, Role, UNDEFINED_EPOCH};
use crate::producer::state::ProducerBatch;

/// What the leader knows of one follower (Kafka's `ReplicaState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteReplica {
    /// The offset the follower fetched from last: it holds everything below. -1: unknown.
    pub log_end_offset: i64,
    /// The follower's log start offset as its last fetch said (Fetch v5+); -1: unknown.
    pub log_start_offset: i64,
    /// When the follower was last at the leader's log end (ISR shrink reads this).
    pub last_caught_up_time_ms: i64,
    /// The leader's log end offset and the time at the follower's previous fetch.
    pub last_fetch_leader_log_end_offset: i64,
    pub last_fetch_time_ms: i64,
    /// The broker epoch the follower fetched with last (KIP-903); -1: unknown, or a follower
    /// that does not send it.
    pub broker_epoch: i64,
}

impl RemoteReplica {
    fn reset(in_sync: bool, now_ms: i64) -> Self {
        RemoteReplica {
            log_end_offset: -1,
            log_start_offset: -1,
            // Kafka gives ISR members a fresh caught-up time on a new leadership, so that a
            // new leader does not drop them before they could fetch.
            last_caught_up_time_ms: if in_sync { now_ms } else { 0 },
            last_fetch_leader_log_end_offset: -1,
            last_fetch_time_ms: 0,
            broker_epoch: -1,
        }
    }

    /// Kafka's `ReplicaState.isCaughtUp`.
    fn is_caught_up(&self, leader_end_offset: i64, now_ms: i64, max_lag_ms: i64) -> bool {
        self.log_end_offset == leader_end_offset
            || now_ms - self.last_caught_up_time_ms <= max_lag_ms
    }
}

/// An ISR change for the controller (one partition of an AlterPartition request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrChange {
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub new_isr: Vec<i32>,
    /// For each member of `new_isr`, the broker epoch it last fetched with (KIP-903), -1 where
    /// unknown and for this leader (whose own epoch the request carries from the metadata).
    /// The controller refuses a member whose broker has registered again since: the fetch
    /// that made it look caught up came from a process that is gone.
    pub broker_epochs: Vec<i64>,
}

/// The controller's answer to an [`IsrChange`]: the partition's state as it committed it, or an
/// error code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IsrChangeOutcome {
    Committed {
        leader_epoch: i32,
        partition_epoch: i32,
        isr: Vec<i32>,
    },
    Failed(i16),
}

/// Where a follower stands, for its fetcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerPosition {
    pub log_end_offset: i64,
    pub log_start_offset: i64,
    /// The epoch of the last batch in the log (the next fetch's `last_fetched_epoch`).
    pub last_fetched_epoch: i32,
    pub high_watermark: i64,
    pub leader_epoch: i32,
}

impl<L: PartitionLog> Partition<L> {
    /// The ISR the high watermark must wait for: the committed one plus members a pending
    /// expansion adds (Kafka's `maximalIsr`); a pending shrink still waits for everyone.
    pub(super) fn maximal_isr(&self) -> Vec<i32> {
        let mut isr = self.isr.clone();
        if let Some(pending) = &self.pending_isr {
            for id in &pending.new_isr {
                if !isr.contains(id) {
                    isr.push(*id);
                }
            }
        }
        isr
    }

    /// New leadership (or a new leader epoch): every follower's state starts over.
    pub(super) fn reset_remote_replicas(&mut self, now_ms: i64) {
        let isr = self.isr.clone();
        self.remote = self
            .replicas
            .iter()
            .filter(|id| **id != self.local_broker_id)
            .map(|id| (*id, RemoteReplica::reset(isr.contains(id), now_ms)))
            .collect();
    }

    pub fn remote_replica(&self, id: i32) -> Option<&RemoteReplica> {
        self.remote.get(&id)
    }

    /// The ISR change waiting for the controller, if any.
    pub fn pending_isr(&self) -> Option<&IsrChange> {
        self.pending_isr.as_ref()
    }

    /// A follower fetched from `fetch_offset` while the leader's log ended at
    /// `leader_end_offset` (Kafka's `updateFollowerFetchState`). Returns an ISR expansion to
    /// send when the follower has caught up, is not in the ISR and `isr_eligible` (its broker
    /// is unfenced and not shutting down, as the caller read the metadata). `broker_epoch` is
    /// the one the follower fetched with (-1 if it did not say), `log_start_offset` its own
    /// log start (-1 likewise).
    #[allow(clippy::too_many_arguments)] // One follower fetch's facts, each a plain number.
    pub fn record_follower_fetch(
        &mut self,
        replica_id: i32,
        fetch_offset: i64,
        leader_end_offset: i64,
        now_ms: i64,
        isr_eligible: bool,
        broker_epoch: i64,
        log_start_offset: i64,
    ) -> Option<IsrChange> {
        if self.role != Role::Leader {
            return None;
        }
        let state = self.remote.get_mut(&replica_id)?;
        if fetch_offset >= leader_end_offset {
            state.last_caught_up_time_ms = state.last_caught_up_time_ms.max(now_ms);
        } else if fetch_offset >= state.last_fetch_leader_log_end_offset {
            state.last_caught_up_time_ms =
                state.last_caught_up_time_ms.max(state.last_fetch_time_ms);
        }
        state.log_end_offset = fetch_offset;
        state.log_start_offset = log_start_offset;
        state.last_fetch_leader_log_end_offset = leader_end_offset;
        state.last_fetch_time_ms = now_ms;
        state.broker_epoch = broker_epoch;
        if self.maybe_increment_high_watermark() {
            self.hw_moved_by_fetch = true;
        }
        if !isr_eligible {
            return None;
        }
        self.maybe_expand_isr(replica_id)
    }

    /// KIP-392: the follower a consumer should fetch from instead of this leader, if
    /// `client`'s rack has one (Kafka's `ReplicaManager.findPreferredReadReplica`). Only
    /// in-sync followers whose log holds the fetch offset are offered: a lagging one could
    /// keep the consumer behind indefinitely.
    pub(super) fn preferred_read_replica(
        &self,
        p: &super::ReadParams,
        client: &super::read_replica::ClientRack,
    ) -> Option<i32> {
        if self.role != Role::Leader || p.replica_id >= 0 {
            return None;
        }
        let candidates = self
            .remote
            .iter()
            .filter(|(id, s)| {
                self.isr.contains(id)
                    && s.log_end_offset >= p.fetch_offset
                    && s.log_start_offset <= p.fetch_offset
            })
            .map(|(&broker, s)| super::read_replica::Candidate {
                broker,
                log_end_offset: s.log_end_offset,
                last_caught_up_time_ms: s.last_caught_up_time_ms,
            });
        super::read_replica::select_rack_aware(client, self.local_broker_id, candidates)
    }

    /// Whether the last follower fetch moved the high watermark (taken by the actor, which tells
    /// the purgatory).
    pub fn take_hw_moved_by_fetch(&mut self) -> bool {
        std::mem::take(&mut self.hw_moved_by_fetch)
    }

    /// Kafka's `maybeExpandIsr`: a follower at or past the high watermark and the start of this
    /// leader's epoch joins the ISR, one AlterPartition at a time.
    fn maybe_expand_isr(&mut self, replica_id: i32) -> Option<IsrChange> {
        if self.pending_isr.is_some() || self.isr.contains(&replica_id) {
            return None;
        }
        let follower_end = self.remote.get(&replica_id)?.log_end_offset;
        let epoch_start = self
            .log
            .epoch_entries()
            .iter()
            .rev()
            .find(|(e, _)| *e == self.leader_epoch)
            .map(|(_, start)| *start)?;
        if follower_end < self.high_watermark || follower_end < epoch_start {
            return None;
        }
        let mut new_isr = self.isr.clone();
        new_isr.push(replica_id);
        Some(self.propose_isr(new_isr))
    }

    /// Kafka's `maybeShrinkIsr`: followers in the ISR that have not caught up within
    /// `max_lag_ms` (`replica.lag.time.max.ms`) leave it.
    pub fn maybe_shrink_isr(&mut self, now_ms: i64, max_lag_ms: i64) -> Option<IsrChange> {
        if self.role != Role::Leader || self.pending_isr.is_some() {
            return None;
        }
        let leo = self.log.log_end_offset();
        let out_of_sync: Vec<i32> = self
            .isr
            .iter()
            .copied()
            .filter(|id| *id != self.local_broker_id)
            .filter(|id| {
                self.remote
                    .get(id)
                    .is_none_or(|r| !r.is_caught_up(leo, now_ms, max_lag_ms))
            })
            .collect();
        if out_of_sync.is_empty() {
            return None;
        }
        let new_isr: Vec<i32> = self
            .isr
            .iter()
            .copied()
            .filter(|id| !out_of_sync.contains(id))
            .collect();
        Some(self.propose_isr(new_isr))
    }

    fn propose_isr(&mut self, new_isr: Vec<i32>) -> IsrChange {
        // Kafka's `addBrokerEpochToIsr`.
        let broker_epochs = new_isr
            .iter()
            .map(|id| self.remote.get(id).map_or(-1, |r| r.broker_epoch))
            .collect();
        let change = IsrChange {
            leader_epoch: self.leader_epoch,
            partition_epoch: self.partition_epoch,
            new_isr,
            broker_epochs,
        };
        self.pending_isr = Some(change.clone());
        change
    }

    /// The controller answered `change`. A committed ISR is adopted at once (the metadata log
    /// brings the same state later, Kafka applies the answer too); a failure clears the pending
    /// state so that a later fetch or shrink check proposes again. Returns whether the high
    /// watermark moved.
    pub fn complete_isr_change(&mut self, change: &IsrChange, outcome: IsrChangeOutcome) -> bool {
        if self.pending_isr.as_ref() != Some(change) {
            return false;
        }
        self.pending_isr = None;
        if let IsrChangeOutcome::Committed {
            leader_epoch,
            partition_epoch,
            isr,
        } = outcome
        {
            if self.role == Role::Leader
                && leader_epoch == self.leader_epoch
                && partition_epoch > self.partition_epoch
            {
                self.partition_epoch = partition_epoch;
                self.isr = isr;
            }
        }
        self.maybe_increment_high_watermark()
    }

    // ---- the follower side ----

    pub fn follower_position(&self) -> Result<FollowerPosition, PartitionError> {
        if !matches!(self.role, Role::Follower { .. }) {
            return Err(PartitionError::NotLeaderOrFollower);
        }
        Ok(FollowerPosition {
            log_end_offset: self.log.log_end_offset(),
            log_start_offset: self.log.log_start_offset(),
            last_fetched_epoch: self
                .log
                .epoch_entries()
                .last()
                .map_or(UNDEFINED_EPOCH, |(e, _)| *e),
            high_watermark: self.high_watermark,
            leader_epoch: self.leader_epoch,
        })
    }

    /// Appends batches fetched from the leader as they are (offsets, epochs and CRCs of the
    /// leader's log), after checking every CRC; updates producer state from them and moves the
    /// high watermark to `min(leader's, own log end)` (Kafka's
    /// `appendRecordsToFollowerOrFutureReplica` + `updateFollowerHighWatermark`).
    ///
    /// `fetched_from` is the position the fetch was sent from. An answer to a fetch from
    /// another position or leader epoch is stale (the metadata moved the replica, or it was
    /// truncated, while the fetch was in flight) and is dropped: Kafka's fetcher applies a
    /// response only while the partition's fetch offset and leader epoch are still those of
    /// the request.
    pub fn append_as_follower(
        &mut self,
        records: Bytes,
        leader_high_watermark: i64,
        leader_log_start_offset: i64,
        fetched_from: &FollowerPosition,
        now_ms: i64,
    ) -> Result<FollowerPosition, PartitionError> {
        let current = self.follower_position()?;
        if current.leader_epoch != fetched_from.leader_epoch
            || current.log_end_offset != fetched_from.log_end_offset
        {
            tracing::debug!(tp = %self.tp, fetched_at = fetched_from.log_end_offset, log_end = current.log_end_offset, fetched_epoch = fetched_from.leader_epoch, leader_epoch = current.leader_epoch, "dropping a stale fetch answer");
            return Ok(current);
        }
        let leo = self.log.log_end_offset();
        let mut first_offset = None;
        let mut info = AppendedBatches {
            first_offset: -1,
            last_offset: -1,
            max_timestamp: -1,
            offset_of_max_timestamp: -1,
            records_count: 0,
        };
        let mut start = None;
        let mut end = 0usize;
        let mut pos = 0usize;
        let mut producer_batches = Vec::new();
        for batch in batches(records.clone()) {
            let batch = batch.map_err(|e| PartitionError::CorruptMessage(e.to_string()))?;
            let size = batch.size_in_bytes();
            let h = batch.header;
            let batch_start = pos;
            pos += size;
            if h.last_offset() < leo {
                // A batch the log already has (the fetch began inside it).
                continue;
            }
            if let Some(last) = (info.last_offset >= 0).then_some(info.last_offset) {
                if h.base_offset <= last {
                    return Err(PartitionError::CorruptMessage(format!(
                        "out of order offsets from the leader: {} after {last}",
                        h.base_offset
                    )));
                }
            }
            batch
                .verify_crc()
                .map_err(|e| PartitionError::CorruptMessage(e.to_string()))?;
            start.get_or_insert(batch_start);
            end = pos;
            first_offset.get_or_insert(h.base_offset);
            info.last_offset = h.last_offset();
            if h.max_timestamp > info.max_timestamp {
                info.max_timestamp = h.max_timestamp;
                info.offset_of_max_timestamp = h.last_offset();
            }
            info.records_count += h.records_count.max(0) as u64;
            producer_batches.push(batch);
        }
        if let Some(start) = start {
            let first = first_offset.unwrap_or(leo);
            if first < leo {
                // The first batch begins below the log end: this log starts inside it, after
                // a reset to a leader whose log start offset DeleteRecords put mid-batch.
                // Kafka's rule: an empty log starts over at the batch's base offset (the log
                // start offset follows the leader's below); anything else is a leader
                // sending what this log already has, refused without touching the log.
                if leo != self.log.log_start_offset() {
                    return Err(PartitionError::InvalidRecord(format!(
                        "unexpected append offset: the leader's batch starts at {first}, \
                         below the log end offset {leo}"
                    )));
                }
                tracing::info!(tp = %self.tp, log_start = leo, batch_base = first, "the follower's empty log starts inside the leader's first batch; starting it at the batch");
                self.log
                    .truncate_fully_and_start_at(first)
                    .map_err(PartitionError::Storage)?;
                self.rebuild_after_truncation(now_ms);
            }
            info.first_offset = first;
            self.log
                .append_as_follower(records.slice(start..end), &info)
                .map_err(PartitionError::Storage)?;
            self.after_log_append();
            self.unflushed_messages += info.records_count;
            // Each batch's leader epoch goes into the epoch cache (Kafka's appendAsFollower
            // assigns them; a disk log has already done so while appending).
            for batch in &producer_batches {
                let (epoch, base) = (
                    batch.header.partition_leader_epoch,
                    batch.header.base_offset,
                );
                let latest = self.log.epoch_entries().last().map(|(e, _)| *e);
                if epoch >= 0 && latest.is_none_or(|l| epoch > l) {
                    self.log
                        .assign_epoch_start_offset(epoch, base)
                        .map_err(PartitionError::Storage)?;
                }
            }
            for batch in producer_batches {
                self.replay_producer_batch(&batch)?;
            }
        }
        if leader_log_start_offset > self.log.log_start_offset()
            && leader_log_start_offset <= self.log.log_end_offset()
        {
            self.log
                .advance_log_start_offset(leader_log_start_offset)
                .map_err(PartitionError::Storage)?;
        }
        let hw = leader_high_watermark.min(self.log.log_end_offset());
        if hw > self.high_watermark {
            self.high_watermark = hw;
            self.producers.on_high_watermark_updated(hw);
        }
        self.follower_position()
    }

    fn replay_producer_batch(&mut self, batch: &RecordBatch) -> Result<(), PartitionError> {
        let parsed = ProducerBatch::from_batch(&batch.data)
            .map_err(|e| PartitionError::CorruptMessage(e.to_string()))?;
        if let Some(b) = parsed {
            if let Some(done) = self.producers.replay_batch(&b) {
                if done.is_aborted {
                    self.log
                        .append_aborted_txn(done.aborted_txn())
                        .map_err(PartitionError::Storage)?;
                }
            }
        }
        Ok(())
    }

    /// The leader answered a fetch with a diverging epoch: truncate to where this log and the
    /// leader's agree (the fetcher's `getOffsetTruncationState` rules). Returns the new
    /// position; the next fetch carries the new last epoch, so a log several epochs off
    /// converges over a few fetches.
    pub fn truncate_to_diverging_epoch(
        &mut self,
        leader_epoch: i32,
        leader_end_offset: i64,
        now_ms: i64,
    ) -> Result<FollowerPosition, PartitionError> {
        self.follower_position()?;
        let leo = self.log.log_end_offset();
        let (epoch, end) = self.end_offset_for_epoch(leader_epoch);
        let target = if epoch == UNDEFINED_EPOCH {
            leader_end_offset.min(leo)
        } else if epoch == leader_epoch {
            leader_end_offset.min(end).min(leo)
        } else {
            end.min(leo)
        };
        self.truncate_log_to(target.max(0), now_ms)?;
        self.follower_position()
    }

    /// The follower's offset is outside the leader's log (Kafka's `handleOutOfRangeError`):
    /// a log past the leader's end is cut back to it; one behind the leader's start restarts
    /// there.
    pub fn reset_to_leader_range(
        &mut self,
        leader_log_start_offset: i64,
        leader_log_end_offset: i64,
        now_ms: i64,
    ) -> Result<FollowerPosition, PartitionError> {
        self.follower_position()?;
        let leo = self.log.log_end_offset();
        if leader_log_end_offset < leo {
            self.truncate_log_to(leader_log_end_offset.max(0), now_ms)?;
        } else if leo < leader_log_start_offset {
            self.log
                .truncate_fully_and_start_at(leader_log_start_offset)
                .map_err(PartitionError::Storage)?;
            self.rebuild_after_truncation(now_ms);
        }
        self.follower_position()
    }

    fn truncate_log_to(&mut self, offset: i64, now_ms: i64) -> Result<(), PartitionError> {
        if offset >= self.log.log_end_offset() {
            return Ok(());
        }
        tracing::info!(tp = %self.tp, from = self.log.log_end_offset(), to = offset, "truncating the follower's log");
        self.log
            .truncate_to(offset)
            .map_err(PartitionError::Storage)?;
        self.rebuild_after_truncation(now_ms);
        Ok(())
    }

    /// Producer state and the high watermark follow the log back (Kafka reloads producer state
    /// after a truncation).
    fn rebuild_after_truncation(&mut self, now_ms: i64) {
        self.producers = crate::producer::partition::rebuild_from_log(
            &self.log,
            self.log.producer_snapshot_dir().as_deref(),
            super::producer_state_config(&self.config),
            now_ms,
        );
        self.high_watermark = self
            .high_watermark
            .clamp(self.log.log_start_offset(), self.log.log_end_offset());
        self.roll_flush = None;
    }
}
