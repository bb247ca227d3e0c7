//! Arbiter pools mirroring Kafka's thread pools: `num.network.threads` network arbiters
//! (Kafka's `Processor` threads: connections, round-robin), `num.io.threads` partition arbiters
//! (Kafka's request handler threads: `PartitionActor`s by hash of topic-partition), and one
//! controller arbiter (Kafka's `QuorumController` event loop + `KafkaRaftClient`).

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

    /// Every arbiter: network, partition, controller.
    pub fn all(&self) -> impl Iterator<Item = &ArbiterHandle> {
        self.network
            .iter()
            .chain(self.io.iter())
            .chain(std::iter::once(&self.controller))
    }

    /// Asks every arbiter thread to stop (process shutdown).
    pub fn stop(&self) {
        for a in self.all() {
            a.stop();
        }
    }
}
