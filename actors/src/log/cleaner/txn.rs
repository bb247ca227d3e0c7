//! Transaction bookkeeping while the cleaner walks a log (Kafka's `CleanedTransactionMetadata`):
//! which data batches belong to aborted transactions (removed), and when a commit or abort
//! marker may go (once no batch of its transaction is left before it).

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::log::AbortedTxn;

/// An aborted transaction the walk is inside of, and the last data batch of it seen so far.
#[derive(Debug, Clone, Copy)]
struct OngoingAbort {
    txn: AbortedTxn,
    last_observed_batch_offset: Option<i64>,
}

/// What a control batch's marker is, as far as the cleaner cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerKind {
    Commit,
    Abort,
    /// Another control record type (never discarded by the transaction rules).
    Other,
    /// A control batch without records: an earlier cleaning already emptied it.
    Empty,
}

#[derive(Debug, Default)]
pub struct CleanedTxnState {
    ongoing_committed: HashSet<i64>,
    ongoing_aborted: HashMap<i64, OngoingAbort>,
    /// Aborted transactions not reached yet, by first offset (and producer, to dedupe).
    pending: BTreeSet<(i64, i64, i64, i64)>,
    /// The aborted transactions whose markers were kept: the cleaned segment's `.txnindex`.
    retained_aborts: Vec<AbortedTxn>,
}

impl CleanedTxnState {
    pub fn add_aborted(&mut self, txns: impl IntoIterator<Item = AbortedTxn>) {
        for t in txns {
            self.pending.insert((
                t.first_offset,
                t.producer_id,
                t.last_offset,
                t.last_stable_offset,
            ));
        }
    }

    fn consume_aborted_up_to(&mut self, offset: i64) {
        while let Some(&first) = self.pending.first() {
            if first.0 > offset {
                break;
            }
            self.pending.pop_first();
            let (first_offset, producer_id, last_offset, last_stable_offset) = first;
            self.ongoing_aborted
                .entry(producer_id)
                .or_insert(OngoingAbort {
                    txn: AbortedTxn {
                        producer_id,
                        first_offset,
                        last_offset,
                        last_stable_offset,
                    },
                    last_observed_batch_offset: None,
                });
        }
    }

    /// A control batch was read: true when it may be discarded. A kept abort marker goes into
    /// the cleaned `.txnindex` (see [`CleanedTxnState::take_retained_aborts`]).
    pub fn on_control_batch(
        &mut self,
        producer_id: i64,
        last_offset: i64,
        kind: MarkerKind,
    ) -> bool {
        self.consume_aborted_up_to(last_offset);
        match kind {
            MarkerKind::Abort => match self.ongoing_aborted.remove(&producer_id) {
                // Kept until every batch of the transaction is gone from the log.
                Some(a) if a.last_observed_batch_offset.is_some() => {
                    self.retained_aborts.push(a.txn);
                    false
                }
                _ => true,
            },
            // Discardable when none of the transaction's batches was seen.
            MarkerKind::Commit => !self.ongoing_committed.remove(&producer_id),
            MarkerKind::Other => false,
            MarkerKind::Empty => true,
        }
    }

    /// A data batch was read: true when it belongs to an aborted transaction (discard it).
    pub fn on_data_batch(
        &mut self,
        producer_id: i64,
        last_offset: i64,
        transactional: bool,
    ) -> bool {
        self.consume_aborted_up_to(last_offset);
        if !transactional {
            return false;
        }
        match self.ongoing_aborted.get_mut(&producer_id) {
            Some(a) => {
                a.last_observed_batch_offset = Some(last_offset);
                true
            }
            None => {
                self.ongoing_committed.insert(producer_id);
                false
            }
        }
    }

    /// The aborted transactions whose markers were kept since the last call.
    pub fn take_retained_aborts(&mut self) -> Vec<AbortedTxn> {
        std::mem::take(&mut self.retained_aborts)
    }
}
