//! What a leader tracks (Kafka's `LeaderState`): each voter's and observer's end offset and
//! fetch times, the high watermark (the offset a majority of voters hold, once it passes the
//! epoch start), check-quorum (resign when a majority has not fetched within 1.5 × the fetch
//! timeout), and when to resend BeginQuorumEpoch.

use std::collections::{BTreeMap, BTreeSet};

use super::rpc::ReplicaStateView;
use super::types::{ReplicaKey, VoterSet};

/// Kafka's `LeaderState.OBSERVER_SESSION_TIMEOUT_MS`: observers silent this long are dropped.
pub const OBSERVER_SESSION_TIMEOUT_MS: i64 = 300_000;
/// Kafka's `CHECK_QUORUM_TIMEOUT_FACTOR`.
const CHECK_QUORUM_TIMEOUT_FACTOR: f64 = 1.5;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaState {
    pub key: ReplicaKey,
    pub end_offset: Option<i64>,
    pub last_fetch_timestamp: i64,
    pub last_fetch_leader_end_offset: i64,
    pub last_caught_up_timestamp: i64,
    pub has_acknowledged_leader: bool,
}

impl ReplicaState {
    fn new(key: ReplicaKey, acknowledged: bool) -> Self {
        ReplicaState {
            key,
            end_offset: None,
            last_fetch_timestamp: -1,
            last_fetch_leader_end_offset: -1,
            last_caught_up_timestamp: -1,
            has_acknowledged_leader: acknowledged,
        }
    }

    /// Kafka's `ReplicaState.updateFollowerState`: caught up when the fetch reaches the leader's
    /// end offset, or the leader end offset seen at the previous fetch.
    fn update_follower(&mut self, now: i64, fetch_offset: i64, leader_end: Option<i64>) {
        if let Some(leader_end) = leader_end {
            if fetch_offset >= leader_end {
                self.last_caught_up_timestamp = self.last_caught_up_timestamp.max(now);
            } else if self.last_fetch_leader_end_offset > 0
                && fetch_offset >= self.last_fetch_leader_end_offset
            {
                self.last_caught_up_timestamp =
                    self.last_caught_up_timestamp.max(self.last_fetch_timestamp);
            }
            self.last_fetch_leader_end_offset = leader_end;
        }
        self.last_fetch_timestamp = self.last_fetch_timestamp.max(now);
        self.end_offset = Some(fetch_offset);
        self.has_acknowledged_leader = true;
    }

    fn matches(&self, key: ReplicaKey) -> bool {
        self.key.id == key.id
            && (self.key.directory_id.is_none() || self.key.directory_id == key.directory_id)
    }

    pub fn view(&self, leader_id: i32, now: i64) -> ReplicaStateView {
        let is_leader = self.key.id == leader_id;
        ReplicaStateView {
            key: self.key,
            log_end_offset: self.end_offset.unwrap_or(-1),
            last_fetch_timestamp: if is_leader {
                now
            } else {
                self.last_fetch_timestamp
            },
            last_caught_up_timestamp: if is_leader {
                now
            } else {
                self.last_caught_up_timestamp
            },
        }
    }
}

/// A voter change the leader has written but not yet committed (KIP-853: one at a time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PendingVoterChange {
    Add {
        request: u64,
        voter: ReplicaKey,
        /// Offset of the VotersRecord once written.
        offset: Option<i64>,
        deadline: i64,
        /// Waiting for the new voter to catch up before writing the record.
        awaiting_catch_up: bool,
        /// The request's `AckWhenCommitted`; when false the answer went at the append.
        ack_when_committed: bool,
    },
    Remove {
        request: u64,
        voter: ReplicaKey,
        offset: i64,
    },
    Update {
        request: u64,
        offset: i64,
    },
}

