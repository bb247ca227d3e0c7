//! The vocabulary of the KRaft core: replica keys, offsets with epochs, endpoints, voter sets
//! (KIP-853) and the election state the `quorum-state` file holds.

use std::collections::BTreeMap;
use std::fmt;

use kactor_protocol::Uuid;

/// A replica as KIP-853 names it: the node id and the id of its metadata log directory. The
/// directory id is absent for replicas of a static quorum (`controller.quorum.voters`) and for
/// requests from older peers; Kafka sends `Uuid.ZERO` for "absent" on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReplicaKey {
    pub id: i32,
    pub directory_id: Option<Uuid>,
}

impl ReplicaKey {
    pub fn of(id: i32, directory_id: Option<Uuid>) -> Self {
        ReplicaKey {
            id,
            directory_id: directory_id.filter(|d| *d != Uuid::ZERO),
        }
    }
    pub fn without_dir(id: i32) -> Self {
        ReplicaKey {
            id,
            directory_id: None,
        }
    }
    /// The wire form of the directory id (`Uuid.ZERO` when absent).
    pub fn wire_directory_id(&self) -> Uuid {
        self.directory_id.unwrap_or(Uuid::ZERO)
    }
}

impl fmt::Display for ReplicaKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // As Kafka 4.4 prints one in its error messages.
        match self.directory_id {
            Some(d) => write!(f, "ReplicaKey(id={}, directoryId={d})", self.id),
            None => write!(f, "ReplicaKey(id={}, directoryId=<undefined>)", self.id),
        }
    }
}

/// Kafka's `OffsetAndEpoch`. Ordered by epoch first, then offset (`OffsetAndEpoch.compareTo`),
/// which is how Raft compares logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OffsetAndEpoch {
    pub offset: i64,
    pub epoch: i32,
}

impl OffsetAndEpoch {
    pub const fn new(offset: i64, epoch: i32) -> Self {
        OffsetAndEpoch { offset, epoch }
    }
}

impl PartialOrd for OffsetAndEpoch {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for OffsetAndEpoch {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.epoch, self.offset).cmp(&(other.epoch, other.offset))
    }
}

/// Kafka's `Snapshots.BOOTSTRAP_SNAPSHOT_ID`: the `0-0` checkpoint `kafka-storage format`
/// writes. Never served to followers.
pub const BOOTSTRAP_SNAPSHOT_ID: OffsetAndEpoch = OffsetAndEpoch::new(0, 0);

/// One listener of a node (KIP-853 `Endpoints`): name, host, port.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Endpoint {
    pub listener: String,
    pub host: String,
    pub port: u16,
}

/// A node's listeners, keyed by listener name (Kafka's `Endpoints`).
pub type Endpoints = Vec<Endpoint>;

impl Endpoint {
    /// Where to connect: `host:port`.
    pub fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// The endpoint to reach a node on: the one named `listener` (the controller listener name
/// the dialling side uses), else the node's first.
pub fn preferred_endpoint<'a>(endpoints: &'a [Endpoint], listener: &str) -> Option<&'a Endpoint> {
    endpoints
        .iter()
        .find(|e| e.listener == listener)
        .or_else(|| endpoints.first())
}

/// Endpoints as Kafka's `Endpoints.toString` prints those of a request: a map of listener
/// names (upper-cased, as `ListenerName.normalised`) to unresolved addresses. Kafka's map is a
/// HashMap, so with several listeners its order can differ; kactor prints them as given.
pub fn java_endpoints(endpoints: &[Endpoint]) -> String {
    let entries: Vec<String> = endpoints
        .iter()
        .map(|e| {
            format!(
                "ListenerName({})={}/<unresolved>:{}",
                e.listener.to_uppercase(),
                e.host,
                e.port
            )
        })
        .collect();
    format!("Endpoints(endpoints={{{}}})", entries.join(", "))
}

/// The kraft.version range a voter supports (`VotersRecord.KRaftVersionFeature`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KRaftVersionRange {
    pub min: i16,
    pub max: i16,
}

impl KRaftVersionRange {
    pub const V0: KRaftVersionRange = KRaftVersionRange { min: 0, max: 0 };
    pub const UP_TO_1: KRaftVersionRange = KRaftVersionRange { min: 0, max: 1 };
}

/// One voter of the quorum (Kafka's `VoterSet.VoterNode`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VoterNode {
    pub key: ReplicaKey,
    pub listeners: Endpoints,
    pub supported_kraft_version: KRaftVersionRange,
}

