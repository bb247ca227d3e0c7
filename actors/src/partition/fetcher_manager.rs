//! Which fetcher follows which partition (Kafka's `AbstractFetcherManager`): one
//! `ReplicaFetcherActor` per (leader broker, fetcher id), the fetcher id chosen from the
//! partition as Kafka chooses it (`num.replica.fetchers`), and the leader's address taken from
//! its registration in the metadata image (the inter-broker listener). Owned by the
//! `ReplicaManagerActor`, which calls it while applying metadata changes.

use std::collections::{BTreeMap, HashMap};

use super::core::TopicPartition;
use super::fetcher::{
    AddFollowedPartitions, FetcherConfig, FollowedPartition, RemoveFollowedPartitions,
    ReplicaFetcherActor, SetLeaderAddress,
};
use crate::metadata::core::MetadataImage;
use crate::runtime::{ActorMetrics, ArbiterPools, MeteredAddr};

/// Kafka's `AbstractFetcherManager.getFetcherId`: `abs(31 * topic.hashCode + partition) %
/// num.replica.fetchers`, with Java's `String.hashCode`, so that a partition goes to the same
/// fetcher id on kactor as on Kafka.
pub fn fetcher_id(tp: &TopicPartition, num_fetchers: usize) -> usize {
    let mut h: i32 = 0;
    for unit in tp.topic.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(unit as i32);
    }
    let v = h.wrapping_mul(31).wrapping_add(tp.partition);
    // Kafka's Utils.abs maps MIN_VALUE to 0.
    let abs = if v == i32::MIN { 0 } else { v.abs() };
    abs as usize % num_fetchers.max(1)
}

/// The address (host:port) a follower reaches `broker` at: its endpoint on the listener named
/// `listener` (`inter.broker.listener.name`), else its PLAINTEXT one, else its first.
pub fn broker_address(
    image: &MetadataImage,
    broker: i32,
    listener: Option<&str>,
) -> Option<String> {
    let reg = image.brokers.get(&broker)?;
    let pick = |name: &str| reg.listeners.iter().find(|l| l.name == name);
    let ep = listener
        .and_then(pick)
        .or_else(|| pick("PLAINTEXT"))
        .or_else(|| reg.listeners.first())?;
    Some(format!("{}:{}", ep.host, ep.port))
}

type FetcherKey = (i32, usize);

pub struct FetcherManager {
    cfg: FetcherConfig,
    num_fetchers: usize,
    listener: Option<String>,
    arbiters: Option<ArbiterPools>,
    fetchers: HashMap<FetcherKey, (MeteredAddr<ReplicaFetcherActor>, String)>,
    /// Which fetcher follows each partition, under which leader epoch.
    followed: HashMap<TopicPartition, (FetcherKey, i32)>,
}

impl FetcherManager {
    pub fn new(
        broker_id: i32,
        config: &BTreeMap<String, String>,
        arbiters: Option<ArbiterPools>,
    ) -> Self {
        let num_fetchers = config
            .get("num.replica.fetchers")
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(1)
            .max(1);
        FetcherManager {
            cfg: FetcherConfig::from_broker_config(broker_id, config),
            num_fetchers,
            listener: config
                .get("inter.broker.listener.name")
                .filter(|v| !v.is_empty())
                .cloned(),
            arbiters,
            fetchers: HashMap::new(),
            followed: HashMap::new(),
        }
    }

    pub fn replication_quotas(
        &self,
    ) -> &std::sync::Arc<super::replication_quota::ReplicationQuotas> {
        &self.cfg.quotas
    }

    pub fn followed_count(&self) -> usize {
        self.followed.len()
    }