#[derive(Debug, Clone)]
pub struct LeaderState {
    pub local: ReplicaKey,
    pub epoch: i32,
    pub epoch_start_offset: i64,
    /// Where the epoch's first data batch goes: after the start-of-epoch control batch
    /// (LeaderChange, and under kraft.version 1 possibly KRaftVersion and Voters).
    pub first_data_offset: i64,
    pub granting_voters: BTreeSet<i32>,
    pub high_watermark: Option<i64>,
    pub voters: BTreeMap<i32, ReplicaState>,
    pub observers: BTreeMap<ReplicaKey, ReplicaState>,
    fetched_voters: BTreeSet<i32>,
    check_quorum_deadline: i64,
    check_quorum_timeout_ms: i64,
    begin_quorum_epoch_deadline: i64,
    begin_quorum_epoch_timeout_ms: i64,
    pub resign_requested: bool,
    pub pending_voter_change: Option<PendingVoterChange>,
    /// The voter set and its offset when the epoch began (Kafka keeps it to re-append the
    /// VotersRecord on kraft.version upgrades).
    pub voter_set_offset_at_start: Option<i64>,
    /// At kraft.version 0: the voters as they reported themselves in UpdateRaftVoter (their
    /// directory ids, listeners, kraft.version ranges), kept in memory only (Kafka's volatile
    /// voters); a kraft.version upgrade writes them in its VotersRecord.
    pub reported_voters: Option<VoterSet>,
}

impl LeaderState {
    #[allow(clippy::too_many_arguments)] // each is a distinct fact of the new epoch
    pub fn new(
        local: ReplicaKey,
        epoch: i32,
        epoch_start_offset: i64,
        voters: &VoterSet,
        voter_set_offset: Option<i64>,
        granting_voters: BTreeSet<i32>,
        fetch_timeout_ms: i64,
        now: i64,
    ) -> Self {
        let check_quorum_timeout_ms =
            (fetch_timeout_ms as f64 * CHECK_QUORUM_TIMEOUT_FACTOR) as i64;
        let mut s = LeaderState {
            local,
            epoch,
            epoch_start_offset,
            first_data_offset: epoch_start_offset + 1,
            granting_voters,
            high_watermark: None,
            voters: BTreeMap::new(),
            observers: BTreeMap::new(),
            fetched_voters: BTreeSet::new(),
            check_quorum_deadline: now + check_quorum_timeout_ms,
            check_quorum_timeout_ms,
            begin_quorum_epoch_deadline: now,
            begin_quorum_epoch_timeout_ms: fetch_timeout_ms / 2,
            resign_requested: false,
            pending_voter_change: None,
            voter_set_offset_at_start: voter_set_offset,
            reported_voters: None,
        };
        for key in voters.keys() {
            let ack = key.id == local.id;
            s.voters.insert(key.id, ReplicaState::new(key, ack));
        }
        s
    }

    pub fn is_voter(&self, key: ReplicaKey) -> bool {
        self.voters.get(&key.id).is_some_and(|r| r.matches(key))
    }

    /// Kafka's `updateVoterAndObserverStates`: the voter set changed (a VotersRecord was
    /// appended or truncated); replicas move between the voter and observer maps, keeping what
    /// is known of them.
    pub fn update_voter_set(&mut self, voters: &VoterSet) {
        let mut old_voters = std::mem::take(&mut self.voters);
        for key in voters.keys() {
            let state = match old_voters.remove(&key.id) {
                Some(mut s) => {
                    s.key = key;
                    s
                }
                None => self
                    .observers
                    .remove(&key)
                    .or_else(|| {
                        let k = self.observers.keys().find(|k| k.id == key.id).copied();
                        k.and_then(|k| self.observers.remove(&k))
                    })
                    .map(|mut s| {
                        s.key = key;
                        s
                    })
                    .unwrap_or_else(|| ReplicaState::new(key, key.id == self.local.id)),
            };
            self.voters.insert(key.id, state);
        }
        for (_, s) in old_voters {
            self.observers.insert(s.key, s);
        }
        self.fetched_voters.retain(|id| voters.contains_id(*id));
    }

    /// The leader's own durable end offset moved (Kafka's `updateLocalState`). Returns whether
    /// the high watermark moved.
    pub fn update_local(&mut self, end_offset: i64) -> bool {
        let key = self.local;
        let state = match self.voters.get_mut(&key.id) {
            Some(s) => s,
            None => self
                .observers
                .entry(key)
                .or_insert_with(|| ReplicaState::new(key, true)),
        };
        state.end_offset = Some(end_offset);
        self.maybe_update_high_watermark()
    }

    fn local_end(&self) -> Option<i64> {
        self.voters
            .get(&self.local.id)
            .or_else(|| self.observers.get(&self.local))
            .and_then(|s| s.end_offset)
    }

