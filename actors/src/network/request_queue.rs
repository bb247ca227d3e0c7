//! The broker-wide request queue bound (Kafka's `RequestChannel` queue of `queued.max.requests`
//! shared by every processor): at most that many requests are read and not yet handled, over
//! all connections of the listeners of one kind. Kafka's processors block on a full queue and
//! stop reading; kactor's connections wait for a slot after a request's size prefix and before
//! its body, so a full broker pushes back on every client through TCP while no request body is
//! held for it.
//!
//! A slot is held from the moment its body is read until its handler has finished; the response
//! may still be waiting to be written (a client that does not read its answers holds only its
//! own connection's `queued.max.requests` responses, never the broker's slots). Before this
//! bound was broker-wide, each connection could hold `queued.max.requests` requests: eight
//! connections pipelining 1 MiB produce requests took the RSS to 3.9 GB.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use prometheus::{IntGauge, IntGaugeVec, Opts};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::memory_pool::{MemoryPool, PoolLease};
use crate::metrics;

/// What requests of one listener kind may hold while read and not yet handled: a place in the
/// [`RequestQueue`] each, and (with `queued.max.request.bytes`) their bytes from the
/// [`MemoryPool`].
#[derive(Clone, Debug)]
pub struct RequestBudget {
    pub queue: RequestQueue,
    pub pool: MemoryPool,
}

impl RequestBudget {
    /// `queued.max.requests` and `queued.max.request.bytes` (≤ 0: no byte bound) for the
    /// listeners of one kind ("broker" or "controller", the gauges' label).
    pub fn new(queued_max_requests: usize, queued_max_request_bytes: i64, listeners: &str) -> Self {
        RequestBudget {
            queue: RequestQueue::new(queued_max_requests, listeners),
            pool: MemoryPool::new(queued_max_request_bytes, listeners),
        }
    }
}

/// What one read request holds of its listeners' [`RequestBudget`] until its handler is done;
/// dropping it gives the place and the bytes back.
pub struct RequestHold {
    _slot: RequestSlot,
    /// The frame's pool bytes (bounded pool only), shared with the frame's buffer: whichever of
    /// the two is done first returns them.
    lease: Option<Arc<PoolLease>>,
}

impl RequestHold {
    pub fn new(slot: RequestSlot, lease: Option<Arc<PoolLease>>) -> Self {
        RequestHold { _slot: slot, lease }
    }
}

impl Drop for RequestHold {
    fn drop(&mut self) {
        if let Some(lease) = &self.lease {
            lease.release();
        }
    }
}

/// Shared by every connection of one listener kind; cheap to clone.
#[derive(Clone, Debug)]
pub struct RequestQueue {
    slots: Arc<Semaphore>,
    queued: IntGauge,
}

/// One request's place in the queue; dropping it frees the place.
#[derive(Debug)]
pub struct RequestSlot {
    _permit: OwnedSemaphorePermit,
    queued: IntGauge,
}

impl Drop for RequestSlot {
    fn drop(&mut self) {
        self.queued.dec();
    }
}

impl RequestQueue {
    /// `queued_max_requests` slots (at least one) for the listeners of one kind (`listeners`
    /// labels the gauge: "broker" or "controller").
    pub fn new(queued_max_requests: usize, listeners: &str) -> Self {
        RequestQueue {
            slots: Arc::new(Semaphore::new(queued_max_requests.max(1))),
            queued: queue_gauges().with_label_values(&[listeners]),
        }
    }

    /// Waits for a free slot.
    pub async fn enter(&self) -> RequestSlot {
        REQUESTS_ENTERED.fetch_add(1, Ordering::Relaxed);
        let permit = self
            .slots
            .clone()
            .acquire_owned()
            .await
            .expect("the request queue's semaphore is never closed");
        self.queued.inc();
        RequestSlot {
            _permit: permit,
            queued: self.queued.clone(),
        }
    }

    /// Slots free now (tests).
    pub fn available(&self) -> usize {
        self.slots.available_permits()
    }
}

static REQUESTS_ENTERED: AtomicU64 = AtomicU64::new(0);

/// Requests that have asked for a queue place since the process started, over every listener:
/// how busy the broker is, for work that should wait for a quiet moment (giving memory back).
pub fn requests_entered() -> u64 {
    REQUESTS_ENTERED.load(Ordering::Relaxed)
}

/// `kactor_network_request_queue_size{listeners}`: Kafka's `RequestQueueSize` gauge, requests
/// read and not yet handled.
fn queue_gauges() -> &'static IntGaugeVec {
    static G: OnceLock<IntGaugeVec> = OnceLock::new();
    G.get_or_init(|| {
        metrics::register(
            IntGaugeVec::new(
                Opts::new(
                    "kactor_network_request_queue_size",
                    "Requests read and not yet handled (bounded by queued.max.requests across \
                     all connections), by listener kind.",
                ),
                &["listeners"],
            )
            .expect("valid family"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn slots_are_shared_and_come_back_when_dropped() {
        let q = RequestQueue::new(2, "test");
        let a = q.enter().await;
        let _b = q.clone().enter().await;
        assert_eq!(q.available(), 0);
        let waiting = tokio::spawn({
            let q = q.clone();
            async move { q.enter().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(a);
        let _c = tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("a freed slot is taken")
            .unwrap();
        assert_eq!(q.available(), 0);
    }
}
