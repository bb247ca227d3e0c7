//! The producer-state table of one partition (Kafka's `ProducerStateManager`,
//! `ProducerAppendInfo`, `ProducerStateEntry`, `BatchMetadata`, `CompletedTxn`), with Kafka
//! 4.4's rules for idempotent and transactional appends.
//!
//! Error semantics as Kafka 4.4 answers a producer:
//! - a retried batch (same producer id, epoch, first and last sequence as one of the last
//!   [`NUM_BATCHES_TO_RETAIN`] batches) is a duplicate: NONE with the original offsets;
//! - an epoch older than the one seen: INVALID_PRODUCER_EPOCH (Kafka replaced PRODUCER_FENCED
//!   on the Produce path with it in 2.7, so the client can abort and retry);
//! - a new epoch must start at sequence 0, the same epoch must continue at last sequence + 1
//!   (wrapping at `i32::MAX`): else OUT_OF_ORDER_SEQUENCE_NUMBER;
//! - an unknown producer (never seen, expired, or its batches deleted) is accepted at any
//!   sequence: since KIP-360 the broker no longer answers UNKNOWN_PRODUCER_ID on Produce;
//! - a non-transactional batch while the producer has a transaction open: INVALID_TXN_STATE;
//! - a marker from an older coordinator epoch: TRANSACTION_COORDINATOR_FENCED;
//! - with `transaction.partition.verification.enable`, a client's transactional batch that
//!   does not continue a transaction already open here needs the producer's current, confirmed
//!   [`VerificationGuard`] (KIP-890): else INVALID_TXN_STATE "Record was not part of an ongoing
//!   transaction" (Kafka's `UnifiedLog.batchMissingRequiredVerification`).

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use kactor_protocol::errors;
use kactor_protocol::records::{
    BatchHeader, EndTransactionMarker, RecordBatch, RecordError, NO_PRODUCER_EPOCH, NO_SEQUENCE,
};
use thiserror::Error;

use crate::log::AbortedTxn;

/// Batches remembered per producer for duplicate detection (Kafka's
/// `ProducerStateEntry.NUM_BATCHES_TO_RETAIN`, matching the client's
/// `max.in.flight.requests.per.connection` limit of 5 with idempotence).
pub const NUM_BATCHES_TO_RETAIN: usize = 5;
/// `producer.id.expiration.ms` default (1 day).
pub const DEFAULT_PRODUCER_ID_EXPIRATION_MS: i64 = 86_400_000;
/// `producer.id.expiration.check.interval.ms` default (10 minutes): how often the log manager
/// has every partition run [`ProducerStateManager::remove_expired_producers`].
pub const DEFAULT_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS: i64 = 600_000;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProducerStateError {
    #[error("out of order sequence number for producer {producer_id}: {message}")]
    OutOfOrderSequence { producer_id: i64, message: String },
    #[error(
        "epoch {epoch} of producer {producer_id} is smaller than the last seen epoch {current}"
    )]
    InvalidProducerEpoch {
        producer_id: i64,
        epoch: i16,
        current: i16,
    },
    #[error("invalid transaction state for producer {producer_id}: {message}")]
    InvalidTxnState { producer_id: i64, message: String },
    #[error(
        "marker for producer {producer_id} from coordinator epoch {epoch}, older than {current}"
    )]
    CoordinatorFenced {
        producer_id: i64,
        epoch: i32,
        current: i32,
    },
}

impl ProducerStateError {
    /// The Produce / WriteTxnMarkers error code.
    pub fn code(&self) -> i16 {
        match self {
            ProducerStateError::OutOfOrderSequence { .. } => errors::OUT_OF_ORDER_SEQUENCE_NUMBER,
            ProducerStateError::InvalidProducerEpoch { .. } => errors::INVALID_PRODUCER_EPOCH,
            ProducerStateError::InvalidTxnState { .. } => errors::INVALID_TXN_STATE,
            ProducerStateError::CoordinatorFenced { .. } => errors::TRANSACTION_COORDINATOR_FENCED,
        }
    }
}

/// Who is appending (Kafka's `AppendOrigin`), the same type validation uses: only clients get
/// sequence checks and duplicate detection; replication and recovery take the log as the truth.
pub use kactor_protocol::records::AppendOrigin;

/// One remembered batch (Kafka's `BatchMetadata`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    pub last_seq: i32,
    pub last_offset: i64,
    pub offset_delta: i32,
    /// The batch's max timestamp.
    pub timestamp: i64,
}

impl BatchMetadata {
    pub fn first_seq(&self) -> i32 {
        decrement_sequence(self.last_seq, self.offset_delta)
    }
    pub fn first_offset(&self) -> i64 {
        self.last_offset - self.offset_delta as i64
    }
}

/// `seq + increment` in the producer's wrapping sequence space (Kafka's
/// `DefaultRecordBatch.incrementSequence`).
pub fn increment_sequence(seq: i32, increment: i32) -> i32 {
    if seq > i32::MAX - increment {
        increment - (i32::MAX - seq) - 1
    } else {
        seq + increment
    }
}

/// `seq - decrement`, wrapping the other way (Kafka's `decrementSequence`).
pub fn decrement_sequence(seq: i32, decrement: i32) -> i32 {
    if seq < decrement {
        i32::MAX - (decrement - seq) + 1
    } else {
        seq - decrement
    }
}