/// The voters of the quorum (Kafka's `VoterSet`): from `controller.quorum.voters` or from the
/// latest `VotersRecord` in the snapshot and log. Keyed by node id: a node id appears at most
/// once.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct VoterSet {
    voters: BTreeMap<i32, VoterNode>,
}

impl VoterSet {
    pub fn new(nodes: impl IntoIterator<Item = VoterNode>) -> Self {
        VoterSet {
            voters: nodes.into_iter().map(|n| (n.key.id, n)).collect(),
        }
    }

    /// A static voter set: ids without directory ids, each with the given listeners.
    pub fn from_static(nodes: impl IntoIterator<Item = (i32, Endpoints)>) -> Self {
        VoterSet::new(nodes.into_iter().map(|(id, listeners)| VoterNode {
            key: ReplicaKey::without_dir(id),
            listeners,
            supported_kraft_version: KRaftVersionRange::V0,
        }))
    }

    pub fn is_empty(&self) -> bool {
        self.voters.is_empty()
    }
    pub fn len(&self) -> usize {
        self.voters.len()
    }
    pub fn ids(&self) -> impl Iterator<Item = i32> + '_ {
        self.voters.keys().copied()
    }
    pub fn keys(&self) -> impl Iterator<Item = ReplicaKey> + '_ {
        self.voters.values().map(|v| v.key)
    }
    pub fn nodes(&self) -> impl Iterator<Item = &VoterNode> {
        self.voters.values()
    }
    pub fn get(&self, id: i32) -> Option<&VoterNode> {
        self.voters.get(&id)
    }
    pub fn contains_id(&self, id: i32) -> bool {
        self.voters.contains_key(&id)
    }

    /// Kafka's `VoterSet.isVoter`: the id is a voter and, when both sides know a directory id,
    /// the directory ids match.
    pub fn is_voter(&self, key: ReplicaKey) -> bool {
        match self.voters.get(&key.id) {
            None => false,
            Some(v) => match (v.key.directory_id, key.directory_id) {
                (Some(a), Some(b)) => a == b,
                (Some(_), None) => false,
                (None, _) => true,
            },
        }
    }

    pub fn is_only_voter(&self, key: ReplicaKey) -> bool {
        self.voters.len() == 1 && self.is_voter(key)
    }

    /// A voter's listeners, empty when unknown.
    pub fn listeners(&self, id: i32) -> Endpoints {
        self.voters
            .get(&id)
            .map(|v| v.listeners.clone())
            .unwrap_or_default()
    }

    /// The voters' keys as a Java list prints them (`[ReplicaKey(...), ...]`), by id.
    pub fn java_key_list(&self) -> String {
        let keys: Vec<String> = self.keys().map(|k| k.to_string()).collect();
        format!("[{}]", keys.join(", "))
    }

    pub fn majority(&self) -> usize {
        self.voters.len() / 2 + 1
    }

    pub fn with_added(&self, node: VoterNode) -> Option<VoterSet> {
        if self.voters.contains_key(&node.key.id) {
            return None;
        }
        let mut v = self.clone();
        v.voters.insert(node.key.id, node);
        Some(v)
    }

    pub fn with_removed(&self, key: ReplicaKey) -> Option<VoterSet> {
        if !self.is_voter(key) {
            return None;
        }
        let mut v = self.clone();
        v.voters.remove(&key.id);
        Some(v)
    }

    pub fn with_updated(&self, node: VoterNode) -> Option<VoterSet> {
        let old = self.voters.get(&node.key.id)?;
        if old.key != node.key {
            return None;
        }
        let mut v = self.clone();
        v.voters.insert(node.key.id, node);
        Some(v)
    }

    /// Kafka's `VoterSet.updateVoterIgnoringDirectoryId`: replaces the voter with the node's
    /// id when it has no directory id yet or the same one.
    pub fn with_updated_ignoring_directory_id(&self, node: VoterNode) -> Option<VoterSet> {
        let old = self.voters.get(&node.key.id)?;
        if old.key.directory_id.is_some() && old.key != node.key {
            return None;
        }
        let mut v = self.clone();
        v.voters.insert(node.key.id, node);
        Some(v)
    }

    /// Kafka's `VoterSet.hasOverlappingMajority`: the two sets share a majority of both (the
    /// condition under which a voter change is safe when done one voter at a time).
    pub fn has_overlapping_majority(&self, other: &VoterSet) -> bool {
        let a: std::collections::BTreeSet<ReplicaKey> = self.keys().collect();
        let b: std::collections::BTreeSet<ReplicaKey> = other.keys().collect();
        let common = a.intersection(&b).count();
        common > a.len() / 2 && common > b.len() / 2
    }
}

