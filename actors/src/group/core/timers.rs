//! The shard's timers (Kafka's `CoordinatorTimer`): deadlines keyed like Kafka's timer keys so
//! rescheduling a key replaces its previous deadline. Owned by the pure core; the actor only
//! wakes it up at `next_deadline`.

use std::collections::{BTreeMap, HashMap};

/// One timer per (purpose, group[, member]), as in Kafka's `classicGroupHeartbeatKey` & co.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TimerKey {
    /// Classic member session (or a pending member's wait for its second JoinGroup).
    ClassicHeartbeat { group_id: String, member_id: String },
    /// Classic join phase: initial-rebalance delay or rebalance timeout.
    ClassicJoin { group_id: String },
    /// Classic sync phase: members that got a JoinGroup response must SyncGroup in time.
    ClassicSync { group_id: String },
    /// KIP-848 member session.
    ConsumerSession { group_id: String, member_id: String },
    /// KIP-848 member that must revoke partitions within its rebalance timeout.
    ConsumerRebalance { group_id: String, member_id: String },
    /// A KIP-848 group's regexes being resolved (Kafka's `<group>-regex` background task).
    ConsumerRegexResolution { group_id: String },
    /// A classic member of a consumer group told to rejoin must send JoinGroup in time.
    ConsumerClassicJoin { group_id: String, member_id: String },
    /// A classic member of a consumer group must send SyncGroup after its JoinGroup in time.
    ConsumerClassicSync { group_id: String, member_id: String },
    /// A share group member's session.
    ShareSession { group_id: String, member_id: String },
    /// Periodic offsets retention and empty-group cleanup.
    OffsetExpiration,
}

/// What to do when a timer fires (state captured at scheduling time, like Kafka's lambdas).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimerAction {
    ClassicHeartbeatExpired,
    /// Initial rebalance delay: extend while new members keep arriving.
    ClassicInitialJoin {
        delay_ms: i32,
        remaining_ms: i32,
    },
    ClassicCompleteJoin,
    ClassicPendingSyncExpired {
        generation_id: i32,
    },
    ConsumerSessionExpired,
    ConsumerRebalanceExpired {
        member_epoch: i32,
    },
    /// The classic member did not rejoin (or sync) within its rebalance timeout: fence it.
    ConsumerClassicMemberExpired,
    /// Resolve these regexes of the group against the topics: Kafka does it off the request
    /// path, so the heartbeat that subscribed is answered before the resolution is applied.
    ConsumerResolveRegexes {
        regexes: Vec<String>,
    },
    ShareSessionExpired,
    OffsetExpiration,
}

#[derive(Debug, Default, Clone)]
pub struct Timers {
    queue: BTreeMap<(i64, u64), TimerKey>,
    by_key: HashMap<TimerKey, (i64, u64, TimerAction)>,
    seq: u64,
}

impl Timers {
    /// Schedules (or reschedules) `key` at `deadline_ms`.
    pub fn schedule(&mut self, key: TimerKey, deadline_ms: i64, action: TimerAction) {
        self.cancel(&key);
        self.seq += 1;
        self.queue.insert((deadline_ms, self.seq), key.clone());
        self.by_key.insert(key, (deadline_ms, self.seq, action));
    }

    pub fn cancel(&mut self, key: &TimerKey) {
        if let Some((deadline, seq, _)) = self.by_key.remove(key) {
            self.queue.remove(&(deadline, seq));
        }
    }

    pub fn is_scheduled(&self, key: &TimerKey) -> bool {
        self.by_key.contains_key(key)
    }

    pub fn deadline(&self, key: &TimerKey) -> Option<i64> {
        self.by_key.get(key).map(|(d, _, _)| *d)
    }

    pub fn next_deadline(&self) -> Option<i64> {
        self.queue.keys().next().map(|(d, _)| *d)
    }

    /// Removes and returns the earliest timer due at `now_ms`, if any.
    pub fn pop_due(&mut self, now_ms: i64) -> Option<(TimerKey, TimerAction)> {
        let (&(deadline, seq), _) = self.queue.iter().next()?;
        if deadline > now_ms {
            return None;
        }
        let key = self.queue.remove(&(deadline, seq))?;
        let (_, _, action) = self.by_key.remove(&key)?;
        Some((key, action))
    }

    /// Drops every timer (shard unloaded).
    pub fn clear(&mut self) {
        self.queue.clear();
        self.by_key.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reschedule_replaces_and_pops_in_order() {
        let mut t = Timers::default();
        let a = TimerKey::ClassicJoin {
            group_id: "a".into(),
        };
        let b = TimerKey::OffsetExpiration;
        t.schedule(a.clone(), 100, TimerAction::ClassicCompleteJoin);
        t.schedule(b.clone(), 50, TimerAction::OffsetExpiration);
        t.schedule(a.clone(), 10, TimerAction::ClassicCompleteJoin);
        assert_eq!(t.next_deadline(), Some(10));
        assert_eq!(t.pop_due(9), None);
        assert_eq!(t.pop_due(100).map(|(k, _)| k), Some(a));
        assert_eq!(t.pop_due(100).map(|(k, _)| k), Some(b));
        assert_eq!(t.pop_due(1000), None);
    }
}
