//! Group coordinator metric families (Kafka's `GroupCoordinatorMetrics`: group counts by state
//! and type, rebalance and offset-commit rates; plus per-group members and the consumer lag
//! that Kafka leaves to external exporters such as Burrow).
//!
//! Each shard refreshes its own groups on a timer ([`ShardMetrics::refresh`]) and owns the
//! label sets it set, removing them when its groups go away or the shard resigns.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::OnceLock;

use prometheus::{IntCounterVec, IntGaugeVec, Opts};

use super::core::{Group, GroupCoordinatorShard};
use crate::metrics::register;

pub struct GroupMetrics {
    /// `kactor_groups{state,type}`: groups this broker coordinates.
    pub groups: IntGaugeVec,
    /// `kactor_group_members{group,type}`: members of each group.
    pub members: IntGaugeVec,
    /// `kactor_group_rebalances_total{type}`: generations (classic) / group epochs (KIP-848)
    /// started.
    pub rebalances_total: IntCounterVec,
    /// `kactor_group_offset_commits_total{api}`: partition offsets committed (OffsetCommit,
    /// TxnOffsetCommit), counted once the commit is durable.
    pub offset_commits_total: IntCounterVec,
    /// `kactor_group_committed_offset{group,topic,partition}`.
    pub committed_offset: IntGaugeVec,
    /// `kactor_group_consumer_lag{group,topic,partition}`: high watermark minus the committed
    /// offset (partitions led by this broker only).
    pub consumer_lag: IntGaugeVec,
}

pub fn group_metrics() -> &'static GroupMetrics {
    static M: OnceLock<GroupMetrics> = OnceLock::new();
    M.get_or_init(|| {
        let gauge = |name: &str, help: &str, labels: &[&str]| {
            register(IntGaugeVec::new(Opts::new(name, help), labels).expect("valid family"))
        };
        let counter = |name: &str, help: &str, labels: &[&str]| {
            register(IntCounterVec::new(Opts::new(name, help), labels).expect("valid family"))
        };
        GroupMetrics {
            groups: gauge(
                "kactor_groups",
                "Groups coordinated by this broker, by state and type.",
                &["state", "type"],
            ),
            members: gauge(
                "kactor_group_members",
                "Members of a group.",
                &["group", "type"],
            ),
            rebalances_total: counter(
                "kactor_group_rebalances_total",
                "Rebalances (new classic generations, new KIP-848 group epochs), by type.",
                &["type"],
            ),
            offset_commits_total: counter(
                "kactor_group_offset_commits_total",
                "Partition offsets committed, by API.",
                &["api"],
            ),
            committed_offset: gauge(
                "kactor_group_committed_offset",
                "A group's committed offset for a partition.",
                &["group", "topic", "partition"],
            ),
            consumer_lag: gauge(
                "kactor_group_consumer_lag",
                "High watermark minus the group's committed offset, by partition.",
                &["group", "topic", "partition"],
            ),
        }
    })
}

/// One committed offset whose lag is wanted: (group, topic, partition) -> offset.
pub type Committed = BTreeMap<(String, String, i32), i64>;

