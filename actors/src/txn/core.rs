//! The transaction state machine of one `__transaction_state` partition (Kafka's
//! `TransactionCoordinator` request logic, `TransactionMetadata`, `TransactionStateManager`
//! bookkeeping). Pure: every change is returned as a [`Transit`] the actor writes to
//! `__transaction_state` first; only [`TxnCoordinatorCore::complete_write`] makes it current
//! (write-then-respond). Markers to partitions are returned as [`MarkerJob`]s.

use std::collections::{BTreeMap, BTreeSet};

use thiserror::Error;

/// `transaction.max.timeout.ms` default (15 minutes).
pub const DEFAULT_TRANSACTION_MAX_TIMEOUT_MS: i32 = 900_000;

/// A (topic, partition) enrolled in a transaction.
pub type TxnPartition = (String, i32);

/// Wire codes (Kafka's `Errors`).
pub mod codes {
    pub const NONE: i16 = 0;
    pub const NOT_COORDINATOR: i16 = 16;
    pub const INVALID_PRODUCER_EPOCH: i16 = 47;
    pub const INVALID_TXN_STATE: i16 = 48;
    pub const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
    pub const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
    pub const CONCURRENT_TRANSACTIONS: i16 = 51;
    pub const PRODUCER_FENCED: i16 = 90;
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
    #[error("invalid producer epoch")]
    InvalidProducerEpoch,
    #[error("invalid transaction state for this request")]
    InvalidTxnState,
}

