//! The partition state machine (Kafka's `Partition` plus the leader side of
//! `UnifiedLog.append` / `read`): leadership and epochs, the ISR view and high watermark, and the
//! produce / fetch / list-offsets / delete-records / offset-for-leader-epoch paths. Pure: no
//! actix, no clock (callers pass `now_ms`), storage behind [`PartitionLog`].

pub mod config;
pub mod error;
pub mod log;
pub mod read_replica;
pub mod replica;
pub mod validate;

use std::collections::HashMap;

use bytes::Bytes;
use kactor_protocol::records::AppendOrigin;

pub use self::config::{PartitionConfig, TopicCompression};
pub use self::error::{PartitionError, RecordErrorDetail};
pub use self::log::{
    AppendedBatches, FlushWork, LogRead, LogSlice, MemoryLog, PartitionLog, TimestampOffset,
};
pub use self::read_replica::{ClientRack, ReadScope};
pub use self::replica::{FollowerPosition, IsrChange, IsrChangeOutcome, RemoteReplica};
use self::validate::{validate_and_assign, AppendPayload};

/// ListOffsets special timestamps (Kafka's `ListOffsetsRequest`).
pub const LATEST_TIMESTAMP: i64 = -1;
pub const EARLIEST_TIMESTAMP: i64 = -2;
pub const MAX_TIMESTAMP: i64 = -3;
pub const EARLIEST_LOCAL_TIMESTAMP: i64 = -4;
pub const LATEST_TIERED_TIMESTAMP: i64 = -5;
pub const EARLIEST_PENDING_UPLOAD_TIMESTAMP: i64 = -6;
/// A reader that is neither a consumer nor a follower and reads to the log end (Kafka's
/// `DEBUGGING_REPLICA_ID`): coordinators loading their partition as its new leader, whose
/// whole log becomes committed under it.
pub const DEBUGGING_REPLICA_ID: i32 = -2;
/// "No epoch given" in requests (Kafka's `RecordBatch.NO_PARTITION_LEADER_EPOCH`).
pub const NO_EPOCH: i32 = -1;
/// OffsetForLeaderEpoch's "unknown" answer (Kafka's `UNDEFINED_EPOCH` / `UNDEFINED_EPOCH_OFFSET`).
pub const UNDEFINED_EPOCH: i32 = -1;
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// Consumer isolation (Kafka's `IsolationLevel`): which offset bounds a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsolationLevel {
    ReadUncommitted,
    ReadCommitted,
}

impl IsolationLevel {
    pub fn from_wire(v: i8) -> Self {
        if v == 1 {
            IsolationLevel::ReadCommitted
        } else {
            IsolationLevel::ReadUncommitted
        }
    }
}

/// The leadership facts the metadata log assigns (Kafka's `PartitionRegistration` subset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionAssignment {
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Leader,
    Follower {
        leader: i32,
    },
    /// Stopped or not yet told: serves nothing.
    Offline,
}

/// Result of a successful leader append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendOutcome {
    pub base_offset: i64,
    pub last_offset: i64,
    /// -1 unless the topic uses LogAppendTime.
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
    pub records_count: u64,
    pub bytes: u64,
    /// The high watermark after the append (already past `last_offset` when ISR = {leader}).
    pub high_watermark: i64,
    /// Set when the append moved the high watermark: the event the purgatory needs.
    pub high_watermark_advanced: bool,
    /// The leader epoch the batch was appended under: an acks=all wait for it ends with
    /// NOT_LEADER_OR_FOLLOWER once that leadership is over, however late it is registered.
    pub leader_epoch: i32,
}

/// A read request for one partition (Kafka's `FetchParams` + `FetchPartitionData` input).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadParams {
    pub fetch_offset: i64,
    pub max_bytes: usize,
    /// Include the first batch even if larger than `max_bytes` (first partition of a response).
    pub min_one_batch: bool,
    pub isolation: IsolationLevel,
    pub current_leader_epoch: i32,
    /// The epoch of the last batch the fetcher saw (KIP-320 divergence check); -1 if none.
    pub last_fetched_epoch: i32,
    /// -1 for consumers; a broker id for followers (they read up to the log end).
    pub replica_id: i32,
}

/// A diverging epoch: the fetcher must truncate to `end_offset` (Fetch v12+ `diverging_epoch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEndOffset {
    pub epoch: i32,
    pub end_offset: i64,
}

#[derive(Debug, Clone)]
pub struct ReadOutcome {
    pub records: LogSlice,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    pub diverging_epoch: Option<EpochEndOffset>,
    /// -1: read from the leader (no KIP-392 preferred read replica).
    pub preferred_read_replica: i32,
    /// read_committed: the aborted transactions overlapping the returned range.
    pub aborted_transactions: Vec<crate::log::AbortedTxn>,
    /// A follower's read held back by the leader's replication throttle (KIP-73): no records
    /// now, and its long poll does not watch the partition, so appends to it do not wake the
    /// fetch only to answer nothing. If the quota frees during the wait, the fetch still waits
    /// it out (at most `replica.fetch.wait.max.ms`); Kafka's DelayedFetch watches the partition
    /// and looks at the quota again on each append instead.
    pub held_back: bool,
}