/// What one shard last contributed, so a refresh applies differences and a resignation
/// removes exactly its own series.
#[derive(Default)]
pub struct ShardMetrics {
    counts: HashMap<(&'static str, &'static str), i64>,
    members: BTreeSet<(String, &'static str)>,
    /// Last seen generation / group epoch. The first refresh after a load is only a baseline
    /// (those generations were counted by an earlier shard); a group that appears later was
    /// created here, so all its generations count.
    epochs: HashMap<String, i32>,
    primed: bool,
    offsets: BTreeSet<(String, String, i32)>,
    lags: BTreeSet<(String, String, i32)>,
}

impl ShardMetrics {
    /// Updates group counts, members and rebalances from the shard; returns its committed
    /// offsets for the lag step ([`ShardMetrics::set_lags`]).
    pub fn refresh(&mut self, shard: &GroupCoordinatorShard) -> Committed {
        let m = group_metrics();
        let mut counts: HashMap<(&'static str, &'static str), i64> = HashMap::new();
        let mut members = BTreeSet::new();
        let mut epochs = HashMap::new();
        for (id, g) in shard.groups() {
            let ty = g.type_name();
            *counts.entry((g.state_name(), ty)).or_default() += 1;
            let (n, epoch) = match g {
                Group::Classic(c) => (c.members.len(), c.generation_id),
                Group::Consumer(c) => (c.members.len(), c.group_epoch),
                Group::Share(c) => (c.members.len(), c.group_epoch),
            };
            m.members.with_label_values(&[id, ty]).set(n as i64);
            members.insert((id.clone(), ty));
            let prev = match self.epochs.get(id) {
                Some(prev) => Some(*prev),
                None if self.primed => Some(0),
                None => None,
            };
            if let Some(prev) = prev.filter(|p| epoch > *p) {
                m.rebalances_total
                    .with_label_values(&[ty])
                    .inc_by((epoch - prev) as u64);
            }
            epochs.insert(id.clone(), epoch);
        }
        for key in self.counts.keys().chain(counts.keys()) {
            let old = self.counts.get(key).copied().unwrap_or(0);
            let new = counts.get(key).copied().unwrap_or(0);
            if old != new {
                m.groups.with_label_values(&[key.0, key.1]).add(new - old);
            }
        }
        for (id, ty) in self.members.difference(&members) {
            let _ = m.members.remove_label_values(&[id, ty]);
        }
        self.counts = counts;
        self.members = members;
        self.epochs = epochs;
        self.primed = true;

        let mut committed = Committed::new();
        for (group, topics) in shard.offsets().all_groups() {
            for (topic, partitions) in topics {
                for (p, v) in partitions {
                    committed.insert((group.clone(), topic.clone(), *p), v.offset);
                }
            }
        }
        let keys: BTreeSet<_> = committed.keys().cloned().collect();
        for (g, t, p) in self.offsets.difference(&keys) {
            let _ = m
                .committed_offset
                .remove_label_values(&[g, t, &p.to_string()]);
        }
        for ((g, t, p), o) in &committed {
            m.committed_offset
                .with_label_values(&[g, t, &p.to_string()])
                .set(*o);
        }
        self.offsets = keys;
        committed
    }

    /// Sets the lag of every committed offset whose partition's high watermark is known.
    pub fn set_lags(
        &mut self,
        committed: &Committed,
        high_watermarks: &HashMap<(String, i32), i64>,
    ) {
        let m = group_metrics();
        let mut lags = BTreeSet::new();
        for ((g, t, p), o) in committed {
            if let Some(hw) = high_watermarks.get(&(t.clone(), *p)) {
                m.consumer_lag
                    .with_label_values(&[g, t, &p.to_string()])
                    .set((hw - o).max(0));
                lags.insert((g.clone(), t.clone(), *p));
            }
        }
        for (g, t, p) in self.lags.difference(&lags) {
            let _ = m.consumer_lag.remove_label_values(&[g, t, &p.to_string()]);
        }
        self.lags = lags;
    }

    /// The shard resigned or stopped: withdraw everything it contributed.
    pub fn clear(&mut self) {
        let m = group_metrics();
        for ((state, ty), n) in self.counts.drain() {
            m.groups.with_label_values(&[state, ty]).sub(n);
        }
        for (id, ty) in std::mem::take(&mut self.members) {
            let _ = m.members.remove_label_values(&[&id, ty]);
        }
        for (g, t, p) in std::mem::take(&mut self.offsets) {
            let _ = m
                .committed_offset
                .remove_label_values(&[&g, &t, &p.to_string()]);
        }
        for (g, t, p) in std::mem::take(&mut self.lags) {
            let _ = m
                .consumer_lag
                .remove_label_values(&[&g, &t, &p.to_string()]);
        }
        self.epochs.clear();
        self.primed = false;
    }
}
