//! The purgatory (Kafka's `DelayedOperationPurgatory` for `DelayedProduce` and `DelayedFetch`):
//! acks=all produces wait here for the high watermark, long-poll fetches for `fetch.min.bytes`
//! or `fetch.max.wait.ms`. `core` is the pure bookkeeping, `actor` the `PurgatoryActor`.

pub mod actor;
pub mod core;
pub mod messages;

pub use self::actor::PurgatoryActor;
pub use self::messages::*;

/// Parks acks=all `watches` until each partition's high watermark passes its required offset,
/// or `timeout_ms`: the code of every watched partition (NONE, REQUEST_TIMED_OUT,
/// NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS_AFTER_APPEND). No watches, no round trip.
/// Without an answer (the purgatory is gone, or restarted and lost it) every partition gets
/// REQUEST_TIMED_OUT: nothing is taken as replicated.
pub async fn await_replication(
    purgatory: &crate::runtime::MeteredAddr<PurgatoryActor>,
    watches: Vec<self::core::ProduceWatch>,
    timeout_ms: u64,
) -> std::collections::HashMap<crate::partition::core::TopicPartition, i16> {
    if watches.is_empty() {
        return Default::default();
    }
    let unanswered: std::collections::HashMap<_, _> = watches
        .iter()
        .map(|w| (w.tp.clone(), kactor_protocol::errors::REQUEST_TIMED_OUT))
        .collect();
    let (done, rx) = tokio::sync::oneshot::channel();
    purgatory.do_send(WatchProduce {
        watches,
        timeout_ms,
        done,
    });
    // The purgatory answers by `timeout_ms`; the margin only guards against a lost answer.
    let margin = std::time::Duration::from_millis(timeout_ms.saturating_add(1000));
    match tokio::time::timeout(margin, rx).await {
        Ok(Ok(r)) => unanswered.into_iter().chain(r).collect(),
        _ => unanswered,
    }
}

/// A coordinator's write-then-respond (Kafka's `CoordinatorRuntime` completing a write on the
/// high watermark event): waits, in the purgatory rather than by polling the partition, until
/// the high watermark of `tp` passes the append `out`. NONE once it did (also when the
/// partition was under min ISR then: the write is committed all the same),
/// NOT_LEADER_OR_FOLLOWER when the leadership it was appended under ended, REQUEST_TIMED_OUT
/// after `timeout_ms` or without a purgatory to wait in.
pub async fn await_commit(
    purgatory: Option<&crate::runtime::MeteredAddr<PurgatoryActor>>,
    tp: &crate::partition::core::TopicPartition,
    out: &crate::partition::core::AppendOutcome,
    timeout_ms: u64,
) -> i16 {
    use kactor_protocol::errors;
    if out.high_watermark > out.last_offset {
        return errors::NONE;
    }
    let Some(purgatory) = purgatory else {
        return errors::REQUEST_TIMED_OUT;
    };
    let watch = self::core::ProduceWatch {
        tp: tp.clone(),
        required_offset: out.last_offset + 1,
        observed_high_watermark: out.high_watermark,
        leader_epoch: out.leader_epoch,
    };
    match await_replication(purgatory, vec![watch], timeout_ms).await[tp] {
        errors::NONE | errors::NOT_ENOUGH_REPLICAS_AFTER_APPEND => errors::NONE,
        code => code,
    }
}
