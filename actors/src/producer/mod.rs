//! Per-partition producer state (Kafka's `ProducerStateManager`, `ProducerAppendInfo`,
//! `ProducerStateEntry` and the `.snapshot` file format), owned by the PartitionActor: the
//! idempotence check on the Produce path (duplicates, sequence gaps, fenced epochs), the open
//! transactions that bound the last stable offset, and the aborted-transaction facts the
//! `.txnindex` records. Pure: no actix, no clock (callers pass `now_ms`).
//!
//! # Using it (for the partition)
//!
//! **Append (leader).** After the batch is validated and its offsets assigned, describe it with
//! [`ProducerBatch::from_batch`] and call [`ProducerStateManager::check_append`]. It answers
//! [`AppendCheck::Duplicate`] (answer the producer with those offsets and error NONE, append
//! nothing), [`AppendCheck::Append`] (append, then [`ProducerStateManager::apply`] the returned
//! [`ProducerAppend`]) or an error ([`ProducerStateError::code`] is the wire code). Batches
//! without a producer id give `AppendCheck::Append` with nothing to apply.
//!
//! **Transaction verification (KIP-890).** Before the coordinator is asked about a
//! transactional batch, [`ProducerStateManager::maybe_start_transaction_verification`] gives
//! the producer's [`VerificationGuard`] (the sentinel if a transaction of its epoch is already
//! open here); after the coordinator's OK, [`ProducerStateManager::confirm_verification`]; the
//! append then presents the guard ([`ProducerStateManager::check_append_verified`]). A
//! transactional batch or marker appended for the producer clears the entry, so an abort that
//! lands in between fails the append with INVALID_TXN_STATE.
//!
//! **Markers.** The control batch a partition appends for WriteTxnMarkers goes through the same
//! two calls with [`AppendOrigin::Coordinator`]; `apply` then returns the [`CompletedTxn`]. For an
//! aborted one, append `complete.aborted_txn(lso)` to the `.txnindex`
//! ([`ProducerStateManager::last_stable_offset_for`] gives the `lso` field Kafka stores).
//!
//! **Read side.** [`ProducerStateManager::first_unstable_offset`] bounds read_committed: the LSO
//! is `min(first_unstable_offset, high_watermark)`. Call
//! [`ProducerStateManager::on_high_watermark_updated`] when the high watermark moves.
//!
//! **Expiry.** [`ProducerStateManager::remove_expired_producers`] forgets producers idle for
//! `producer.id.expiration.ms` (from [`ProducerStateConfig`], which follows the dynamic broker
//! config) unless they have a transaction open, and verification entries that old; the
//! partition runs it on the log manager's timer (`producer.id.expiration.check.interval.ms`),
//! as Kafka's per-log `PeriodicProducerExpirationCheck` task does.
//!
//! **Recovery and snapshots.** [`snapshot::write_snapshot`] at clean shutdown and
//! [`snapshot::write_snapshot_unsynced`] at segment roll, fsynced by the roll's flush (file
//! `<map end offset, 20 digits>.snapshot`); on open, [`snapshot::latest_snapshot`] then
//! [`ProducerStateManager::load_snapshot`] and replay the log from the snapshot's offset with
//! [`ProducerStateManager::replay_batch`].

pub mod partition;
pub mod snapshot;
pub mod state;

pub use state::{
    AppendCheck, AppendOrigin, BatchMetadata, CompletedTxn, ProducerAppend, ProducerBatch,
    ProducerStateConfig, ProducerStateEntry, ProducerStateError, ProducerStateManager,
    VerificationGuard, VerificationStateEntry, DEFAULT_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS,
    DEFAULT_PRODUCER_ID_EXPIRATION_MS, NUM_BATCHES_TO_RETAIN,
};