fn in_sequence(last_seq: i32, next_seq: i32) -> bool {
    next_seq as i64 == last_seq as i64 + 1 || (next_seq == 0 && last_seq == i32::MAX)
}

/// Proof that a transactional append was verified with the transaction coordinator (Kafka's
/// `VerificationGuard`): a process-wide unique number, so a guard handed out before an entry
/// was cleared never matches the entry created after it. [`VerificationGuard::SENTINEL`] is
/// "no verification" and matches nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VerificationGuard(u64);

impl VerificationGuard {
    pub const SENTINEL: VerificationGuard = VerificationGuard(0);

    /// A guard no other guard of this process equals.
    pub fn fresh() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        VerificationGuard(NEXT.fetch_add(1, Ordering::Relaxed))
    }

    /// Whether `presented` is this guard (Kafka's `VerificationGuard.verify`): the sentinel
    /// never verifies.
    pub fn verify(self, presented: VerificationGuard) -> bool {
        presented != Self::SENTINEL && presented == self
    }
}

/// A verification in flight for one producer on this partition (Kafka's
/// `VerificationStateEntry`): created before the coordinator is asked, cleared once a
/// transactional batch or marker of the producer is appended, expired after
/// `producer.id.expiration.ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerificationStateEntry {
    /// When the entry was created (expiry counts from it; reuse does not renew it).
    pub timestamp: i64,
    pub guard: VerificationGuard,
    pub lowest_sequence: i32,
    pub epoch: i16,
    /// Transaction version 2: the end marker carries the bumped epoch the next transaction
    /// uses, so a marker of the entry's epoch does not clear it.
    pub supports_epoch_bump: bool,
    /// kactor: the coordinator answered OK for this guard
    /// ([`ProducerStateManager::confirm_verification`]). Kafka hands the guard to the append
    /// inside the request; kactor's Produce handler is shared with non-transactional traffic,
    /// so the guard reaches the partition in a message queued just before the append instead.
    pub confirmed: bool,
}

impl VerificationStateEntry {
    /// Kafka's `maybeUpdateLowestSequenceAndEpoch`: a lower sequence of the same epoch, or a
    /// newer epoch with its sequence, replaces the remembered one.
    fn maybe_update_lowest_sequence_and_epoch(&mut self, sequence: i32, epoch: i16) {
        if epoch == self.epoch && sequence < self.lowest_sequence {
            self.lowest_sequence = sequence;
        }
        if epoch > self.epoch {
            self.epoch = epoch;
            self.lowest_sequence = sequence;
        }
    }
}

/// What the table knows about one producer (Kafka's `ProducerStateEntry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerStateEntry {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// Oldest first, at most [`NUM_BATCHES_TO_RETAIN`].
    pub batches: VecDeque<BatchMetadata>,
    /// Epoch of the last coordinator that wrote a marker for this producer (-1: none).
    pub coordinator_epoch: i32,
    /// Max timestamp of the last batch or marker: expiry counts from it.
    pub last_timestamp: i64,
    pub current_txn_first_offset: Option<i64>,
}

impl ProducerStateEntry {
    fn empty(producer_id: i64) -> Self {
        ProducerStateEntry {
            producer_id,
            producer_epoch: NO_PRODUCER_EPOCH,
            batches: VecDeque::new(),
            coordinator_epoch: -1,
            last_timestamp: -1,
            current_txn_first_offset: None,
        }
    }
    pub fn last_seq(&self) -> i32 {
        self.batches.back().map_or(NO_SEQUENCE, |b| b.last_seq)
    }
    pub fn first_seq(&self) -> i32 {
        self.batches.front().map_or(NO_SEQUENCE, |b| b.first_seq())
    }
    pub fn last_data_offset(&self) -> i64 {
        self.batches.back().map_or(-1, |b| b.last_offset)
    }
    pub fn last_offset_delta(&self) -> i32 {
        self.batches.back().map_or(0, |b| b.offset_delta)
    }

    /// A new epoch forgets the old epoch's batches (Kafka's `maybeUpdateProducerEpoch`).
    fn update_epoch(&mut self, epoch: i16) {
        if self.producer_epoch != epoch {
            self.batches.clear();
            self.producer_epoch = epoch;
        }
    }

    fn add_batch(&mut self, epoch: i16, last_seq: i32, last_offset: i64, delta: i32, ts: i64) {
        self.update_epoch(epoch);
        self.batches.push_back(BatchMetadata {
            last_seq,
            last_offset,
            offset_delta: delta,
            timestamp: ts,
        });
        while self.batches.len() > NUM_BATCHES_TO_RETAIN {
            self.batches.pop_front();
        }
        self.last_timestamp = ts;
    }

    fn find_duplicate(&self, b: &ProducerBatch) -> Option<BatchMetadata> {
        if b.producer_epoch != self.producer_epoch {
            return None;
        }
        self.batches
            .iter()
            .find(|m| m.first_seq() == b.base_sequence && m.last_seq == b.last_sequence)
            .copied()
    }
}

/// What the producer-state rules need from one batch (header facts plus, for a control batch,
/// its end-transaction marker). Offsets are the ones the log assigned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerBatch {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub last_sequence: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
    pub is_transactional: bool,
    pub marker: Option<EndTransactionMarker>,
}