impl TxnError {
    pub fn code(&self) -> i16 {
        match self {
            TxnError::InvalidTransactionTimeout => codes::INVALID_TRANSACTION_TIMEOUT,
            TxnError::ConcurrentTransactions => codes::CONCURRENT_TRANSACTIONS,
            TxnError::InvalidProducerIdMapping => codes::INVALID_PRODUCER_ID_MAPPING,
            TxnError::ProducerFenced => codes::PRODUCER_FENCED,
            TxnError::InvalidProducerEpoch => codes::INVALID_PRODUCER_EPOCH,
            TxnError::InvalidTxnState => codes::INVALID_TXN_STATE,
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

fn bump_epoch(m: &mut TxnMetadata, fresh_producer_id: Option<i64>) -> Result<(), ()> {
    // Epoch exhaustion moves to a new producer id at epoch 0 (Kafka: at Short.MAX_VALUE - 1).
    if m.producer_epoch >= i16::MAX - 1 || m.producer_id < 0 {
        let id = fresh_producer_id.ok_or(())?;
        m.previous_producer_id = m.producer_id;
        m.producer_id = id;
        m.last_producer_epoch = -1;
        m.producer_epoch = 0;
    } else {
        m.last_producer_epoch = m.producer_epoch;
        m.producer_epoch += 1;
    }
    Ok(())
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

    /// InitProducerId with a transactional id (Kafka's `handleInitProducerId`).
    /// `expected` is the (producer id, epoch) a v3+ client already holds, or (-1, -1).
    pub fn init_producer_id(
        &mut self,
        transactional_id: &str,
        txn_timeout_ms: i32,
        expected: (i64, i16),
        client_transaction_version: i16,
        fresh_producer_id: Option<i64>,
        now_ms: i64,
    ) -> Result<InitDecision, TxnError> {
        if txn_timeout_ms <= 0 || txn_timeout_ms > self.config.transaction_max_timeout_ms {
            return Err(TxnError::InvalidTransactionTimeout);
        }
        self.check_free(transactional_id)?;
        let Some(current) = self.txns.get(transactional_id).cloned() else {
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
                client_transaction_version,
            };
            let result = InitResult {
                producer_id: id,
                producer_epoch: 0,
                error: codes::NONE,
            };
            return Ok(InitDecision::Write(self.begin(target), result));
        };
        // A client re-initialising with the id/epoch it holds (KIP-360) must hold the current
        // one, or the one just before an epoch bump it never saw.
        if expected.0 >= 0 {
            let matches_current =
                expected.0 == current.producer_id && expected.1 == current.producer_epoch;
            let matches_last = expected.0 == current.producer_id
                && current.last_producer_epoch >= 0
                && expected.1 == current.last_producer_epoch;
            let matches_previous_id = expected.0 == current.previous_producer_id;
            if !(matches_current || matches_last || matches_previous_id) {
                return Err(TxnError::ProducerFenced);
            }
        }
        match current.state {
            TxnState::PrepareAbort | TxnState::PrepareCommit | TxnState::PrepareEpochFence => {
                Err(TxnError::ConcurrentTransactions)
            }
            TxnState::Dead => Err(TxnError::ConcurrentTransactions),
            TxnState::Ongoing => {
                // Fence the old producer and abort its transaction; the caller retries and
                // gets a clean epoch once the abort completes.
                let mut target = current;
                if bump_epoch(&mut target, fresh_producer_id).is_err() {
                    return Ok(InitDecision::NeedProducerId);
                }
                target.state = TxnState::PrepareAbort;
                target.txn_last_update_timestamp_ms = now_ms;
                let result = InitResult {
                    producer_id: target.producer_id,
                    producer_epoch: target.producer_epoch,
                    error: codes::CONCURRENT_TRANSACTIONS,
                };
                Ok(InitDecision::Write(self.begin(target), result))
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let mut target = current;
                if bump_epoch(&mut target, fresh_producer_id).is_err() {
                    return Ok(InitDecision::NeedProducerId);
                }
                target.state = TxnState::Empty;
                target.partitions.clear();
                target.txn_timeout_ms = txn_timeout_ms;
                target.txn_start_timestamp_ms = -1;
                target.txn_last_update_timestamp_ms = now_ms;
                target.client_transaction_version = client_transaction_version;
                let result = InitResult {
                    producer_id: target.producer_id,
                    producer_epoch: target.producer_epoch,
                    error: codes::NONE,
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
        let mut target = m.clone();
        if target.state != TxnState::Ongoing {
            target.partitions.clear();
            target.txn_start_timestamp_ms = now_ms;
        }
        target.state = TxnState::Ongoing;
        target.partitions.extend(partitions.iter().cloned());
        target.txn_last_update_timestamp_ms = now_ms;
        Ok(Some(self.begin(target)))
    }

    /// AddPartitionsToTxn v4+ `verify_only` (KIP-890 part 1, asked by partition leaders): NONE
    /// for partitions in the producer's open transaction, INVALID_TXN_STATE for the others.
    pub fn verify_partitions(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[(String, i32)],
    ) -> Result<Vec<(TxnPartition, i16)>, TxnError> {
        let m = self.check_producer(transactional_id, producer_id, producer_epoch)?;
        Ok(partitions
            .iter()
            .map(|p| {
                let ok = m.state == TxnState::Ongoing && m.partitions.contains(p);
                (
                    p.clone(),
                    if ok {
                        codes::NONE
                    } else {
                        codes::INVALID_TXN_STATE
                    },
                )
            })
            .collect())
    }

    /// EndTxn (Kafka's `endTransaction`) under the transaction version the id was initialised
    /// with. `Ok(None)`: a retry of a finished end, answer NONE.
    pub fn end_txn(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        now_ms: i64,
    ) -> Result<Option<Transit>, TxnError> {
        self.end_txn_versioned(
            transactional_id,
            producer_id,
            producer_epoch,
            commit,
            None,
            now_ms,
        )
    }

    /// EndTxn with the client's transaction version when the request tells it (Kafka: EndTxn
    /// v5+ means KIP-890 transactions, TV2, whatever the id was initialised with); the version
    /// is persisted with the end.
    pub fn end_txn_versioned(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        client_transaction_version: Option<i16>,
        now_ms: i64,
    ) -> Result<Option<Transit>, TxnError> {
        self.check_free(transactional_id)?;
        let m = self
            .txns
            .get(transactional_id)
            .ok_or(TxnError::InvalidProducerIdMapping)?;
        let version = client_transaction_version.unwrap_or(m.client_transaction_version);
        let tv2 = version >= 2;
        if m.producer_id != producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        // TV2 bumps the epoch at the end: a retry of the end arrives with the epoch before it.
        let is_retry_epoch =
            tv2 && m.last_producer_epoch >= 0 && producer_epoch == m.last_producer_epoch;
        if m.producer_epoch != producer_epoch && !is_retry_epoch {
            return Err(TxnError::ProducerFenced);
        }
        match (m.state, commit) {
            (TxnState::Ongoing, _) if !is_retry_epoch => {
                let mut target = m.clone();
                target.client_transaction_version = version;
                if tv2 {
                    target.last_producer_epoch = target.producer_epoch;
                    target.producer_epoch += 1;
                }
                target.state = if commit {
                    TxnState::PrepareCommit
                } else {
                    TxnState::PrepareAbort
                };
                target.txn_last_update_timestamp_ms = now_ms;
                Ok(Some(self.begin(target)))
            }
            (TxnState::Empty, false) if tv2 && !is_retry_epoch => {
                // TV2 lets a producer abort with nothing added; the epoch still moves on.
                let mut target = m.clone();
                target.client_transaction_version = version;
                target.last_producer_epoch = target.producer_epoch;
                target.producer_epoch += 1;
                target.state = TxnState::PrepareAbort;
                target.txn_last_update_timestamp_ms = now_ms;
                Ok(Some(self.begin(target)))
            }
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Ok(None),
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                Err(TxnError::ConcurrentTransactions)
            }
            (TxnState::PrepareEpochFence, _) => Err(TxnError::InvalidProducerEpoch),
            _ if is_retry_epoch => Err(TxnError::ProducerFenced),
            _ => Err(TxnError::InvalidTxnState),
        }
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

    /// Every marker of the prepared end was written: persist CompleteCommit / CompleteAbort.
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
        let mut target = m.clone();
        target.state = state;
        target.partitions.clear();
        target.txn_last_update_timestamp_ms = now_ms;
        Some(self.begin(target))
    }

    /// Open transactions past their `transaction.timeout.ms` (Kafka's
    /// `abortTimedOutTransactions`): each is fenced (epoch bump) and aborted.
    pub fn abort_timed_out(&mut self, now_ms: i64) -> Vec<Transit> {
        let due: Vec<TxnMetadata> = self
            .txns
            .values()
            .filter(|m| {
                m.state == TxnState::Ongoing
                    && !self.pending.contains(&m.transactional_id)
                    && m.txn_start_timestamp_ms + m.txn_timeout_ms as i64 <= now_ms
            })
            .cloned()
            .collect();
        let mut out = Vec::new();
        for mut target in due {
            if bump_epoch(&mut target, None).is_err() {
                // Epoch exhausted: abort at the current epoch; InitProducerId moves the id on.
            }
            target.state = TxnState::PrepareAbort;
            target.txn_last_update_timestamp_ms = now_ms;
            out.push(self.begin(target));
        }
        out
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
