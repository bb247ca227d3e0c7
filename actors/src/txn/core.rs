//! The transaction state machine of one `__transaction_state` partition (Kafka's
//! `TransactionCoordinator` request logic, `TransactionMetadata`, `TransactionStateManager`
//! bookkeeping). Pure: every change is returned as a [`Transit`] the actor writes to
//! `__transaction_state` first; only [`TxnCoordinatorCore::complete_write`] makes it current
//! (write-then-respond). Markers to partitions are returned as [`MarkerJob`]s.

use std::collections::{BTreeMap, BTreeSet};

use kactor_protocol::errors;
use thiserror::Error;

/// `transaction.max.timeout.ms` default (15 minutes).
pub const DEFAULT_TRANSACTION_MAX_TIMEOUT_MS: i32 = 900_000;

/// A (topic, partition) enrolled in a transaction.
pub type TxnPartition = (String, i32);

/// Partition indexes by topic, topics in name order, partitions in the order given: the shape
/// of every per-topic list on the wire and in `__transaction_state`.
pub fn by_topic<'a>(
    partitions: impl IntoIterator<Item = &'a TxnPartition>,
) -> BTreeMap<&'a str, Vec<i32>> {
    let mut grouped: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (t, p) in partitions {
        grouped.entry(t.as_str()).or_default().push(*p);
    }
    grouped
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum TxnError {
    #[error("transaction timeout out of range")]
    InvalidTransactionTimeout,
    #[error("the transactional id is busy with another operation")]
    ConcurrentTransactions,
    #[error("producer id does not match the transactional id")]
    InvalidProducerIdMapping,
    #[error("the producer was fenced by a newer epoch")]
    ProducerFenced,
    #[error("invalid transaction state for this request")]
    InvalidTxnState,
    #[error("empty transactional id")]
    InvalidRequest,
}

impl TxnError {
    pub fn code(&self) -> i16 {
        match self {
            TxnError::InvalidTransactionTimeout => errors::INVALID_TRANSACTION_TIMEOUT,
            TxnError::ConcurrentTransactions => errors::CONCURRENT_TRANSACTIONS,
            TxnError::InvalidProducerIdMapping => errors::INVALID_PRODUCER_ID_MAPPING,
            TxnError::ProducerFenced => errors::PRODUCER_FENCED,
            TxnError::InvalidTxnState => errors::INVALID_TXN_STATE,
            TxnError::InvalidRequest => errors::INVALID_REQUEST,
        }
    }
}

/// Kafka's `TransactionState`, with its persisted ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    Dead,
    PrepareEpochFence,
}

impl TxnState {
    pub fn id(self) -> i8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
            TxnState::Dead => 6,
            TxnState::PrepareEpochFence => 7,
        }
    }
    pub fn from_id(id: i8) -> Option<Self> {
        Some(match id {
            0 => TxnState::Empty,
            1 => TxnState::Ongoing,
            2 => TxnState::PrepareCommit,
            3 => TxnState::PrepareAbort,
            4 => TxnState::CompleteCommit,
            5 => TxnState::CompleteAbort,
            6 => TxnState::Dead,
            7 => TxnState::PrepareEpochFence,
            _ => return None,
        })
    }
    /// The names DescribeTransactions / ListTransactions use (Kafka's `TransactionState.name`).
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }
    fn is_complete_or_empty(self) -> bool {
        matches!(
            self,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        )
    }
}

/// One transactional id's state (Kafka's `TransactionMetadata`, persisted fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMetadata {
    pub transactional_id: String,
    pub producer_id: i64,
    pub previous_producer_id: i64,
    pub next_producer_id: i64,
    pub producer_epoch: i16,
    pub last_producer_epoch: i16,
    pub txn_timeout_ms: i32,
    pub state: TxnState,
    /// (topic, partition) in the transaction.
    pub partitions: BTreeSet<(String, i32)>,
    pub txn_start_timestamp_ms: i64,
    pub txn_last_update_timestamp_ms: i64,
    /// 0/1: classic transactions; 2: KIP-890 (epoch bump at every end).
    pub client_transaction_version: i16,
}

