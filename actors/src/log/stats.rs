//! Per-thread counters of the work done by offset lookups (no Kafka counterpart: Kafka shows the
//! same property only through its benchmarks). Tests and `log_bench` read them to show that a
//! lookup is a binary search over the index plus at most one index interval read from `.log`.
//! Thread-local, so tests running in parallel threads do not see each other's reads.

use std::cell::Cell;

thread_local! {
    static LOG_BYTES_READ: Cell<u64> = const { Cell::new(0) };
    static INDEX_PROBES: Cell<u64> = const { Cell::new(0) };
}

/// Work done on this thread since it started (counters only grow: take differences).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LookupStats {
    /// Bytes `pread` from `.log` files while walking batch headers (reads, lookups, scans).
    pub log_bytes_read: u64,
    /// Index entries compared during binary searches of `.index` / `.timeindex`.
    pub index_probes: u64,
}

impl LookupStats {
    /// The counters of the calling thread.
    pub fn current() -> Self {
        LookupStats {
            log_bytes_read: LOG_BYTES_READ.with(Cell::get),
            index_probes: INDEX_PROBES.with(Cell::get),
        }
    }

    /// What happened between `earlier` and now.
    pub fn since(earlier: LookupStats) -> Self {
        let now = Self::current();
        LookupStats {
            log_bytes_read: now.log_bytes_read - earlier.log_bytes_read,
            index_probes: now.index_probes - earlier.index_probes,
        }
    }
}

pub(crate) fn add_log_bytes_read(n: usize) {
    LOG_BYTES_READ.with(|c| c.set(c.get() + n as u64));
}

pub(crate) fn add_index_probe() {
    INDEX_PROBES.with(|c| c.set(c.get() + 1));
}
