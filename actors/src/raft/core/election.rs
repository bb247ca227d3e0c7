//! A vote count for one epoch (Kafka's `EpochElection`): each voter is unrecorded, granted or
//! rejected; the election is won with a majority granted and lost once a majority can no
//! longer be reached.

use std::collections::BTreeMap;

use super::types::ReplicaKey;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Vote {
    Unrecorded,
    Granted,
    Rejected,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpochElection {
    voters: BTreeMap<i32, (ReplicaKey, Vote)>,
}

impl EpochElection {
    pub fn new(voters: impl IntoIterator<Item = ReplicaKey>) -> Self {
        EpochElection {
            voters: voters
                .into_iter()
                .map(|k| (k.id, (k, Vote::Unrecorded)))
                .collect(),
        }
    }

    /// Records a voter's answer; returns false when the node is not a voter or had already
    /// answered (a second answer in the same epoch does not change the count).
    pub fn record(&mut self, id: i32, granted: bool) -> bool {
        match self.voters.get_mut(&id) {
            Some((_, v @ Vote::Unrecorded)) => {
                *v = if granted {
                    Vote::Granted
                } else {
                    Vote::Rejected
                };
                true
            }
            _ => false,
        }
    }

    fn majority(&self) -> usize {
        self.voters.len() / 2 + 1
    }
    fn count(&self, v: Vote) -> usize {
        self.voters.values().filter(|(_, s)| *s == v).count()
    }
    pub fn is_granted(&self) -> bool {
        self.count(Vote::Granted) >= self.majority()
    }
    pub fn is_rejected(&self) -> bool {
        self.count(Vote::Granted) + self.count(Vote::Unrecorded) < self.majority()
    }
    pub fn unrecorded(&self) -> Vec<ReplicaKey> {
        self.voters
            .values()
            .filter(|(_, s)| *s == Vote::Unrecorded)
            .map(|(k, _)| *k)
            .collect()
    }
    pub fn granting(&self) -> Vec<i32> {
        self.voters
            .iter()
            .filter(|(_, (_, s))| *s == Vote::Granted)
            .map(|(id, _)| *id)
            .collect()
    }
    pub fn voter_ids(&self) -> Vec<i32> {
        self.voters.keys().copied().collect()
    }
}
