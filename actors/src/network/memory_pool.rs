//! The request memory pool (Kafka's `SimpleMemoryPool` behind `queued.max.request.bytes`): one
//! budget of request bytes shared by every connection of every listener. A connection that has
//! read a request's size prefix takes that many bytes from the pool before reading the body;
//! when the pool has nothing left the connection stops reading (Kafka mutes the channel) until
//! some other request's bytes come back. Bytes come back when the [`PoolLease`] is dropped,
//! which the connection arranges for once the request no longer needs its buffer.
//!
//! The facts follow Kafka 4.4: the pool exists only when `queued.max.request.bytes` > 0 (else
//! nothing is counted, [`MemoryPool::unbounded`]); allocation is *non-strict* (the SocketServer
//! creates the pool with `strict = false`): a request gets its bytes whenever the pool has any
//! byte left, so the pool may dip below zero by up to one request, and a connection waits only
//! while the pool is at or below zero. No request can be larger than the pool, because Kafka
//! refuses to start unless `queued.max.request.bytes >= socket.request.max.bytes`.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};

use prometheus::{IntGauge, IntGaugeVec, Opts};
use tokio::sync::Notify;

use crate::metrics;

/// A handle on the broker's request memory pool; cheap to clone, one per connection.
#[derive(Clone, Default)]
pub struct MemoryPool {
    /// `None` = `queued.max.request.bytes` ≤ 0: nothing is counted and nobody waits, so the
    /// default configuration pays one branch per request and no atomic operation.
    inner: Option<Arc<PoolInner>>,
}

struct PoolInner {
    size_bytes: i64,
    /// May go negative (non-strict allocation), never below `-(largest request - 1)`.
    available_bytes: AtomicI64,
    /// Wakes the connections waiting for bytes when the pool goes from empty to non-empty
    /// (Kafka's selector unmutes every memory-muted channel at that point).
    released: Notify,
    metrics: PoolMetrics,
}

impl std::fmt::Debug for MemoryPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.inner {
            None => f.write_str("MemoryPool(unbounded)"),
            Some(p) => write!(
                f,
                "MemoryPool({}/{} bytes available)",
                p.available_bytes.load(Ordering::Relaxed),
                p.size_bytes
            ),
        }
    }
}

/// Bytes taken from the pool for one request. [`PoolLease::release`] or dropping it gives them
/// back, once: a request's lease is shared by its buffer and its handler, and whichever is done
/// first returns the bytes (see `ConnectionActor::dispatch`).
#[must_use = "dropping the lease releases its bytes at once"]
pub struct PoolLease {
    pool: Arc<PoolInner>,
    bytes: i64,
    released: AtomicBool,
}

impl PoolLease {
    pub fn release(&self) {
        if self.released.swap(true, Ordering::AcqRel) {
            return;
        }
        let before = self
            .pool
            .available_bytes
            .fetch_add(self.bytes, Ordering::AcqRel);
        self.pool.metrics.release(self.bytes);
        // Waiters sleep only after seeing the pool at or below zero, and every release that
        // lifts it above zero wakes them: no wake-up can be lost, and releases into a pool
        // that already had room (the common case) skip Notify's lock.
        if before <= 0 && before + self.bytes > 0 {
            self.pool.released.notify_waiters();
        }
    }
}

impl Drop for PoolLease {
    fn drop(&mut self) {
        self.release();
    }
}

impl MemoryPool {
    /// No pool (`queued.max.request.bytes` ≤ 0, Kafka's `MemoryPool.NONE`).
    pub fn unbounded() -> Self {
        MemoryPool { inner: None }
    }

    /// The pool for `queued.max.request.bytes` (≤ 0 = [`Self::unbounded`]) serving the
    /// listeners of one kind (`listeners` labels its gauges: "broker" or "controller"). Sets
    /// those gauges, so build one per kind per broker.
    pub fn new(queued_max_request_bytes: i64, listeners: &str) -> Self {
        let metrics = PoolMetrics::for_listeners(listeners);
        if queued_max_request_bytes <= 0 {
            metrics.set_unbounded();
            return Self::unbounded();
        }
        metrics.set_size(queued_max_request_bytes);
        MemoryPool {
            inner: Some(Arc::new(PoolInner {
                size_bytes: queued_max_request_bytes,
                available_bytes: AtomicI64::new(queued_max_request_bytes),
                released: Notify::new(),
                metrics,
            })),
        }
    }

    pub fn is_bounded(&self) -> bool {
        self.inner.is_some()
    }

    /// Bytes not taken (negative when non-strict allocation overdrew the pool); `None` when
    /// unbounded.
    pub fn available_bytes(&self) -> Option<i64> {
        self.inner
            .as_ref()
            .map(|p| p.available_bytes.load(Ordering::Acquire))
    }

    /// Takes `bytes` if the pool has any byte left (Kafka's non-strict `tryAllocate`).
    /// `None` from an unbounded pool too: there is nothing to give back.
    pub fn try_allocate(&self, bytes: usize) -> Option<PoolLease> {
        let pool = self.inner.as_ref()?;
        try_take(pool, bytes as i64)
    }

