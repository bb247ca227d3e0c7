//! Transaction coordinator metric families (Kafka's `TransactionCoordinator` /
//! `TransactionStateManager` / `TransactionMarkerChannelManager` sensors and the
//! `ProducerIdManager` allocation counts): transactional ids by state, open transactions,
//! commits and aborts, markers, loaded coordinator partitions and producer ids handed out.
//!
//! Each shard refreshes its gauges on a timer ([`ShardMetrics::refresh`]) and applies only the
//! difference to what it contributed before, so shards on one broker add up and a resigned
//! shard removes exactly its own share ([`ShardMetrics::clear`]).

use std::collections::HashMap;
use std::sync::OnceLock;

use prometheus::{IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts};

use super::core::{TxnMetadata, TxnState};
use crate::metrics::register;

pub struct TxnMetrics {
    /// `kactor_transaction_ids{state}`: transactional ids loaded by this broker's coordinator
    /// shards, by Kafka's state name.
    pub transactional_ids: IntGaugeVec,
    /// `kactor_transactions_open`: transactions begun and not yet complete (Ongoing,
    /// PrepareCommit, PrepareAbort, PrepareEpochFence).
    pub open: IntGauge,
    /// `kactor_transaction_commits_total`: transactions that reached CompleteCommit.
    pub commits_total: IntCounter,
    /// `kactor_transaction_aborts_total{reason}`: transactions that reached CompleteAbort;
    /// reason = client (EndTxn abort), timeout (`transaction.timeout.ms`), fenced (a new
    /// producer instance called InitProducerId).
    pub aborts_total: IntCounterVec,
    /// `kactor_transaction_markers_total{result}`: marker appends by result (written, skipped,
    /// failed: failed ones are retried).
    pub markers_total: IntCounterVec,
    /// `kactor_transaction_coordinator_partitions`: `__transaction_state` partitions this
    /// broker coordinates (shards running).
    pub coordinator_partitions: IntGauge,
    /// `kactor_producer_ids_generated_total`: producer ids handed out (idempotent producers and
    /// new transactional ids).
    pub producer_ids_total: IntCounter,
    /// `kactor_producer_id_blocks_total`: producer-id blocks allocated by the controller.
    pub producer_id_blocks_total: IntCounter,
}

pub fn txn_metrics() -> &'static TxnMetrics {
    static M: OnceLock<TxnMetrics> = OnceLock::new();
    M.get_or_init(|| TxnMetrics {
        transactional_ids: register(
            IntGaugeVec::new(
                Opts::new(
                    "kactor_transaction_ids",
                    "Transactional ids loaded by this broker's transaction coordinator, by state.",
                ),
                &["state"],
            )
            .expect("valid family"),
        ),
        open: register(
            IntGauge::new(
                "kactor_transactions_open",
                "Transactions begun and not yet complete on this broker's coordinator.",
            )
            .expect("valid family"),
        ),
        commits_total: register(
            IntCounter::new(
                "kactor_transaction_commits_total",
                "Transactions committed (CompleteCommit written).",
            )
            .expect("valid family"),
        ),
        aborts_total: register(
            IntCounterVec::new(
                Opts::new(
                    "kactor_transaction_aborts_total",
                    "Transactions aborted (CompleteAbort written), by reason.",
                ),
                &["reason"],
            )
            .expect("valid family"),
        ),
        markers_total: register(
            IntCounterVec::new(
                Opts::new(
                    "kactor_transaction_markers_total",
                    "Transaction marker appends by the coordinator, by result.",
                ),
                &["result"],
            )
            .expect("valid family"),
        ),
        coordinator_partitions: register(
            IntGauge::new(
                "kactor_transaction_coordinator_partitions",
                "__transaction_state partitions coordinated by this broker.",
            )
            .expect("valid family"),
        ),
        producer_ids_total: register(
            IntCounter::new(
                "kactor_producer_ids_generated_total",
                "Producer ids handed out by InitProducerId.",
            )
            .expect("valid family"),
        ),
        producer_id_blocks_total: register(
            IntCounter::new(
                "kactor_producer_id_blocks_total",
                "Producer id blocks allocated to this broker by the controller.",
            )
            .expect("valid family"),
        ),
    })
}

fn is_open(state: TxnState) -> bool {
    matches!(
        state,
        TxnState::Ongoing
            | TxnState::PrepareCommit
            | TxnState::PrepareAbort
            | TxnState::PrepareEpochFence
    )
}

/// What one shard last contributed to the gauges.
#[derive(Default)]
pub struct ShardMetrics {
    by_state: HashMap<&'static str, i64>,
    open: i64,
}

impl ShardMetrics {
    /// Sets the shard's share of the gauges from its current transactions.
    pub fn refresh<'a>(&mut self, txns: impl Iterator<Item = &'a TxnMetadata>) {
        let mut by_state: HashMap<&'static str, i64> = HashMap::new();
        let mut open = 0;
        for t in txns {
            *by_state.entry(t.state.name()).or_default() += 1;
            if is_open(t.state) {
                open += 1;
            }
        }
        self.apply(by_state, open);
    }

    /// Removes the shard's share (it resigned or stopped).
    pub fn clear(&mut self) {
        self.apply(HashMap::new(), 0);
    }

    fn apply(&mut self, by_state: HashMap<&'static str, i64>, open: i64) {
        let m = txn_metrics();
        for (state, n) in &by_state {
            let before = self.by_state.get(state).copied().unwrap_or(0);
            m.transactional_ids
                .with_label_values(&[state])
                .add(n - before);
        }
        for (state, before) in &self.by_state {
            if !by_state.contains_key(state) {
                m.transactional_ids.with_label_values(&[state]).sub(*before);
            }
        }
        m.open.add(open - self.open);
        self.by_state = by_state;
        self.open = open;
    }
}
