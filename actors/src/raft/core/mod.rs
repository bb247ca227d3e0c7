//! The KRaft state machine (Kafka's `KafkaRaftClient` + `QuorumState` + `LeaderState`):
//! epochs, votes, unattached / voted / candidate / leader / follower states, and the high
//! watermark as the largest offset a majority of voters hold. Pure: inputs are messages and a
//! clock value, outputs are what the shell must do (persist, append, flush, send, notify), in
//! order.
//!
//! Only the single-voter path is wired end to end today: at start-up the lone voter bumps the
//! epoch, votes for itself, becomes leader and writes a LeaderChangeMessage; an append commits
//! once it is flushed locally. Vote handling and follower end offsets are modelled so the
//! multi-voter RPCs (Vote, BeginQuorumEpoch, Fetch) plug in later.

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

/// What the `quorum-state` file holds (Kafka's `ElectionState`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectionState {
    pub epoch: i32,
    pub leader_id: Option<i32>,
    pub voted_id: Option<i32>,
    pub voters: Vec<i32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaftConfig {
    pub node_id: i32,
    /// `controller.quorum.voters` ids.
    pub voters: BTreeSet<i32>,
    /// `controller.quorum.election.timeout.ms`
    pub election_timeout_ms: i64,
}

/// The node's role in the current epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RaftState {
    /// Knows the epoch but neither leader nor vote.
    Unattached,
    /// Granted its vote in this epoch.
    Voted { voted_id: i32 },
    /// Asking for votes.
    Candidate { granted: BTreeSet<i32> },
    /// Leads the epoch; `epoch_start_offset` is where its LeaderChangeMessage went.
    Leader {
        epoch_start_offset: i64,
        /// Log end offset each voter is known to hold (its own: flushed end offset).
        end_offsets: BTreeMap<i32, i64>,
    },
    /// Follows `leader_id`.
    Follower { leader_id: i32 },
}