/// A change to persist before it takes effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transit {
    pub target: TxnMetadata,
}

/// Commit/abort markers to write to every partition of a finished transaction (Kafka's
/// `TransactionMarkerChannelManager` input).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerJob {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
    pub coordinator_epoch: i32,
    pub partitions: Vec<(String, i32)>,
    pub transaction_version: i16,
}

/// InitProducerId's answer once its write (if any) committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitResult {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// CONCURRENT_TRANSACTIONS when this call only fenced an open transaction (the client retries).
    pub error: i16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitDecision {
    /// Ask the producer-id manager for a fresh id and call again with it.
    NeedProducerId,
    /// Write, then answer `result`.
    Write(Transit, InitResult),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnCoordinatorConfig {
    /// `transaction.max.timeout.ms`
    pub transaction_max_timeout_ms: i32,
    /// The leader epoch of the `__transaction_state` partition (markers carry it).
    pub coordinator_epoch: i32,
}

impl Default for TxnCoordinatorConfig {
    fn default() -> Self {
        TxnCoordinatorConfig {
            transaction_max_timeout_ms: DEFAULT_TRANSACTION_MAX_TIMEOUT_MS,
            coordinator_epoch: 0,
        }
    }
}

/// The transactional ids of one `__transaction_state` partition.
#[derive(Debug, Default)]
pub struct TxnCoordinatorCore {
    config: TxnCoordinatorConfig,
    txns: BTreeMap<String, TxnMetadata>,
    /// Ids with a write in flight: one at a time per id (Kafka's `pendingState`).
    pending: BTreeSet<String>,
}

/// Kafka's `TransactionMetadata.isEpochExhausted`: an epoch from which one more bump would
/// leave no room to fence its holder (`i16::MAX` is the coordinator's alone).
pub fn is_epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

/// The transaction version the coordinator ends transactions with on its own (an abort that
/// fences a producer, a timed-out transaction; Kafka's `transactionVersionLevel()`): kactor's
/// controller finalizes `transaction.version` 2.
pub const SERVER_TRANSACTION_VERSION: i16 = 2;

impl TxnMetadata {
    /// The (producer id, epoch) the producer continues with once this prepared end completes
    /// (the ids of Kafka's `prepareComplete`, which EndTxn v5 answers): a KIP-890 end that
    /// exhausted the epoch moves to `next_producer_id` at epoch 0.
    pub fn completed_producer(&self) -> (i64, i16) {
        if self.client_transaction_version >= 2 && self.next_producer_id >= 0 {
            (self.next_producer_id, 0)
        } else {
            (self.producer_id, self.producer_epoch)
        }
    }

    /// The start of a change (Kafka's `prepareTransitionTo`): every transition records the
    /// producer id it leaves as the previous one.
    fn transition(&self, now_ms: i64) -> TxnMetadata {
        let mut t = self.clone();
        t.previous_producer_id = self.producer_id;
        t.txn_last_update_timestamp_ms = now_ms;
        t
    }
}

/// EndTxn's outcome (Kafka's `endTransaction` before the append).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndDecision {
    /// Nothing to write (a retry of an end that already completed): answer NONE with this
    /// producer id and epoch.
    Done(i64, i16),
    /// The end exhausts the epoch: ask the producer-id manager for the id the producer moves
    /// to, and call again with it.
    NeedProducerId,
    /// Write the Prepare state, then answer with its [`TxnMetadata::completed_producer`].
    Write(Transit),
}

/// A transaction past its timeout (Kafka's `abortTimedOutTransactions`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimeoutAbort {
    /// Write this fencing abort.
    Write(Transit),
    /// The fence exhausts the epoch: call [`TxnCoordinatorCore::abort_timed_out_with`] with a
    /// fresh producer id.
    NeedProducerId(String),
}

