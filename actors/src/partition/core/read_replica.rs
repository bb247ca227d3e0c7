//! KIP-392, fetch from follower: which replica a consumer should read from. The rules are
//! Kafka's `RackAwareReplicaSelector` over the candidates `ReplicaManager
//! .findPreferredReadReplica` offers it: in-sync followers that hold the fetch offset.

use std::collections::HashMap;
use std::sync::Arc;

/// The class name `replica.selector.class` takes for rack-aware reads, the one selector Kafka
/// ships (a Java plugin cannot be loaded here).
pub const RACK_AWARE_SELECTOR: &str = "org.apache.kafka.common.replica.RackAwareReplicaSelector";

/// What a leader needs to point a consumer at a replica in its rack, built once per fetch
/// request: the rack the consumer sent (Fetch v11+ `RackId`) and the rack of every broker
/// reachable on the listener the consumer came through (a broker without an endpoint there
/// cannot be named to it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientRack {
    pub rack: String,
    pub broker_racks: HashMap<i32, Option<String>>,
}

impl ClientRack {
    fn holds(&self, broker: i32) -> bool {
        self.broker_racks
            .get(&broker)
            .and_then(|r| r.as_deref())
            .is_some_and(|r| r == self.rack)
    }
}

/// Who may serve a read and what the leader learns from it, beside the read's own
/// parameters (Kafka's `FetchParams.fetchOnlyLeader` and `clientMetadata`).
#[derive(Debug, Clone)]
pub struct ReadScope {
    /// A follower may answer: a consumer's Fetch v11+ (it carries client metadata), which a
    /// follower serves up to its own high watermark. Otherwise only the leader reads.
    pub followers_may_serve: bool,
    /// For the leader: the consumer's rack, when `replica.selector.class` is rack-aware.
    pub client_rack: Option<Arc<ClientRack>>,
    /// A follower's fetch: its own log start offset (Fetch v5+), -1 if it did not say.
    pub follower_log_start_offset: i64,
    /// A follower's fetch of a partition this leader throttles, with the leader's replication
    /// quota exceeded: a follower outside the ISR gets no records (Kafka's
    /// `shouldLeaderThrottle`); its fetch offset still counts.
    pub leader_throttled: bool,
}

impl Default for ReadScope {
    fn default() -> Self {
        ReadScope {
            followers_may_serve: false,
            client_rack: None,
            follower_log_start_offset: -1,
            leader_throttled: false,
        }
    }
}

/// A follower the leader may offer: one in the ISR whose log holds the fetch offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    pub broker: i32,
    pub log_end_offset: i64,
    pub last_caught_up_time_ms: i64,
}

/// The follower a consumer in `client.rack` should fetch from, or `None` for the leader: the
/// leader if it is in the consumer's rack or no candidate is, otherwise the most caught-up
/// candidate there (highest log end, then most recently caught up, then highest broker id:
/// Kafka's `ReplicaView.comparator`).
pub fn select_rack_aware(
    client: &ClientRack,
    leader: i32,
    candidates: impl IntoIterator<Item = Candidate>,
) -> Option<i32> {
    if client.rack.is_empty() || client.holds(leader) {
        return None;
    }
    candidates
        .into_iter()
        .filter(|c| c.broker != leader && client.holds(c.broker))
        .max_by_key(|c| (c.log_end_offset, c.last_caught_up_time_ms, c.broker))
        .map(|c| c.broker)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(rack: &str) -> ClientRack {
        ClientRack {
            rack: rack.into(),
            broker_racks: HashMap::from([
                (1, Some("a".into())),
                (2, Some("b".into())),
                (3, Some("b".into())),
                (4, None),
            ]),
        }
    }

    fn c(broker: i32, log_end_offset: i64, last_caught_up_time_ms: i64) -> Candidate {
        Candidate {
            broker,
            log_end_offset,
            last_caught_up_time_ms,
        }
    }

    #[test]
    fn the_leader_serves_its_own_rack_and_racks_without_replicas() {
        let all = [c(2, 10, 5), c(3, 10, 5)];
        assert_eq!(select_rack_aware(&client("a"), 1, all), None);
        assert_eq!(select_rack_aware(&client("z"), 1, all), None);
        assert_eq!(select_rack_aware(&client(""), 1, all), None);
        // The leader in the client's rack wins over followers there.
        assert_eq!(select_rack_aware(&client("b"), 2, [c(3, 10, 5)]), None);
    }

    #[test]
    fn the_most_caught_up_follower_in_the_rack_is_chosen() {
        let b = client("b");
        assert_eq!(select_rack_aware(&b, 1, [c(2, 10, 5), c(3, 9, 9)]), Some(2));
        assert_eq!(
            select_rack_aware(&b, 1, [c(2, 10, 5), c(3, 10, 6)]),
            Some(3)
        );
        assert_eq!(
            select_rack_aware(&b, 1, [c(2, 10, 5), c(3, 10, 5)]),
            Some(3)
        );
        // Only candidates count (the caller left out lagging or out-of-ISR followers).
        assert_eq!(select_rack_aware(&b, 1, [c(2, 10, 5)]), Some(2));
        assert_eq!(select_rack_aware(&b, 1, []), None);
        // A broker without a rack, or unknown on the listener, is no one's rack.
        assert_eq!(select_rack_aware(&b, 1, [c(4, 99, 9), c(5, 99, 9)]), None);
    }
}
