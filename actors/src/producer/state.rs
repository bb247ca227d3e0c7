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
//! - a marker from an older coordinator epoch: TRANSACTION_COORDINATOR_FENCED.

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;
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
/// `producer.id.expiration.check.interval.ms` default (10 minutes).
pub const PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS: i64 = 600_000;

/// Wire error codes this module produces (Kafka's `Errors`).
pub mod codes {
    pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
    pub const INVALID_PRODUCER_EPOCH: i16 = 47;
    pub const INVALID_TXN_STATE: i16 = 48;
    pub const TRANSACTION_COORDINATOR_FENCED: i16 = 52;
}

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
            ProducerStateError::OutOfOrderSequence { .. } => codes::OUT_OF_ORDER_SEQUENCE_NUMBER,
            ProducerStateError::InvalidProducerEpoch { .. } => codes::INVALID_PRODUCER_EPOCH,
            ProducerStateError::InvalidTxnState { .. } => codes::INVALID_TXN_STATE,
            ProducerStateError::CoordinatorFenced { .. } => codes::TRANSACTION_COORDINATOR_FENCED,
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
}

impl ProducerAppend {
    /// The update for a batch that carries no producer state.
    pub fn none(last_offset: i64) -> Self {
        ProducerAppend {
            entry: None,
            started_txn_at: None,
            completed: None,
            end_offset: last_offset + 1,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerStateConfig {
    /// `producer.id.expiration.ms`.
    pub producer_id_expiration_ms: i64,
}

impl Default for ProducerStateConfig {
    fn default() -> Self {
        ProducerStateConfig {
            producer_id_expiration_ms: DEFAULT_PRODUCER_ID_EXPIRATION_MS,
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
    last_expiry_check_ms: i64,
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
    pub fn check_append(
        &self,
        b: &ProducerBatch,
        origin: AppendOrigin,
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
        Ok(AppendCheck::Append(ProducerAppend {
            entry: Some(entry),
            started_txn_at,
            completed,
            end_offset: b.last_offset + 1,
        }))
    }

    /// Records an appended batch. Returns the transaction its marker completed, if any (append
    /// `aborted_txn()` of an aborted one to the `.txnindex`).
    pub fn apply(&mut self, update: ProducerAppend) -> Option<CompletedTxn> {
        self.map_end_offset = self.map_end_offset.max(update.end_offset);
        let entry = update.entry?;
        let pid = entry.producer_id;
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

    /// Forgets producers idle for `producer.id.expiration.ms` with no open transaction (Kafka's
    /// `removeExpiredProducers`, run every `producer.id.expiration.check.interval.ms`). Returns
    /// how many were removed.
    pub fn remove_expired_producers(&mut self, now_ms: i64) -> usize {
        let before = self.producers.len();
        let expiration = self.config.producer_id_expiration_ms;
        self.producers.retain(|_, e| {
            e.current_txn_first_offset.is_some()
                || now_ms.saturating_sub(e.last_timestamp) < expiration
        });
        before - self.producers.len()
    }

    /// [`Self::remove_expired_producers`] at most every `producer.id.expiration.check.interval.ms`
    /// (10 minutes), driven by the caller's appends instead of a timer.
    pub fn maybe_remove_expired(&mut self, now_ms: i64) -> usize {
        if now_ms.saturating_sub(self.last_expiry_check_ms)
            < PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS
        {
            return 0;
        }
        self.last_expiry_check_ms = now_ms;
        self.remove_expired_producers(now_ms)
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