/// The abort a coordinator starts on its own to fence the producer of an open transaction
/// (Kafka's `prepareFenceProducerEpoch` followed by an abort at the server's transaction
/// version): the epoch moves one past the producer's. `None`: the epoch is exhausted and a
/// fresh producer id is needed for after the abort.
fn fence_abort(
    m: &TxnMetadata,
    fresh_producer_id: Option<i64>,
    now_ms: i64,
) -> Option<TxnMetadata> {
    let mut t = m.transition(now_ms);
    if is_epoch_exhausted(m.producer_epoch) {
        t.next_producer_id = fresh_producer_id?;
    }
    t.last_producer_epoch = m.producer_epoch;
    t.producer_epoch = m.producer_epoch.saturating_add(1);
    t.state = TxnState::PrepareAbort;
    t.client_transaction_version = SERVER_TRANSACTION_VERSION;
    Some(t)
}

impl TxnCoordinatorCore {
    pub fn new(config: TxnCoordinatorConfig) -> Self {
        TxnCoordinatorCore {
            config,
            ..Default::default()
        }
    }

    pub fn config(&self) -> TxnCoordinatorConfig {
        self.config
    }

    /// The leader epoch of the state partition this core was loaded at (markers carry it).
    pub fn coordinator_epoch(&self) -> i32 {
        self.config.coordinator_epoch
    }

    pub fn get(&self, transactional_id: &str) -> Option<&TxnMetadata> {
        self.txns.get(transactional_id)
    }
    pub fn transactions(&self) -> impl Iterator<Item = &TxnMetadata> {
        self.txns.values()
    }

    fn begin(&mut self, target: TxnMetadata) -> Transit {
        self.pending.insert(target.transactional_id.clone());
        Transit { target }
    }

    /// Whether `id` has a `__transaction_state` write in flight (its requests answer
    /// CONCURRENT_TRANSACTIONS until the write finishes).
    pub fn is_pending(&self, id: &str) -> bool {
        self.pending.contains(id)
    }

    fn check_free(&self, id: &str) -> Result<(), TxnError> {
        if self.pending.contains(id) {
            Err(TxnError::ConcurrentTransactions)
        } else {
            Ok(())
        }
    }