/// One partition replica hosted on this broker.
pub struct Partition<L: PartitionLog> {
    pub tp: TopicPartition,
    local_broker_id: i32,
    log: L,
    config: PartitionConfig,
    role: Role,
    leader_epoch: i32,
    partition_epoch: i32,
    replicas: Vec<i32>,
    isr: Vec<i32>,
    high_watermark: i64,
    /// The leader's view of each follower (`replica.rs`).
    remote: HashMap<i32, RemoteReplica>,
    /// An ISR change sent to the controller and not answered yet (Kafka's pending ISR states).
    pending_isr: Option<IsrChange>,
    /// A follower fetch moved the high watermark; the actor tells the purgatory.
    hw_moved_by_fetch: bool,
    /// Flush bookkeeping for `flush.messages` / `flush.ms`.
    unflushed_messages: u64,
    last_flush_ms: i64,
    /// Idempotence and transaction state (`crate::producer`).
    producers: crate::producer::ProducerStateManager,
    /// A segment rolled at this offset and still needs its flush (taken by the actor).
    roll_flush: Option<i64>,
    /// The producer snapshot of the newest roll, not yet fsynced (the roll's flush does it).
    roll_snapshot: Option<std::path::PathBuf>,
}

impl<L: PartitionLog> Partition<L> {
    pub fn new(
        tp: TopicPartition,
        local_broker_id: i32,
        log: L,
        config: PartitionConfig,
        now_ms: i64,
    ) -> Self {
        // Until told otherwise the high watermark is what the log recovered up to its recovery
        // point; becoming leader with ISR = {self} moves it to the log end.
        let high_watermark = log
            .recovery_point()
            .clamp(log.log_start_offset(), log.log_end_offset());
        let producers = crate::producer::partition::rebuild_from_log(
            &log,
            log.producer_snapshot_dir().as_deref(),
            producer_state_config(&config),
            now_ms,
        );
        Partition {
            tp,
            local_broker_id,
            log,
            config,
            role: Role::Offline,
            leader_epoch: NO_EPOCH,
            partition_epoch: -1,
            replicas: Vec::new(),
            isr: Vec::new(),
            high_watermark,
            remote: HashMap::new(),
            pending_isr: None,
            hw_moved_by_fetch: false,
            unflushed_messages: 0,
            last_flush_ms: now_ms,
            producers,
            roll_flush: None,
            roll_snapshot: None,
        }
    }

    /// Sets the high watermark from `replication-offset-checkpoint` when the replica is
    /// created (Kafka's `Partition.updateHighWatermark` at log creation), clamped to the log as
    /// recovered. Without this, a replica restarted cleanly would start with its high watermark
    /// at the log end and, leading again, show consumers records no other replica has.
    pub fn restore_high_watermark(&mut self, checkpointed: i64) {
        self.high_watermark =
            checkpointed.clamp(self.log.log_start_offset(), self.log.log_end_offset());
    }