/// What the `quorum-state` file holds (Kafka's `ElectionState`): the epoch, the leader if known,
/// the vote granted in this epoch if any, and (kraft.version 0 only) the voter ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectionState {
    pub epoch: i32,
    pub leader_id: Option<i32>,
    pub voted_key: Option<ReplicaKey>,
    /// Written in data_version 0 files (`currentVoters`); empty otherwise.
    pub voters: Vec<i32>,
}

impl ElectionState {
    pub fn unknown_leader(epoch: i32, voters: Vec<i32>) -> Self {
        ElectionState {
            epoch,
            leader_id: None,
            voted_key: None,
            voters,
        }
    }
    pub fn is_leader(&self, id: i32) -> bool {
        self.leader_id == Some(id)
    }
    /// Kafka's `isVotedCandidate`: we voted for `key` (directory ids compared when recorded).
    pub fn is_voted_candidate(&self, key: ReplicaKey) -> bool {
        match self.voted_key {
            Some(v) => {
                v.id == key.id && (v.directory_id.is_none() || v.directory_id == key.directory_id)
            }
            None => false,
        }
    }
}

/// The quorum settings (Kafka's `QuorumConfig` plus the node's identity).
#[derive(Debug, Clone)]
pub struct RaftConfig {
    /// `node.id`; `None` for a replica without one (a pure observer).
    pub node_id: Option<i32>,
    /// The metadata log directory's id (`meta.properties` `directory.id`).
    pub directory_id: Uuid,
    /// The cluster id requests must carry (or omit).
    pub cluster_id: String,
    /// `controller.quorum.voters`; `None` when the voter set comes from the log
    /// (`controller.quorum.bootstrap.servers`, KIP-853).
    pub static_voters: Option<VoterSet>,
    /// Destinations to fetch from while the leader is unknown: the static voters' ids, or
    /// the bootstrap servers as negative ids -2, -3, ... (as Kafka numbers them).
    pub bootstrap_servers: Vec<i32>,
    /// This node's own listeners (sent in BeginQuorumEpoch / responses as leader endpoints).
    pub local_listeners: Endpoints,
    /// The first of `controller.listener.names`, the listener Raft traffic uses: a voter
    /// added without an endpoint on it could not be reached (Kafka's channel listener name).
    pub default_listener: String,
    /// The kraft.version range this software supports.
    pub supported_kraft_version: KRaftVersionRange,
    /// `controller.quorum.election.timeout.ms`
    pub election_timeout_ms: i64,
    /// `controller.quorum.fetch.timeout.ms`
    pub fetch_timeout_ms: i64,
    /// `controller.quorum.election.backoff.max.ms`
    pub election_backoff_max_ms: i64,
    /// `controller.quorum.request.timeout.ms`
    pub request_timeout_ms: i64,
    /// `controller.quorum.retry.backoff.ms`
    pub retry_backoff_ms: i64,
    /// `controller.quorum.fetch.max.bytes`
    pub fetch_max_bytes: i32,
    /// `controller.quorum.fetch.snapshot.max.bytes`
    pub fetch_snapshot_max_bytes: i32,
    /// `KafkaRaftClient.MAX_FETCH_WAIT_MS`: how long a Fetch may wait at the leader.
    pub fetch_max_wait_ms: i32,
    /// `controller.quorum.auto.join.enable`: an observer in the voter set's directory asks
    /// to be added (KIP-853).
    pub auto_join: bool,
}

impl RaftConfig {
    /// Kafka 4.4's defaults (`QuorumConfig`), for a node of a static quorum.
    pub fn with_static_voters(node_id: i32, voters: VoterSet) -> Self {
        RaftConfig {
            node_id: Some(node_id),
            directory_id: Uuid::ZERO,
            cluster_id: String::new(),
            bootstrap_servers: voters.ids().collect(),
            local_listeners: voters.listeners(node_id),
            default_listener: "CONTROLLER".to_string(),
            static_voters: Some(voters),
            supported_kraft_version: KRaftVersionRange::UP_TO_1,
            election_timeout_ms: 1000,
            fetch_timeout_ms: 2000,
            election_backoff_max_ms: 1000,
            request_timeout_ms: 2000,
            retry_backoff_ms: 20,
            fetch_max_bytes: 1024 * 1024,
            fetch_snapshot_max_bytes: 1024 * 1024,
            fetch_max_wait_ms: 500,
            auto_join: false,
        }
    }

    pub fn local_key(&self) -> Option<ReplicaKey> {
        self.node_id
            .map(|id| ReplicaKey::of(id, Some(self.directory_id)))
    }
}