    /// InitProducerId with a transactional id (Kafka's `handleInitProducerId` and
    /// `prepareInitProducerIdTransit`). `expected` is the (producer id, epoch) a v3+ client
    /// already holds.
    pub fn init_producer_id(
        &mut self,
        transactional_id: &str,
        txn_timeout_ms: i32,
        expected: Option<(i64, i16)>,
        fresh_producer_id: Option<i64>,
        now_ms: i64,
    ) -> Result<InitDecision, TxnError> {
        if transactional_id.is_empty() {
            return Err(TxnError::InvalidRequest);
        }
        if txn_timeout_ms <= 0 || txn_timeout_ms > self.config.transaction_max_timeout_ms {
            return Err(TxnError::InvalidTransactionTimeout);
        }
        self.check_free(transactional_id)?;
        let Some(current) = self.txns.get(transactional_id).cloned() else {
            // A new id (whatever the client expected: it may be recovering from an expired
            // one) starts at epoch 0.
            let Some(id) = fresh_producer_id else {
                return Ok(InitDecision::NeedProducerId);
            };
            let target = TxnMetadata {
                transactional_id: transactional_id.to_string(),
                producer_id: id,
                previous_producer_id: -1,
                next_producer_id: -1,
                producer_epoch: 0,
                last_producer_epoch: -1,
                txn_timeout_ms,
                state: TxnState::Empty,
                partitions: BTreeSet::new(),
                txn_start_timestamp_ms: -1,
                txn_last_update_timestamp_ms: now_ms,
                client_transaction_version: 0,
            };
            let result = InitResult {
                producer_id: id,
                producer_epoch: 0,
                error: errors::NONE,
            };
            return Ok(InitDecision::Write(self.begin(target), result));
        };
        // Only the producer id is checked here (the epoch is when it is bumped): the client's
        // current id, or the one it had before the epoch ran out and the id moved on.
        if let Some((pid, epoch)) = expected {
            let valid = pid == current.producer_id
                || (pid == current.previous_producer_id && is_epoch_exhausted(epoch));
            if !valid {
                return Err(TxnError::ProducerFenced);
            }
        }
        match current.state {
            TxnState::PrepareAbort
            | TxnState::PrepareCommit
            | TxnState::PrepareEpochFence
            | TxnState::Dead => Err(TxnError::ConcurrentTransactions),
            TxnState::Ongoing => {
                // Fence the old producer and abort its transaction; the epoch it fenced with is
                // never handed out: the caller retries and gets a fresh one once the abort
                // completes.
                let Some(target) = fence_abort(&current, fresh_producer_id, now_ms) else {
                    return Ok(InitDecision::NeedProducerId);
                };
                let result = InitResult {
                    producer_id: -1,
                    producer_epoch: -1,
                    error: errors::CONCURRENT_TRANSACTIONS,
                };
                Ok(InitDecision::Write(self.begin(target), result))
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let epoch = current.producer_epoch;
                let mut target = current.transition(now_ms);
                let rotate = is_epoch_exhausted(epoch) && expected.is_none_or(|(_, e)| e == epoch);
                if rotate {
                    // Kafka's `prepareProducerIdRotation`.
                    let Some(id) = fresh_producer_id else {
                        return Ok(InitDecision::NeedProducerId);
                    };
                    target.producer_id = id;
                    target.producer_epoch = 0;
                    target.last_producer_epoch = if expected.is_some() { epoch } else { -1 };
                } else {
                    // Kafka's `prepareIncrementProducerEpoch`.
                    match expected {
                        None => {
                            target.producer_epoch = epoch + 1;
                            target.last_producer_epoch = -1;
                        }
                        Some((_, e)) if e == epoch => {
                            target.producer_epoch = epoch + 1;
                            target.last_producer_epoch = epoch;
                        }
                        // A retry of an init whose answer was lost: the same epoch again.
                        // (At an exhausted epoch Kafka fails this retry with
                        // UNKNOWN_SERVER_ERROR; the same answer is what it was for.)
                        Some((_, e)) if e == current.last_producer_epoch => {}
                        Some(_) => return Err(TxnError::ProducerFenced),
                    }
                }
                target.next_producer_id = -1;
                target.state = TxnState::Empty;
                target.partitions.clear();
                target.txn_timeout_ms = txn_timeout_ms;
                target.txn_start_timestamp_ms = -1;
                let result = InitResult {
                    producer_id: target.producer_id,
                    producer_epoch: target.producer_epoch,
                    error: errors::NONE,
                };
                Ok(InitDecision::Write(self.begin(target), result))
            }
        }
    }

