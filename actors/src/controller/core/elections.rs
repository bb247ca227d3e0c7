//! Leader elections an administrator asks for (ElectLeaders, `kafka-leader-election`; Kafka's
//! `ReplicationControlManager.electLeaders` with its `PartitionChangeBuilder` election rules).
//!
//! PREFERRED gives leadership back to a partition's first replica, which is where replica
//! placement spread leaders evenly; after a broker restart the partitions it led stay with
//! whoever took them over until this runs. UNCLEAN gives a leaderless partition a leader, from
//! outside the ISR when no in-sync replica is usable (the admin accepts losing records).

use kactor_protocol::errors::*;
use kactor_protocol::metadata::PartitionChangeRecord;

use super::errors::*;
use super::requests::{ElectionType, TopicElectionResult};
use super::{ControllerResult, QuorumControllerCore};
use crate::metadata::core::{MetadataRecord, PartitionRegistration};

/// Kafka's default texts for these codes, which it puts in `error_message` too.
const ELECTION_NOT_NEEDED_MSG: &str = "Leader election not needed for topic partition.";
const PREFERRED_LEADER_NOT_AVAILABLE_MSG: &str = "The preferred leader was not available.";
const ELIGIBLE_LEADERS_NOT_AVAILABLE_MSG: &str =
    "Eligible topic partition leaders are not available.";

/// At most this many elections per periodic pass (Kafka's `MAX_ELECTIONS_PER_IMBALANCE`); a
/// pass that reaches it runs again at once.
pub const MAX_ELECTIONS_PER_PASS: usize = 1_000;

impl QuorumControllerCore {
    /// Runs `election` for the requested partitions, or for every partition when `partitions`
    /// is None; then the partitions that already have the leader asked for are left out of the
    /// answer, as Kafka does. Results keep the request's grouping and order, duplicates
    /// included.
    pub fn elect_leaders(
        &mut self,
        election: ElectionType,
        partitions: Option<&[(String, Vec<i32>)]>,
    ) -> ControllerResult<Vec<TopicElectionResult>> {
        if let Some(r) = self.not_controller(Vec::new()) {
            return r;
        }
        let mut records = Vec::new();
        let mut results = Vec::new();
        match partitions {
            Some(requested) => {
                for (topic, indexes) in requested {
                    let partitions = indexes
                        .iter()
                        .map(|&i| (i, self.elect_one(topic, i, election, &mut records)))
                        .collect();
                    results.push(TopicElectionResult {
                        topic: topic.clone(),
                        partitions,
                    });
                }
            }
            None => {
                let all: Vec<(String, Vec<i32>)> = self
                    .topics_by_name()
                    .map(|(name, t)| (name.clone(), t.partitions.keys().copied().collect()))
                    .collect();
                for (topic, indexes) in all {
                    let partitions: Vec<_> = indexes
                        .into_iter()
                        .map(|i| (i, self.elect_one(&topic, i, election, &mut records)))
                        .filter(|(_, e)| e.code != ELECTION_NOT_NEEDED)
                        .collect();
                    if !partitions.is_empty() {
                        results.push(TopicElectionResult { topic, partitions });
                    }
                }
            }
        }
        // Each change was applied as it was made (`elect_one`).
        ControllerResult::of(records, results)
    }

