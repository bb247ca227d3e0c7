//! The KRaft protocol as a pure state machine (Kafka 4.4's `KafkaRaftClient`, `QuorumState`
//! and the epoch states): elections with pre-vote (KIP-996), replication by follower Fetch
//! with diverging-epoch truncation (KIP-595), snapshots by FetchSnapshot (KIP-630), the voter
//! set from configuration or the log (KIP-853) and the high watermark.
//!
//! No I/O and no clock: [`RaftCore::handle`] takes one [`Input`] and the current time and
//! returns the [`Output`]s the shell carries out, in order. Rules for the shell:
//! - `PersistElection` must be durable before any later output is carried out (a vote is
//!   written before it is granted).
//! - Appends (`AppendLeader`, `AppendFollower`) may sit in the OS cache until the following
//!   `Flush`; the shell answers each `Flush` with [`Input::Flushed`] once durable. The core
//!   counts only flushed offsets toward the high watermark, and a voter sends its next Fetch
//!   only once everything it appended is flushed (Kafka flushes inline before fetching again).
//! - `InstallSnapshot` is answered at once by [`Input::SnapshotLoaded`].
//! - `Send` carries a correlation id; the shell feeds the answer back as [`Input::Response`]
//!   (or [`Input::RequestFailed`] when the transport gives up) with that id.
//! - `Records::Read` / `SnapshotBytes::Read` in replies are filled by the shell from its log.
//!
//! Kafka's behaviour is followed as of 4.4.0; where the core differs it says why.

pub mod election;
pub mod leader;
pub mod log;
pub mod requests;
pub mod rpc;
pub mod state;
pub mod types;

#[cfg(test)]
mod sim;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use kactor_protocol::errors::*;

use self::election::EpochElection;
use self::leader::{LeaderState, PendingVoterChange};
use self::log::{LogState, LogView, ValidOffsetAndEpoch};
use self::requests::RequestManager;
use self::rpc::*;
use self::state::{EpochState, SnapshotDownload};
use self::types::java_endpoints;
pub use self::types::{
    ElectionState, Endpoint, Endpoints, KRaftVersionRange, OffsetAndEpoch, RaftConfig, ReplicaKey,
    VoterNode, VoterSet,
};

/// Identifies an inbound request so the reply can be routed back (assigned by the shell).
pub type RequestId = u64;

#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// Recovered state: the quorum-state file (None when absent) and the log.
    Start {
        election: Option<ElectionState>,
        log: LogState,
    },
    /// Append one atomic batch of record values. Only the leader accepts it, and only in
    /// `epoch`, the epoch the writer's state was built in (Kafka's
    /// `scheduleAtomicAppend(epoch, ...)`): records decided under an older leadership must not
    /// land in a newer one, even of the same node.
    Append { records: Vec<Bytes>, epoch: i32 },
    /// Kafka's `RaftClient.upgradeKRaftVersion`: the active controller finalizes a higher
    /// kraft.version; the leader appends a KRaftVersionRecord and the VotersRecord of its
    /// in-memory voters as one control batch (answered by `Appended`, `KRaftVersionUnchanged`,
    /// `KRaftUpgradeRefused` or `AppendRejected`).
    UpgradeKRaftVersion {
        version: i16,
        validate_only: bool,
        /// As for `Append`: refused outside this epoch.
        epoch: i32,
    },
    /// The log is durable up to `end_offset` (exclusive).
    Flushed { end_offset: i64 },
    /// Time passed.
    Tick,
    /// A Raft request from a peer (or an admin client for DescribeQuorum / voter changes).
    Request { id: RequestId, request: Request },
    /// The answer to a `Send`.
    Response {
        from: i32,
        correlation_id: u64,
        response: Response,
    },
    /// A `Send` failed in the transport (disconnect, unreachable).
    RequestFailed { to: i32, correlation_id: u64 },
    /// The state machine wrote a snapshot at `id` (at or below the high watermark).
    SnapshotCreated { id: OffsetAndEpoch, size: u64 },
    /// The shell deleted log segments below `start_offset` (covered by a snapshot).
    LogStartAdvanced { start_offset: i64 },
    /// The snapshot from `InstallSnapshot` is in place; its control records say this.
    SnapshotLoaded {
        id: OffsetAndEpoch,
        voters: Option<VoterSet>,
        kraft_version: Option<i16>,
    },
    /// Kafka's `resign(epoch)`: the leader of `epoch` steps down.
    Resign { epoch: i32 },
    /// Kafka's `shutdown(timeoutMs)`: resign if leading, then finish.
    Shutdown { timeout_ms: i64 },
}

/// The content of a batch the leader appends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchContent {
    Data(Vec<Bytes>),
    /// One control batch: its records in order (usually one; a kraft.version upgrade writes the
    /// KRaftVersionRecord and the VotersRecord together).
    Control(Vec<ControlRecord>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Write the quorum-state file durably (`data_version` 0 for kraft.version 0, else 1).
    PersistElection {
        state: ElectionState,
        data_version: i16,
    },
    /// Append a batch as leader at `base_offset` with partition leader epoch `epoch`.
    AppendLeader {
        base_offset: i64,
        epoch: i32,
        content: BatchContent,
    },
    /// Append batches fetched from the leader, as they are.
    AppendFollower {
        batches: Vec<LogBatch>,
    },
    /// Remove everything at and above `offset`.
    Truncate {
        offset: i64,
    },
    /// Make the log durable up to `end_offset`; answer with `Flushed`.
    Flush {
        end_offset: i64,
    },
    Send {
        to: i32,
        correlation_id: u64,
        request: Request,
    },
    Reply {
        id: RequestId,
        response: Response,
    },
    /// Answer to `Append`.
    Appended {
        base_offset: i64,
        last_offset: i64,
        epoch: i32,
    },
    /// Answer to `UpgradeKRaftVersion` when nothing is appended: the version is already the
    /// one asked for, or the request only validates.
    KRaftVersionUnchanged,
    /// Answer to `UpgradeKRaftVersion` refused, with Kafka's InvalidUpdateVersionException
    /// message.
    KRaftUpgradeRefused {
        message: String,
    },
    /// Answer to `Append` when not leader.
    AppendRejected {
        leader_id: Option<i32>,
        epoch: i32,
    },
    /// Everything below this offset is committed.
    HighWatermark(i64),
    /// The leader or epoch changed. For this node as leader, `epoch_start_offset` is where
    /// its LeaderChangeMessage went and `first_data_offset` where the first batch after the
    /// start-of-epoch control batch goes.
    LeaderChanged {
        leader_id: Option<i32>,
        epoch: i32,
        epoch_start_offset: Option<i64>,
        first_data_offset: Option<i64>,
    },
    /// Start writing snapshot `id` received from the leader (drop any partial one).
    BeginSnapshot {
        id: OffsetAndEpoch,
    },
    /// Append `bytes` at `position` of the snapshot being received.
    WriteSnapshotChunk {
        id: OffsetAndEpoch,
        position: u64,
        bytes: Bytes,
    },
    /// The snapshot is complete: freeze it, replace the log with it (log start = log end =
    /// `id.offset`), then feed `SnapshotLoaded`.
    InstallSnapshot {
        id: OffsetAndEpoch,
    },
    /// Graceful shutdown finished (or timed out).
    ShutdownComplete {
        timed_out: bool,
    },
    /// An invariant Kafka guards with an exception broke: stop the node.
    Fatal(String),
}

/// A Fetch the leader holds until data arrives, the high watermark moves or `max_wait_ms`
/// passes (Kafka's fetch purgatory).
#[derive(Debug, Clone)]
struct ParkedFetch {
    id: RequestId,
    request: FetchRequest,
    deadline: i64,
    original: FetchResponse,
}

#[derive(Debug, Clone)]
pub struct RaftCore {
    cfg: RaftConfig,
    rng: StdRng,
    state: EpochState,
    log: LogView,
    requests: RequestManager,
    next_correlation_id: u64,
    /// Highest committed offset announced (the log's high watermark).
    committed: i64,
    parked: Vec<ParkedFetch>,
    shutdown_deadline: Option<i64>,
    shutdown_done: bool,
    last_leader_notice: Option<(Option<i32>, i32)>,
    started: bool,
    /// The clock of the input being handled.
    now: i64,
    /// The node of an AddRaftVoter waiting for the new voter to catch up.
    pending_add_node: Option<VoterNode>,
    /// Correlation id of the ApiVersions request to a voter being added.
    api_versions_in_flight: Option<u64>,
    /// A flush this core asked for itself while a fetch waited on it (see
    /// [`Self::fetch_blocked_on_flush`]); cleared by any `Flushed`.
    flush_asked: bool,
    /// When an observer controller with `auto_join` may next ask the leader to add it (Kafka's
    /// `FollowerState.updateVoterSetPeriodTimer`: the fetch timeout, from becoming a follower
    /// and from each request sent).
    auto_join_at: i64,
    out: Vec<Output>,
}

fn is_set(e: i16) -> bool {
    e != NONE
}

impl RaftCore {
    /// `seed` drives the randomized election timeouts and the choice of bootstrap server.
    pub fn new(mut cfg: RaftConfig, seed: u64) -> Self {
        // Kafka lists every voter (itself included) as a bootstrap server; a Fetch to
        // ourselves can only learn what we know, so it is skipped.
        if let Some(id) = cfg.node_id {
            cfg.bootstrap_servers.retain(|b| *b != id);
        }
        let requests = RequestManager::new(
            cfg.bootstrap_servers.clone(),
            cfg.request_timeout_ms,
            cfg.retry_backoff_ms,
        );
        RaftCore {
            rng: StdRng::seed_from_u64(seed),
            state: EpochState::Unattached {
                epoch: 0,
                leader_id: None,
                voted_key: None,
                election_deadline: i64::MAX,
                high_watermark: None,
            },
            log: LogView::default(),
            requests,
            next_correlation_id: 0,
            committed: 0,
            parked: Vec::new(),
            shutdown_deadline: None,
            shutdown_done: false,
            last_leader_notice: None,
            started: false,
            now: 0,
            pending_add_node: None,
            api_versions_in_flight: None,
            flush_asked: false,
            auto_join_at: 0,
            out: Vec::new(),
            cfg,
        }
    }

    // ---- queries -------------------------------------------------------------------------