/// A control record the shell must write (Kafka's `ControlRecordType` with its message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlRecord {
    LeaderChange {
        leader_id: i32,
        voters: Vec<i32>,
        granting_voters: Vec<i32>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RaftInput {
    /// Recovered state: the persisted election state (None if no file) and the log's end.
    Start {
        election: Option<ElectionState>,
        log_end_offset: i64,
        last_epoch: i32,
    },
    /// The controller asks to append one atomic batch of record values.
    Append { records: Vec<Bytes> },
    /// The log is durable up to `end_offset` (exclusive).
    Flushed { end_offset: i64 },
    /// Timer.
    Tick,
    /// A candidate asks for our vote (Vote RPC).
    VoteRequested {
        candidate_id: i32,
        candidate_epoch: i32,
        last_epoch: i32,
        last_offset: i64,
    },
    /// A voter answered our vote request.
    VoteAnswered {
        voter_id: i32,
        epoch: i32,
        granted: bool,
    },
    /// A follower voter fetched from us at `fetch_offset` (it holds everything below it).
    FollowerFetched { replica_id: i32, fetch_offset: i64 },
    /// Learned of a leader (BeginQuorumEpoch or a fetch response).
    LeaderDiscovered { leader_id: i32, epoch: i32 },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RaftOutput {
    /// Write the quorum-state file (before anything else that depends on it).
    PersistElectionState(ElectionState),
    /// Append a control batch at `base_offset` with partition leader epoch `epoch`, then flush.
    AppendControl {
        base_offset: i64,
        epoch: i32,
        record: ControlRecord,
    },
    /// Append a data batch at `base_offset`, then flush.
    AppendData {
        base_offset: i64,
        epoch: i32,
        records: Vec<Bytes>,
    },
    /// Answer to `Append`: where the batch went.
    Appended {
        base_offset: i64,
        last_offset: i64,
        epoch: i32,
    },
    /// Answer to `Append` when not leader.
    AppendRejected {
        leader_id: Option<i32>,
        epoch: i32,
    },
    /// Everything below `high_watermark` is committed: deliver it to listeners.
    HighWatermarkAdvanced {
        high_watermark: i64,
    },
    /// Leadership changed; `next_offset` is set when this node became leader (the offset its
    /// first data batch will get).
    LeaderChanged {
        leader_id: Option<i32>,
        epoch: i32,
        next_offset: Option<i64>,
    },
    SendVoteRequest {
        to: i32,
        epoch: i32,
        last_epoch: i32,
        last_offset: i64,
    },
    SendVoteResponse {
        to: i32,
        epoch: i32,
        granted: bool,
    },
}

#[derive(Debug, Clone)]
pub struct RaftCore {
    cfg: RaftConfig,
    epoch: i32,
    state: RaftState,
    log_end_offset: i64,
    /// Epoch of the last batch in the log.
    last_epoch: i32,
    flushed_end_offset: i64,
    high_watermark: i64,
    election_deadline_ms: Option<i64>,
    started: bool,
}

impl RaftCore {
    pub fn new(cfg: RaftConfig) -> Self {
        RaftCore {
            cfg,
            epoch: 0,
            state: RaftState::Unattached,
            log_end_offset: 0,
            last_epoch: 0,
            flushed_end_offset: 0,
            high_watermark: 0,
            election_deadline_ms: None,
            started: false,
        }
    }

    pub fn epoch(&self) -> i32 {
        self.epoch
    }
    pub fn state(&self) -> &RaftState {
        &self.state
    }
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }
    pub fn node_id(&self) -> i32 {
        self.cfg.node_id
    }
    pub fn voters(&self) -> &BTreeSet<i32> {
        &self.cfg.voters
    }
    pub fn leader_id(&self) -> Option<i32> {
        match &self.state {
            RaftState::Leader { .. } => Some(self.cfg.node_id),
            RaftState::Follower { leader_id } => Some(*leader_id),
            _ => None,
        }
    }
    pub fn is_leader(&self) -> bool {
        matches!(self.state, RaftState::Leader { .. })
    }
    /// Known end offsets of the voters while leader (for DescribeQuorum).
    pub fn voter_end_offsets(&self) -> BTreeMap<i32, i64> {
        match &self.state {
            RaftState::Leader { end_offsets, .. } => end_offsets.clone(),
            _ => BTreeMap::new(),
        }
    }

    fn majority(&self) -> usize {
        self.cfg.voters.len() / 2 + 1
    }

    fn election_state(&self) -> ElectionState {
        ElectionState {
            epoch: self.epoch,
            leader_id: self.leader_id(),
            voted_id: match &self.state {
                RaftState::Voted { voted_id } => Some(*voted_id),
                RaftState::Candidate { .. } => Some(self.cfg.node_id),
                _ => None,
            },
            voters: self.cfg.voters.iter().copied().collect(),
        }
    }

    /// A randomized timeout in [T, 2T), derived from the node id and epoch so runs are
    /// reproducible (deterministic simulation) yet voters spread out.
    fn election_timeout(&self) -> i64 {
        let t = self.cfg.election_timeout_ms;
        let spread =
            (self.cfg.node_id as i64 * 7919 + self.epoch as i64 * 104729).rem_euclid(t.max(1));
        t + spread
    }

    pub fn handle(&mut self, input: RaftInput, now_ms: i64) -> Vec<RaftOutput> {
        let mut out = Vec::new();
        match input {
            RaftInput::Start {
                election,
                log_end_offset,
                last_epoch,
            } => self.start(election, log_end_offset, last_epoch, now_ms, &mut out),
            RaftInput::Append { records } => self.append(records, &mut out),
            RaftInput::Flushed { end_offset } => {
                self.flushed_end_offset = self.flushed_end_offset.max(end_offset);
                if let RaftState::Leader { end_offsets, .. } = &mut self.state {
                    end_offsets.insert(self.cfg.node_id, self.flushed_end_offset);
                }
                self.maybe_advance_high_watermark(&mut out);
            }
            RaftInput::Tick => {
                if self.election_deadline_ms.is_some_and(|d| now_ms >= d) {
                    self.start_election(now_ms, &mut out);
                }
            }
            RaftInput::VoteRequested {
                candidate_id,
                candidate_epoch,
                last_epoch,
                last_offset,
            } => self.vote_requested(
                candidate_id,
                candidate_epoch,
                last_epoch,
                last_offset,
                now_ms,
                &mut out,
            ),
            RaftInput::VoteAnswered {
                voter_id,
                epoch,
                granted,
            } => {
                if epoch > self.epoch {
                    self.become_unattached(epoch, now_ms, &mut out);
                } else if epoch == self.epoch && granted {
                    if let RaftState::Candidate { granted } = &mut self.state {
                        granted.insert(voter_id);
                        if granted.len() >= self.majority() {
                            self.become_leader(&mut out);
                        }
                    }
                }
            }
            RaftInput::FollowerFetched {
                replica_id,
                fetch_offset,
            } => {
                if let RaftState::Leader { end_offsets, .. } = &mut self.state {
                    if self.cfg.voters.contains(&replica_id) {
                        end_offsets.insert(replica_id, fetch_offset);
                    }
                }
                self.maybe_advance_high_watermark(&mut out);
            }
            RaftInput::LeaderDiscovered { leader_id, epoch } => {
                if epoch > self.epoch || (epoch == self.epoch && self.leader_id().is_none()) {
                    self.epoch = epoch;
                    self.state = RaftState::Follower { leader_id };
                    self.election_deadline_ms = Some(now_ms + self.election_timeout());
                    out.push(RaftOutput::PersistElectionState(self.election_state()));
                    out.push(RaftOutput::LeaderChanged {
                        leader_id: Some(leader_id),
                        epoch,
                        next_offset: None,
                    });
                }
            }
        }
        out
    }

    fn start(
        &mut self,
        election: Option<ElectionState>,
        log_end_offset: i64,
        last_epoch: i32,
        now_ms: i64,
        out: &mut Vec<RaftOutput>,
    ) {
        self.started = true;
        self.log_end_offset = log_end_offset;
        // Everything on disk at start-up survived a restart: it is durable.
        self.flushed_end_offset = log_end_offset;
        self.last_epoch = last_epoch;
        // The log can be ahead of the file if we crashed between the two writes.
        self.epoch = election.as_ref().map_or(0, |e| e.epoch).max(last_epoch);
        self.state = match &election {
            Some(e) if e.epoch == self.epoch => match (e.leader_id, e.voted_id) {
                // A leader of a past life cannot keep leading the same epoch: its in-memory
                // state is gone (Kafka resigns); it waits for the next election.
                (Some(l), _) if l != self.cfg.node_id => RaftState::Follower { leader_id: l },
                (_, Some(v)) if v != self.cfg.node_id => RaftState::Voted { voted_id: v },
                _ => RaftState::Unattached,
            },
            _ => RaftState::Unattached,
        };
        if self.cfg.voters.len() == 1 && self.cfg.voters.contains(&self.cfg.node_id) {
            // A lone voter wins every election it starts.
            self.start_election(now_ms, out);
        } else {
            self.election_deadline_ms = Some(now_ms + self.election_timeout());
        }
    }

    fn start_election(&mut self, now_ms: i64, out: &mut Vec<RaftOutput>) {
        if !self.cfg.voters.contains(&self.cfg.node_id) || self.is_leader() {
            return;
        }
        self.epoch += 1;
        self.state = RaftState::Candidate {
            granted: BTreeSet::from([self.cfg.node_id]),
        };
        self.election_deadline_ms = Some(now_ms + self.election_timeout());
        out.push(RaftOutput::PersistElectionState(self.election_state()));
        if self.majority() <= 1 {
            self.become_leader(out);
            return;
        }
        for v in &self.cfg.voters {
            if *v != self.cfg.node_id {
                out.push(RaftOutput::SendVoteRequest {
                    to: *v,
                    epoch: self.epoch,
                    last_epoch: self.last_epoch,
                    last_offset: self.log_end_offset,
                });
            }
        }
    }

    fn become_unattached(&mut self, epoch: i32, now_ms: i64, out: &mut Vec<RaftOutput>) {
        let was_leader = self.is_leader();
        self.epoch = epoch;
        self.state = RaftState::Unattached;
        self.election_deadline_ms = Some(now_ms + self.election_timeout());
        out.push(RaftOutput::PersistElectionState(self.election_state()));
        if was_leader {
            out.push(RaftOutput::LeaderChanged {
                leader_id: None,
                epoch,
                next_offset: None,
            });
        }
    }

    fn become_leader(&mut self, out: &mut Vec<RaftOutput>) {
        let granting = match &self.state {
            RaftState::Candidate { granted } => granted.iter().copied().collect(),
            _ => vec![self.cfg.node_id],
        };
        let epoch_start_offset = self.log_end_offset;
        let mut end_offsets = BTreeMap::new();
        end_offsets.insert(self.cfg.node_id, self.flushed_end_offset);
        self.state = RaftState::Leader {
            epoch_start_offset,
            end_offsets,
        };
        self.election_deadline_ms = None;
        out.push(RaftOutput::PersistElectionState(self.election_state()));
        out.push(RaftOutput::AppendControl {
            base_offset: epoch_start_offset,
            epoch: self.epoch,
            record: ControlRecord::LeaderChange {
                leader_id: self.cfg.node_id,
                voters: self.cfg.voters.iter().copied().collect(),
                granting_voters: granting,
            },
        });
        self.log_end_offset += 1;
        self.last_epoch = self.epoch;
        out.push(RaftOutput::LeaderChanged {
            leader_id: Some(self.cfg.node_id),
            epoch: self.epoch,
            next_offset: Some(self.log_end_offset),
        });
    }

    fn append(&mut self, records: Vec<Bytes>, out: &mut Vec<RaftOutput>) {
        if !self.is_leader() || records.is_empty() {
            if !self.is_leader() {
                out.push(RaftOutput::AppendRejected {
                    leader_id: self.leader_id(),
                    epoch: self.epoch,
                });
            }
            return;
        }
        let base_offset = self.log_end_offset;
        let last_offset = base_offset + records.len() as i64 - 1;
        self.log_end_offset = last_offset + 1;
        out.push(RaftOutput::AppendData {
            base_offset,
            epoch: self.epoch,
            records,
        });
        out.push(RaftOutput::Appended {
            base_offset,
            last_offset,
            epoch: self.epoch,
        });
    }

    fn vote_requested(
        &mut self,
        candidate_id: i32,
        candidate_epoch: i32,
        last_epoch: i32,
        last_offset: i64,
        now_ms: i64,
        out: &mut Vec<RaftOutput>,
    ) {
        if candidate_epoch < self.epoch {
            out.push(RaftOutput::SendVoteResponse {
                to: candidate_id,
                epoch: self.epoch,
                granted: false,
            });
            return;
        }
        if candidate_epoch > self.epoch {
            self.become_unattached(candidate_epoch, now_ms, out);
        }
        let log_ok = (last_epoch, last_offset) >= (self.last_epoch, self.log_end_offset);
        let granted = match &self.state {
            RaftState::Unattached => log_ok,
            RaftState::Voted { voted_id } => *voted_id == candidate_id,
            _ => false,
        };
        if granted && matches!(self.state, RaftState::Unattached) {
            self.state = RaftState::Voted {
                voted_id: candidate_id,
            };
            self.election_deadline_ms = Some(now_ms + self.election_timeout());
            out.push(RaftOutput::PersistElectionState(self.election_state()));
        }
        out.push(RaftOutput::SendVoteResponse {
            to: candidate_id,
            epoch: self.epoch,
            granted,
        });
    }

    /// The high watermark is the largest offset held by a majority of voters, and only moves
    /// once the leader has committed something of its own epoch (Raft §5.4.2).
    fn maybe_advance_high_watermark(&mut self, out: &mut Vec<RaftOutput>) {
        let RaftState::Leader {
            epoch_start_offset,
            end_offsets,
        } = &self.state
        else {
            return;
        };
        let mut offsets: Vec<i64> = self
            .cfg
            .voters
            .iter()
            .map(|v| end_offsets.get(v).copied().unwrap_or(0))
            .collect();
        offsets.sort_unstable_by(|a, b| b.cmp(a));
        let candidate = offsets[self.majority() - 1];
        if candidate > *epoch_start_offset && candidate > self.high_watermark {
            self.high_watermark = candidate;
            out.push(RaftOutput::HighWatermarkAdvanced {
                high_watermark: candidate,
            });
        }
    }
}