impl ProducerBatch {
    /// From a header alone (data batches; a control batch needs [`ProducerBatch::from_batch`]).
    pub fn from_header(h: &BatchHeader) -> Self {
        let last_sequence = if h.base_sequence == NO_SEQUENCE {
            NO_SEQUENCE
        } else {
            increment_sequence(h.base_sequence, h.last_offset_delta)
        };
        ProducerBatch {
            producer_id: h.producer_id,
            producer_epoch: h.producer_epoch,
            base_sequence: h.base_sequence,
            last_sequence,
            first_offset: h.base_offset,
            last_offset: h.last_offset(),
            max_timestamp: h.max_timestamp,
            is_transactional: h.is_transactional(),
            marker: None,
        }
    }

    /// Describes one whole batch (offsets already assigned). `Ok(None)`: the batch carries no
    /// producer state (no producer id, or an empty control batch left by the cleaner).
    pub fn from_batch(batch: &Bytes) -> Result<Option<Self>, RecordError> {
        let parsed = RecordBatch::parse(batch)?;
        let h = parsed.header;
        if !h.has_producer_id() {
            return Ok(None);
        }
        let mut out = Self::from_header(&h);
        if h.is_control() {
            let Some(record) = parsed.records()?.next().transpose()? else {
                return Ok(None);
            };
            let key = record.key.as_deref().unwrap_or(&[]);
            out.marker = Some(EndTransactionMarker::parse(key, record.value.as_deref())?);
        }
        Ok(Some(out))
    }
}

/// A transaction whose marker was appended (Kafka's `CompletedTxn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompletedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    /// The marker's offset.
    pub last_offset: i64,
    pub is_aborted: bool,
    /// The LSO Kafka records with an aborted transaction: the first offset of the next open
    /// transaction of another producer, else `last_offset + 1`.
    pub last_stable_offset: i64,
}

impl CompletedTxn {
    /// The `.txnindex` entry for an aborted transaction.
    pub fn aborted_txn(&self) -> AbortedTxn {
        AbortedTxn {
            producer_id: self.producer_id,
            first_offset: self.first_offset,
            last_offset: self.last_offset,
            last_stable_offset: self.last_stable_offset,
        }
    }
}

/// The outcome of [`ProducerStateManager::check_append`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppendCheck {
    /// A retry of a batch already in the log: answer with its offsets, append nothing.
    Duplicate(BatchMetadata),
    /// Append the batch, then apply this update.
    Append(ProducerAppend),
}

/// The table update one appended batch makes (Kafka's `ProducerAppendInfo`), applied only after
/// the log accepted the batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerAppend {
    /// `None` for a batch without producer id: nothing to remember.
    entry: Option<ProducerStateEntry>,
    started_txn_at: Option<i64>,
    completed: Option<(i64, i64, bool)>,
    end_offset: i64,
    /// The batch ends the producer's pending verification (Kafka's `updateProducers`).
    clear_verification: bool,
}