    pub fn config(&self) -> &RaftConfig {
        &self.cfg
    }
    pub fn epoch(&self) -> i32 {
        self.state.epoch()
    }
    pub fn state(&self) -> &EpochState {
        &self.state
    }
    pub fn state_name(&self) -> &'static str {
        self.state.name()
    }
    pub fn leader_id(&self) -> Option<i32> {
        self.state.leader_id(self.cfg.node_id)
    }
    pub fn is_leader(&self) -> bool {
        matches!(self.state, EpochState::Leader(_))
    }
    /// The committed offset (the log's high watermark).
    pub fn high_watermark(&self) -> i64 {
        self.committed
    }
    pub fn log_end_offset(&self) -> i64 {
        self.log.end_offset
    }
    pub fn log(&self) -> &LogView {
        &self.log
    }
    pub fn node_id(&self) -> Option<i32> {
        self.cfg.node_id
    }
    pub fn voters(&self) -> VoterSet {
        self.log.last_voter_set()
    }
    /// The node an AddRaftVoter is waiting on (its ApiVersions, or its catching up).
    pub fn voter_being_added(&self) -> Option<i32> {
        self.pending_add_node.as_ref().map(|n| n.key.id)
    }
    /// Where node `id` listens, as far as this node knows: its entry in the voter set, or,
    /// for the leader, the endpoints it announced (an observer formatted without voters learns
    /// the leader that way first).
    pub fn known_endpoints(&self, id: i32) -> Endpoints {
        let listed = self.log.last_voter_set().listeners(id);
        if listed.is_empty() && self.leader_id() == Some(id) {
            return self.leader_endpoints();
        }
        listed
    }
    pub fn local_key(&self) -> Option<ReplicaKey> {
        self.cfg.local_key()
    }
    pub fn is_voter(&self) -> bool {
        self.local_key()
            .is_some_and(|k| self.log.last_voter_set().is_voter(k))
    }
    fn is_only_voter(&self) -> bool {
        self.local_key()
            .is_some_and(|k| self.log.last_voter_set().is_only_voter(k))
    }
    /// The election state the quorum-state file holds now.
    pub fn election_state(&self) -> ElectionState {
        self.state.election(self.local_key(), self.voter_ids())
    }
    /// The DescribeQuorum answer (as the leader gives it; an error elsewhere).
    pub fn describe_quorum(&mut self, now: i64) -> DescribeQuorumResponse {
        self.describe(now)
    }

    fn voter_ids(&self) -> Vec<i32> {
        self.log.last_voter_set().ids().collect()
    }
    fn leader_id_or_sentinel(&self) -> i32 {
        self.leader_id().unwrap_or(-1)
    }
    fn leader_endpoints(&self) -> Endpoints {
        match &self.state {
            EpochState::Leader(_) | EpochState::Resigned { .. } => self.cfg.local_listeners.clone(),
            EpochState::Follower {
                leader_endpoints, ..
            }
            | EpochState::Prospective {
                leader_endpoints, ..
            } => leader_endpoints.clone(),
            _ => Endpoints::new(),
        }
    }

    // ---- entry point ---------------------------------------------------------------------

    pub fn handle(&mut self, input: Input, now: i64) -> Vec<Output> {
        self.now = now;
        match input {
            Input::Start { election, log } => self.start(election, log, now),
            _ if !self.started => {}
            Input::Append { records, epoch } => self.append(records, epoch, now),
            Input::UpgradeKRaftVersion {
                version,
                validate_only,
                epoch,
            } => self.upgrade_kraft_version(version, validate_only, epoch),
            Input::Flushed { end_offset } => self.flushed(end_offset, now),
            Input::Tick => {}
            Input::Request { id, request } => self.handle_request(id, request, now),
            Input::Response {
                from,
                correlation_id,
                response:
                    Response::ApiVersions {
                        error,
                        kraft_version,
                    },
            } => {
                if self.api_versions_in_flight == Some(correlation_id) {
                    self.api_versions_in_flight = None;
                    self.handle_api_versions_response(error, kraft_version, now);
                }
                let _ = from;
            }
            Input::Response {
                from,
                correlation_id,
                response,
            } => {
                if self.requests.is_response_expected(from, correlation_id) {
                    let ok = self.handle_response(from, response, now);
                    self.requests.on_result(from, correlation_id, ok, now);
                }
            }
            Input::RequestFailed { to, correlation_id } => {
                if self.api_versions_in_flight == Some(correlation_id) {
                    self.api_versions_in_flight = None;
                    self.handle_api_versions_response(BROKER_NOT_AVAILABLE, None, now);
                }
                self.requests.on_result(to, correlation_id, false, now);
            }
            Input::SnapshotCreated { id, size } => self.log.add_snapshot(id, size),
            Input::LogStartAdvanced { start_offset } => self.log.advance_start(start_offset),
            Input::SnapshotLoaded {
                id,
                voters,
                kraft_version,
            } => {
                if self.log.start_offset == id.offset && self.log.end_offset == id.offset {
                    if let Some(v) = voters {
                        self.log.record_voters(i64::MIN, v);
                    }
                    if let Some(k) = kraft_version {
                        self.log.record_kraft_version(i64::MIN, k);
                    }
                }
            }
            Input::Resign { epoch } => {
                if let EpochState::Leader(l) = &mut self.state {
                    if l.epoch == epoch {
                        l.resign_requested = true;
                    }
                }
            }
            Input::Shutdown { timeout_ms } => {
                if self.shutdown_deadline.is_none() {
                    self.shutdown_deadline = Some(now.saturating_add(timeout_ms));
                }
            }
        }
        if self.started {
            self.poll(now);
            self.maybe_complete_shutdown(now);
        }
        std::mem::take(&mut self.out)
    }

    // ---- start-up (Kafka's QuorumState.initialize + KafkaRaftClient.initialize) -----------

    fn start(&mut self, election: Option<ElectionState>, log: LogState, now: i64) {
        if self.started {
            return;
        }
        self.started = true;
        self.log = LogView::from_state(&log, self.cfg.static_voters.as_ref());
        let election =
            election.unwrap_or_else(|| ElectionState::unknown_leader(0, self.voter_ids()));
        let end = self.log.end_offset_and_epoch();
        let local = self.local_key();
        let voters = self.log.last_voter_set();
        let timeout = self.random_election_timeout();
        let initial = if election.epoch < end.epoch {
            // The log is ahead of the file (a crash between the two writes).
            EpochState::Unattached {
                epoch: end.epoch,
                leader_id: None,
                voted_key: None,
                election_deadline: now + timeout,
                high_watermark: None,
            }
        } else if local.is_some_and(|k| election.is_leader(k.id)) {
            // A leader restarts resigned in its epoch: it cannot vote again in it, and its
            // unflushed tail may be gone, so it must not lead it again.
            EpochState::Resigned {
                epoch: election.epoch,
                unacked_voters: voters
                    .ids()
                    .filter(|v| Some(*v) != self.cfg.node_id)
                    .collect(),
                preferred_successors: Vec::new(),
                election_deadline: now + timeout,
            }
        } else if let Some(leader) = election.leader_id {
            // Checked before "voted for itself": a candidate that then learned its epoch's
            // leader follows it after a restart. Resuming the candidacy would send Votes whose
            // last epoch equals the candidate epoch (it holds the leader's records of that
            // epoch), which voters refuse as INVALID_REQUEST, fatal to the sender (found by
            // the simulation, seed 2002004 of five_voters_two_observers).
            let endpoints = voters.listeners(leader);
            if endpoints.is_empty() {
                EpochState::Unattached {
                    epoch: election.epoch,
                    leader_id: Some(leader),
                    voted_key: election.voted_key,
                    election_deadline: now + timeout,
                    high_watermark: None,
                }
            } else {
                EpochState::Follower {
                    epoch: election.epoch,
                    leader_id: leader,
                    leader_endpoints: endpoints,
                    voted_key: election.voted_key,
                    fetch_deadline: now + self.cfg.fetch_timeout_ms,
                    has_fetched_from_leader: false,
                    high_watermark: None,
                    fetching_snapshot: None,
                }
            }
        } else if local.is_some_and(|k| election.is_voted_candidate(k)) {
            let mut e = EpochElection::new(voters.keys());
            e.record(local.expect("local").id, true);
            EpochState::Candidate {
                epoch: election.epoch,
                election: e,
                election_deadline: now + timeout,
                high_watermark: None,
            }
        } else {
            EpochState::Unattached {
                epoch: election.epoch,
                leader_id: None,
                voted_key: election.voted_key,
                election_deadline: if self.is_voter() {
                    now + timeout
                } else {
                    i64::MAX
                },
                high_watermark: None,
            }
        };
        self.durable(initial);
        self.fire_leader_change();
        if self.is_only_voter()
            && matches!(
                self.state,
                EpochState::Unattached { .. }
                    | EpochState::Follower { .. }
                    | EpochState::Resigned { .. }
            )
        {
            self.transition_to_prospective(now);
        }
        if matches!(self.state, EpochState::Candidate { .. }) {
            self.on_become_candidate(now);
        }
    }

    // ---- transitions (QuorumState) ---------------------------------------------------------

    fn random_election_timeout(&mut self) -> i64 {
        let t = self.cfg.election_timeout_ms;
        if t <= 0 {
            return 0;
        }
        t + self.rng.gen_range(0..t)
    }

    fn data_version(&self) -> i16 {
        if self.log.last_kraft_version() >= 1 {
            1
        } else {
            0
        }
    }

    /// Writes the new state's election to the quorum-state file, then switches to it.
    fn durable(&mut self, new_state: EpochState) {
        let voters = if self.data_version() == 0 {
            self.voter_ids()
        } else {
            Vec::new()
        };
        let state = new_state.election(self.local_key(), voters);
        self.out.push(Output::PersistElection {
            state,
            data_version: self.data_version(),
        });
        self.state = new_state;
    }

    fn fire_leader_change(&mut self) {
        let leader = self.leader_id();
        let epoch = self.epoch();
        // A resigned leader no longer leads: listeners hear "no leader" (Kafka's Resigned
        // reports itself, but its controller has already stopped writing).
        let leader = if matches!(self.state, EpochState::Resigned { .. }) {
            None
        } else {
            leader
        };
        if self.last_leader_notice == Some((leader, epoch)) {
            return;
        }
        self.last_leader_notice = Some((leader, epoch));
        let (epoch_start_offset, first_data_offset) = match &self.state {
            EpochState::Leader(l) => (Some(l.epoch_start_offset), Some(l.first_data_offset)),
            _ => (None, None),
        };
        self.out.push(Output::LeaderChanged {
            leader_id: leader,
            epoch,
            epoch_start_offset,
            first_data_offset,
        });
    }

    /// Kafka's `transitionToUnattached(epoch, leaderId)`: a higher epoch, or the same epoch
    /// from Prospective (keeping the vote), or epoch + 1 from Resigned.
    fn transition_to_unattached(&mut self, epoch: i32, leader_id: Option<i32>, now: i64) {
        let current = self.epoch();
        let prospective = matches!(self.state, EpochState::Prospective { .. });
        if epoch < current || (epoch == current && !prospective) {
            return;
        }
        let remaining = |d: i64| (d - now).max(0);
        let timeout = if !self.is_voter() {
            i64::MAX
        } else {
            match &self.state {
                EpochState::Candidate {
                    election_deadline, ..
                }
                | EpochState::Unattached {
                    election_deadline, ..
                }
                | EpochState::Resigned {
                    election_deadline, ..
                } => remaining(*election_deadline),
                EpochState::Prospective {
                    election,
                    election_deadline,
                    ..
                } if !election.is_rejected() => remaining(*election_deadline),
                _ => self.random_election_timeout(),
            }
        };
        let voted_key = if epoch == current {
            self.state.voted_key(self.local_key())
        } else {
            None
        };
        let hw = self.state.high_watermark();
        self.leave_leadership(now);
        self.durable(EpochState::Unattached {
            epoch,
            leader_id,
            voted_key,
            election_deadline: now.saturating_add(timeout),
            high_watermark: hw,
        });
        self.fire_leader_change();
        self.requests.reset_all();
    }

    /// Grant a vote while Unattached or Prospective (Kafka's `unattachedAddVotedState` /
    /// `prospectiveAddVotedState`).
    fn add_voted_state(&mut self, candidate: ReplicaKey, now: i64) {
        let timeout = self.random_election_timeout();
        let new_state = match &self.state {
            EpochState::Unattached {
                epoch,
                leader_id,
                voted_key: None,
                high_watermark,
                ..
            } => EpochState::Unattached {
                epoch: *epoch,
                leader_id: *leader_id,
                voted_key: Some(candidate),
                election_deadline: now + timeout,
                high_watermark: *high_watermark,
            },
            EpochState::Prospective {
                epoch,
                leader_id,
                leader_endpoints,
                voted_key: None,
                election,
                high_watermark,
                ..
            } => EpochState::Prospective {
                epoch: *epoch,
                leader_id: *leader_id,
                leader_endpoints: leader_endpoints.clone(),
                voted_key: Some(candidate),
                election: election.clone(),
                election_deadline: now + timeout,
                high_watermark: *high_watermark,
            },
            _ => return,
        };
        self.durable(new_state);
    }

    /// Kafka's `transitionToFollower`.
    fn transition_to_follower(
        &mut self,
        epoch: i32,
        leader_id: i32,
        endpoints: Endpoints,
        now: i64,
    ) {
        let current = self.epoch();
        if Some(leader_id) == self.cfg.node_id || epoch < current {
            return;
        }
        if endpoints.is_empty() {
            // Kafka cannot follow a leader whose listeners it does not know; it stays
            // unattached (learning the epoch) until a request or response names them.
            if epoch > current {
                self.transition_to_unattached(epoch, Some(leader_id), now);
            }
            return;
        }
        if epoch == current {
            match &self.state {
                EpochState::Follower {
                    leader_endpoints, ..
                } if leader_endpoints.len() >= endpoints.len() => return,
                EpochState::Leader(_) => return,
                _ => {}
            }
        }
        let voted_key = if epoch == current {
            self.state.voted_key(self.local_key())
        } else {
            None
        };
        let hw = self.state.high_watermark();
        self.leave_leadership(now);
        self.durable(EpochState::Follower {
            epoch,
            leader_id,
            leader_endpoints: endpoints,
            voted_key,
            fetch_deadline: now + self.cfg.fetch_timeout_ms,
            has_fetched_from_leader: false,
            high_watermark: hw,
            fetching_snapshot: None,
        });
        self.auto_join_at = now + self.cfg.fetch_timeout_ms;
        self.fire_leader_change();
        // onBecomeFollower
        self.requests.reset_all();
        self.fail_parked_fetches(NOT_LEADER_OR_FOLLOWER);
    }

    /// Kafka's `transitionToProspective` (not persisted: nothing in the file changes).
    fn transition_to_prospective(&mut self, now: i64) {
        if !self.is_voter()
            || matches!(
                self.state,
                EpochState::Leader(_) | EpochState::Prospective { .. }
            )
        {
            return;
        }
        let voters = self.log.last_voter_set();
        let mut election = EpochElection::new(voters.keys());
        election.record(self.cfg.node_id.expect("voter has an id"), true);
        let leader_id = self
            .leader_id()
            .filter(|_| !matches!(self.state, EpochState::Resigned { .. }));
        let timeout = self.random_election_timeout();
        self.state = EpochState::Prospective {
            epoch: self.epoch(),
            leader_id,
            leader_endpoints: self.leader_endpoints_if_follower(),
            voted_key: self.state.voted_key(self.local_key()),
            election,
            election_deadline: now + timeout,
            high_watermark: self.state.high_watermark(),
        };
        // onBecomeProspective
        if !self.maybe_transition_to_candidate(now) {
            self.requests.reset_all();
        }
    }

    fn leader_endpoints_if_follower(&self) -> Endpoints {
        match &self.state {
            EpochState::Follower {
                leader_endpoints, ..
            }
            | EpochState::Prospective {
                leader_endpoints, ..
            } => leader_endpoints.clone(),
            _ => Endpoints::new(),
        }
    }

    fn maybe_transition_to_candidate(&mut self, now: i64) -> bool {
        if let EpochState::Prospective { election, .. } = &self.state {
            if election.is_granted() {
                self.transition_to_candidate(now);
                return true;
            }
        }
        false
    }

    /// Kafka's `transitionToCandidate`: only from Prospective; bumps the epoch and votes for
    /// itself (persisted).
    fn transition_to_candidate(&mut self, now: i64) {
        if !self.is_voter() || !matches!(self.state, EpochState::Prospective { .. }) {
            return;
        }
        let voters = self.log.last_voter_set();
        let mut election = EpochElection::new(voters.keys());
        election.record(self.cfg.node_id.expect("voter has an id"), true);
        let timeout = self.random_election_timeout();
        let hw = self.state.high_watermark();
        self.durable(EpochState::Candidate {
            epoch: self.epoch() + 1,
            election,
            election_deadline: now + timeout,
            high_watermark: hw,
        });
        self.fire_leader_change();
        self.on_become_candidate(now);
    }

    fn on_become_candidate(&mut self, now: i64) {
        if !self.maybe_transition_to_leader(now) {
            self.requests.reset_all();
        }
    }

    fn maybe_transition_to_leader(&mut self, now: i64) -> bool {
        let granting = match &self.state {
            EpochState::Candidate { election, .. } if election.is_granted() => election.granting(),
            _ => return false,
        };
        self.become_leader(granting.into_iter().collect(), now);
        true
    }

    /// Kafka's `onBecomeLeader`: persist, then write the LeaderChangeMessage at the log end so
    /// the epoch has an entry to commit.
    fn become_leader(&mut self, granting: BTreeSet<i32>, now: i64) {
        let Some(local) = self.local_key() else {
            return;
        };
        let epoch = self.epoch();
        let start = self.log.end_offset;
        let voters = self.log.last_voter_set();
        let mut leader = LeaderState::new(
            local,
            epoch,
            start,
            &voters,
            self.log.last_voter_set_offset(),
            granting.clone(),
            self.cfg.fetch_timeout_ms,
            now,
        );
        leader.update_local(self.log.flushed_end);
        self.durable(EpochState::Leader(Box::new(leader)));
        let mut records = vec![ControlRecord::LeaderChange {
            leader_id: local.id,
            voters: voters.ids().collect(),
            granting_voters: granting.into_iter().collect(),
        }];
        // Kafka's `appendStartOfEpochControlRecords`: under kraft.version 1 the leader writes
        // the voter set into the log when it only came from the bootstrap checkpoint (so that
        // observers formatted without voters learn it by fetching) or when its own entry is
        // stale (its listeners or kraft.version range changed since).
        let kraft_version = self.log.last_kraft_version();
        if kraft_version >= 1 {
            let me = VoterNode {
                key: local,
                listeners: self.cfg.local_listeners.clone(),
                supported_kraft_version: self.cfg.supported_kraft_version,
            };
            let from_bootstrap =
                self.log.last_voter_set_offset().is_none() && self.log.start_offset == 0;
            let stale = voters.get(local.id).is_some_and(|v| {
                !me.listeners.is_empty()
                    && (v.listeners != me.listeners
                        || v.supported_kraft_version != me.supported_kraft_version)
            });
            let updated = if stale { voters.with_updated(me) } else { None };
            if from_bootstrap || updated.is_some() {
                records.push(ControlRecord::KRaftVersion(kraft_version));
                records.push(ControlRecord::Voters(
                    updated.unwrap_or_else(|| voters.clone()),
                ));
            }
        }
        let count = records.len() as i64;
        self.append_as_leader(BatchContent::Control(records), count);
        if let EpochState::Leader(l) = &mut self.state {
            l.first_data_offset = start + count;
        }
        if count > 1 {
            self.refresh_after_log_change();
        }
        self.fire_leader_change();
        self.requests.reset_all();
    }

    /// Kafka's `transitionToResigned`.
    fn transition_to_resigned(&mut self, preferred: Vec<ReplicaKey>, now: i64) {
        if !self.is_leader() {
            return;
        }
        self.fail_parked_fetches(NOT_LEADER_OR_FOLLOWER);
        let epoch = self.epoch();
        let timeout = self.random_election_timeout();
        let unacked = self
            .log
            .last_voter_set()
            .ids()
            .filter(|v| Some(*v) != self.cfg.node_id)
            .collect();
        self.state = EpochState::Resigned {
            epoch,
            unacked_voters: unacked,
            preferred_successors: preferred,
            election_deadline: now + timeout,
        };
        self.fire_leader_change();
        self.requests.reset_all();
    }

    /// Leaving the Leader state by any transition: pending voter changes fail.
    fn leave_leadership(&mut self, _now: i64) {
        if let EpochState::Leader(l) = &mut self.state {
            if let Some(change) = l.pending_voter_change.take() {
                self.reply_voter_change(change, NOT_LEADER_OR_FOLLOWER, None);
            }
        }
    }

    // ---- polling (KafkaRaftClient.pollCurrentState) ---------------------------------------

    fn poll(&mut self, now: i64) {
        // Transitions made while polling are followed by another poll of the new state, as
        // Kafka's loop does (a timeout of 0 wakes it at once); bounded for safety.
        for _ in 0..8 {
            let before = (self.state.name(), self.epoch());
            match &self.state {
                EpochState::Leader(_) => self.poll_leader(now),
                EpochState::Candidate { .. } => self.poll_candidate(now),
                EpochState::Prospective { .. } => self.poll_prospective(now),
                EpochState::Follower { .. } => self.poll_follower(now),
                EpochState::Unattached { .. } => self.poll_unattached(now),
                EpochState::Resigned { .. } => self.poll_resigned(now),
            }
            if (self.state.name(), self.epoch()) == before {
                break;
            }
        }
    }

    fn poll_leader(&mut self, now: i64) {
        self.fire_leader_change();
        let (resign, preferred) = match &self.state {
            EpochState::Leader(l) => (
                self.shutdown_deadline.is_some()
                    || l.resign_requested
                    || l.time_until_check_quorum_expires(now) == 0,
                l.non_leader_voters_by_descending_fetch_offset(),
            ),
            _ => return,
        };
        if resign {
            self.transition_to_resigned(preferred, now);
            return;
        }
        self.expire_voter_change(now);
        self.expire_parked_fetches(now);
        let targets = match &mut self.state {
            EpochState::Leader(l) if l.time_until_begin_quorum_epoch(now) == 0 => {
                let t = l.need_begin_quorum_epoch(now);
                l.reset_begin_quorum_epoch_timer(now);
                t
            }
            _ => Vec::new(),
        };
        for key in targets {
            let req = Request::BeginQuorumEpoch(BeginQuorumEpochRequest {
                cluster_id: Some(self.cfg.cluster_id.clone()),
                voter_key: Some(key),
                leader_id: self.cfg.node_id.unwrap_or(-1),
                leader_epoch: self.epoch(),
                leader_endpoints: self.cfg.local_listeners.clone(),
            });
            self.maybe_send(key.id, req, now);
        }
    }

    fn poll_candidate(&mut self, now: i64) {
        let expired = match &self.state {
            EpochState::Candidate {
                election_deadline, ..
            } => now >= *election_deadline,
            _ => return,
        };
        if self.shutdown_deadline.is_none() && expired {
            self.transition_to_prospective(now);
            return;
        }
        self.maybe_send_vote_requests(now);
    }

    fn poll_prospective(&mut self, now: i64) {
        let expired = match &self.state {
            EpochState::Prospective {
                election_deadline, ..
            } => now >= *election_deadline,
            _ => return,
        };
        if self.shutdown_deadline.is_none() && expired {
            self.prospective_after_election_loss(now);
            return;
        }
        self.maybe_send_vote_requests(now);
    }

    /// Kafka's `prospectiveTransitionAfterElectionLoss`: back to following the known leader,
    /// else unattached in the same epoch.
    fn prospective_after_election_loss(&mut self, now: i64) {
        let (epoch, leader, endpoints) = match &self.state {
            EpochState::Prospective {
                epoch,
                leader_id,
                leader_endpoints,
                ..
            } => (*epoch, *leader_id, leader_endpoints.clone()),
            _ => return,
        };
        match leader {
            Some(l) if !endpoints.is_empty() => {
                // Same epoch, so Kafka's transitionToFollower accepts it from Prospective.
                self.transition_to_follower(epoch, l, endpoints, now)
            }
            _ => self.transition_to_unattached(epoch, leader, now),
        }
    }

    fn maybe_send_vote_requests(&mut self, now: i64) {
        let (targets, pre_vote) = match &self.state {
            EpochState::Prospective { election, .. } if !election.is_rejected() => {
                (election.unrecorded(), true)
            }
            EpochState::Candidate { election, .. } if !election.is_rejected() => {
                (election.unrecorded(), false)
            }
            _ => return,
        };
        let end = self.log.end_offset_and_epoch();
        let Some(local) = self.local_key() else {
            return;
        };
        for key in targets {
            if Some(key.id) == self.cfg.node_id {
                continue;
            }
            let req = Request::Vote(VoteRequest {
                cluster_id: Some(self.cfg.cluster_id.clone()),
                voter_key: Some(key),
                candidate: local,
                candidate_epoch: self.epoch(),
                last_offset_epoch: end.epoch,
                last_offset: end.offset,
                pre_vote,
            });
            self.maybe_send(key.id, req, now);
        }
    }

    fn poll_follower(&mut self, now: i64) {
        let expired = match &self.state {
            EpochState::Follower { fetch_deadline, .. } => now >= *fetch_deadline,
            _ => return,
        };
        if self.shutdown_deadline.is_some() {
            return;
        }
        if self.is_voter() && expired {
            self.transition_to_prospective(now);
            return;
        }
        if self.should_send_add_or_remove_voter(now) {
            // Kafka's `pollFollowerAsObserver`: no fetch in this round; the request waits for
            // one in flight to the leader to finish.
            if self.send_add_or_remove_voter(now) {
                self.auto_join_at = now + self.cfg.fetch_timeout_ms;
            }
            return;
        }
        self.maybe_send_fetch_to_best_node(now);
    }

    /// KIP-853's `controller.quorum.auto.join.enable`: a controller that is an observer of a
    /// quorum whose voters live in the log asks to become a voter, once per fetch timeout.
    fn should_send_add_or_remove_voter(&self, now: i64) -> bool {
        self.cfg.auto_join
            && !self.is_voter()
            && self.local_key().is_some_and(|k| k.directory_id.is_some())
            && self.log.last_kraft_version() >= 1
            && now >= self.auto_join_at
    }

    /// Kafka's observer step: if this node's id is a voter under another directory id (the
    /// node was re-formatted), that voter is removed first; otherwise this node asks to be
    /// added, answered when the VotersRecord is appended. Errors are not acted on: the next
    /// period asks again. Returns whether the request went out.
    fn send_add_or_remove_voter(&mut self, now: i64) -> bool {
        let (Some(leader), Some(me)) = (self.leader_id(), self.local_key()) else {
            return false;
        };
        let cluster_id = Some(self.cfg.cluster_id.clone());
        let old = self.log.last_voter_set().keys().find(|k| k.id == me.id);
        let request = match old {
            Some(old) => Request::RemoveRaftVoter(RemoveRaftVoterRequest {
                cluster_id,
                voter: old,
            }),
            None => Request::AddRaftVoter(AddRaftVoterRequest {
                cluster_id,
                timeout_ms: self.cfg.request_timeout_ms as i32,
                voter: me,
                listeners: self.cfg.local_listeners.clone(),
                ack_when_committed: false,
            }),
        };
        self.maybe_send(leader, request, now)
    }

    fn poll_unattached(&mut self, now: i64) {
        let expired = match &self.state {
            EpochState::Unattached {
                election_deadline, ..
            } => now >= *election_deadline,
            _ => return,
        };
        if self.is_voter() {
            if self.shutdown_deadline.is_some() {
                return;
            }
            if expired {
                self.transition_to_prospective(now);
                return;
            }
        }
        self.maybe_send_fetch_to_any_bootstrap(now);
    }

    fn poll_resigned(&mut self, now: i64) {
        let (epoch, unacked, preferred, expired) = match &self.state {
            EpochState::Resigned {
                epoch,
                unacked_voters,
                preferred_successors,
                election_deadline,
            } => (
                *epoch,
                unacked_voters.clone(),
                preferred_successors.clone(),
                now >= *election_deadline,
            ),
            _ => return,
        };
        for v in unacked {
            let req = Request::EndQuorumEpoch(EndQuorumEpochRequest {
                cluster_id: Some(self.cfg.cluster_id.clone()),
                leader_id: self.cfg.node_id.unwrap_or(-1),
                leader_epoch: epoch,
                preferred_candidates: preferred.clone(),
                leader_endpoints: self.cfg.local_listeners.clone(),
            });
            self.maybe_send(v, req, now);
        }
        if self.shutdown_deadline.is_none() && expired {
            self.transition_to_unattached(epoch + 1, None, now);
        }
    }

    fn maybe_send(&mut self, to: i32, request: Request, now: i64) -> bool {
        if self.requests.is_backing_off(to, now) || !self.requests.is_ready(to, now) {
            return false;
        }
        self.next_correlation_id += 1;
        let correlation_id = self.next_correlation_id;
        self.requests.on_sent(to, correlation_id, now);
        self.out.push(Output::Send {
            to,
            correlation_id,
            request,
        });
        true
    }

    fn build_fetch(&self) -> Request {
        Request::Fetch(FetchRequest {
            cluster_id: Some(self.cfg.cluster_id.clone()),
            replica: self.local_key().unwrap_or(ReplicaKey::without_dir(-1)),
            max_wait_ms: self.cfg.fetch_max_wait_ms,
            max_bytes: self.cfg.fetch_max_bytes,
            current_leader_epoch: self.epoch(),
            fetch_offset: self.log.end_offset,
            last_fetched_epoch: self.log.last_fetched_epoch(),
            high_watermark: self.state.high_watermark().unwrap_or(-1),
        })
    }

    /// A replica fetches only what it has made durable: the leader counts a voter's fetch
    /// offset as held by it (Kafka flushes inline before the next poll sends the Fetch). An
    /// observer with a node id too: an AddRaftVoter can make it a voter between two fetches,
    /// and its last fetch offset then counts toward the high watermark at once.
    fn fetch_blocked_on_flush(&mut self) -> bool {
        let blocked = self.cfg.node_id.is_some() && self.log.flushed_end < self.log.end_offset;
        // A flush that came back short (a truncation overtook it) is asked for again, or the
        // fetch would wait for good.
        if blocked && !self.flush_asked {
            self.flush_asked = true;
            self.out.push(Output::Flush {
                end_offset: self.log.end_offset,
            });
        }
        blocked
    }

    fn maybe_send_fetch_to_any_bootstrap(&mut self, now: i64) {
        if self.fetch_blocked_on_flush() {
            return;
        }
        let n = self.requests.bootstrap_len();
        if n == 0 {
            return;
        }
        let start = self.rng.gen_range(0..n);
        if let Some(node) = self.requests.ready_bootstrap(now, start) {
            let req = self.build_fetch();
            self.maybe_send(node, req, now);
        }
    }

    fn maybe_send_fetch_to_best_node(&mut self, now: i64) {
        let leader = match &self.state {
            EpochState::Follower { leader_id, .. } => *leader_id,
            _ => return,
        };
        if self.requests.has_timed_out(leader, now) {
            self.requests.reset(leader);
            self.maybe_send_fetch_to_any_bootstrap(now);
        } else if self.requests.is_backing_off(leader, now) {
            self.maybe_send_fetch_to_any_bootstrap(now);
        } else if !self.requests.has_any_inflight(now) {
            self.maybe_send_fetch_or_fetch_snapshot(leader, now);
        }
    }

    fn maybe_send_fetch_or_fetch_snapshot(&mut self, leader: i32, now: i64) {
        let download = match &self.state {
            EpochState::Follower {
                fetching_snapshot, ..
            } => fetching_snapshot.clone(),
            _ => return,
        };
        let req = match download {
            Some(d) => Request::FetchSnapshot(FetchSnapshotRequest {
                cluster_id: Some(self.cfg.cluster_id.clone()),
                replica: self.local_key().unwrap_or(ReplicaKey::without_dir(-1)),
                max_bytes: self.cfg.fetch_snapshot_max_bytes,
                current_leader_epoch: self.epoch(),
                snapshot_id: d.id,
                position: d.written as i64,
            }),
            None => {
                if self.fetch_blocked_on_flush() {
                    return;
                }
                self.build_fetch()
            }
        };
        self.maybe_send(leader, req, now);
    }

    fn maybe_complete_shutdown(&mut self, now: i64) {
        let Some(deadline) = self.shutdown_deadline else {
            return;
        };
        if self.shutdown_done {
            return;
        }
        let has_remote_leader = self
            .leader_id()
            .is_some_and(|l| Some(l) != self.cfg.node_id)
            && !matches!(self.state, EpochState::Resigned { .. });
        if now >= deadline {
            self.shutdown_done = true;
            self.out.push(Output::ShutdownComplete { timed_out: true });
        } else if !self.is_voter() || self.is_only_voter() || has_remote_leader {
            self.shutdown_done = true;
            self.out.push(Output::ShutdownComplete { timed_out: false });
        }
    }

    // ---- leader appends and the high watermark ---------------------------------------------

    fn append(&mut self, records: Vec<Bytes>, epoch: i32, now: i64) {
        let leader = matches!(&self.state,
            EpochState::Leader(l) if !l.resign_requested && self.shutdown_deadline.is_none());
        if !leader || epoch != self.epoch() || records.is_empty() {
            self.out.push(Output::AppendRejected {
                leader_id: if self.is_leader() {
                    None
                } else {
                    self.leader_id()
                },
                epoch: self.epoch(),
            });
            return;
        }
        let n = records.len() as i64;
        let (base, last, epoch) = self.append_as_leader(BatchContent::Data(records), n);
        self.out.push(Output::Appended {
            base_offset: base,
            last_offset: last,
            epoch,
        });
        let _ = now;
    }

    /// Appends a batch of `count` records at the log end in the current epoch, then asks for a
    /// flush. Parked fetches waiting for data wake up.
    fn append_as_leader(&mut self, content: BatchContent, count: i64) -> (i64, i64, i32) {
        let epoch = self.epoch();
        let base = self.log.end_offset;
        let last = base + count - 1;
        if let BatchContent::Control(records) = &content {
            // By the batch's base offset, as the log is read back at start-up and by followers.
            for r in records {
                match r {
                    ControlRecord::Voters(v) => self.log.record_voters(base, v.clone()),
                    ControlRecord::KRaftVersion(k) => self.log.record_kraft_version(base, *k),
                    ControlRecord::LeaderChange { .. } => {}
                }
            }
        }
        self.log.append(base, last, epoch);
        self.out.push(Output::AppendLeader {
            base_offset: base,
            epoch,
            content,
        });
        self.out.push(Output::Flush {
            end_offset: self.log.end_offset,
        });
        self.wake_parked_fetches(Some(self.log.end_offset));
        (base, last, epoch)
    }

    fn flushed(&mut self, end_offset: i64, now: i64) {
        self.flush_asked = false;
        let end = end_offset.min(self.log.end_offset);
        if end <= self.log.flushed_end {
            return;
        }
        self.log.flushed_end = end;
        let moved = match &mut self.state {
            EpochState::Leader(l) => l.update_local(end),
            _ => false,
        };
        if moved {
            self.on_leader_high_watermark(now);
        }
    }

    /// Kafka's `onUpdateLeaderHighWatermark`: commit, let voter changes complete, and answer
    /// every parked fetch (followers learn the new high watermark promptly).
    fn on_leader_high_watermark(&mut self, now: i64) {
        let Some(hw) = self.state.high_watermark() else {
            return;
        };
        self.advance_committed(hw);
        self.voter_change_on_high_watermark(hw, now);
        self.wake_parked_fetches(None);
    }

    fn advance_committed(&mut self, hw: i64) {
        if hw > self.committed {
            self.committed = hw;
            self.out.push(Output::HighWatermark(hw));
        }
    }

    // ---- requests --------------------------------------------------------------------------

    fn valid_cluster_id(&self, cluster_id: &Option<String>) -> bool {
        match cluster_id {
            None => true,
            Some(c) => c.is_empty() && self.cfg.cluster_id.is_empty() || *c == self.cfg.cluster_id,
        }
    }

    fn is_valid_voter_key(&self, key: Option<ReplicaKey>) -> bool {
        match key {
            None => true,
            Some(k) => {
                Some(k.id) == self.cfg.node_id
                    && (k.directory_id.is_none() || k.directory_id == Some(self.cfg.directory_id))
            }
        }
    }

    /// Kafka's `validateVoterOnlyRequest`.
    fn validate_voter_only(&self, remote_id: i32, epoch: i32) -> Option<i16> {
        if epoch < self.epoch() {
            Some(FENCED_LEADER_EPOCH)
        } else if remote_id < 0 {
            Some(INVALID_REQUEST)
        } else {
            None
        }
    }

    /// Kafka's `validateLeaderOnlyRequest`.
    fn validate_leader_only(&self, epoch: i32) -> Option<i16> {
        if epoch < self.epoch() {
            Some(FENCED_LEADER_EPOCH)
        } else if epoch > self.epoch() {
            Some(UNKNOWN_LEADER_EPOCH)
        } else if !self.is_leader() {
            Some(NOT_LEADER_OR_FOLLOWER)
        } else if self.shutdown_deadline.is_some() {
            Some(BROKER_NOT_AVAILABLE)
        } else {
            None
        }
    }

    fn quorum_response(&self, error: i16, partition_error: i16) -> QuorumResponse {
        QuorumResponse {
            error,
            partition_error,
            leader_id: self.leader_id_or_sentinel(),
            leader_epoch: self.epoch(),
            leader_endpoints: self.leader_endpoints(),
        }
    }

    fn reply(&mut self, id: RequestId, response: Response) {
        self.out.push(Output::Reply { id, response });
    }

    fn handle_request(&mut self, id: RequestId, request: Request, now: i64) {
        let response = match request {
            Request::Vote(r) => Some(Response::Vote(self.handle_vote(r, now))),
            Request::BeginQuorumEpoch(r) => Some(Response::BeginQuorumEpoch(
                self.handle_begin_quorum_epoch(r, now),
            )),
            Request::EndQuorumEpoch(r) => Some(Response::EndQuorumEpoch(
                self.handle_end_quorum_epoch(r, now),
            )),
            Request::Fetch(r) => self.handle_fetch(id, r, now).map(Response::Fetch),
            Request::FetchSnapshot(r) => {
                Some(Response::FetchSnapshot(self.handle_fetch_snapshot(r, now)))
            }
            Request::DescribeQuorum => Some(Response::DescribeQuorum(self.describe(now))),
            Request::AddRaftVoter(r) => self
                .handle_add_voter(id, r, now)
                .map(Response::AddRaftVoter),
            Request::RemoveRaftVoter(r) => self
                .handle_remove_voter(id, r, now)
                .map(Response::RemoveRaftVoter),
            Request::UpdateRaftVoter(r) => self
                .handle_update_voter(id, r, now)
                .map(Response::UpdateRaftVoter),
            // Raft itself only sends ApiVersions (to a voter being added); the broker's
            // network layer answers ApiVersions requests.
            Request::ApiVersions { .. } => None,
        };
        if let Some(response) = response {
            self.reply(id, response);
        }
    }

    /// Kafka's `handleVoteRequest`.
    fn handle_vote(&mut self, r: VoteRequest, now: i64) -> VoteResponse {
        let reject = |s: &Self, e: i16| VoteResponse {
            common: s.quorum_response(NONE, e),
            vote_granted: false,
        };
        if !self.valid_cluster_id(&r.cluster_id) {
            return VoteResponse {
                common: QuorumResponse {
                    error: INCONSISTENT_CLUSTER_ID,
                    partition_error: NONE,
                    leader_id: -1,
                    leader_epoch: -1,
                    leader_endpoints: Endpoints::new(),
                },
                vote_granted: false,
            };
        }
        let illegal_epoch = if r.pre_vote {
            r.last_offset_epoch > r.candidate_epoch
        } else {
            r.last_offset_epoch >= r.candidate_epoch
        };
        if r.last_offset < 0 || r.last_offset_epoch < 0 || illegal_epoch {
            return reject(self, INVALID_REQUEST);
        }
        if let Some(e) = self.validate_voter_only(r.candidate.id, r.candidate_epoch) {
            return reject(self, e);
        }
        // Even a pre-vote teaches us the epoch (Kafka 4.4 moves to Unattached in it).
        if r.candidate_epoch > self.epoch() {
            self.transition_to_unattached(r.candidate_epoch, None, now);
        }
        if !self.is_valid_voter_key(r.voter_key) {
            return reject(self, INVALID_VOTER_KEY);
        }
        let up_to_date = OffsetAndEpoch::new(r.last_offset, r.last_offset_epoch)
            >= self.log.end_offset_and_epoch();
        let granted = self
            .state
            .can_grant_vote(r.candidate, up_to_date, r.pre_vote);
        if !r.pre_vote && granted {
            // The vote is persisted (PersistElection) before the response leaves.
            self.add_voted_state(r.candidate, now);
        }
        VoteResponse {
            common: self.quorum_response(NONE, NONE),
            vote_granted: granted,
        }
    }

    /// Kafka's `handleBeginQuorumEpochRequest`.
    fn handle_begin_quorum_epoch(
        &mut self,
        r: BeginQuorumEpochRequest,
        now: i64,
    ) -> QuorumResponse {
        if !self.valid_cluster_id(&r.cluster_id) {
            return QuorumResponse {
                error: INCONSISTENT_CLUSTER_ID,
                partition_error: NONE,
                leader_id: -1,
                leader_epoch: -1,
                leader_endpoints: Endpoints::new(),
            };
        }
        if let Some(e) = self.validate_voter_only(r.leader_id, r.leader_epoch) {
            return self.quorum_response(NONE, e);
        }
        let endpoints = if r.leader_endpoints.is_empty() {
            self.log.last_voter_set().listeners(r.leader_id)
        } else {
            r.leader_endpoints.clone()
        };
        if let Err(msg) = self.maybe_transition(Some(r.leader_id), r.leader_epoch, endpoints, now) {
            self.out.push(Output::Fatal(msg));
            return self.quorum_response(NONE, UNKNOWN_SERVER_ERROR);
        }
        if !self.is_valid_voter_key(r.voter_key) {
            return self.quorum_response(NONE, INVALID_VOTER_KEY);
        }
        self.quorum_response(NONE, NONE)
    }

    /// Kafka's `handleEndQuorumEpochRequest`.
    fn handle_end_quorum_epoch(&mut self, r: EndQuorumEpochRequest, now: i64) -> QuorumResponse {
        if !self.valid_cluster_id(&r.cluster_id) {
            return QuorumResponse {
                error: INCONSISTENT_CLUSTER_ID,
                partition_error: NONE,
                leader_id: -1,
                leader_epoch: -1,
                leader_endpoints: Endpoints::new(),
            };
        }
        if let Some(e) = self.validate_voter_only(r.leader_id, r.leader_epoch) {
            return self.quorum_response(NONE, e);
        }
        let endpoints = if r.leader_endpoints.is_empty() {
            self.log.last_voter_set().listeners(r.leader_id)
        } else {
            r.leader_endpoints.clone()
        };
        if let Err(msg) = self.maybe_transition(Some(r.leader_id), r.leader_epoch, endpoints, now) {
            self.out.push(Output::Fatal(msg));
            return self.quorum_response(NONE, UNKNOWN_SERVER_ERROR);
        }
        let backoff = self.end_epoch_election_backoff(&r.preferred_candidates);
        if let EpochState::Follower {
            leader_id,
            fetch_deadline,
            ..
        } = &mut self.state
        {
            if *leader_id == r.leader_id {
                // A preferred successor starts its election sooner; the first at once.
                *fetch_deadline = now + backoff;
            }
        }
        self.quorum_response(NONE, NONE)
    }

    /// Kafka's `endEpochElectionBackoff` with `strictExponentialElectionBackoffMs`.
    fn end_epoch_election_backoff(&self, preferred: &[ReplicaKey]) -> i64 {
        let position = preferred
            .iter()
            .position(|k| {
                Some(k.id) == self.cfg.node_id
                    && (k.directory_id.is_none() || k.directory_id == Some(self.cfg.directory_id))
            })
            .unwrap_or(preferred.len());
        let total = preferred.len();
        let max = self.cfg.election_backoff_max_ms;
        if position == 0 {
            0
        } else if position >= total {
            max
        } else {
            let base = max >> (total as u32 - 1).min(62);
            max.min(base << (position as u32 - 1).min(62))
        }
    }

    /// Kafka's `hasConsistentLeader`.
    fn has_consistent_leader(&self, epoch: i32, leader_id: Option<i32>) -> bool {
        match leader_id {
            Some(l) if Some(l) == self.cfg.node_id => self.is_leader(),
            _ => {
                epoch != self.epoch()
                    || leader_id.is_none()
                    || self.leader_id().is_none()
                    || self.leader_id() == leader_id
            }
        }
    }

    /// Kafka's `maybeTransition`: follow a newer epoch's leader (or learn the epoch), or the
    /// current epoch's leader once known.
    fn maybe_transition(
        &mut self,
        leader_id: Option<i32>,
        epoch: i32,
        endpoints: Endpoints,
        now: i64,
    ) -> Result<(), String> {
        if !self.has_consistent_leader(epoch, leader_id) {
            return Err(format!(
                "received request or response with leader {leader_id:?} and epoch {epoch} which \
                 is inconsistent with current leader {:?} and epoch {}",
                self.leader_id(),
                self.epoch()
            ));
        }
        if epoch > self.epoch() {
            match leader_id {
                Some(l) => self.transition_to_follower(epoch, l, endpoints, now),
                None => self.transition_to_unattached(epoch, None, now),
            }
        } else if let Some(l) = leader_id {
            if self.leader_id().is_none() || endpoints.len() > self.leader_endpoints().len() {
                self.transition_to_follower(epoch, l, endpoints, now);
            }
        }
        Ok(())
    }

    // ---- Fetch (leader side) ---------------------------------------------------------------

    fn empty_fetch_response(&self, error: i16, partition_error: i16) -> FetchResponse {
        FetchResponse {
            error,
            partition_error,
            high_watermark: -1,
            log_start_offset: self.log.start_offset,
            leader_id: self.leader_id_or_sentinel(),
            leader_epoch: self.epoch(),
            diverging_epoch: None,
            snapshot_id: None,
            records: Records::None,
            leader_endpoints: self.leader_endpoints(),
        }
    }

    /// Kafka's `handleFetchRequest`: answers now, or parks the Fetch (returns None).
    fn handle_fetch(&mut self, id: RequestId, r: FetchRequest, now: i64) -> Option<FetchResponse> {
        if !self.valid_cluster_id(&r.cluster_id) {
            let mut resp = self.empty_fetch_response(INCONSISTENT_CLUSTER_ID, NONE);
            resp.leader_id = -1;
            resp.leader_epoch = -1;
            return Some(resp);
        }
        if r.max_wait_ms < 0
            || r.fetch_offset < 0
            || r.last_fetched_epoch < 0
            || r.last_fetched_epoch > r.current_leader_epoch
        {
            return Some(self.empty_fetch_response(NONE, INVALID_REQUEST));
        }
        let resp = self.try_complete_fetch(&r, now);
        let answer_now = resp.partition_error != NONE
            || !matches!(resp.records, Records::None)
            || r.max_wait_ms == 0
            || resp.diverging_epoch.is_some()
            || resp.snapshot_id.is_some()
            || r.high_watermark < resp.high_watermark;
        if answer_now {
            return Some(resp);
        }
        self.parked.push(ParkedFetch {
            id,
            deadline: now + r.max_wait_ms as i64,
            request: r,
            original: resp,
        });
        None
    }

    /// Kafka's `tryCompleteFetchRequest`.
    fn try_complete_fetch(&mut self, r: &FetchRequest, now: i64) -> FetchResponse {
        if let Some(e) = self.validate_leader_only(r.current_leader_epoch) {
            return self.empty_fetch_response(NONE, e);
        }
        let valid = match self.log.latest_snapshot() {
            Some(s) if r.fetch_offset == 0 && s != types::BOOTSTRAP_SNAPSHOT_ID => {
                ValidOffsetAndEpoch::Snapshot(s)
            }
            _ => self
                .log
                .validate_offset_and_epoch(r.fetch_offset, r.last_fetched_epoch),
        };
        let mut records = Records::None;
        if valid == ValidOffsetAndEpoch::Valid {
            let moved = match &mut self.state {
                EpochState::Leader(l) => l.update_replica(r.replica, now, r.fetch_offset),
                _ => false,
            };
            if moved {
                self.on_leader_high_watermark(now);
            }
            if r.fetch_offset < self.log.end_offset {
                records = Records::Read {
                    from_offset: r.fetch_offset,
                    max_bytes: r.max_bytes,
                };
            }
        }
        let mut resp = self.empty_fetch_response(NONE, NONE);
        resp.high_watermark = self.state.high_watermark().unwrap_or(-1);
        resp.records = records;
        match valid {
            ValidOffsetAndEpoch::Diverging(d) => resp.diverging_epoch = Some(d),
            ValidOffsetAndEpoch::Snapshot(s) => resp.snapshot_id = Some(s),
            ValidOffsetAndEpoch::Valid => {}
        }
        resp
    }

    /// Wake parked fetches: those below `end_offset` (new data), or all (`None`: the high
    /// watermark moved). Each is answered with a fresh `tryCompleteFetchRequest`.
    fn wake_parked_fetches(&mut self, end_offset: Option<i64>) {
        if self.parked.is_empty() {
            return;
        }
        let parked = std::mem::take(&mut self.parked);
        let (wake, keep): (Vec<_>, Vec<_>) = parked
            .into_iter()
            .partition(|p| end_offset.is_none_or(|e| p.request.fetch_offset < e));
        self.parked = keep;
        let now = self.now;
        for p in wake {
            let resp = self.try_complete_fetch(&p.request, now);
            self.reply(p.id, Response::Fetch(resp));
        }
    }

    fn expire_parked_fetches(&mut self, now: i64) {
        if self.parked.iter().all(|p| p.deadline > now) {
            return;
        }
        let parked = std::mem::take(&mut self.parked);
        for p in parked {
            if p.deadline <= now {
                self.reply(p.id, Response::Fetch(p.original));
            } else {
                self.parked.push(p);
            }
        }
    }

    fn fail_parked_fetches(&mut self, error: i16) {
        for p in std::mem::take(&mut self.parked) {
            let resp = self.empty_fetch_response(NONE, error);
            self.reply(p.id, Response::Fetch(resp));
        }
    }

    // ---- FetchSnapshot (leader side) -------------------------------------------------------

    fn handle_fetch_snapshot(
        &mut self,
        r: FetchSnapshotRequest,
        now: i64,
    ) -> FetchSnapshotResponse {
        let mut resp = FetchSnapshotResponse {
            error: NONE,
            partition_error: NONE,
            leader_id: self.leader_id_or_sentinel(),
            leader_epoch: self.epoch(),
            snapshot_id: OffsetAndEpoch::new(-1, -1),
            size: -1,
            position: -1,
            bytes: SnapshotBytes::None,
            leader_endpoints: self.leader_endpoints(),
        };
        if !self.valid_cluster_id(&r.cluster_id) {
            resp.error = INCONSISTENT_CLUSTER_ID;
            resp.leader_id = -1;
            resp.leader_epoch = -1;
            return resp;
        }
        if let Some(e) = self.validate_leader_only(r.current_leader_epoch) {
            resp.partition_error = e;
            return resp;
        }
        let size = match self.log.snapshot_size(r.snapshot_id) {
            Some(s) if r.snapshot_id != types::BOOTSTRAP_SNAPSHOT_ID => s,
            _ => {
                resp.partition_error = SNAPSHOT_NOT_FOUND;
                return resp;
            }
        };
        if r.position < 0 || r.position as u64 >= size {
            resp.partition_error = POSITION_OUT_OF_RANGE;
            return resp;
        }
        let len = (size - r.position as u64).min(r.max_bytes.max(0) as u64);
        if let EpochState::Leader(l) = &mut self.state {
            l.update_check_quorum(r.replica, now);
        }
        resp.snapshot_id = r.snapshot_id;
        resp.size = size as i64;
        resp.position = r.position;
        resp.bytes = SnapshotBytes::Read {
            id: r.snapshot_id,
            position: r.position as u64,
            len,
        };
        resp
    }

    fn describe(&mut self, now: i64) -> DescribeQuorumResponse {
        let voters = self.log.last_voter_set();
        let nodes = voters
            .nodes()
            .map(|n| (n.key.id, n.listeners.clone()))
            .collect();
        match &mut self.state {
            EpochState::Leader(l) => {
                let leader_id = l.local.id;
                let current_voters = l.voters.values().map(|s| s.view(leader_id, now)).collect();
                let observers = l
                    .active_observers(now)
                    .iter()
                    .filter(|s| s.key.id >= 0)
                    .map(|s| s.view(leader_id, now))
                    .collect();
                DescribeQuorumResponse {
                    error: NONE,
                    partition_error: NONE,
                    leader_id,
                    leader_epoch: l.epoch,
                    high_watermark: l.high_watermark.unwrap_or(-1),
                    current_voters,
                    observers,
                    nodes,
                }
            }
            _ => DescribeQuorumResponse {
                error: NONE,
                partition_error: NOT_LEADER_OR_FOLLOWER,
                leader_id: -1,
                leader_epoch: -1,
                high_watermark: -1,
                current_voters: Vec::new(),
                observers: Vec::new(),
                nodes: Vec::new(),
            },
        }
    }

    // ---- responses -------------------------------------------------------------------------

    /// Returns whether the response counts as a success for the request manager.
    fn handle_response(&mut self, from: i32, response: Response, now: i64) -> bool {
        match response {
            Response::Vote(r) => self.handle_vote_response(from, r, now),
            Response::BeginQuorumEpoch(r) => {
                if is_set(r.error) {
                    return self.top_level_error(r.error);
                }
                let ep = self.response_endpoints(r.leader_id, &r.leader_endpoints);
                match self.common_response(
                    r.partition_error,
                    opt(r.leader_id),
                    r.leader_epoch,
                    ep,
                    now,
                ) {
                    Some(h) => h,
                    None if r.partition_error == NONE => {
                        if let EpochState::Leader(l) = &mut self.state {
                            l.add_acknowledgement(from);
                        }
                        true
                    }
                    None => false,
                }
            }
            Response::EndQuorumEpoch(r) => {
                if is_set(r.error) {
                    return self.top_level_error(r.error);
                }
                let ep = self.response_endpoints(r.leader_id, &r.leader_endpoints);
                match self.common_response(
                    r.partition_error,
                    opt(r.leader_id),
                    r.leader_epoch,
                    ep,
                    now,
                ) {
                    Some(h) => h,
                    None if r.partition_error == NONE => {
                        if let EpochState::Resigned { unacked_voters, .. } = &mut self.state {
                            unacked_voters.retain(|v| *v != from);
                        }
                        true
                    }
                    None => false,
                }
            }
            Response::Fetch(r) => self.handle_fetch_response(r, now),
            Response::FetchSnapshot(r) => self.handle_fetch_snapshot_response(r, now),
            Response::UpdateRaftVoter(_)
            | Response::ApiVersions { .. }
            | Response::AddRaftVoter(_)
            | Response::RemoveRaftVoter(_)
            | Response::DescribeQuorum(_) => true,
        }
    }

    fn top_level_error(&mut self, error: i16) -> bool {
        if error == CLUSTER_AUTHORIZATION_FAILED {
            self.out.push(Output::Fatal(
                "cluster authorization failed in a Raft response".into(),
            ));
        }
        false
    }

    fn response_endpoints(&self, leader_id: i32, endpoints: &Endpoints) -> Endpoints {
        if leader_id < 0 {
            Endpoints::new()
        } else if endpoints.is_empty() {
            self.log.last_voter_set().listeners(leader_id)
        } else {
            endpoints.clone()
        }
    }

    /// Kafka's `maybeHandleCommonResponse`: `Some(handled)` when the epoch or error settles
    /// it, `None` to go on with the response.
    fn common_response(
        &mut self,
        error: i16,
        leader_id: Option<i32>,
        epoch: i32,
        endpoints: Endpoints,
        now: i64,
    ) -> Option<bool> {
        let endpoints = match leader_id {
            Some(l) if endpoints.is_empty() => self.log.last_voter_set().listeners(l),
            _ => endpoints,
        };
        if epoch < self.epoch() || error == UNKNOWN_LEADER_EPOCH {
            return Some(true);
        }
        if epoch > self.epoch() || error == FENCED_LEADER_EPOCH || error == NOT_LEADER_OR_FOLLOWER {
            if let Err(msg) = self.maybe_transition(leader_id, epoch, endpoints, now) {
                self.out.push(Output::Fatal(msg));
            }
            return Some(true);
        }
        if let Some(leader) =
            leader_id.filter(|_| epoch == self.epoch() && self.leader_id().is_none())
        {
            self.transition_to_follower(epoch, leader, endpoints, now);
            return if error == NONE { None } else { Some(true) };
        }
        match error {
            BROKER_NOT_AVAILABLE => Some(false),
            INVALID_VOTER_KEY => Some(true),
            INVALID_REQUEST => {
                self.out.push(Output::Fatal(
                    "received unexpected invalid request error".into(),
                ));
                Some(false)
            }
            _ => None,
        }
    }

    fn handle_vote_response(&mut self, from: i32, r: VoteResponse, now: i64) -> bool {
        if r.common.error == UNSUPPORTED_VERSION
            && matches!(self.state, EpochState::Prospective { .. })
        {
            // A voter that predates pre-vote: become a candidate without it.
            self.transition_to_candidate(now);
            return true;
        }
        if is_set(r.common.error) {
            return self.top_level_error(r.common.error);
        }
        let c = &r.common;
        let ep = self.response_endpoints(c.leader_id, &c.leader_endpoints);
        if let Some(h) =
            self.common_response(c.partition_error, opt(c.leader_id), c.leader_epoch, ep, now)
        {
            return h;
        }
        if c.partition_error != NONE {
            return false;
        }
        match &mut self.state {
            EpochState::Prospective { election, .. } | EpochState::Candidate { election, .. } => {
                election.record(from, r.vote_granted);
                let rejected = election.is_rejected();
                if r.vote_granted {
                    if matches!(self.state, EpochState::Prospective { .. }) {
                        self.maybe_transition_to_candidate(now);
                    } else {
                        self.maybe_transition_to_leader(now);
                    }
                } else if rejected && matches!(self.state, EpochState::Prospective { .. }) {
                    // A candidate waits out its election timeout before going back to
                    // Prospective; a prospective gives up at once.
                    self.prospective_after_election_loss(now);
                }
            }
            _ => {}
        }
        true
    }

    // ---- Fetch (follower side) -------------------------------------------------------------

    fn handle_fetch_response(&mut self, r: FetchResponse, now: i64) -> bool {
        if is_set(r.error) {
            return self.top_level_error(r.error);
        }
        let ep = self.response_endpoints(r.leader_id, &r.leader_endpoints);
        if let Some(h) =
            self.common_response(r.partition_error, opt(r.leader_id), r.leader_epoch, ep, now)
        {
            return h;
        }
        if !matches!(self.state, EpochState::Follower { .. }) {
            return true;
        }
        if r.partition_error != NONE {
            return false;
        }
        if let Some(d) = r.diverging_epoch.filter(|d| d.epoch >= 0) {
            let hw = self.state.high_watermark();
            if hw.is_some_and(|hw| d.offset < hw) {
                self.out.push(Output::Fatal(format!(
                    "the leader requested truncation to offset {}, below the high watermark {}",
                    d.offset,
                    hw.unwrap_or(-1)
                )));
                return false;
            }
            let offset = self.log.truncation_offset(d);
            if offset < self.committed {
                self.out.push(Output::Fatal(format!(
                    "truncation to {offset} would remove committed data below {}",
                    self.committed
                )));
                return false;
            }
            self.log.truncate_to(offset);
            self.out.push(Output::Truncate { offset });
            self.refresh_after_log_change();
        } else if let Some(s) = r.snapshot_id.filter(|s| s.epoch >= 0 || s.offset >= 0) {
            if s.epoch < 0 || s.offset < 0 {
                return false;
            }
            let already = self.log.snapshot_size(s).is_some();
            if let EpochState::Follower {
                fetching_snapshot, ..
            } = &mut self.state
            {
                if already {
                    *fetching_snapshot = None;
                } else {
                    *fetching_snapshot = Some(SnapshotDownload { id: s, written: 0 });
                    self.out.push(Output::BeginSnapshot { id: s });
                }
            }
        } else {
            if let Records::Batches(batches) = r.records {
                if !batches.is_empty() && !self.append_as_follower(batches) {
                    return false;
                }
            }
            let hw = (r.high_watermark >= 0).then_some(r.high_watermark);
            self.update_follower_high_watermark(hw);
        }
        if let EpochState::Follower {
            fetch_deadline,
            has_fetched_from_leader,
            ..
        } = &mut self.state
        {
            *fetch_deadline = now + self.cfg.fetch_timeout_ms;
            *has_fetched_from_leader = true;
        }
        true
    }

    fn append_as_follower(&mut self, batches: Vec<LogBatch>) -> bool {
        // Batches wholly below our end (possible only after a truncation raced the fetch)
        // are skipped; a gap is a protocol violation.
        let batches: Vec<LogBatch> = batches
            .into_iter()
            .filter(|b| b.last_offset >= self.log.end_offset)
            .collect();
        let Some(first) = batches.first() else {
            return true;
        };
        if first.base_offset != self.log.end_offset {
            self.out.push(Output::Fatal(format!(
                "fetched batch at offset {} does not start at the log end {}",
                first.base_offset, self.log.end_offset
            )));
            return false;
        }
        let mut last_epoch = self.log.last_fetched_epoch();
        for b in &batches {
            if b.epoch < last_epoch {
                self.out.push(Output::Fatal(format!(
                    "fetched batch at offset {} has epoch {} below the log's {last_epoch}",
                    b.base_offset, b.epoch
                )));
                return false;
            }
            last_epoch = b.epoch;
            for c in &b.control {
                match c {
                    ControlRecord::Voters(v) => self.log.record_voters(b.base_offset, v.clone()),
                    ControlRecord::KRaftVersion(k) => {
                        self.log.record_kraft_version(b.base_offset, *k)
                    }
                    ControlRecord::LeaderChange { .. } => {}
                }
            }
            self.log.append(b.base_offset, b.last_offset, b.epoch);
        }
        self.out.push(Output::AppendFollower { batches });
        self.out.push(Output::Flush {
            end_offset: self.log.end_offset,
        });
        self.refresh_after_log_change();
        true
    }

    /// The voter set may have changed with the log (a VotersRecord appended or truncated):
    /// a replica removed from the voters stops electing; the leader re-tracks its replicas.
    fn refresh_after_log_change(&mut self) {
        let voters = self.log.last_voter_set();
        if let EpochState::Leader(l) = &mut self.state {
            l.update_voter_set(&voters);
        }
    }

    fn update_follower_high_watermark(&mut self, hw: Option<i64>) {
        let Some(hw) = hw else { return };
        let new = self.log.end_offset.min(hw);
        let moved = match &mut self.state {
            EpochState::Follower { high_watermark, .. } => match high_watermark {
                Some(old) if new <= *old => false,
                _ => {
                    *high_watermark = Some(new);
                    true
                }
            },
            _ => false,
        };
        if moved {
            self.advance_committed(new);
        }
    }

    fn handle_fetch_snapshot_response(&mut self, r: FetchSnapshotResponse, now: i64) -> bool {
        if is_set(r.error) {
            return self.top_level_error(r.error);
        }
        let ep = self.response_endpoints(r.leader_id, &r.leader_endpoints);
        if let Some(h) =
            self.common_response(r.partition_error, opt(r.leader_id), r.leader_epoch, ep, now)
        {
            return h;
        }
        let download = match &self.state {
            EpochState::Follower {
                fetching_snapshot, ..
            } => fetching_snapshot.clone(),
            _ => return true,
        };
        if r.partition_error == SNAPSHOT_NOT_FOUND
            || r.snapshot_id.offset < 0
            || r.snapshot_id.epoch < 0
        {
            // The leader no longer has it: fetch again, which names the current snapshot.
            self.set_follower_download(None, now);
            return true;
        }
        if r.partition_error != NONE {
            return false;
        }
        let Some(d) = download else {
            self.out.push(Output::Fatal(format!(
                "received a FetchSnapshot response for {:?} while not fetching a snapshot",
                r.snapshot_id
            )));
            return false;
        };
        if d.id != r.snapshot_id {
            self.out.push(Output::Fatal(format!(
                "received fetch snapshot response with an invalid id. Expected {:?}; Received {:?}",
                d.id, r.snapshot_id
            )));
            return false;
        }
        if d.written as i64 != r.position {
            self.out.push(Output::Fatal(format!(
                "received fetch snapshot response with an invalid position. Expected {}; Received {}",
                d.written, r.position
            )));
            return false;
        }
        let bytes = match r.bytes {
            SnapshotBytes::Bytes(b) => b,
            _ => Bytes::new(),
        };
        let written = d.written + bytes.len() as u64;
        self.out.push(Output::WriteSnapshotChunk {
            id: d.id,
            position: d.written,
            bytes,
        });
        if written as i64 == r.size {
            self.set_follower_download(None, now);
            self.out.push(Output::InstallSnapshot { id: d.id });
            self.log.add_snapshot(d.id, written);
            self.log.reset_to_snapshot(d.id, None, None);
            self.refresh_after_log_change();
            self.update_follower_high_watermark(Some(d.id.offset));
        } else {
            self.set_follower_download(Some(SnapshotDownload { id: d.id, written }), now);
        }
        true
    }

    fn set_follower_download(&mut self, d: Option<SnapshotDownload>, now: i64) {
        if let EpochState::Follower {
            fetching_snapshot,
            fetch_deadline,
            has_fetched_from_leader,
            ..
        } = &mut self.state
        {
            *fetching_snapshot = d;
            *fetch_deadline = now + self.cfg.fetch_timeout_ms;
            *has_fetched_from_leader = true;
        }
    }

    // ---- voter changes (KIP-853) -----------------------------------------------------------

    /// Kafka's `handleAddVoterRequest` and `AddVoterHandler`: checks in Kafka's order, then an
    /// ApiVersions round trip to the new voter (its supported kraft.version), then the
    /// VotersRecord once the new voter has caught up; the answer waits for its commit.
    fn handle_add_voter(
        &mut self,
        id: RequestId,
        r: AddRaftVoterRequest,
        now: i64,
    ) -> Option<VoterChangeResponse> {
        let err = |e: i16, m: String| {
            Some(VoterChangeResponse {
                error: e,
                error_message: Some(m),
            })
        };
        if !self.valid_cluster_id(&r.cluster_id) {
            return err(
                INCONSISTENT_CLUSTER_ID,
                self.cluster_id_mismatch(&r.cluster_id),
            );
        }
        if let Some(e) = self.validate_leader_only(self.epoch()) {
            // Kafka answers a non-leader with an empty message.
            return err(e, String::new());
        }
        if r.voter.directory_id.is_none() {
            return err(
                INVALID_REQUEST,
                "Add voter request didn't include a valid voter".into(),
            );
        }
        if !r
            .listeners
            .iter()
            // Kafka normalises listener names to upper case on both sides.
            .any(|e| e.listener.eq_ignore_ascii_case(&self.cfg.default_listener))
        {
            return err(
                INVALID_REQUEST,
                format!(
                    "Add voter request didn't include the endpoint ({}) for the default \
                     listener ListenerName({})",
                    java_endpoints(&r.listeners),
                    self.cfg.default_listener.to_uppercase()
                ),
            );
        }
        if let Some(e) = self.voter_change_precheck("adding voter") {
            return Some(e);
        }
        let voters = self.log.last_voter_set();
        if voters.contains_id(r.voter.id) {
            return err(
                DUPLICATE_VOTER,
                format!(
                    "The voter id for {} is already part of the set of voters {}.",
                    r.voter,
                    voters.java_key_list()
                ),
            );
        }
        let node = VoterNode {
            key: r.voter,
            listeners: r.listeners.clone(),
            supported_kraft_version: KRaftVersionRange::UP_TO_1,
        };
        if let EpochState::Leader(l) = &mut self.state {
            l.pending_voter_change = Some(PendingVoterChange::Add {
                request: id,
                voter: r.voter,
                offset: None,
                deadline: now + self.cfg.request_timeout_ms,
                awaiting_catch_up: true,
                ack_when_committed: r.ack_when_committed,
            });
        }
        self.pending_add_node = Some(node);
        self.next_correlation_id += 1;
        let correlation_id = self.next_correlation_id;
        self.api_versions_in_flight = Some(correlation_id);
        self.out.push(Output::Send {
            to: r.voter.id,
            correlation_id,
            request: Request::ApiVersions {
                listeners: r.listeners,
            },
        });
        None
    }

    /// Kafka's answer to a voter change naming another cluster.
    fn cluster_id_mismatch(&self, given: &Option<String>) -> String {
        format!(
            "The given id \"{}\" doesn't match the cluster id \"{}\"",
            given.as_deref().unwrap_or_default(),
            self.cfg.cluster_id
        )
    }

    /// The checks every voter change starts with (Kafka's handlers, in their order).
    fn voter_change_precheck(&self, change: &str) -> Option<VoterChangeResponse> {
        let err = |e: i16, m: String| {
            Some(VoterChangeResponse {
                error: e,
                error_message: Some(m),
            })
        };
        let (hw, pending) = match &self.state {
            EpochState::Leader(l) => (l.high_watermark, l.pending_voter_change.is_some()),
            _ => return err(NOT_LEADER_OR_FOLLOWER, String::new()),
        };
        if pending {
            return err(
                REQUEST_TIMED_OUT,
                "Request timed out waiting for leader to handle previous voter change request"
                    .into(),
            );
        }
        let Some(hw) = hw else {
            return err(
                REQUEST_TIMED_OUT,
                "Request timed out waiting for leader to establish HWM and fence previous \
                 voter changes"
                    .into(),
            );
        };
        let kraft_version = self.log.last_kraft_version();
        if kraft_version < 1 {
            return err(
                UNSUPPORTED_VERSION,
                format!(
                    "Cluster doesn't support {change} because the kraft.version feature is \
                     {kraft_version}"
                ),
            );
        }
        if self.log.last_voter_set_offset().is_some_and(|o| o >= hw) {
            return err(
                REQUEST_TIMED_OUT,
                format!(
                    "Request timed out waiting for voters to commit the latest voter change at \
                     Optional[{}] with HWM {hw}",
                    self.log.last_voter_set_offset().unwrap_or(-1)
                ),
            );
        }
        None
    }

    fn handle_remove_voter(
        &mut self,
        id: RequestId,
        r: RemoveRaftVoterRequest,
        _now: i64,
    ) -> Option<VoterChangeResponse> {
        let err = |e: i16, m: String| {
            Some(VoterChangeResponse {
                error: e,
                error_message: Some(m),
            })
        };
        if !self.valid_cluster_id(&r.cluster_id) {
            return err(
                INCONSISTENT_CLUSTER_ID,
                self.cluster_id_mismatch(&r.cluster_id),
            );
        }
        if let Some(e) = self.validate_leader_only(self.epoch()) {
            // Kafka answers a non-leader with an empty message.
            return err(e, String::new());
        }
        if let Some(e) = self.voter_change_precheck("removing voter") {
            return Some(e);
        }
        let voters = self.log.last_voter_set();
        let new_voters = match voters.with_removed(r.voter) {
            // An empty voter set could never commit again.
            Some(v) if !v.is_empty() => v,
            _ => {
                return err(
                    VOTER_NOT_FOUND,
                    format!(
                        "Cannot remove voter {} from the set of voters {}",
                        r.voter,
                        voters.java_key_list()
                    ),
                )
            }
        };
        let (offset, _, _) = self.append_as_leader(
            BatchContent::Control(vec![ControlRecord::Voters(new_voters)]),
            1,
        );
        self.refresh_after_log_change();
        if let EpochState::Leader(l) = &mut self.state {
            l.pending_voter_change = Some(PendingVoterChange::Remove {
                request: id,
                voter: r.voter,
                offset,
            });
        }
        None
    }

    /// Kafka's `upgradeKRaftVersion` / `LeaderState.maybeAppendUpgradedKRaftVersion`, in its
    /// order of checks. At kraft.version 0 the leader's in-memory voters are the static voter
    /// set with this node's own directory id, listeners and supported range filled in (Kafka's
    /// `updateVoterIgnoringDirectoryId` when the epoch starts); another voter becomes known
    /// only through its UpdateRaftVoter, which Kafka's followers send and kactor's do not, so a
    /// quorum with kactor followers is refused as Kafka refuses voters that did not report
    /// support.
    fn upgrade_kraft_version(&mut self, version: i16, validate_only: bool, epoch: i32) {
        let leader = matches!(&self.state,
            EpochState::Leader(l) if !l.resign_requested && self.shutdown_deadline.is_none());
        if !leader || epoch != self.epoch() {
            self.out.push(Output::AppendRejected {
                leader_id: if self.is_leader() {
                    None
                } else {
                    self.leader_id()
                },
                epoch: self.epoch(),
            });
            return;
        }
        let name = |v: i16| format!("KRAFT_VERSION_{v}");
        let refuse = |message: String| Output::KRaftUpgradeRefused { message };
        let persisted = self.log.last_kraft_version();
        if persisted == version {
            self.out.push(Output::KRaftVersionUnchanged);
            return;
        }
        if persisted > version {
            self.out.push(refuse(format!(
                "Invalid upgrade of kraft.version from version {} to {} because the new version \
                 is a downgrade",
                name(persisted),
                name(version)
            )));
            return;
        }
        let mut voters = match &self.state {
            EpochState::Leader(l) => l.reported_voters.clone(),
            _ => None,
        }
        .unwrap_or_else(|| self.log.last_voter_set());
        if let Some(local) = self.local_key() {
            let me = VoterNode {
                key: local,
                listeners: self.cfg.local_listeners.clone(),
                supported_kraft_version: self.cfg.supported_kraft_version,
            };
            if let Some(updated) = voters.with_updated_ignoring_directory_id(me) {
                voters = updated;
            }
        }
        let supported = voters.nodes().all(|n| {
            n.supported_kraft_version.min <= version && version <= n.supported_kraft_version.max
        });
        if !supported {
            self.out.push(refuse(format!(
                "Invalid upgrade of kraft.version to {} because not all of the voters support it",
                name(version)
            )));
            return;
        }
        if voters.keys().any(|k| k.directory_id.is_none()) {
            self.out.push(refuse(format!(
                "Directory id must be known for all of the voters: {:?}",
                voters.keys().collect::<Vec<_>>()
            )));
            return;
        }
        if validate_only {
            self.out.push(Output::KRaftVersionUnchanged);
            return;
        }
        let (base_offset, last_offset, epoch) = self.append_as_leader(
            BatchContent::Control(vec![
                ControlRecord::KRaftVersion(version),
                ControlRecord::Voters(voters),
            ]),
            2,
        );
        // The voters now have their directory ids (DescribeQuorum reports them).
        self.refresh_after_log_change();
        self.out.push(Output::Appended {
            base_offset,
            last_offset,
            epoch,
        });
    }

    /// Kafka's `handleUpdateVoterRequest` and `UpdateVoterHandler`.
    fn handle_update_voter(
        &mut self,
        id: RequestId,
        r: UpdateRaftVoterRequest,
        _now: i64,
    ) -> Option<UpdateVoterResponse> {
        let resp = |s: &Self, e: i16| {
            Some(UpdateVoterResponse {
                error: e,
                leader_id: s.leader_id_or_sentinel(),
                leader_epoch: s.epoch(),
                leader_endpoints: s.leader_endpoints(),
            })
        };
        if !self.valid_cluster_id(&r.cluster_id) {
            return resp(self, INCONSISTENT_CLUSTER_ID);
        }
        if let Some(e) = self.validate_leader_only(r.current_leader_epoch) {
            return resp(self, e);
        }
        if r.voter.directory_id.is_none() {
            return resp(self, INVALID_REQUEST);
        }
        let (hw, pending) = match &self.state {
            EpochState::Leader(l) => (l.high_watermark, l.pending_voter_change.is_some()),
            _ => return resp(self, NOT_LEADER_OR_FOLLOWER),
        };
        let Some(hw) = hw.filter(|_| !pending) else {
            return resp(self, REQUEST_TIMED_OUT);
        };
        let kraft_version = self.log.last_kraft_version();
        if kraft_version < r.kraft_version.min || kraft_version > r.kraft_version.max {
            return resp(self, INVALID_REQUEST);
        }
        if r.listeners.is_empty() {
            return resp(self, INVALID_REQUEST);
        }
        let voters = self.log.last_voter_set();
        if kraft_version < 1 {
            // A static quorum records nothing in the log: the leader keeps what the voter
            // reported in memory, for a later kraft.version upgrade (Kafka's volatile voters).
            if !voters.contains_id(r.voter.id) {
                return resp(self, VOTER_NOT_FOUND);
            }
            let node = VoterNode {
                key: r.voter,
                listeners: r.listeners,
                supported_kraft_version: r.kraft_version,
            };
            if let EpochState::Leader(l) = &mut self.state {
                let known = l.reported_voters.take().unwrap_or(voters);
                l.reported_voters = Some(
                    known
                        .with_updated_ignoring_directory_id(node)
                        .unwrap_or(known),
                );
            }
            return resp(self, NONE);
        }
        if self.log.last_voter_set_offset().is_some_and(|o| o >= hw) {
            return resp(self, REQUEST_TIMED_OUT);
        }
        let node = VoterNode {
            key: r.voter,
            listeners: r.listeners,
            supported_kraft_version: r.kraft_version,
        };
        let Some(updated) = voters.with_updated(node) else {
            return resp(self, VOTER_NOT_FOUND);
        };
        let (offset, _, _) = self.append_as_leader(
            BatchContent::Control(vec![ControlRecord::Voters(updated)]),
            1,
        );
        if let EpochState::Leader(l) = &mut self.state {
            l.pending_voter_change = Some(PendingVoterChange::Update {
                request: id,
                offset,
            });
        }
        None
    }

    /// The new voter answered ApiVersions (Kafka's `AddVoterHandler.handleApiVersionsResponse`):
    /// it must support kraft.version 1 and be caught up; then the VotersRecord is written.
    fn handle_api_versions_response(
        &mut self,
        error: i16,
        kraft_version: Option<KRaftVersionRange>,
        now: i64,
    ) {
        let voter = match &self.state {
            EpochState::Leader(l) => match &l.pending_voter_change {
                Some(PendingVoterChange::Add {
                    voter,
                    awaiting_catch_up: true,
                    ..
                }) => *voter,
                _ => return,
            },
            _ => return,
        };
        let fail = |s: &mut Self, e: i16, m: String| {
            if let EpochState::Leader(l) = &mut s.state {
                if let Some(c) = l.pending_voter_change.take() {
                    s.pending_add_node = None;
                    s.reply_voter_change(c, e, Some(m));
                }
            }
        };
        if error != NONE {
            return fail(
                self,
                REQUEST_TIMED_OUT,
                // Kafka's text, its missing word included.
                format!(
                    "Aborted add voter operation for since API_VERSIONS returned an error {}",
                    kactor_protocol::errors::ErrorCode::from_code(error)
                        .map_or_else(|| error.to_string(), |e| e.name().to_string())
                ),
            );
        }
        let current = self.log.last_kraft_version();
        let Some(range) = kraft_version.filter(|r| r.min <= current && current <= r.max) else {
            return fail(
                self,
                INVALID_REQUEST,
                format!(
                    "Aborted add voter operation for {voter} since the kraft.version range {} \
                     doesn't support the finalized version {current}",
                    kraft_version.map_or_else(
                        || "(missing)".to_string(),
                        |r| format!("(min: {}, max: {}", r.min, r.max)
                    )
                ),
            );
        };
        let caught_up = match &self.state {
            EpochState::Leader(l) => l.is_replica_caught_up(voter, now),
            _ => false,
        };
        if !caught_up {
            return fail(
                self,
                REQUEST_TIMED_OUT,
                format!("Aborted add voter operation for {voter} since it is lagging behind"),
            );
        }
        let Some(mut node) = self.pending_add_node.take() else {
            return;
        };
        node.supported_kraft_version = range;
        let Some(new_voters) = self.log.last_voter_set().with_added(node) else {
            return;
        };
        let (offset, _, _) = self.append_as_leader(
            BatchContent::Control(vec![ControlRecord::Voters(new_voters)]),
            1,
        );
        self.refresh_after_log_change();
        let mut early_answer = None;
        if let EpochState::Leader(l) = &mut self.state {
            if let Some(PendingVoterChange::Add {
                request,
                offset: o,
                awaiting_catch_up,
                ack_when_committed,
                ..
            }) = &mut l.pending_voter_change
            {
                *o = Some(offset);
                *awaiting_catch_up = false;
                if !*ack_when_committed {
                    early_answer = Some(*request);
                }
            }
        }
        // Kafka's AddVoterHandler completes such a request at the append; the change stays
        // pending (no other voter change starts) until the record commits.
        if let Some(request) = early_answer {
            self.reply(
                request,
                Response::AddRaftVoter(VoterChangeResponse {
                    error: NONE,
                    error_message: None,
                }),
            );
        }
    }

    /// A pending voter change completes once its VotersRecord is committed; a removed leader
    /// then resigns (Kafka's RemoveVoterHandler).
    fn voter_change_on_high_watermark(&mut self, hw: i64, now: i64) {
        let (done, resign) = match &mut self.state {
            EpochState::Leader(l) => match &l.pending_voter_change {
                Some(PendingVoterChange::Add {
                    offset: Some(o), ..
                })
                | Some(PendingVoterChange::Update { offset: o, .. })
                    if *o < hw =>
                {
                    (l.pending_voter_change.take(), false)
                }
                Some(PendingVoterChange::Remove { offset, voter, .. }) if *offset < hw => {
                    let resign = voter.id == l.local.id;
                    (l.pending_voter_change.take(), resign)
                }
                _ => (None, false),
            },
            _ => return,
        };
        if let Some(change) = done {
            self.reply_voter_change(change, NONE, None);
        }
        if resign {
            if let EpochState::Leader(l) = &mut self.state {
                l.resign_requested = true;
            }
        }
        let _ = now;
    }

    fn expire_voter_change(&mut self, now: i64) {
        let expired = match &mut self.state {
            EpochState::Leader(l) => match &l.pending_voter_change {
                Some(PendingVoterChange::Add { deadline, .. }) if now >= *deadline => {
                    l.pending_voter_change.take()
                }
                _ => None,
            },
            _ => None,
        };
        if let Some(change) = expired {
            self.pending_add_node = None;
            self.reply_voter_change(
                change,
                REQUEST_TIMED_OUT,
                Some("Timed out waiting for the voter to be added".into()),
            );
        }
    }

    fn reply_voter_change(
        &mut self,
        change: PendingVoterChange,
        error: i16,
        message: Option<String>,
    ) {
        match change {
            // Answered at the append already.
            PendingVoterChange::Add {
                ack_when_committed: false,
                offset: Some(_),
                ..
            } => {}
            PendingVoterChange::Add { request, .. } => self.reply(
                request,
                Response::AddRaftVoter(VoterChangeResponse {
                    error,
                    error_message: message,
                }),
            ),
            PendingVoterChange::Remove { request, .. } => self.reply(
                request,
                Response::RemoveRaftVoter(VoterChangeResponse {
                    error,
                    error_message: message,
                }),
            ),
            PendingVoterChange::Update { request, .. } => {
                let response = UpdateVoterResponse {
                    error,
                    leader_id: self.leader_id_or_sentinel(),
                    leader_epoch: self.epoch(),
                    leader_endpoints: self.leader_endpoints(),
                };
                self.reply(request, Response::UpdateRaftVoter(response))
            }
        }
    }
}

fn opt(id: i32) -> Option<i32> {
    (id >= 0).then_some(id)
}