    pub fn role(&self) -> Role {
        self.role
    }
    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch
    }
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }
    pub fn log_start_offset(&self) -> i64 {
        self.log.log_start_offset()
    }
    pub fn log_end_offset(&self) -> i64 {
        self.log.log_end_offset()
    }
    /// The LSO: open (or not yet replicated) transactions hold it below the high watermark.
    pub fn last_stable_offset(&self) -> i64 {
        self.producers.last_stable_offset(self.high_watermark)
    }
    pub fn producer_state(&self) -> &crate::producer::ProducerStateManager {
        &self.producers
    }
    /// Writes the producer-state snapshot (clean shutdown; Kafka's `UnifiedLog.close`).
    pub fn write_producer_snapshot(&mut self) -> Result<(), String> {
        let Some(dir) = self.log.producer_snapshot_dir() else {
            return Ok(());
        };
        let leo = self.log.log_end_offset();
        crate::producer::partition::write_snapshot(&mut self.producers, &dir, leo)
    }
    /// After every append: if the log rolled a segment, take the producer-state snapshot
    /// named by the new segment's base offset (Kafka's `UnifiedLog.roll` →
    /// `ProducerStateManager.takeSnapshot`), so recovery after a crash replays at most one
    /// segment of producer state; and remember the roll for the flush. Call it before the
    /// appended batch's producer update is applied: the snapshot then holds exactly the state
    /// up to the roll offset.
    fn after_log_append(&mut self) {
        let Some(rolled_at) = self.log.take_roll_flush() else {
            return;
        };
        self.roll_flush = Some(self.roll_flush.map_or(rolled_at, |r| r.max(rolled_at)));
        let Some(dir) = self.log.producer_snapshot_dir() else {
            return;
        };
        // Written without its fsync: an fsync here held up the partition's appends (and the
        // fetches waiting on them) behind whatever the disk was writing back, 0.2-1.5 s at a
        // 1 GiB segment roll under load. Kafka takes it unsynced too; the roll's flush syncs it.
        match crate::producer::partition::write_roll_snapshot(&mut self.producers, &dir, rolled_at)
        {
            Ok(path) => self.roll_snapshot = Some(path),
            // Only recovery time depends on it: it replays from the previous snapshot instead.
            Err(e) => tracing::warn!(
                tp = %self.tp, rolled_at, error = %e,
                "producer snapshot at roll not written"
            ),
        }
    }

    /// The newest roll's producer snapshot, to fsync with the rolled segment's flush.
    pub fn take_roll_snapshot(&mut self) -> Option<std::path::PathBuf> {
        self.roll_snapshot.take()
    }

    /// The newest segment roll whose flush has not been scheduled yet (Kafka flushes a rolled
    /// segment right away, off the append path).
    pub fn take_roll_flush(&mut self) -> Option<i64> {
        self.roll_flush.take()
    }

    /// `min.insync.replicas`, capped by the replication factor (Kafka's `effectiveMinIsr`): a
    /// topic with fewer replicas than the broker-wide minimum still takes acks=all writes once
    /// all of them are in sync.
    pub fn effective_min_isr(&self) -> usize {
        self.config
            .min_insync_replicas
            .min(self.replicas.len().max(1))
    }

    /// The ISR is smaller than the effective minimum (acks=all is refused).
    pub fn is_under_min_isr(&self) -> bool {
        self.isr.len() < self.effective_min_isr()
    }

    pub fn isr(&self) -> &[i32] {
        &self.isr
    }
    pub fn replicas(&self) -> &[i32] {
        &self.replicas
    }
    pub fn config(&self) -> &PartitionConfig {
        &self.config
    }
    pub fn log(&self) -> &L {
        &self.log
    }
    pub fn log_mut(&mut self) -> &mut L {
        &mut self.log
    }
    /// Gives the log back (clean shutdown closes it, deletion removes it).
    pub fn into_log(self) -> L {
        self.log
    }
    pub fn set_config(&mut self, config: PartitionConfig) {
        self.log.update_config(&config.effective);
        self.producers.set_config(producer_state_config(&config));
        self.config = config;
    }

    /// Before the coordinator is asked about a transactional batch of `producer_id` (Kafka's
    /// `Partition.maybeStartTransactionVerification`): the producer's [`VerificationGuard`],
    /// or the sentinel when a transaction of `epoch` is already open here (no need to ask).
    ///
    /// [`VerificationGuard`]: crate::producer::VerificationGuard
    pub fn maybe_start_transaction_verification(
        &mut self,
        producer_id: i64,
        sequence: i32,
        epoch: i16,
        supports_epoch_bump: bool,
        now_ms: i64,
    ) -> Result<crate::producer::VerificationGuard, PartitionError> {
        self.check_leader()?;
        Ok(self.producers.maybe_start_transaction_verification(
            producer_id,
            sequence,
            epoch,
            supports_epoch_bump,
            now_ms,
        )?)
    }

    /// The coordinator confirmed the verification `guard` stands for: the producer's next
    /// append may start its transaction here. INVALID_TXN_STATE if the guard was cleared
    /// meanwhile (the transaction ended).
    pub fn confirm_transaction_verification(
        &mut self,
        producer_id: i64,
        guard: crate::producer::VerificationGuard,
    ) -> Result<(), PartitionError> {
        self.check_leader()?;
        Ok(self.producers.confirm_verification(producer_id, guard)?)
    }

    /// Takes leadership for `assignment.leader_epoch` (Kafka's `Partition.makeLeader`): the new
    /// epoch starts at the current log end, and the high watermark is recomputed from the ISR.
    /// Returns whether the high watermark moved.
    pub fn become_leader(
        &mut self,
        assignment: &PartitionAssignment,
        now_ms: i64,
    ) -> Result<bool, PartitionError> {
        if self.role == Role::Leader && assignment.leader_epoch < self.leader_epoch {
            // A stale notification must not roll leadership back.
            return Ok(false);
        }
        let leo = self.log.log_end_offset();
        let new_leadership =
            assignment.leader_epoch > self.leader_epoch || self.role != Role::Leader;
        if new_leadership {
            self.log
                .assign_epoch_start_offset(assignment.leader_epoch, leo)
                .map_err(PartitionError::Storage)?;
        }
        if new_leadership || assignment.partition_epoch != self.partition_epoch {
            // The committed state replaces whatever ISR change was in flight.
            self.pending_isr = None;
        }
        self.role = Role::Leader;
        self.leader_epoch = assignment.leader_epoch;
        self.partition_epoch = assignment.partition_epoch;
        self.replicas = assignment.replicas.clone();
        self.isr = assignment.isr.clone();
        if new_leadership {
            self.reset_remote_replicas(now_ms);
        } else {
            // Same leadership, new replica set (a reassignment): keep what is known of the
            // followers that stay, start the new ones over.
            let known = std::mem::take(&mut self.remote);
            self.reset_remote_replicas(now_ms);
            for (id, state) in known {
                if let Some(slot) = self.remote.get_mut(&id) {
                    *slot = state;
                }
            }
        }
        Ok(self.maybe_increment_high_watermark())
    }

    /// Follows `assignment.leader` (Kafka's `Partition.makeFollower`); the replica fetcher (later)
    /// truncates and fetches.
    pub fn become_follower(&mut self, assignment: &PartitionAssignment) {
        self.role = Role::Follower {
            leader: assignment.leader,
        };
        self.leader_epoch = assignment.leader_epoch;
        self.partition_epoch = assignment.partition_epoch;
        self.replicas = assignment.replicas.clone();
        self.isr = assignment.isr.clone();
        self.remote.clear();
        self.pending_isr = None;
    }

    pub fn stop(&mut self) {
        self.role = Role::Offline;
    }

    /// Rereads the log from disk ([`PartitionLog::reopen`]) and rebuilds what the partition
    /// derives from it: producer state, and the high watermark bounded by the reread log.
    /// Role, epochs and replica sets stay as they were.
    pub fn reload_from_log(&mut self, now_ms: i64) -> Result<(), PartitionError> {
        self.log.reopen().map_err(PartitionError::Storage)?;
        self.producers = crate::producer::partition::rebuild_from_log(
            &self.log,
            self.log.producer_snapshot_dir().as_deref(),
            producer_state_config(&self.config),
            now_ms,
        );
        self.high_watermark = self
            .high_watermark
            .clamp(self.log.log_start_offset(), self.log.log_end_offset());
        self.remote.clear();
        self.pending_isr = None;
        self.unflushed_messages = 0;
        self.roll_flush = None;
        self.roll_snapshot = None;
        Ok(())
    }

    /// The leader's high watermark: the smallest log end offset among the members of the
    /// maximal ISR (Kafka's `maybeIncrementLeaderHW`); a follower whose end is not known yet
    /// (-1, before its first fetch under this leader) holds it. Never moves backwards.
    fn maybe_increment_high_watermark(&mut self) -> bool {
        // Kafka's `maybeIncrementLeaderHW` (since KIP-966): under min ISR nothing commits, so
        // acks=1 records written then stay invisible to consumers until enough replicas have
        // them, and no leader elected later from the shrunken ISR can lose what was read.
        if self.role != Role::Leader || self.is_under_min_isr() {
            return false;
        }
        let leo = self.log.log_end_offset();
        let min_isr_leo = self
            .maximal_isr()
            .iter()
            .filter(|id| **id != self.local_broker_id)
            .map(|id| self.remote.get(id).map_or(-1, |r| r.log_end_offset))
            .fold(leo, i64::min);
        if min_isr_leo > self.high_watermark {
            self.high_watermark = min_isr_leo;
            self.producers.on_high_watermark_updated(min_isr_leo);
            true
        } else {
            false
        }
    }

    fn check_leader(&self) -> Result<(), PartitionError> {
        if self.role == Role::Leader {
            Ok(())
        } else {
            Err(PartitionError::NotLeaderOrFollower)
        }
    }

    /// Kafka's `Partition.checkCurrentLeaderEpoch`: -1 skips the check.
    pub fn check_current_leader_epoch(&self, requested: i32) -> Result<(), PartitionError> {
        if requested == NO_EPOCH || requested == self.leader_epoch {
            Ok(())
        } else if requested < self.leader_epoch {
            Err(PartitionError::FencedLeaderEpoch {
                requested,
                current: self.leader_epoch,
            })
        } else {
            Err(PartitionError::UnknownLeaderEpoch {
                requested,
                current: self.leader_epoch,
            })
        }
    }

    /// Appends one produce payload as leader (Kafka's `Partition.appendRecordsToLeader`).
    pub fn append_as_leader(
        &mut self,
        records: &Bytes,
        required_acks: i16,
        now_ms: i64,
    ) -> Result<AppendOutcome, PartitionError> {
        self.append_owned_as_leader(records.clone(), required_acks, now_ms)
    }

    /// [`Partition::append_as_leader`] taking the payload by value: when nothing else holds its
    /// buffer (a produce request for one partition), the offsets and epoch are written into it
    /// in place instead of into a copy.
    pub fn append_owned_as_leader(
        &mut self,
        records: Bytes,
        required_acks: i16,
        now_ms: i64,
    ) -> Result<AppendOutcome, PartitionError> {
        self.append_from(records, required_acks, now_ms, AppendOrigin::Client)
    }

    /// A leader append on behalf of `origin`: a producer's request (`Client`), or records a
    /// coordinator writes itself (`Coordinator`: no sequence rules, no dedup).
    pub fn append_from(
        &mut self,
        records: Bytes,
        required_acks: i16,
        now_ms: i64,
        origin: AppendOrigin,
    ) -> Result<AppendOutcome, PartitionError> {
        self.check_leader()?;
        if !matches!(required_acks, -1..=1) {
            return Err(PartitionError::InvalidRequiredAcks(required_acks));
        }
        if required_acks == -1 && self.is_under_min_isr() {
            return Err(PartitionError::NotEnoughReplicas {
                isr: self.isr.len(),
                min_isr: self.effective_min_isr(),
            });
        }
        let v = validate_and_assign(
            &self.tp,
            records,
            self.log.log_end_offset(),
            self.leader_epoch,
            &self.config,
            now_ms,
            origin,
        )?;
        // The producer checks read the batch header only.
        let header = match &v.records {
            AppendPayload::Whole(b) => b.clone(),
            AppendPayload::Split { header, .. } => Bytes::copy_from_slice(header),
        };
        let producer_update = match crate::producer::partition::check_leader_append_from(
            &self.producers,
            &header,
            origin,
        )? {
            crate::producer::AppendCheck::Duplicate(d) => {
                return Ok(crate::producer::partition::duplicate_outcome(
                    &d,
                    self.log.log_start_offset(),
                    self.high_watermark,
                    self.leader_epoch,
                ))
            }
            crate::producer::AppendCheck::Append(u) => u,
        };
        let bytes = v.records.len() as u64;
        let info = AppendedBatches {
            first_offset: v.first_offset,
            last_offset: v.last_offset,
            max_timestamp: v.max_timestamp,
            offset_of_max_timestamp: v.offset_of_max_timestamp,
            records_count: v.records_count,
        };
        match v.records {
            AppendPayload::Whole(records) => self.log.append(records, &info),
            AppendPayload::Split { header, body } => self.log.append_split(&header, body, &info),
        }
        .map_err(PartitionError::Storage)?;
        self.after_log_append();
        if let Some(done) = self.producers.apply(producer_update) {
            if done.is_aborted {
                self.log
                    .append_aborted_txn(done.aborted_txn())
                    .map_err(PartitionError::Storage)?;
            }
        }
        self.unflushed_messages += v.records_count;
        let advanced = self.maybe_increment_high_watermark();
        Ok(AppendOutcome {
            base_offset: v.first_offset,
            last_offset: v.last_offset,
            log_append_time_ms: v.log_append_time_ms,
            log_start_offset: self.log.log_start_offset(),
            records_count: v.records_count,
            bytes,
            high_watermark: self.high_watermark,
            high_watermark_advanced: advanced,
            leader_epoch: self.leader_epoch,
        })
    }

    /// Appends a transaction marker for WriteTxnMarkers (Kafka's `appendRecordsToLeader` with
    /// origin COORDINATOR): a control batch checked against the producer state, completing the
    /// producer's transaction (an aborted one goes into the `.txnindex`).
    pub fn append_txn_marker(
        &mut self,
        marker: &crate::producer::partition::TxnMarker,
        now_ms: i64,
    ) -> Result<AppendOutcome, PartitionError> {
        self.check_leader()?;
        // Markers are written with acks=all (Kafka's WriteTxnMarkers handler): under min ISR
        // they are refused before anything is appended, and the coordinator retries, rather
        // than appended to wait for a high watermark that does not move.
        if self.is_under_min_isr() {
            return Err(PartitionError::NotEnoughReplicas {
                isr: self.isr.len(),
                min_isr: self.effective_min_isr(),
            });
        }
        let offset = self.log.log_end_offset();
        let (records, update) = crate::producer::partition::prepare_marker(
            &self.producers,
            marker,
            offset,
            self.leader_epoch,
            now_ms,
        )?;
        let bytes = records.len() as u64;
        self.log
            .append(
                records,
                &AppendedBatches {
                    first_offset: offset,
                    last_offset: offset,
                    max_timestamp: now_ms,
                    offset_of_max_timestamp: offset,
                    records_count: 1,
                },
            )
            .map_err(PartitionError::Storage)?;
        self.after_log_append();
        if let Some(done) = self.producers.apply(update) {
            if done.is_aborted {
                self.log
                    .append_aborted_txn(done.aborted_txn())
                    .map_err(PartitionError::Storage)?;
            }
        }
        self.unflushed_messages += 1;
        let advanced = self.maybe_increment_high_watermark();
        Ok(AppendOutcome {
            base_offset: offset,
            last_offset: offset,
            log_append_time_ms: -1,
            log_start_offset: self.log.log_start_offset(),
            records_count: 1,
            bytes,
            high_watermark: self.high_watermark,
            high_watermark_advanced: advanced,
            leader_epoch: self.leader_epoch,
        })
    }

    /// Reads for a consumer or follower on the leader (Kafka's `Partition.fetchRecords` +
    /// `UnifiedLog.read`).
    pub fn read(&mut self, p: &ReadParams) -> Result<ReadOutcome, PartitionError> {
        self.read_scoped(p, &ReadScope::default())
    }

    /// `read`, where `scope` may let a follower serve a consumer (KIP-392) and may ask the
    /// leader to point the consumer at a replica in its rack instead of reading.
    pub fn read_scoped(
        &mut self,
        p: &ReadParams,
        scope: &ReadScope,
    ) -> Result<ReadOutcome, PartitionError> {
        if !scope.followers_may_serve {
            self.check_leader()?;
        } else if self.role == Role::Offline {
            return Err(PartitionError::NotLeaderOrFollower);
        }
        self.check_current_leader_epoch(p.current_leader_epoch)?;
        let log_start = self.log.log_start_offset();
        let leo = self.log.log_end_offset();
        let base = |records: LogSlice, diverging: Option<EpochEndOffset>, hw: i64| ReadOutcome {
            records,
            high_watermark: hw,
            last_stable_offset: hw,
            log_start_offset: log_start,
            log_end_offset: leo,
            diverging_epoch: diverging,
            preferred_read_replica: -1,
            aborted_transactions: Vec::new(),
            held_back: false,
        };
        // Kafka skips the read when it names another replica: the consumer fetches there next.
        if let Some(client) = scope.client_rack.as_deref() {
            if let Some(replica) = self.preferred_read_replica(p, client) {
                let mut out = base(LogSlice::Memory(Bytes::new()), None, self.high_watermark);
                out.last_stable_offset = self.last_stable_offset();
                out.preferred_read_replica = replica;
                return Ok(out);
            }
        }
        // Kafka's `Partition.readRecords`: the fetcher's last epoch must be one the log knows
        // the end of, and the fetch offset not below the log start, before any divergence.
        if p.last_fetched_epoch >= 0 {
            let (epoch, end_offset) = self.end_offset_for_epoch(p.last_fetched_epoch);
            if epoch == UNDEFINED_EPOCH
                || end_offset == UNDEFINED_EPOCH_OFFSET
                || p.fetch_offset < log_start
            {
                return Err(PartitionError::OffsetOutOfRange {
                    offset: p.fetch_offset,
                    log_start_offset: log_start,
                    log_end_offset: leo,
                });
            }
            if end_offset < p.fetch_offset || epoch < p.last_fetched_epoch {
                let hw = self.high_watermark;
                return Ok(base(
                    LogSlice::Memory(Bytes::new()),
                    Some(EpochEndOffset { epoch, end_offset }),
                    hw,
                ));
            }
        }
        if p.fetch_offset < log_start || p.fetch_offset > leo {
            return Err(PartitionError::OffsetOutOfRange {
                offset: p.fetch_offset,
                log_start_offset: log_start,
                log_end_offset: leo,
            });
        }
        let max_offset = if p.replica_id >= 0 || p.replica_id == DEBUGGING_REPLICA_ID {
            leo
        } else {
            match p.isolation {
                IsolationLevel::ReadUncommitted => self.high_watermark,
                IsolationLevel::ReadCommitted => self.last_stable_offset(),
            }
        };
        let held_back =
            scope.leader_throttled && p.replica_id >= 0 && !self.isr.contains(&p.replica_id);
        let read = if p.fetch_offset >= max_offset || held_back {
            LogSlice::Memory(Bytes::new())
        } else {
            self.log
                .read(p.fetch_offset, p.max_bytes, max_offset, p.min_one_batch)
                .map_err(PartitionError::Storage)?
                .records
        };
        let mut out = base(read, None, self.high_watermark);
        out.last_stable_offset = self.last_stable_offset();
        out.held_back = held_back;
        if p.replica_id < 0
            && p.isolation == IsolationLevel::ReadCommitted
            && !out.records.is_empty()
        {
            out.aborted_transactions = self
                .log
                .collect_aborted_transactions(p.fetch_offset, max_offset);
        }
        Ok(out)
    }

    /// Bytes a consumer at `fetch_offset` could read now, below the high watermark (DelayedFetch's
    /// accumulated-bytes estimate), capped at `max_bytes`.
    pub fn readable_bytes(&self, fetch_offset: i64, max_bytes: usize) -> usize {
        if self.role == Role::Offline || fetch_offset >= self.high_watermark {
            return 0;
        }
        self.log
            .read(fetch_offset, max_bytes, self.high_watermark, false)
            .map(|r| r.records.len())
            .unwrap_or(0)
    }

    /// ListOffsets for one partition (Kafka's `Partition.fetchOffsetForTimestamp`). `None` means
    /// "no such offset" (-1 / -1 on the wire).
    pub fn offset_for_timestamp(
        &self,
        timestamp: i64,
        isolation: Option<IsolationLevel>,
        current_leader_epoch: i32,
    ) -> Result<Option<TimestampOffset>, PartitionError> {
        self.check_leader()?;
        self.check_current_leader_epoch(current_leader_epoch)?;
        let last_fetchable = match isolation {
            Some(IsolationLevel::ReadCommitted) => self.last_stable_offset(),
            Some(IsolationLevel::ReadUncommitted) => self.high_watermark,
            None => self.log.log_end_offset(),
        };
        // A new leader whose high watermark has not reached its epoch's start offset can't tell
        // clients where its log ends yet.
        let epoch_start = self.log.epoch_entries().last().map(|(_, o)| *o);
        if isolation.is_some() && epoch_start.is_some_and(|s| s > self.high_watermark) {
            return Err(PartitionError::OffsetNotAvailable(format!(
                "high watermark {} is behind the leader epoch start offset",
                self.high_watermark
            )));
        }
        let storage =
            |r: Result<Option<TimestampOffset>, String>| r.map_err(PartitionError::Storage);
        let found = match timestamp {
            LATEST_TIMESTAMP => {
                return Ok(Some(TimestampOffset {
                    timestamp: -1,
                    offset: last_fetchable,
                    leader_epoch: Some(self.leader_epoch),
                }))
            }
            EARLIEST_TIMESTAMP => {
                let offset = self.log.log_start_offset();
                return Ok(Some(TimestampOffset {
                    timestamp: -1,
                    offset,
                    leader_epoch: self.epoch_for_offset(offset),
                }));
            }
            EARLIEST_LOCAL_TIMESTAMP => {
                let offset = self.log.local_log_start_offset();
                return Ok(Some(TimestampOffset {
                    timestamp: -1,
                    offset,
                    leader_epoch: self.epoch_for_offset(offset),
                }));
            }
            // No tiered storage: nothing has been tiered (Kafka answers offset -1, epoch -1).
            LATEST_TIERED_TIMESTAMP => {
                return Ok(Some(TimestampOffset {
                    timestamp: -1,
                    offset: -1,
                    leader_epoch: Some(-1),
                }))
            }
            // Without tiered storage there is nothing pending upload (KIP-1023): -1 / -1.
            EARLIEST_PENDING_UPLOAD_TIMESTAMP => {
                return Ok(Some(TimestampOffset {
                    timestamp: -1,
                    offset: -1,
                    leader_epoch: Some(-1),
                }))
            }
            MAX_TIMESTAMP => storage(self.log.max_timestamp_offset())?,
            ts if ts < 0 => {
                return Err(PartitionError::Storage(format!(
                    "unsupported timestamp {ts}"
                )))
            }
            ts => storage(self.log.offset_for_timestamp(ts))?,
        };
        Ok(found
            .filter(|f| f.offset < last_fetchable)
            .map(|f| TimestampOffset {
                leader_epoch: f.leader_epoch.or_else(|| self.epoch_for_offset(f.offset)),
                ..f
            }))
    }

    /// The epoch that wrote `offset`, from the epoch cache.
    fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        self.log
            .epoch_entries()
            .iter()
            .rev()
            .find(|(_, start)| *start <= offset)
            .map(|(e, _)| *e)
    }

    /// DeleteRecords on the leader (Kafka's `Partition.deleteRecordsOnLeader`): returns the new
    /// low watermark (log start offset). `offset == -1` means "up to the high watermark".
    pub fn delete_records(&mut self, offset: i64) -> Result<i64, PartitionError> {
        self.check_leader()?;
        if !self.config.cleanup_delete {
            return Err(PartitionError::PolicyViolation(format!(
                "Records of partition {} can not be deleted due to the configured policy",
                self.tp
            )));
        }
        let target = if offset == -1 {
            self.high_watermark
        } else {
            offset
        };
        if target < 0 || target > self.high_watermark {
            return Err(PartitionError::OffsetOutOfRange {
                offset: target,
                log_start_offset: self.log.log_start_offset(),
                log_end_offset: self.high_watermark,
            });
        }
        self.log
            .advance_log_start_offset(target)
            .map_err(PartitionError::Storage)?;
        Ok(self.log.log_start_offset())
    }

    /// The end offset of `epoch` as the epoch cache tells it (Kafka's
    /// `LeaderEpochFileCache.endOffsetFor`): (epoch found, its end offset) or undefined.
    pub fn end_offset_for_epoch(&self, requested: i32) -> (i32, i64) {
        let entries = self.log.epoch_entries();
        if requested == UNDEFINED_EPOCH {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        }
        if entries.last().is_some_and(|(e, _)| *e == requested) {
            return (requested, self.log.log_end_offset());
        }
        let Some(higher) = entries.iter().find(|(e, _)| *e > requested) else {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        };
        match entries.iter().rev().find(|(e, _)| *e <= requested) {
            Some((floor, _)) => (*floor, higher.1),
            None => (requested, higher.1),
        }
    }

    /// OffsetForLeaderEpoch (Kafka's `Partition.lastOffsetForLeaderEpoch`).
    pub fn last_offset_for_leader_epoch(
        &self,
        current_leader_epoch: i32,
        leader_epoch: i32,
        fetch_only_from_leader: bool,
    ) -> Result<EpochEndOffset, PartitionError> {
        if fetch_only_from_leader {
            self.check_leader()?;
        } else if self.role == Role::Offline {
            return Err(PartitionError::NotLeaderOrFollower);
        }
        self.check_current_leader_epoch(current_leader_epoch)?;
        let (epoch, end_offset) = self.end_offset_for_epoch(leader_epoch);
        Ok(EpochEndOffset { epoch, end_offset })
    }

    /// Whether `flush.messages` or `flush.ms` asks for a flush now.
    pub fn flush_due(&self, now_ms: i64) -> bool {
        let by_count = self.config.flush_messages >= 0
            && self.unflushed_messages >= self.config.flush_messages as u64;
        let by_time = now_ms.saturating_sub(self.last_flush_ms) >= self.config.flush_ms;
        self.unflushed_messages > 0 && (by_count || by_time)
    }

    /// Flushes inline if `flush.messages` or `flush.ms` says so (Kafka's per-append and
    /// scheduled flush checks). Returns whether it flushed.
    pub fn maybe_flush(&mut self, now_ms: i64) -> Result<bool, PartitionError> {
        if !self.flush_due(now_ms) {
            return Ok(false);
        }
        self.flush(now_ms)?;
        Ok(true)
    }

    /// Takes the fsync work a due (or `force`d) flush needs, to run off the actor; `Ok(None)`
    /// when the log flushed inline or nothing was due. Finish with [`Partition::complete_flush`].
    pub fn prepare_flush(
        &mut self,
        now_ms: i64,
        force: bool,
    ) -> Result<Option<Box<dyn FlushWork>>, PartitionError> {
        if !(force || self.flush_due(now_ms)) {
            return Ok(None);
        }
        let leo = self.log.log_end_offset();
        match self.log.prepare_flush(leo) {
            Some(work) => Ok(Some(work)),
            None => {
                self.flush(now_ms)?;
                Ok(None)
            }
        }
    }

    /// A flush prepared by [`Partition::prepare_flush`] has run.
    pub fn complete_flush(&mut self, work: Box<dyn FlushWork>, now_ms: i64) {
        self.log.complete_flush(work);
        self.unflushed_messages = 0;
        self.last_flush_ms = now_ms;
    }

    pub fn flush(&mut self, now_ms: i64) -> Result<(), PartitionError> {
        self.log.flush().map_err(PartitionError::Storage)?;
        self.unflushed_messages = 0;
        self.last_flush_ms = now_ms;
        Ok(())
    }

    /// Retention by time / size (the LogManager's periodic check).
    pub fn enforce_retention(&mut self, now_ms: i64) -> Result<usize, PartitionError> {
        // Compact-only logs run it too (Kafka's `deleteOldSegments` without `delete`): the log
        // applies retention.ms / retention.bytes only under `delete` itself, still drops
        // segments below the log start offset, and removes the `.deleted` files cleanings left.
        let hw = self.high_watermark;
        let (ms, bytes) = (self.config.retention_ms, self.config.retention_bytes);
        self.log
            .enforce_retention(now_ms, hw, ms, bytes)
            .map_err(PartitionError::Storage)
    }

    /// The log cleaner's view of a compacted log (`None` when `cleanup.policy` has no
    /// `compact`): it never cleans past the LSO, and keeps the batches holding live producers'
    /// last sequences (Kafka's `lastRecordsOfActiveProducers`).
    pub fn cleaner_view(&mut self) -> Result<Option<crate::log::cleaner::LogView>, PartitionError> {
        if !self.config.cleanup_compact {
            return Ok(None);
        }
        let producers = self
            .producers
            .producers()
            .map(|p| {
                let last = p.last_data_offset();
                let record = crate::log::cleaner::LastRecord {
                    last_data_offset: (last >= 0).then_some(last),
                    producer_epoch: p.producer_epoch,
                };
                (p.producer_id, record)
            })
            .collect();
        let lso = self.last_stable_offset();
        self.log
            .cleaner_view(lso, producers)
            .map_err(PartitionError::Storage)
    }

    /// Swaps a cleaning of this log in (see `crate::log::Log::replace_with_cleaned`).
    pub fn replace_with_cleaned(
        &mut self,
        cleaned: &[crate::log::cleaner::CleanedSegment],
        generation: u64,
    ) -> Result<usize, PartitionError> {
        self.log
            .replace_with_cleaned(cleaned, generation)
            .map_err(PartitionError::Storage)
    }

    /// Forgets producers idle past `producer.id.expiration.ms` (the log manager's periodic
    /// check, Kafka's per-log `PeriodicProducerExpirationCheck`): leader and follower alike,
    /// as every Kafka log runs it. Returns how many were removed.
    pub fn remove_expired_producers(&mut self, now_ms: i64) -> usize {
        self.producers.remove_expired_producers(now_ms)
    }
}

#[cfg(test)]
mod tests;

/// The producer-state settings a partition's config carries.
fn producer_state_config(config: &PartitionConfig) -> crate::producer::ProducerStateConfig {
    crate::producer::ProducerStateConfig {
        transaction_verification_enabled: config.transaction_verification_enable,
        producer_id_expiration_ms: config.producer_id_expiration_ms,
    }
}