    /// Follows `partition` from `leader`. Returns false when the leader's address is not known
    /// (not registered): the partition stays unfollowed until a later image places it.
    pub fn follow(&mut self, image: &MetadataImage, leader: i32, p: FollowedPartition) -> bool {
        self.note_own_epoch(image);
        let key = (leader, fetcher_id(&p.tp, self.num_fetchers));
        if self.followed.get(&p.tp) == Some(&(key, p.leader_epoch)) {
            // Only the ISR or replica set changed: the fetcher goes on as it was.
            return true;
        }
        self.unfollow(std::slice::from_ref(&p.tp));
        let Some(address) = broker_address(image, leader, self.listener.as_deref()) else {
            tracing::warn!(tp = %p.tp, leader, "cannot follow: the leader has no registered endpoint");
            return false;
        };
        let fetcher = self.fetcher(key, &address);
        self.followed.insert(p.tp.clone(), (key, p.leader_epoch));
        fetcher.do_send(AddFollowedPartitions(vec![p]));
        true
    }

    /// Stops following these partitions (they lead here now, were deleted or went offline).
    pub fn unfollow(&mut self, tps: &[TopicPartition]) {
        let mut by_fetcher: HashMap<FetcherKey, Vec<TopicPartition>> = HashMap::new();
        for tp in tps {
            if let Some((key, _)) = self.followed.remove(tp) {
                by_fetcher.entry(key).or_default().push(tp.clone());
            }
        }
        for (key, tps) in by_fetcher {
            if let Some((addr, _)) = self.fetchers.get(&key) {
                addr.do_send(RemoveFollowedPartitions(tps));
            }
        }
    }

    /// This broker's registration epoch, as the fetchers send it.
    fn note_own_epoch(&self, image: &MetadataImage) {
        if let Some(me) = image.brokers.get(&self.cfg.broker_id) {
            self.cfg
                .broker_epoch
                .store(me.epoch, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// A new image: a leader that registered again at another address is fetched from there,
    /// and fetches carry this broker's current epoch.
    pub fn refresh_addresses(&mut self, image: &MetadataImage) {
        self.note_own_epoch(image);
        for ((leader, _), (addr, address)) in self.fetchers.iter_mut() {
            if let Some(now) = broker_address(image, *leader, self.listener.as_deref()) {
                if now != *address {
                    *address = now.clone();
                    addr.do_send(SetLeaderAddress(now));
                }
            }
        }
    }

    fn fetcher(&mut self, key: FetcherKey, address: &str) -> MeteredAddr<ReplicaFetcherActor> {
        if let Some((addr, known)) = self.fetchers.get_mut(&key) {
            if known != address {
                *known = address.to_string();
                addr.do_send(SetLeaderAddress(address.to_string()));
            }
            return addr.clone();
        }
        let (leader, id) = key;
        let cfg = self.cfg.clone();
        let address_owned = address.to_string();
        let metrics = ActorMetrics::new("ReplicaFetcherActor");
        let m = metrics.clone();
        let make = move |_: &mut actix::Context<ReplicaFetcherActor>| {
            ReplicaFetcherActor::new(leader, id, address_owned.clone(), cfg.clone(), m.clone())
        };
        let addr = match &self.arbiters {
            Some(pools) => {
                let arbiter = pools.io_for(&("replica-fetcher", leader, id));
                crate::runtime::start_supervised(&arbiter, metrics, make)
            }
            None => MeteredAddr::new(actix::Supervisor::start(make), metrics),
        };
        tracing::info!(leader, fetcher = id, address, "started a replica fetcher");
        self.fetchers
            .insert(key, (addr.clone(), address.to_string()));
        addr
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fetcher_ids_match_kafkas_formula() {
        // Java: Math.abs(31 * "t".hashCode() + 0) % 3 = (31 * 116) % 3 = 3596 % 3 = 2
        assert_eq!(fetcher_id(&TopicPartition::new("t", 0), 3), 2);
        assert_eq!(fetcher_id(&TopicPartition::new("t", 1), 3), 0);
        // One fetcher takes everything.
        assert_eq!(fetcher_id(&TopicPartition::new("orders", 17), 1), 0);
        // A long name overflows i32 as Java's hashCode does and stays in range.
        let tp = TopicPartition::new("a-rather-long-topic-name-for-overflow", 5);
        assert!(fetcher_id(&tp, 4) < 4);
    }
}