    /// Takes `bytes`, waiting while the pool is empty; `None` at once when unbounded. The
    /// caller reads nothing more from its socket while this waits, which is Kafka's mute.
    /// Cancel-safe: dropping the future takes nothing.
    pub async fn allocate(&self, bytes: usize) -> Option<PoolLease> {
        let pool = self.inner.as_ref()?;
        let bytes = bytes as i64;
        loop {
            // Register for the wake-up before looking, so a release between the look and the
            // wait is not missed.
            let released = pool.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            if let Some(lease) = try_take(pool, bytes) {
                return Some(lease);
            }
            released.await;
        }
    }
}

fn try_take(pool: &Arc<PoolInner>, bytes: i64) -> Option<PoolLease> {
    let mut available = pool.available_bytes.load(Ordering::Acquire);
    while available >= 1 {
        match pool.available_bytes.compare_exchange_weak(
            available,
            available - bytes,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => {
                pool.metrics.allocate(bytes);
                return Some(PoolLease {
                    pool: pool.clone(),
                    bytes,
                    released: AtomicBool::new(false),
                });
            }
            Err(now) => available = now,
        }
    }
    None
}

/// Kafka's `MemoryPoolAvailable` / `MemoryPoolUsed` SocketServer gauges, for one pool. Moved
/// by deltas, so concurrent allocations and releases leave them exact once quiet.
struct PoolMetrics {
    available_bytes: IntGauge,
    used_bytes: IntGauge,
}

impl PoolMetrics {
    fn for_listeners(listeners: &str) -> Self {
        let (available, used) = families();
        PoolMetrics {
            available_bytes: available.with_label_values(&[listeners]),
            used_bytes: used.with_label_values(&[listeners]),
        }
    }

    fn allocate(&self, bytes: i64) {
        self.available_bytes.sub(bytes);
        self.used_bytes.add(bytes);
    }

    fn release(&self, bytes: i64) {
        self.available_bytes.add(bytes);
        self.used_bytes.sub(bytes);
    }

    fn set_size(&self, size_bytes: i64) {
        self.available_bytes.set(size_bytes);
        self.used_bytes.set(0);
    }

    /// Kafka's `MemoryPool.NONE` reports Long.MAX_VALUE available and nothing used.
    fn set_unbounded(&self) {
        self.available_bytes.set(i64::MAX);
        self.used_bytes.set(0);
    }
}

fn families() -> &'static (IntGaugeVec, IntGaugeVec) {
    static FAMILIES: OnceLock<(IntGaugeVec, IntGaugeVec)> = OnceLock::new();
    FAMILIES.get_or_init(|| {
        (
            metrics::register(
                IntGaugeVec::new(
                    Opts::new(
                        "kactor_network_request_memory_pool_available_bytes",
                        "Request bytes the queued.max.request.bytes pool can still give, by listener kind (negative when overdrawn; 2^63-1 when unbounded).",
                    ),
                    &["listeners"],
                )
                .expect("valid family"),
            ),
            metrics::register(
                IntGaugeVec::new(
                    Opts::new(
                        "kactor_network_request_memory_pool_used_bytes",
                        "Request bytes taken from the queued.max.request.bytes pool and not yet released, by listener kind.",
                    ),
                    &["listeners"],
                )
                .expect("valid family"),
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn unbounded_counts_nothing() {
        let pool = MemoryPool::new(-1, "test");
        assert!(!pool.is_bounded());
        assert!(pool.try_allocate(1 << 30).is_none());
        assert_eq!(pool.available_bytes(), None);
        assert!(!MemoryPool::new(0, "test").is_bounded());
    }

    #[test]
    fn non_strict_allocation_overdraws_once_then_refuses() {
        let pool = MemoryPool::new(100, "test");
        let a = pool.try_allocate(60).unwrap();
        // 40 left, 70 asked: granted (non-strict), the pool goes to -30.
        let b = pool.try_allocate(70).unwrap();
        assert_eq!(pool.available_bytes(), Some(-30));
        assert!(pool.try_allocate(1).is_none());
        drop(a);
        assert_eq!(pool.available_bytes(), Some(30));
        let c = pool.try_allocate(100).unwrap();
        // An explicit release gives the bytes back once; the drop after it does nothing.
        c.release();
        c.release();
        assert_eq!(pool.available_bytes(), Some(30));
        drop((b, c));
        assert_eq!(pool.available_bytes(), Some(100));
    }

    #[tokio::test]
    async fn a_waiter_wakes_when_bytes_come_back() {
        let pool = MemoryPool::new(100, "test");
        let all = pool.try_allocate(100).unwrap();
        let waiter = {
            let pool = pool.clone();
            tokio::spawn(async move { pool.allocate(50).await.map(|l| l.bytes) })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "allocated from an empty pool");
        drop(all);
        let got = tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("woken by the release")
            .unwrap();
        assert_eq!(got, Some(50));
        assert_eq!(pool.available_bytes(), Some(100));
    }
}