    fn check_producer(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
    ) -> Result<&TxnMetadata, TxnError> {
        let m = self
            .txns
            .get(transactional_id)
            .ok_or(TxnError::InvalidProducerIdMapping)?;
        if m.producer_id != producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if m.producer_epoch != producer_epoch {
            return Err(TxnError::ProducerFenced);
        }
        Ok(m)
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn (the group's `__consumer_offsets` partition).
    /// `Ok(None)`: every partition is already in the transaction, answer NONE without a write.
    pub fn add_partitions(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[(String, i32)],
        now_ms: i64,
    ) -> Result<Option<Transit>, TxnError> {
        if transactional_id.is_empty() {
            return Err(TxnError::InvalidRequest);
        }
        self.check_free(transactional_id)?;
        let m = self.check_producer(transactional_id, producer_id, producer_epoch)?;
        match m.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort | TxnState::PrepareEpochFence => {
                return Err(TxnError::ConcurrentTransactions)
            }
            TxnState::Dead => return Err(TxnError::InvalidTxnState),
            _ => {}
        }
        if m.state == TxnState::Ongoing && partitions.iter().all(|p| m.partitions.contains(p)) {
            return Ok(None);
        }
        let mut target = m.transition(now_ms);
        if target.state != TxnState::Ongoing {
            target.partitions.clear();
            target.txn_start_timestamp_ms = now_ms;
        }
        target.state = TxnState::Ongoing;
        target.partitions.extend(partitions.iter().cloned());
        Ok(Some(self.begin(target)))
    }

    /// AddPartitionsToTxn v4+ `verify_only` (KIP-890 part 1, asked by partition leaders;
    /// Kafka's `handleVerifyPartitionsInTransaction`): NONE for partitions in the producer's
    /// transaction, TRANSACTION_ABORTABLE for the others; a transaction being ended is busy.
    pub fn verify_partitions(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[(String, i32)],
    ) -> Result<Vec<(TxnPartition, i16)>, TxnError> {
        if transactional_id.is_empty() {
            return Err(TxnError::InvalidRequest);
        }
        let m = self.check_producer(transactional_id, producer_id, producer_epoch)?;
        if matches!(m.state, TxnState::PrepareCommit | TxnState::PrepareAbort) {
            return Err(TxnError::ConcurrentTransactions);
        }
        Ok(partitions
            .iter()
            .map(|p| {
                let code = if m.partitions.contains(p) {
                    errors::NONE
                } else {
                    errors::TRANSACTION_ABORTABLE
                };
                (p.clone(), code)
            })
            .collect())
    }

    /// EndTxn (Kafka's `endTransaction` / `endTransactionWithTV1`) from the producer (id,
    /// epoch) the request names, at the client's transaction version: EndTxn v5+ means
    /// KIP-890 (2), whatever the id was initialised with; the version is persisted with the
    /// end. `fresh_producer_id` answers a [`EndDecision::NeedProducerId`].
    pub fn end_txn(
        &mut self,
        transactional_id: &str,
        (producer_id, producer_epoch): (i64, i16),
        commit: bool,
        client_transaction_version: i16,
        fresh_producer_id: Option<i64>,
        now_ms: i64,
    ) -> Result<EndDecision, TxnError> {
        if transactional_id.is_empty() {
            return Err(TxnError::InvalidRequest);
        }
        if client_transaction_version < 2 {
            return self.end_txn_v1(
                transactional_id,
                producer_id,
                producer_epoch,
                commit,
                now_ms,
            );
        }
        self.check_free(transactional_id)?;
        let m = self
            .txns
            .get(transactional_id)
            .ok_or(TxnError::InvalidProducerIdMapping)?;
        // Every KIP-890 end bumps the epoch, so a retry of an end carries the epoch just
        // before the current one; the same epoch is the next transaction's end. A retry of an
        // end that exhausted the epoch carries the previous producer id and the last epoch.
        let retry_on_overflow = m.previous_producer_id == producer_id
            && producer_epoch == i16::MAX - 1
            && m.producer_epoch == 0;
        let retry_on_bump = i32::from(m.producer_epoch) == i32::from(producer_epoch) + 1;
        if m.producer_id != producer_id && !retry_on_overflow {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        let current = producer_epoch == m.producer_epoch;
        let valid_epoch = match m.state {
            TxnState::Ongoing | TxnState::Empty | TxnState::Dead | TxnState::PrepareEpochFence => {
                current
            }
            TxnState::PrepareCommit | TxnState::PrepareAbort => retry_on_bump,
            TxnState::CompleteCommit | TxnState::CompleteAbort => {
                retry_on_bump || retry_on_overflow || current
            }
        };
        if !valid_epoch {
            return Err(TxnError::ProducerFenced);
        }
        let is_retry = retry_on_bump || retry_on_overflow;
        // (Kafka's table: a completed end answers its own retry; an abort at the current epoch
        // after any completed or empty transaction is a new, empty transaction's abort.)
        let (state, no_partition_added) = match (m.state, commit) {
            (TxnState::Ongoing, true) => (TxnState::PrepareCommit, false),
            (TxnState::Ongoing, false) => (TxnState::PrepareAbort, false),
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) if is_retry => {
                return Ok(EndDecision::Done(m.producer_id, m.producer_epoch));
            }
            (TxnState::CompleteCommit, false) if is_retry => return Err(TxnError::InvalidTxnState),
            (TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort, false) => {
                (TxnState::PrepareAbort, true)
            }
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                return Err(TxnError::ConcurrentTransactions)
            }
            _ => return Err(TxnError::InvalidTxnState),
        };
        let mut target = m.transition(now_ms);
        target.next_producer_id = -1;
        if is_epoch_exhausted(m.producer_epoch) {
            let Some(id) = fresh_producer_id else {
                return Ok(EndDecision::NeedProducerId);
            };
            target.next_producer_id = id;
        }
        target.last_producer_epoch = m.producer_epoch;
        // At most i16::MAX (from an exhausted epoch, which moves to the next id on completion).
        target.producer_epoch = m.producer_epoch.saturating_add(1);
        target.state = state;
        target.client_transaction_version = client_transaction_version;
        if no_partition_added {
            // Nothing was added, so the abort is also where this "transaction" started.
            target.partitions.clear();
            target.txn_start_timestamp_ms = now_ms;
        }
        Ok(EndDecision::Write(self.begin(target)))
    }