    /// A replica fetched at `fetch_offset` (Kafka's `updateReplicaState`). Returns whether the
    /// high watermark moved.
    pub fn update_replica(&mut self, key: ReplicaKey, now: i64, fetch_offset: i64) -> bool {
        if key.id < 0 || key.id == self.local.id {
            return false;
        }
        let leader_end = self.local_end();
        let is_voter = self.is_voter(key);
        let state = if is_voter {
            self.voters.get_mut(&key.id).expect("voter state")
        } else {
            self.observers
                .entry(key)
                .or_insert_with(|| ReplicaState::new(key, false))
        };
        state.update_follower(now, fetch_offset, leader_end);
        self.update_check_quorum(key, now);
        is_voter && self.maybe_update_high_watermark()
    }

    /// Kafka's `updateCheckQuorumForFollowingVoter`.
    pub fn update_check_quorum(&mut self, key: ReplicaKey, now: i64) {
        if self.is_voter(key) && key.id != self.local.id {
            self.fetched_voters.insert(key.id);
        }
        let mut majority = self.voters.len() / 2 + 1;
        if self.voters.contains_key(&self.local.id) {
            majority -= 1;
        }
        if self.fetched_voters.len() >= majority {
            self.fetched_voters.clear();
            self.check_quorum_deadline = now + self.check_quorum_timeout_ms;
        }
    }

    /// Time left before check-quorum fails; `i64::MAX` for a lone voter.
    pub fn time_until_check_quorum_expires(&self, now: i64) -> i64 {
        if self.voters.len() == 1 {
            return i64::MAX;
        }
        (self.check_quorum_deadline - now).max(0)
    }

    /// Kafka's `maybeUpdateHighWatermark`: the end offset of the voter at index n/2 in
    /// descending order, once it is past the epoch start offset; never moves back.
    fn maybe_update_high_watermark(&mut self) -> bool {
        let mut ends: Vec<Option<i64>> = self.voters.values().map(|s| s.end_offset).collect();
        ends.sort_by(|a, b| b.cmp(a));
        let Some(Some(candidate)) = ends.get(self.voters.len() / 2).copied() else {
            return false;
        };
        if candidate <= self.epoch_start_offset {
            return false;
        }
        match self.high_watermark {
            Some(hw) if candidate <= hw => false,
            _ => {
                self.high_watermark = Some(candidate);
                true
            }
        }
    }

    pub fn time_until_begin_quorum_epoch(&self, now: i64) -> i64 {
        (self.begin_quorum_epoch_deadline - now).max(0)
    }
    pub fn reset_begin_quorum_epoch_timer(&mut self, now: i64) {
        self.begin_quorum_epoch_deadline = now + self.begin_quorum_epoch_timeout_ms;
    }
    /// Voters (not us) that have not fetched within half the fetch timeout.
    pub fn need_begin_quorum_epoch(&self, now: i64) -> Vec<ReplicaKey> {
        self.voters
            .values()
            .filter(|s| {
                s.key.id != self.local.id
                    && now - s.last_fetch_timestamp >= self.begin_quorum_epoch_timeout_ms
            })
            .map(|s| s.key)
            .collect()
    }
    pub fn add_acknowledgement(&mut self, id: i32) {
        if let Some(s) = self.voters.get_mut(&id) {
            s.has_acknowledged_leader = true;
        }
    }

    /// Voters other than us, most caught up first: the preferred successors on resignation.
    pub fn non_leader_voters_by_descending_fetch_offset(&self) -> Vec<ReplicaKey> {
        let mut v: Vec<&ReplicaState> = self
            .voters
            .values()
            .filter(|s| s.key.id != self.local.id)
            .collect();
        v.sort_by(|a, b| {
            b.end_offset
                .cmp(&a.end_offset)
                .then(a.key.id.cmp(&b.key.id))
        });
        v.into_iter().map(|s| s.key).collect()
    }

    /// Kafka's `isReplicaCaughtUp`: an observer that fetched within the last hour and had
    /// caught up to the leader since its previous fetch.
    pub fn is_replica_caught_up(&self, key: ReplicaKey, now: i64) -> bool {
        const ONE_HOUR_MS: i64 = 3_600_000;
        self.observers.get(&key).is_some_and(|s| {
            s.last_caught_up_timestamp > 0
                && s.last_fetch_timestamp > 0
                && s.last_fetch_timestamp > now - ONE_HOUR_MS
        })
    }

    /// Observers that fetched within the session timeout (Kafka drops the others).
    pub fn active_observers(&mut self, now: i64) -> Vec<ReplicaState> {
        let local = self.local;
        self.observers.retain(|k, s| {
            *k == local || now - s.last_fetch_timestamp < OBSERVER_SESSION_TIMEOUT_MS
        });
        self.observers.values().cloned().collect()
    }
}
