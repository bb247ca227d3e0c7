//! Controller gauges (Kafka's `QuorumControllerMetrics` / `ControllerMetadataMetrics`): whether
//! this node is the active controller, and, on the active one, the cluster's partition and
//! broker health as its metadata image shows it: offline partitions (no leader), partitions
//! not led by their preferred replica, fenced and active brokers. The counts are a pure
//! function of the image; the actor refreshes the gauges when the image moves.

use std::sync::OnceLock;

use prometheus::IntGauge;

use crate::metadata::MetadataImage;
use crate::metrics::register;

/// What the gauges show, computed from an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ControllerCounts {
    pub topics: i64,
    pub partitions: i64,
    /// Partitions with no leader (Kafka's `OfflinePartitionsCount`).
    pub offline_partitions: i64,
    /// Partitions whose leader is not their first replica (`PreferredReplicaImbalanceCount`).
    pub preferred_replica_imbalance: i64,
    pub fenced_brokers: i64,
    pub active_brokers: i64,
}

impl ControllerCounts {
    pub fn of(image: &MetadataImage) -> Self {
        let mut c = ControllerCounts {
            topics: image.topics.by_id.len() as i64,
            ..Default::default()
        };
        for t in image.topics.by_id.values() {
            for p in t.partitions.values() {
                c.partitions += 1;
                if p.leader < 0 {
                    c.offline_partitions += 1;
                }
                if p.replicas.first().is_some_and(|first| *first != p.leader) {
                    c.preferred_replica_imbalance += 1;
                }
            }
        }
        for b in image.brokers.values() {
            if b.fenced {
                c.fenced_brokers += 1;
            } else {
                c.active_brokers += 1;
            }
        }
        c
    }
}

struct Gauges {
    active: IntGauge,
    topics: IntGauge,
    partitions: IntGauge,
    offline_partitions: IntGauge,
    preferred_replica_imbalance: IntGauge,
    fenced_brokers: IntGauge,
    active_brokers: IntGauge,
}

fn gauges() -> &'static Gauges {
    static G: OnceLock<Gauges> = OnceLock::new();
    G.get_or_init(|| {
        let g = |name: &str, help: &str| register(IntGauge::new(name, help).expect("valid"));
        Gauges {
            active: g(
                "kactor_controller_active",
                "1 on the active controller, 0 on the other controllers.",
            ),
            topics: g(
                "kactor_controller_topics",
                "Topics in the metadata (active controller).",
            ),
            partitions: g(
                "kactor_controller_partitions",
                "Partitions in the metadata (active controller).",
            ),
            offline_partitions: g(
                "kactor_controller_offline_partitions",
                "Partitions without a leader (active controller).",
            ),
            preferred_replica_imbalance: g(
                "kactor_controller_preferred_replica_imbalance",
                "Partitions not led by their preferred (first) replica (active controller).",
            ),
            fenced_brokers: g(
                "kactor_controller_fenced_brokers",
                "Registered brokers that are fenced (active controller).",
            ),
            active_brokers: g(
                "kactor_controller_active_brokers",
                "Registered brokers that are unfenced (active controller).",
            ),
        }
    })
}

/// Sets the gauges: the counts on the active controller, zeros elsewhere (as Kafka reports
/// them only from the active one), so that a sum over controllers is the cluster's figure.
pub fn publish(active: bool, counts: &ControllerCounts) {
    let g = gauges();
    let zero = ControllerCounts::default();
    let c = if active { counts } else { &zero };
    g.active.set(active as i64);
    g.topics.set(c.topics);
    g.partitions.set(c.partitions);
    g.offline_partitions.set(c.offline_partitions);
    g.preferred_replica_imbalance
        .set(c.preferred_replica_imbalance);
    g.fenced_brokers.set(c.fenced_brokers);
    g.active_brokers.set(c.active_brokers);
}