    /// EndTxn before KIP-890 (Kafka's `endTransactionWithTV1`): the epoch never moves, so
    /// only the current one is valid and a completed end of the same kind is its retry.
    fn end_txn_v1(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        now_ms: i64,
    ) -> Result<EndDecision, TxnError> {
        let m = self.check_producer(transactional_id, producer_id, producer_epoch)?;
        self.check_free(transactional_id)?;
        let state = match (m.state, commit) {
            (TxnState::Ongoing, true) => TxnState::PrepareCommit,
            (TxnState::Ongoing, false) => TxnState::PrepareAbort,
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => {
                return Ok(EndDecision::Done(m.producer_id, m.producer_epoch));
            }
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                return Err(TxnError::ConcurrentTransactions)
            }
            _ => return Err(TxnError::InvalidTxnState),
        };
        let mut target = m.transition(now_ms);
        target.state = state;
        target.client_transaction_version = 0;
        Ok(EndDecision::Write(self.begin(target)))
    }

    /// The `__transaction_state` write of `transit` finished. On success the target becomes
    /// current; a prepared end returns the markers to send.
    pub fn complete_write(&mut self, transit: &Transit, success: bool) -> Option<MarkerJob> {
        let t = &transit.target;
        self.pending.remove(&t.transactional_id);
        if !success {
            return None;
        }
        self.txns.insert(t.transactional_id.clone(), t.clone());
        self.marker_job(t)
    }

    fn marker_job(&self, t: &TxnMetadata) -> Option<MarkerJob> {
        let commit = match t.state {
            TxnState::PrepareCommit => true,
            TxnState::PrepareAbort => false,
            _ => return None,
        };
        Some(MarkerJob {
            transactional_id: t.transactional_id.clone(),
            producer_id: t.producer_id,
            producer_epoch: t.producer_epoch,
            commit,
            coordinator_epoch: self.config.coordinator_epoch,
            partitions: t.partitions.iter().cloned().collect(),
            transaction_version: t.client_transaction_version,
        })
    }

    /// Every marker of the prepared end was written: persist CompleteCommit / CompleteAbort
    /// (Kafka's `prepareComplete`, which also moves an exhausted KIP-890 producer to its next id).
    pub fn markers_written(&mut self, transactional_id: &str, now_ms: i64) -> Option<Transit> {
        if self.pending.contains(transactional_id) {
            return None;
        }
        let m = self.txns.get(transactional_id)?;
        let state = match m.state {
            TxnState::PrepareCommit => TxnState::CompleteCommit,
            TxnState::PrepareAbort => TxnState::CompleteAbort,
            _ => return None,
        };
        let (producer_id, producer_epoch) = m.completed_producer();
        let mut target = m.transition(now_ms);
        target.producer_id = producer_id;
        target.producer_epoch = producer_epoch;
        target.next_producer_id = -1;
        target.state = state;
        target.partitions.clear();
        Some(self.begin(target))
    }

    /// Open transactions past their `transaction.timeout.ms` (Kafka's
    /// `abortTimedOutTransactions`): each is fenced (epoch bump) and aborted.
    pub fn abort_timed_out(&mut self, now_ms: i64) -> Vec<TimeoutAbort> {
        let due: Vec<String> = self
            .txns
            .values()
            .filter(|m| {
                m.state == TxnState::Ongoing
                    && !self.pending.contains(&m.transactional_id)
                    && m.txn_start_timestamp_ms + m.txn_timeout_ms as i64 <= now_ms
            })
            .map(|m| m.transactional_id.clone())
            .collect();
        due.into_iter()
            .map(|id| match self.abort_timed_out_with(&id, None, now_ms) {
                Some(t) => TimeoutAbort::Write(t),
                None => TimeoutAbort::NeedProducerId(id),
            })
            .collect()
    }

    /// The fencing abort of `transactional_id`'s timed-out transaction, given a fresh producer
    /// id when its epoch is exhausted. `None`: it needs one (or is no longer due: not Ongoing,
    /// or busy).
    pub fn abort_timed_out_with(
        &mut self,
        transactional_id: &str,
        fresh_producer_id: Option<i64>,
        now_ms: i64,
    ) -> Option<Transit> {
        let m = self.txns.get(transactional_id)?;
        if m.state != TxnState::Ongoing || self.pending.contains(transactional_id) {
            return None;
        }
        let target = fence_abort(m, fresh_producer_id, now_ms)?;
        Some(self.begin(target))
    }

    /// Markers still owed after a load (transactions persisted in a Prepare state).
    pub fn pending_marker_jobs(&self) -> Vec<MarkerJob> {
        self.txns
            .values()
            .filter_map(|t| self.marker_job(t))
            .collect()
    }

    /// Applies one `__transaction_state` record during load (a `None` value is a tombstone).
    pub fn replay(&mut self, transactional_id: &str, value: Option<TxnMetadata>) {
        match value {
            Some(m) => {
                self.txns.insert(transactional_id.to_string(), m);
            }
            None => {
                self.txns.remove(transactional_id);
            }
        }
    }

    /// Ids idle for `transactional.id.expiration.ms` in a finished state (Kafka's
    /// `removeExpiredTransactionalIds`): tombstones to write.
    pub fn expired_transactional_ids(&self, now_ms: i64, expiration_ms: i64) -> Vec<String> {
        self.txns
            .values()
            .filter(|m| {
                m.state.is_complete_or_empty()
                    && !self.pending.contains(&m.transactional_id)
                    && now_ms.saturating_sub(m.txn_last_update_timestamp_ms) >= expiration_ms
            })
            .map(|m| m.transactional_id.clone())
            .collect()
    }

    /// Starts the removal of the ids [`Self::expired_transactional_ids`] finds: each is busy
    /// (requests get CONCURRENT_TRANSACTIONS) until [`Self::complete_expiration`] tells how
    /// its tombstone write went (Kafka's `prepareDead` before the tombstone append).
    pub fn begin_expiration(&mut self, now_ms: i64, expiration_ms: i64) -> Vec<String> {
        let ids = self.expired_transactional_ids(now_ms, expiration_ms);
        for id in &ids {
            self.pending.insert(id.clone());
        }
        ids
    }

    /// The tombstone of `id` was written (`success`): the id is gone; else it stays as it was.
    pub fn complete_expiration(&mut self, id: &str, success: bool) {
        self.pending.remove(id);
        if success {
            self.txns.remove(id);
        }
    }

    /// ListTransactions filters: states (names, empty = all), producer ids (empty = all), and
    /// a minimum running duration (-1 = none).
    pub fn list(
        &self,
        states: &[String],
        producer_ids: &[i64],
        duration_filter_ms: i64,
        now_ms: i64,
    ) -> Vec<&TxnMetadata> {
        self.txns
            .values()
            .filter(|m| m.state != TxnState::Dead)
            .filter(|m| states.is_empty() || states.iter().any(|s| s == m.state.name()))
            .filter(|m| producer_ids.is_empty() || producer_ids.contains(&m.producer_id))
            .filter(|m| {
                duration_filter_ms < 0
                    || (m.state == TxnState::Ongoing
                        && now_ms - m.txn_start_timestamp_ms >= duration_filter_ms)
            })
            .collect()
    }
}