    /// One partition's election; a leader change is appended to `records` and applied to the
    /// image at once, so a partition named twice is elected once.
    fn elect_one(
        &mut self,
        topic: &str,
        index: i32,
        election: ElectionType,
        records: &mut Vec<MetadataRecord>,
    ) -> ApiError {
        let Some(t) = self.image.topics.get_by_name(topic) else {
            return ApiError::new(
                UNKNOWN_TOPIC_OR_PARTITION,
                format!("No such topic as {topic}"),
            );
        };
        let topic_id = t.id;
        let Some(p) = t.partitions.get(&index).cloned() else {
            return ApiError::new(
                UNKNOWN_TOPIC_OR_PARTITION,
                format!("No such partition as {topic}-{index}"),
            );
        };
        let not_needed = match election {
            ElectionType::Preferred => p.replicas.first() == Some(&p.leader),
            ElectionType::Unclean => p.leader != -1,
        };
        if not_needed {
            return ApiError::new(ELECTION_NOT_NEEDED, ELECTION_NOT_NEEDED_MSG);
        }
        let change = match election {
            ElectionType::Preferred => self.preferred_leader(&p).map(|leader| (leader, None)),
            ElectionType::Unclean => {
                self.choose_leader(topic, index, &p, &p.isr, |b| self.is_usable(b), || true)
            }
        };
        let Some((leader, isr)) = change.filter(|(leader, _)| *leader != p.leader) else {
            return match election {
                ElectionType::Preferred => ApiError::new(
                    PREFERRED_LEADER_NOT_AVAILABLE,
                    PREFERRED_LEADER_NOT_AVAILABLE_MSG,
                ),
                ElectionType::Unclean => ApiError::new(
                    ELIGIBLE_LEADERS_NOT_AVAILABLE,
                    ELIGIBLE_LEADERS_NOT_AVAILABLE_MSG,
                ),
            };
        };
        let record = MetadataRecord::PartitionChange(PartitionChangeRecord {
            partition_id: index,
            topic_id,
            isr,
            leader,
            ..Default::default()
        });
        self.apply_own(std::slice::from_ref(&record));
        records.push(record);
        ApiError::NONE
    }

    /// The leader a preferred election settles on: the first replica if it is in sync and can
    /// lead; otherwise a current leader that can still lead stays (no change); otherwise the
    /// next in-sync replica that can lead. None: no replica qualifies.
    fn preferred_leader(&self, p: &PartitionRegistration) -> Option<i32> {
        let eligible = |b: i32| p.isr.contains(&b) && self.is_usable(b);
        let preferred = *p.replicas.first()?;
        if eligible(preferred) {
            return Some(preferred);
        }
        if eligible(p.leader) {
            return Some(p.leader);
        }
        p.replicas.iter().skip(1).copied().find(|&b| eligible(b))
    }

    /// Kafka's `maybeBalancePartitionLeaders` (`auto.leader.rebalance.enable`): every partition
    /// not led by its first replica gets a preferred election, which moves leadership only
    /// where that replica is in sync and can lead. Returns the records and whether the pass
    /// stopped at [`MAX_ELECTIONS_PER_PASS`].
    pub fn balance_partition_leaders(&mut self) -> (Vec<MetadataRecord>, bool) {
        let due =
            self.partitions_where(|p| p.replicas.first().is_some_and(|first| *first != p.leader));
        self.elect_each(ElectionType::Preferred, due)
    }

    /// Kafka's `maybeElectUncleanLeaders`: leaderless partitions of topics whose
    /// `unclean.leader.election.enable` is on get an unclean election.
    pub fn elect_unclean_leaders(&mut self) -> (Vec<MetadataRecord>, bool) {
        let leaderless = self.partitions_where(|p| p.leader == -1);
        let due = leaderless
            .into_iter()
            .filter(|(topic, _)| self.unclean_election_enabled(topic))
            .collect();
        self.elect_each(ElectionType::Unclean, due)
    }

    /// (topic, partition) of every partition `wanted` picks.
    fn partitions_where(
        &self,
        wanted: impl Fn(&PartitionRegistration) -> bool,
    ) -> Vec<(String, i32)> {
        self.topics_by_name()
            .flat_map(|(name, t)| {
                t.partitions
                    .iter()
                    .filter(|(_, p)| wanted(p))
                    .map(|(i, _)| (name.clone(), *i))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Runs `election` for each of `due`, up to [`MAX_ELECTIONS_PER_PASS`] records.
    fn elect_each(
        &mut self,
        election: ElectionType,
        due: Vec<(String, i32)>,
    ) -> (Vec<MetadataRecord>, bool) {
        let mut records = Vec::new();
        if !self.active {
            return (records, false);
        }
        for (topic, index) in due {
            if records.len() >= MAX_ELECTIONS_PER_PASS {
                return (records, true);
            }
            self.elect_one(&topic, index, election, &mut records);
        }
        (records, false)
    }
}
