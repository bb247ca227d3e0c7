//! Arbiter pools mirroring Kafka's thread pools: `num.network.threads` network arbiters
//! (Kafka's `Processor` threads: connections, round-robin), `num.io.threads` partition arbiters
//! (Kafka's request handler threads: `PartitionActor`s by hash of topic-partition), and three
//! single-thread arbiters by latency class:
//! - controller: Raft and the controller (Kafka's `QuorumController` event loop and
//!   `KafkaRaftClient`), and the metadata publisher that follows them;
//! - coordinator: the group and transaction coordinator managers and their shards, and the
//!   producer id manager (Kafka's coordinator runtime threads), so that a burst of offset
//!   commits never delays a Raft fsync or an election, and the reverse;
//! - storage: the replica manager and the log manager, whose work is file work (creating,
//!   deleting and flushing logs, retention), kept off the threads above.

use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use actix::prelude::*;

/// The process's arbiters. Cloning shares the round-robin cursor.
#[derive(Clone)]
pub struct ArbiterPools {
    network: Arc<Vec<ArbiterHandle>>,
    io: Arc<Vec<ArbiterHandle>>,
    controller: ArbiterHandle,
    coordinator: ArbiterHandle,
    storage: ArbiterHandle,
    next_network: Arc<AtomicUsize>,
}

impl ArbiterPools {
    /// Spawns the arbiter threads. Must run inside an actix `System`.
    pub fn start(network_threads: usize, io_threads: usize) -> Self {
        let spawn = |n: usize| {
            (0..n.max(1))
                .map(|_| Arbiter::new().handle())
                .collect::<Vec<_>>()
        };
        ArbiterPools {
            network: Arc::new(spawn(network_threads)),
            io: Arc::new(spawn(io_threads)),
            controller: Arbiter::new().handle(),
            coordinator: Arbiter::new().handle(),
            storage: Arbiter::new().handle(),
            next_network: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The next network arbiter, round-robin (a new connection's home).
    pub fn next_network(&self) -> ArbiterHandle {
        let i = self.next_network.fetch_add(1, Ordering::Relaxed) % self.network.len();
        self.network[i].clone()
    }

    /// The partition arbiter for a key (e.g. `(topic, partition)`), stable for the process.
    pub fn io_for<K: Hash>(&self, key: &K) -> ArbiterHandle {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        key.hash(&mut h);
        self.io[(h.finish() % self.io.len() as u64) as usize].clone()
    }

    pub fn io_arbiters(&self) -> &[ArbiterHandle] {
        &self.io
    }

    pub fn controller(&self) -> ArbiterHandle {
        self.controller.clone()
    }

    /// The group and transaction coordinators' arbiter.
    pub fn coordinator(&self) -> ArbiterHandle {
        self.coordinator.clone()
    }

    /// The replica manager's and log manager's arbiter (file work).
    pub fn storage(&self) -> ArbiterHandle {
        self.storage.clone()
    }

    /// Every arbiter: network, partition, controller, coordinator, storage.
    pub fn all(&self) -> impl Iterator<Item = &ArbiterHandle> {
        self.network.iter().chain(self.io.iter()).chain([
            &self.controller,
            &self.coordinator,
            &self.storage,
        ])
    }

    /// Asks every arbiter thread to stop (process shutdown).
    pub fn stop(&self) {
        for a in self.all() {
            a.stop();
        }
    }
}