impl ProducerAppend {
    /// The update for a batch that carries no producer state.
    pub fn none(last_offset: i64) -> Self {
        ProducerAppend {
            entry: None,
            started_txn_at: None,
            completed: None,
            end_offset: last_offset + 1,
            clear_verification: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerStateConfig {
    /// `producer.id.expiration.ms`.
    pub producer_id_expiration_ms: i64,
    /// `transaction.partition.verification.enable` (default true): transactional client
    /// batches that start a transaction here need a confirmed [`VerificationGuard`].
    pub transaction_verification_enabled: bool,
}

impl Default for ProducerStateConfig {
    fn default() -> Self {
        ProducerStateConfig {
            producer_id_expiration_ms: DEFAULT_PRODUCER_ID_EXPIRATION_MS,
            transaction_verification_enabled: true,
        }
    }
}

/// One partition's producer table.
#[derive(Debug, Clone, Default)]
pub struct ProducerStateManager {
    config: ProducerStateConfig,
    producers: BTreeMap<i64, ProducerStateEntry>,
    /// Open transactions by first offset → producer id.
    ongoing_txns: BTreeMap<i64, i64>,
    /// Completed transactions whose marker the high watermark has not passed yet: they still
    /// hold the LSO back (Kafka's `unreplicatedTxns`).
    unreplicated_txns: BTreeMap<i64, CompletedTxn>,
    /// Offset after the last batch applied (Kafka's `lastMapOffset + 1`): snapshots are named by it.
    map_end_offset: i64,
    /// Pending KIP-890 verifications by producer id (Kafka's `verificationStates`).
    verification_states: BTreeMap<i64, VerificationStateEntry>,
}

impl ProducerStateManager {
    pub fn new(config: ProducerStateConfig) -> Self {
        ProducerStateManager {
            config,
            ..Default::default()
        }
    }

    pub fn config(&self) -> &ProducerStateConfig {
        &self.config
    }
    pub fn set_config(&mut self, config: ProducerStateConfig) {
        self.config = config;
    }
    pub fn producers(&self) -> impl Iterator<Item = &ProducerStateEntry> {
        self.producers.values()
    }
    pub fn producer(&self, producer_id: i64) -> Option<&ProducerStateEntry> {
        self.producers.get(&producer_id)
    }
    pub fn producer_count(&self) -> usize {
        self.producers.len()
    }
    pub fn map_end_offset(&self) -> i64 {
        self.map_end_offset
    }
    /// Open transactions, oldest first: (first offset, producer id).
    pub fn ongoing_txns(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.ongoing_txns.iter().map(|(o, p)| (*o, *p))
    }

    /// Validates one batch against the table (Kafka's `UnifiedLog.analyzeAndValidateProducerState`
    /// + `ProducerAppendInfo.append`) without changing it.
    ///
    /// A client's transactional batch presents the producer's confirmed [`VerificationGuard`]
    /// if it has one (see [`Self::confirm_verification`]).
    pub fn check_append(
        &self,
        b: &ProducerBatch,
        origin: AppendOrigin,
    ) -> Result<AppendCheck, ProducerStateError> {
        self.check_append_with(b, origin, None)
    }

    /// [`Self::check_append`] for an append that carries its own [`VerificationGuard`], as
    /// Kafka's `appendAsLeader` does: it must be the producer's current guard.
    pub fn check_append_verified(
        &self,
        b: &ProducerBatch,
        origin: AppendOrigin,
        guard: VerificationGuard,
    ) -> Result<AppendCheck, ProducerStateError> {
        self.check_append_with(b, origin, Some(guard))
    }

    /// A transactional data batch from a client that does not continue a transaction of its
    /// epoch already open here must present the current guard when verification is enabled
    /// (Kafka's `analyzeAndValidateProducerState`; the epoch is checked first). `Client` and
    /// `Coordinator` appends are held to it, as in Kafka: the group coordinator's TxnOffsetCommit
    /// records need the guard `txn::leader_verify` confirmed on the `__consumer_offsets`
    /// partition, so an abort marker written between the coordinator's OK and the offsets'
    /// append voids it instead of letting the append open a transaction nobody will end.
    /// Replication and recovery take the log as the truth.
    fn check_append_with(
        &self,
        b: &ProducerBatch,
        origin: AppendOrigin,
        guard: Option<VerificationGuard>,
    ) -> Result<AppendCheck, ProducerStateError> {
        if b.producer_id < 0 {
            return Ok(AppendCheck::Append(ProducerAppend::none(b.last_offset)));
        }
        let current = self.producers.get(&b.producer_id);
        if origin == AppendOrigin::Client && b.marker.is_none() {
            if let Some(dup) = current.and_then(|e| e.find_duplicate(b)) {
                return Ok(AppendCheck::Duplicate(dup));
            }
        }
        let mut entry = current
            .cloned()
            .unwrap_or_else(|| ProducerStateEntry::empty(b.producer_id));
        let mut started_txn_at = None;
        let mut completed = None;
        match &b.marker {
            Some(marker) => {
                check_epoch(&entry, b, origin)?;
                if entry.coordinator_epoch > marker.coordinator_epoch {
                    return Err(ProducerStateError::CoordinatorFenced {
                        producer_id: b.producer_id,
                        epoch: marker.coordinator_epoch,
                        current: entry.coordinator_epoch,
                    });
                }
                // Only a transaction that wrote data leaves something for readers to skip.
                if let Some(first) = entry.current_txn_first_offset {
                    completed = Some((
                        first,
                        b.last_offset,
                        matches!(
                            marker.control_type,
                            kactor_protocol::records::ControlRecordType::Abort
                        ),
                    ));
                }
                entry.update_epoch(b.producer_epoch);
                entry.coordinator_epoch = marker.coordinator_epoch;
                entry.current_txn_first_offset = None;
                entry.last_timestamp = b.max_timestamp;
            }
            None => {
                check_epoch(&entry, b, origin)?;
                if matches!(origin, AppendOrigin::Client | AppendOrigin::Coordinator)
                    && b.is_transactional
                    && self.batch_missing_required_verification(b, guard)
                {
                    return Err(ProducerStateError::InvalidTxnState {
                        producer_id: b.producer_id,
                        message: "Record was not part of an ongoing transaction".into(),
                    });
                }
                if origin == AppendOrigin::Client {
                    check_sequence(&entry, b)?;
                }
                if entry.current_txn_first_offset.is_some() && !b.is_transactional {
                    return Err(ProducerStateError::InvalidTxnState {
                        producer_id: b.producer_id,
                        message: format!(
                            "expected a transactional write at offset {}",
                            b.first_offset
                        ),
                    });
                }
                if entry.current_txn_first_offset.is_none() && b.is_transactional {
                    entry.current_txn_first_offset = Some(b.first_offset);
                    started_txn_at = Some(b.first_offset);
                }
                entry.add_batch(
                    b.producer_epoch,
                    b.last_sequence,
                    b.last_offset,
                    (b.last_offset - b.first_offset) as i32,
                    b.max_timestamp,
                );
            }
        }
        // Kafka's `updateProducers`: a transactional batch ends the pending verification,
        // except a TV2 marker of the verified epoch (the next transaction's verification).
        let clear_verification = b.is_transactional
            && !self
                .verification_states
                .get(&b.producer_id)
                .is_some_and(|v| {
                    v.supports_epoch_bump && b.marker.is_some() && b.producer_epoch == v.epoch
                });
        Ok(AppendCheck::Append(ProducerAppend {
            entry: Some(entry),
            started_txn_at,
            completed,
            end_offset: b.last_offset + 1,
            clear_verification,
        }))
    }

    /// Kafka's `batchMissingRequiredVerification` for a transactional data batch: verification
    /// is on, the batch does not continue an open transaction of its epoch, and `presented`
    /// is not the producer's current confirmed guard.
    /// `presented`: the append's own guard, or `None` for the one confirmed at the partition.
    fn batch_missing_required_verification(
        &self,
        b: &ProducerBatch,
        presented: Option<VerificationGuard>,
    ) -> bool {
        if !self.config.transaction_verification_enabled
            || self.has_ongoing_transaction(b.producer_id, b.producer_epoch)
        {
            return false;
        }
        let current = self.verification_states.get(&b.producer_id);
        let presented = presented.unwrap_or_else(|| {
            current
                .filter(|v| v.confirmed)
                .map_or(VerificationGuard::SENTINEL, |v| v.guard)
        });
        !current.is_some_and(|v| v.guard.verify(presented))
    }

    /// Whether the producer has a transaction of `epoch` open here (Kafka's
    /// `UnifiedLog.hasOngoingTransaction`): its batches need no verification.
    pub fn has_ongoing_transaction(&self, producer_id: i64, epoch: i16) -> bool {
        self.producers
            .get(&producer_id)
            .is_some_and(|e| e.current_txn_first_offset.is_some() && e.producer_epoch == epoch)
    }

    /// Before the coordinator is asked about a transactional batch (Kafka's
    /// `UnifiedLog.maybeStartTransactionVerification`): an epoch older than the producer's is
    /// fenced (INVALID_PRODUCER_EPOCH); a transaction of this epoch already open here needs no
    /// verification ([`VerificationGuard::SENTINEL`]), nor does a verify-only client (one that
    /// cannot bump its epoch) while `transaction.partition.verification.enable` is off; else
    /// the producer's verification entry is created or reused and its guard returned.
    pub fn maybe_start_transaction_verification(
        &mut self,
        producer_id: i64,
        sequence: i32,
        epoch: i16,
        supports_epoch_bump: bool,
        now_ms: i64,
    ) -> Result<VerificationGuard, ProducerStateError> {
        if let Some(e) = self.producers.get(&producer_id) {
            if epoch < e.producer_epoch {
                return Err(ProducerStateError::InvalidProducerEpoch {
                    producer_id,
                    epoch,
                    current: e.producer_epoch,
                });
            }
        }
        // The switch is read here, from the partition's config, which follows dynamic broker
        // config changes, so the leader's check and the append's check never disagree.
        if self.has_ongoing_transaction(producer_id, epoch)
            || (!supports_epoch_bump && !self.config.transaction_verification_enabled)
        {
            return Ok(VerificationGuard::SENTINEL);
        }
        Ok(self
            .maybe_create_verification_state_entry(
                producer_id,
                sequence,
                epoch,
                supports_epoch_bump,
                now_ms,
            )
            .guard)
    }

    /// The producer's verification entry, created with a fresh guard if it has none (Kafka's
    /// `maybeCreateVerificationStateEntry`); an existing one keeps its guard and timestamp.
    pub fn maybe_create_verification_state_entry(
        &mut self,
        producer_id: i64,
        sequence: i32,
        epoch: i16,
        supports_epoch_bump: bool,
        now_ms: i64,
    ) -> &VerificationStateEntry {
        let entry = self
            .verification_states
            .entry(producer_id)
            .or_insert_with(|| VerificationStateEntry {
                timestamp: now_ms,
                guard: VerificationGuard::fresh(),
                lowest_sequence: sequence,
                epoch,
                supports_epoch_bump,
                confirmed: false,
            });
        entry.maybe_update_lowest_sequence_and_epoch(sequence, epoch);
        entry
    }

    /// The coordinator said `guard`'s verification is good: appends may now present it. An
    /// error (INVALID_TXN_STATE) if the entry was cleared or replaced meanwhile (e.g. the
    /// transaction's abort marker was written while the coordinator was being asked).
    pub fn confirm_verification(
        &mut self,
        producer_id: i64,
        guard: VerificationGuard,
    ) -> Result<(), ProducerStateError> {
        match self.verification_states.get_mut(&producer_id) {
            Some(v) if v.guard.verify(guard) => {
                v.confirmed = true;
                Ok(())
            }
            _ => Err(ProducerStateError::InvalidTxnState {
                producer_id,
                message: "Record was not part of an ongoing transaction".into(),
            }),
        }
    }

    pub fn verification_state_entry(&self, producer_id: i64) -> Option<&VerificationStateEntry> {
        self.verification_states.get(&producer_id)
    }

    /// The producer's current guard, or the sentinel (Kafka's `UnifiedLog.verificationGuard`).
    pub fn verification_guard(&self, producer_id: i64) -> VerificationGuard {
        self.verification_states
            .get(&producer_id)
            .map_or(VerificationGuard::SENTINEL, |v| v.guard)
    }

    pub fn clear_verification_state_entry(&mut self, producer_id: i64) {
        self.verification_states.remove(&producer_id);
    }

    /// Pending verifications (tests, metrics).
    pub fn verification_state_count(&self) -> usize {
        self.verification_states.len()
    }

    /// Records an appended batch. Returns the transaction its marker completed, if any (append
    /// `aborted_txn()` of an aborted one to the `.txnindex`).
    pub fn apply(&mut self, update: ProducerAppend) -> Option<CompletedTxn> {
        self.map_end_offset = self.map_end_offset.max(update.end_offset);
        let entry = update.entry?;
        let pid = entry.producer_id;
        if update.clear_verification {
            self.verification_states.remove(&pid);
        }
        self.producers.insert(pid, entry);
        if let Some(first) = update.started_txn_at {
            self.ongoing_txns.insert(first, pid);
        }
        let (first_offset, last_offset, is_aborted) = update.completed?;
        let last_stable_offset = self
            .ongoing_txns
            .iter()
            .find(|(_, p)| **p != pid)
            .map_or(last_offset + 1, |(o, _)| *o);
        self.ongoing_txns.remove(&first_offset);
        let txn = CompletedTxn {
            producer_id: pid,
            first_offset,
            last_offset,
            is_aborted,
            last_stable_offset,
        };
        self.unreplicated_txns.insert(first_offset, txn);
        Some(txn)
    }

    /// Replays one batch read from the log (recovery, followers): no sequence checks, a batch
    /// the rules reject is skipped as Kafka's replication origin would log and move on.
    pub fn replay_batch(&mut self, b: &ProducerBatch) -> Option<CompletedTxn> {
        match self.check_append(b, AppendOrigin::Replication) {
            Ok(AppendCheck::Append(update)) => self.apply(update),
            Ok(AppendCheck::Duplicate(_)) => None,
            Err(e) => {
                tracing::warn!(error = %e, "producer state: skipping batch on replay");
                self.map_end_offset = self.map_end_offset.max(b.last_offset + 1);
                None
            }
        }
    }

    /// The first offset read_committed consumers must not pass (Kafka's `firstUnstableOffset`).
    pub fn first_unstable_offset(&self) -> Option<i64> {
        let unreplicated = self.unreplicated_txns.keys().next().copied();
        let ongoing = self.ongoing_txns.keys().next().copied();
        match (unreplicated, ongoing) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The LSO given the high watermark: `min(first unstable offset, high watermark)`.
    pub fn last_stable_offset(&self, high_watermark: i64) -> i64 {
        self.first_unstable_offset()
            .map_or(high_watermark, |o| o.min(high_watermark))
    }

    /// Completed transactions whose marker is now below the high watermark stop holding the LSO.
    pub fn on_high_watermark_updated(&mut self, high_watermark: i64) {
        self.unreplicated_txns
            .retain(|_, t| t.last_offset >= high_watermark);
    }

    /// Forgets producers idle for `producer.id.expiration.ms` with no open transaction, and
    /// verification entries created that long ago (Kafka's `removeExpiredProducers`, run every
    /// `producer.id.expiration.check.interval.ms`: the log manager's `ProducerExpirationTick`).
    /// Returns how many producers were removed.
    pub fn remove_expired_producers(&mut self, now_ms: i64) -> usize {
        let before = self.producers.len();
        let expiration = self.config.producer_id_expiration_ms;
        self.producers.retain(|_, e| {
            e.current_txn_first_offset.is_some()
                || now_ms.saturating_sub(e.last_timestamp) < expiration
        });
        self.verification_states
            .retain(|_, v| now_ms.saturating_sub(v.timestamp) < expiration);
        before - self.producers.len()
    }

    /// Empties the table, e.g. before rebuilding it after a truncation (Kafka's
    /// `truncateFullyAndStartAt` / `truncateAndReload` without a usable snapshot).
    pub fn truncate_fully_and_start_at(&mut self, offset: i64) {
        self.producers.clear();
        self.ongoing_txns.clear();
        self.unreplicated_txns.clear();
        self.map_end_offset = offset;
    }

    /// Replaces the table with a snapshot's entries taken at `snapshot_offset` (Kafka's
    /// `loadFromSnapshot`): expired producers are dropped; open transactions come back from the
    /// entries' `current_txn_first_offset`.
    pub fn load_snapshot(
        &mut self,
        entries: Vec<ProducerStateEntry>,
        snapshot_offset: i64,
        now_ms: i64,
    ) {
        self.truncate_fully_and_start_at(snapshot_offset);
        let expiration = self.config.producer_id_expiration_ms;
        for e in entries {
            let expired = e.current_txn_first_offset.is_none()
                && now_ms.saturating_sub(e.last_timestamp) >= expiration;
            if expired {
                continue;
            }
            if let Some(first) = e.current_txn_first_offset {
                self.ongoing_txns.insert(first, e.producer_id);
            }
            self.producers.insert(e.producer_id, e);
        }
    }

    /// The table covers the log up to `offset` (batches without producer ids in between), as
    /// Kafka's `updateMapEndOffset` before a snapshot.
    pub fn update_map_end_offset(&mut self, offset: i64) {
        self.map_end_offset = self.map_end_offset.max(offset);
    }

    /// Test and snapshot access to every entry.
    pub fn entries(&self) -> Vec<ProducerStateEntry> {
        self.producers.values().cloned().collect()
    }
}

fn check_epoch(
    entry: &ProducerStateEntry,
    b: &ProducerBatch,
    origin: AppendOrigin,
) -> Result<(), ProducerStateError> {
    if b.producer_epoch < entry.producer_epoch && origin != AppendOrigin::Replication {
        return Err(ProducerStateError::InvalidProducerEpoch {
            producer_id: b.producer_id,
            epoch: b.producer_epoch,
            current: entry.producer_epoch,
        });
    }
    Ok(())
}

/// Kafka's `ProducerAppendInfo.checkSequence` for a single batch per append.
fn check_sequence(entry: &ProducerStateEntry, b: &ProducerBatch) -> Result<(), ProducerStateError> {
    let out_of_order = |message: String| ProducerStateError::OutOfOrderSequence {
        producer_id: b.producer_id,
        message,
    };
    if b.producer_epoch != entry.producer_epoch {
        if b.base_sequence != 0 && entry.producer_epoch != NO_PRODUCER_EPOCH {
            return Err(out_of_order(format!(
                "invalid sequence number for new epoch {} at offset {}: {} (seq. number), {} \
                 (current producer epoch)",
                b.producer_epoch, b.first_offset, b.base_sequence, entry.producer_epoch
            )));
        }
        return Ok(());
    }
    // A producer whose state is gone (expired, deleted with its records) may continue anywhere.
    let last = entry.last_seq();
    if entry.producer_epoch != NO_PRODUCER_EPOCH && !in_sequence(last, b.base_sequence) {
        return Err(out_of_order(format!(
            "at offset {}: {} (incoming seq. number), {} (current end sequence number)",
            b.first_offset, b.base_sequence, last
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kactor_protocol::records::ControlRecordType;

    const PID: i64 = 7;

    fn data(epoch: i16, seq: i32, offset: i64, transactional: bool) -> ProducerBatch {
        ProducerBatch {
            producer_id: PID,
            producer_epoch: epoch,
            base_sequence: seq,
            last_sequence: seq,
            first_offset: offset,
            last_offset: offset,
            max_timestamp: 1000,
            is_transactional: transactional,
            marker: None,
        }
    }

    fn marker(epoch: i16, offset: i64, commit: bool) -> ProducerBatch {
        ProducerBatch {
            base_sequence: NO_SEQUENCE,
            last_sequence: NO_SEQUENCE,
            is_transactional: true,
            marker: Some(EndTransactionMarker {
                control_type: if commit {
                    ControlRecordType::Commit
                } else {
                    ControlRecordType::Abort
                },
                coordinator_epoch: 0,
            }),
            ..data(epoch, 0, offset, true)
        }
    }

    fn append(m: &mut ProducerStateManager, b: &ProducerBatch) -> Result<(), i16> {
        match m.check_append(b, AppendOrigin::Client) {
            Ok(AppendCheck::Append(u)) => {
                m.apply(u);
                Ok(())
            }
            Ok(AppendCheck::Duplicate(_)) => panic!("not a retry"),
            Err(e) => Err(e.code()),
        }
    }

    fn write_marker(m: &mut ProducerStateManager, b: &ProducerBatch) {
        match m.check_append(b, AppendOrigin::Coordinator).unwrap() {
            AppendCheck::Append(u) => {
                m.apply(u);
            }
            AppendCheck::Duplicate(_) => panic!("markers are never duplicates"),
        }
    }

    fn start(m: &mut ProducerStateManager, epoch: i16, seq: i32, now: i64) -> VerificationGuard {
        m.maybe_start_transaction_verification(PID, seq, epoch, false, now)
            .unwrap()
    }

    #[test]
    fn guards_are_unique_and_the_sentinel_verifies_nothing() {
        let (a, b) = (VerificationGuard::fresh(), VerificationGuard::fresh());
        assert_ne!(a, b);
        assert!(a.verify(a));
        assert!(!a.verify(b));
        assert!(!a.verify(VerificationGuard::SENTINEL));
        assert!(!VerificationGuard::SENTINEL.verify(VerificationGuard::SENTINEL));
    }

    #[test]
    fn a_verification_entry_is_created_once_and_reused() {
        let mut m = ProducerStateManager::default();
        let g = start(&mut m, 0, 5, 100);
        assert_ne!(g, VerificationGuard::SENTINEL);
        assert_eq!(m.verification_guard(PID), g);
        // Reused with the same guard; a lower sequence of the same epoch is remembered, the
        // creation time is not renewed.
        assert_eq!(start(&mut m, 0, 3, 200), g);
        let e = *m.verification_state_entry(PID).unwrap();
        assert_eq!((e.lowest_sequence, e.epoch, e.timestamp), (3, 0, 100));
        // A newer epoch replaces epoch and sequence.
        assert_eq!(start(&mut m, 1, 9, 300), g);
        let e = *m.verification_state_entry(PID).unwrap();
        assert_eq!((e.lowest_sequence, e.epoch), (9, 1));
    }

    #[test]
    fn a_transactional_batch_must_present_the_current_guard() {
        let mut m = ProducerStateManager::default();
        let b = data(0, 0, 0, true);
        let missing = |r: Result<AppendCheck, ProducerStateError>| match r {
            Err(e @ ProducerStateError::InvalidTxnState { .. }) => {
                assert!(e.to_string().contains("not part of an ongoing transaction"));
                true
            }
            _ => false,
        };
        // No verification at all.
        assert!(missing(m.check_append(&b, AppendOrigin::Client)));
        let g = start(&mut m, 0, 0, 0);
        // Started but not confirmed: the partition does not present it.
        assert!(missing(m.check_append(&b, AppendOrigin::Client)));
        // An explicit guard must be the current one.
        assert!(missing(m.check_append_verified(
            &b,
            AppendOrigin::Client,
            VerificationGuard::fresh()
        )));
        assert!(missing(m.check_append_verified(
            &b,
            AppendOrigin::Client,
            VerificationGuard::SENTINEL
        )));
        assert!(m.check_append_verified(&b, AppendOrigin::Client, g).is_ok());
        // Confirmed: the append goes through and clears the entry.
        m.confirm_verification(PID, g).unwrap();
        append(&mut m, &b).unwrap();
        assert!(m.verification_state_entry(PID).is_none());
        // The transaction is open: no guard needed, and no new verification.
        append(&mut m, &data(0, 1, 1, true)).unwrap();
        assert_eq!(start(&mut m, 0, 2, 0), VerificationGuard::SENTINEL);
        // Non-transactional and replicated batches are not held to it.
        let mut other = ProducerStateManager::default();
        append(&mut other, &data(0, 0, 0, false)).unwrap();
        assert!(other
            .check_append(&data(0, 0, 0, true), AppendOrigin::Replication)
            .is_ok());
    }

    #[test]
    fn the_transactions_marker_clears_the_guard() {
        let mut m = ProducerStateManager::default();
        let g = start(&mut m, 0, 0, 0);
        m.confirm_verification(PID, g).unwrap();
        // The coordinator aborted before the append arrived.
        write_marker(&mut m, &marker(0, 0, false));
        assert!(m.verification_state_entry(PID).is_none());
        assert_eq!(
            append(&mut m, &data(0, 0, 1, true)),
            Err(errors::INVALID_TXN_STATE)
        );
        assert!(m.producer(PID).unwrap().current_txn_first_offset.is_none());
        // The old guard cannot be confirmed again either.
        assert_eq!(
            m.confirm_verification(PID, g).map_err(|e| e.code()),
            Err(errors::INVALID_TXN_STATE)
        );
        // A fresh verification works, with a new guard.
        let g2 = start(&mut m, 0, 0, 0);
        assert_ne!(g2, g);
    }

    #[test]
    fn a_tv2_marker_of_the_verified_epoch_keeps_the_guard() {
        let mut m = ProducerStateManager::default();
        // Transaction version 2: the verification for the next transaction (epoch 1) may be
        // under way while the previous transaction's marker, carrying epoch 1, is written.
        let g = m
            .maybe_start_transaction_verification(PID, 0, 1, true, 0)
            .unwrap();
        write_marker(&mut m, &marker(1, 0, true));
        assert_eq!(m.verification_guard(PID), g);
        // A marker of another epoch clears it.
        write_marker(&mut m, &marker(2, 1, true));
        assert_eq!(m.verification_guard(PID), VerificationGuard::SENTINEL);
    }

    #[test]
    fn an_older_epoch_is_fenced_before_verification() {
        let mut m = ProducerStateManager::default();
        append(&mut m, &data(3, 0, 0, false)).unwrap();
        assert_eq!(
            m.maybe_start_transaction_verification(PID, 0, 2, false, 0)
                .map_err(|e| e.code()),
            Err(errors::INVALID_PRODUCER_EPOCH)
        );
        assert_eq!(m.verification_state_count(), 0);
    }

    #[test]
    fn verification_entries_expire_after_the_producer_id_expiration() {
        let mut m = ProducerStateManager::new(ProducerStateConfig {
            producer_id_expiration_ms: 1000,
            ..Default::default()
        });
        start(&mut m, 0, 0, 100);
        // Reuse does not renew it: expiry counts from creation.
        start(&mut m, 0, 0, 900);
        m.remove_expired_producers(1099);
        assert_eq!(m.verification_state_count(), 1);
        m.remove_expired_producers(1100);
        assert_eq!(m.verification_state_count(), 0);
    }

    #[test]
    fn with_verification_disabled_no_guard_is_needed() {
        let mut m = ProducerStateManager::new(ProducerStateConfig {
            transaction_verification_enabled: false,
            ..Default::default()
        });
        append(&mut m, &data(0, 0, 0, true)).unwrap();
        assert!(m.producer(PID).unwrap().current_txn_first_offset.is_some());
    }

    /// The leader asks the partition whether to verify: with the switch off a verify-only
    /// client is waved through (no entry, so no round trip to the coordinator), while a
    /// transaction version 2 client still has its partition added.
    #[test]
    fn with_verification_disabled_only_epoch_bumping_clients_start_verification() {
        let mut m = ProducerStateManager::new(ProducerStateConfig {
            transaction_verification_enabled: false,
            ..Default::default()
        });
        assert_eq!(start(&mut m, 0, 0, 1), VerificationGuard::SENTINEL);
        assert_eq!(m.verification_state_count(), 0);
        let g = m
            .maybe_start_transaction_verification(PID, 0, 0, true, 1)
            .unwrap();
        assert_ne!(g, VerificationGuard::SENTINEL);
        // Switched back on (a dynamic broker config change reaches the partition's config):
        // a verify-only client is verified again.
        m.set_config(ProducerStateConfig::default());
        assert_ne!(start(&mut m, 0, 0, 2), VerificationGuard::SENTINEL);
    }
}
