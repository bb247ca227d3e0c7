//! RaftActor (Kafka's `KafkaRaftClient` driven by `KafkaRaftManager`'s I/O thread): owns the
//! `__cluster_metadata-0` log and the `quorum-state` file, feeds [`RaftCore`] and carries out
//! its outputs, and delivers committed batches to listeners. Runs on the controller arbiter.
//! Metadata appends are fsynced inline: they are small and rare, and a commit must not be
//! acknowledged before it is durable.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use kactor_protocol::messages::{RequestBody, ResponseBody};
use kactor_protocol::Uuid;
use tokio::sync::oneshot;
use tracing::{debug, error, info, warn};

use super::batch::{
    control_records, decode_batches, encode_control_batch, encode_data_batch, MetadataBatch,
};
use super::core::log::{EpochEntry, LogState};
use super::core::rpc::{ControlRecord, Records, Response, SnapshotBytes};
use super::core::types::preferred_endpoint;
use super::core::types::OffsetAndEpoch;
use super::core::{
    BatchContent, Endpoint, Endpoints, Input, Output, RaftConfig, RaftCore, RequestId, VoterSet,
};
use super::messages::*;
use super::peer::{RaftPeerActor, RaftPeerResult, SendRaftRequest};
use super::quorum_state;
use super::snapshot;
use super::wire;
use crate::log::config::LogConfig;
use crate::log::unified::Log;
use crate::runtime::{ActorMetrics, MeteredAddr, MeteredRecipient, SupervisedActor};

/// The metadata topic's partition directory name.
pub const METADATA_PARTITION_DIR: &str = "__cluster_metadata-0";
/// Kafka's `KafkaRaftClient.MAX_BATCH_SIZE_BYTES`: the largest metadata batch.
pub const MAX_BATCH_SIZE_BYTES: i32 = 8 * 1024 * 1024;
/// How much of the log one delivery reads at a time.
const DELIVERY_READ_BYTES: u32 = 1024 * 1024;
/// How often the core's timers (election, fetch, check-quorum, parked fetches) are checked.
const TICK: Duration = Duration::from_millis(50);
/// How often snapshot retention by age is checked (it is also checked after every snapshot).
const CLEAN_INTERVAL_MS: i64 = 60_000;

#[derive(Debug, Clone)]
pub struct RaftActorConfig {
    pub node_id: i32,
    /// Voter ids from `controller.quorum.voters`.
    pub voters: BTreeSet<i32>,
    /// Each voter's controller listeners (from `controller.quorum.voters`, named after the
    /// first of `controller.quorum.listener.names`); the peer connections dial the first.
    pub voter_endpoints: BTreeMap<i32, Endpoints>,
    /// `meta.properties` `cluster.id`, checked in Raft requests ("" accepts any).
    pub cluster_id: String,
    /// Seeds the randomized election timeouts.
    pub seed: u64,
    /// `metadata.log.dir` (or the first `log.dirs` entry); the partition dir goes inside.
    pub metadata_log_dir: PathBuf,
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
    /// `metadata.log.segment.bytes`
    pub segment_bytes: i32,
    /// `metadata.log.segment.ms`
    pub segment_ms: i64,
    /// The metadata log dir's `directory.id` (this voter's id in a VotersRecord); ZERO when
    /// unknown.
    pub directory_id: Uuid,
    /// `metadata.max.retention.bytes`: log plus snapshots above this delete the oldest
    /// snapshots and the log below the next one (-1: no limit).
    pub retention_bytes: i64,
    /// `metadata.max.retention.ms`: snapshots older than this go with the log below the next
    /// one (-1: no limit). The latest snapshot always stays.
    pub retention_ms: i64,
    /// `controller.quorum.fetch.max.bytes`
    pub fetch_max_bytes: i32,
    /// `controller.quorum.auto.join.enable` on a controller: as an observer of a dynamic
    /// quorum it asks the leader to add it.
    pub auto_join: bool,
    /// `controller.quorum.fetch.snapshot.max.bytes`
    pub fetch_snapshot_max_bytes: i32,
    /// `controller.quorum.bootstrap.servers` (host:port), used when `voters` is empty: the
    /// voter set then comes from the bootstrap checkpoint and the log (KIP-853).
    pub bootstrap_servers: Vec<String>,
    /// This node's controller listeners, announced as leader and written into VotersRecords
    /// (dynamic quorums; a static voter's come from `voter_endpoints`).
    pub local_listeners: Endpoints,
    /// The first of `controller.listener.names`: the listener dialled on other controllers.
    pub controller_listener: String,
}

impl RaftActorConfig {
    pub fn single_node(node_id: i32, metadata_log_dir: impl Into<PathBuf>) -> Self {
        RaftActorConfig {
            node_id,
            voters: BTreeSet::from([node_id]),
            voter_endpoints: Default::default(),
            cluster_id: String::new(),
            seed: node_id as u64,
            metadata_log_dir: metadata_log_dir.into(),
            election_timeout_ms: 1000,
            fetch_timeout_ms: 2000,
            election_backoff_max_ms: 1000,
            request_timeout_ms: 2000,
            retry_backoff_ms: 20,
            segment_bytes: 1024 * 1024 * 1024,
            segment_ms: 7 * 24 * 60 * 60 * 1000,
            directory_id: Uuid::ZERO,
            retention_bytes: 100 * 1024 * 1024,
            retention_ms: 7 * 24 * 60 * 60 * 1000,
            fetch_max_bytes: 1024 * 1024,
            auto_join: false,
            fetch_snapshot_max_bytes: 1024 * 1024,
            bootstrap_servers: Vec::new(),
            local_listeners: Endpoints::new(),
            controller_listener: "CONTROLLER".to_string(),
        }
    }

    pub fn partition_dir(&self) -> PathBuf {
        self.metadata_log_dir.join(METADATA_PARTITION_DIR)
    }
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

struct Listener {
    name: &'static str,
    committed: MeteredRecipient<MetadataBatchesCommitted>,
    leader_changes: Option<MeteredRecipient<RaftLeaderChanged>>,
    /// First offset not yet delivered.
    next_offset: i64,
    /// The last leadership notice sent.
    notified: Option<RaftLeaderChanged>,
}

pub struct RaftActor {
    cfg: RaftActorConfig,
    core: RaftCore,
    log: Log,
    listeners: Vec<Listener>,
    leader_notice: Option<RaftLeaderChanged>,
    /// Set once the metadata log failed an I/O operation: the core's view (log end offset,
    /// high watermark) no longer matches the file, so nothing more is appended or delivered
    /// and the process is told to stop (Kafka halts the node on a metadata log I/O error).
    failed: Option<String>,
    /// Inbound Raft requests waiting for the core's reply: (version, listener name, where the
    /// wire answer goes).
    replies: HashMap<RequestId, (i16, String, oneshot::Sender<ResponseBody>)>,
    next_request_id: RequestId,
    /// One connection actor per node the core has sent to, with the address it dials
    /// (started on first use; replaced when the node's address changes).
    peers: BTreeMap<i32, (String, MeteredAddr<RaftPeerActor>)>,
    /// This actor's address, for the peers' answers (set when it starts).
    me: Option<MeteredAddr<RaftActor>>,
    /// The current leader, for the broker's channel to the active controller.
    leader_tx: tokio::sync::watch::Sender<Option<i32>>,
    /// host:port of every controller this node knows (voters, and the leader it follows),
    /// for the broker's channel and forwarding: with a dynamic quorum they come from the log.
    addresses_tx: tokio::sync::watch::Sender<Arc<BTreeMap<i32, String>>>,
    /// Shared with the active controller (see [`AppendGate`]).
    gate: Arc<AppendGate>,
    /// Inputs that may append a voter change, held while the controller has records in
    /// flight (in arrival order).
    deferred: VecDeque<Input>,
    /// Control batches of Raft's own (voter changes) appended by the last `run`.
    own_control: Vec<(i64, i64)>,
    /// Snapshots on disk, ascending: id, size, last contained log timestamp (for retention).
    snapshots: Vec<snapshot::SnapshotMeta>,
    /// The latest snapshot read back, for listeners that load it.
    loaded: Option<Arc<LoadedSnapshot>>,
    last_clean_ms: i64,
    metrics: ActorMetrics,
}

fn storage(e: impl std::fmt::Display) -> RaftError {
    RaftError::Storage(e.to_string())
}

/// A storage error that names the path it happened at (start-up errors reach the operator).
fn storage_at(path: &Path, e: impl std::fmt::Display) -> RaftError {
    RaftError::Storage(format!("{}: {e}", path.display()))
}

impl RaftActor {
    /// Opens the metadata log and quorum state and runs the start-up election (a lone voter
    /// becomes leader here, writing its LeaderChangeMessage). Done before the actor starts so
    /// a broken metadata dir stops start-up with a clear error.
    pub fn open(cfg: RaftActorConfig, metrics: ActorMetrics) -> Result<RaftActor, RaftError> {
        let dir = cfg.partition_dir();
        std::fs::create_dir_all(&dir).map_err(|e| storage_at(&dir, e))?;
        let now = now_ms();
        let log_config = LogConfig {
            segment_bytes: cfg.segment_bytes,
            segment_ms: cfg.segment_ms,
            max_message_bytes: MAX_BATCH_SIZE_BYTES,
            // The metadata log is trimmed by snapshots, never by retention.
            retention_ms: -1,
            retention_bytes: -1,
            ..LogConfig::default()
        };
        let mut log =
            Log::open(&dir, log_config, 0, 0, false, now).map_err(|e| storage_at(&dir, e))?;
        if log.topic_id().is_none() {
            log.assign_topic_id(Uuid::METADATA_TOPIC_ID)
                .map_err(|e| storage_at(&dir, e))?;
        }
        let election = quorum_state::read(&dir).map_err(|e| storage_at(&dir, e))?;
        let (snapshots, loaded, bootstrap) = open_snapshots(&mut log, now)?;
        let mut log_state = log_state(&log)?;
        log_state.snapshots = snapshots
            .iter()
            .map(|s| super::core::log::SnapshotInfo {
                id: s.id,
                size: s.size,
            })
            .collect();
        if let Some(l) = &loaded {
            log_state.snapshot_voters = l.voters.clone();
            log_state.snapshot_kraft_version = l.snapshot.kraft_version;
        } else {
            log_state.snapshot_voters = bootstrap.voters;
            log_state.snapshot_kraft_version = bootstrap.kraft_version;
        }
        info!(
            node_id = cfg.node_id,
            log_start_offset = log.log_start_offset(),
            log_end_offset = log.log_end_offset(),
            last_epoch = log.latest_epoch().unwrap_or(0),
            latest_snapshot = ?snapshots.last().map(|s| s.id),
            "opened the metadata log"
        );
        let voters = VoterSet::from_static(cfg.voters.iter().map(|id| {
            (
                *id,
                cfg.voter_endpoints.get(id).cloned().unwrap_or_default(),
            )
        }));
        let mut raft_cfg = RaftConfig::with_static_voters(cfg.node_id, voters);
        if cfg.voters.is_empty() {
            // KIP-853: the voters come from the bootstrap checkpoint and the log; until the
            // leader is known, fetch from any bootstrap server (numbered -2, -3, ... as Kafka
            // numbers them).
            raft_cfg.static_voters = None;
            raft_cfg.bootstrap_servers = (0..cfg.bootstrap_servers.len() as i32)
                .map(|i| -2 - i)
                .collect();
            raft_cfg.local_listeners = cfg.local_listeners.clone();
        }
        raft_cfg.election_timeout_ms = cfg.election_timeout_ms;
        raft_cfg.fetch_timeout_ms = cfg.fetch_timeout_ms;
        raft_cfg.election_backoff_max_ms = cfg.election_backoff_max_ms;
        raft_cfg.request_timeout_ms = cfg.request_timeout_ms;
        raft_cfg.retry_backoff_ms = cfg.retry_backoff_ms;
        raft_cfg.cluster_id = cfg.cluster_id.clone();
        raft_cfg.directory_id = cfg.directory_id;
        raft_cfg.default_listener = cfg.controller_listener.clone();
        raft_cfg.fetch_max_bytes = cfg.fetch_max_bytes;
        raft_cfg.auto_join = cfg.auto_join;
        raft_cfg.fetch_snapshot_max_bytes = cfg.fetch_snapshot_max_bytes;
        let core = RaftCore::new(raft_cfg, cfg.seed);
        let mut actor = RaftActor {
            cfg,
            core,
            log,
            listeners: Vec::new(),
            leader_notice: None,
            failed: None,
            replies: HashMap::new(),
            next_request_id: 0,
            peers: BTreeMap::new(),
            me: None,
            leader_tx: tokio::sync::watch::channel(None).0,
            addresses_tx: tokio::sync::watch::channel(Arc::new(BTreeMap::new())).0,
            gate: Arc::new(AppendGate::default()),
            deferred: VecDeque::new(),
            own_control: Vec::new(),
            snapshots,
            loaded: loaded.map(|l| Arc::new(l.snapshot)),
            last_clean_ms: now,
            metrics,
        };
        actor.run(
            Input::Start {
                election,
                log: log_state,
            },
            now,
        )?;
        Ok(actor)
    }

    /// The Raft leader's id as it changes (the active controller's node).
    pub fn leader_watch(&self) -> tokio::sync::watch::Receiver<Option<i32>> {
        self.leader_tx.subscribe()
    }

    /// The gate the co-located controller shares with this actor.
    pub fn append_gate(&self) -> Arc<AppendGate> {
        self.gate.clone()
    }

    /// host:port of the controllers this node knows, updated as the voter set and the leader
    /// change.
    pub fn addresses_watch(&self) -> tokio::sync::watch::Receiver<Arc<BTreeMap<i32, String>>> {
        self.addresses_tx.subscribe()
    }

    pub fn config(&self) -> &RaftActorConfig {
        &self.cfg
    }

    pub fn metadata_dir(&self) -> &Path {
        self.log.dir()
    }

    /// Why the metadata log went offline, if it did.
    pub fn failure(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// The metadata log failed: stop using it and report a fatal fault. A failed write may
    /// have left part of a batch in the segment while the core already counted it, so every
    /// later append would go to the wrong offset; Kafka's answer is to halt the node, and a
    /// restart's recovery truncates the torn tail.
    fn fail(&mut self, e: &RaftError) {
        if self.failed.is_some() {
            return;
        }
        let reason = format!(
            "the KRaft metadata log in {} failed: {e}",
            self.log.dir().display()
        );
        error!("{reason}; shutting down this node (as Kafka does on a metadata log I/O error)");
        crate::runtime::fault::report_fatal(reason.clone());
        self.failed = Some(reason);
    }

    /// Feeds one input and carries out the outputs (and the inputs they cause, like Flushed).
    /// Returns the reply to an Append, if the input was one.
    fn run(
        &mut self,
        input: Input,
        now: i64,
    ) -> Result<Option<Result<Option<AppendedBatch>, RaftError>>, RaftError> {
        if let Some(reason) = &self.failed {
            return Err(RaftError::Storage(reason.clone()));
        }
        let mut reply = None;
        let mut inputs = VecDeque::from([input]);
        while let Some(input) = inputs.pop_front() {
            for out in self.core.handle(input, now) {
                match out {
                    Output::PersistElection {
                        state,
                        data_version,
                    } => {
                        quorum_state::write(self.log.dir(), &state, data_version)
                            .map_err(storage)?;
                    }
                    Output::AppendLeader {
                        base_offset,
                        epoch,
                        content,
                    } => {
                        if let BatchContent::Control(records) = &content {
                            // A batch of Raft's own within the epoch (not its start): the
                            // controller's next records go after it.
                            let starts_epoch = records
                                .iter()
                                .any(|r| matches!(r, ControlRecord::LeaderChange { .. }));
                            if !starts_epoch {
                                let last = base_offset + records.len() as i64 - 1;
                                self.own_control.push((base_offset, last));
                            }
                        }
                        let batch = match &content {
                            BatchContent::Data(records) => {
                                encode_data_batch(base_offset, epoch, now, records)
                            }
                            BatchContent::Control(records) => {
                                encode_control_batch(base_offset, epoch, now, records)
                            }
                        }
                        .map_err(storage)?;
                        self.log.append(&batch, now).map_err(storage)?;
                    }
                    Output::AppendFollower { batches } => {
                        for b in batches {
                            self.log.append(&b.bytes, now).map_err(storage)?;
                        }
                    }
                    Output::Truncate { offset } => {
                        self.log.truncate_to(offset, now).map_err(storage)?;
                    }
                    Output::Flush { end_offset } => {
                        self.log.flush(end_offset, now).map_err(storage)?;
                        inputs.push_back(Input::Flushed { end_offset });
                    }
                    Output::Appended {
                        base_offset,
                        last_offset,
                        epoch,
                    } => {
                        reply = Some(Ok(Some(AppendedBatch {
                            base_offset,
                            last_offset,
                            epoch,
                        })))
                    }
                    Output::AppendRejected { leader_id, epoch } => {
                        reply = Some(Err(RaftError::NotLeader { leader_id, epoch }))
                    }
                    Output::KRaftVersionUnchanged => reply = Some(Ok(None)),
                    Output::KRaftUpgradeRefused { message } => {
                        reply = Some(Err(RaftError::InvalidUpdateVersion(message)))
                    }
                    Output::HighWatermark(high_watermark) => {
                        debug!(high_watermark, "metadata high watermark advanced");
                    }
                    Output::LeaderChanged {
                        leader_id,
                        epoch,
                        first_data_offset,
                        ..
                    } => {
                        info!(?leader_id, epoch, "metadata quorum leader changed");
                        self.leader_tx.send_replace(leader_id);
                        self.leader_notice = Some(RaftLeaderChanged {
                            leader_id,
                            epoch,
                            // The first data batch goes after the start-of-epoch batch.
                            next_offset: first_data_offset,
                        });
                    }
                    Output::Send {
                        to,
                        correlation_id,
                        request,
                    } => {
                        let sent = self.peer(to, &request).is_some_and(|peer| {
                            peer.try_send(SendRaftRequest {
                                correlation_id,
                                request,
                                queued_at: std::time::Instant::now(),
                            })
                            .is_ok()
                        });
                        if !sent {
                            // No connection to that voter (no endpoint, or its queue is full):
                            // the core backs off and tries again.
                            inputs.push_back(Input::RequestFailed { to, correlation_id });
                        }
                    }
                    Output::Reply { id, response } => self.reply(id, response),
                    Output::BeginSnapshot { id } => {
                        snapshot::begin_download(self.log.dir(), id).map_err(storage)?;
                    }
                    Output::WriteSnapshotChunk {
                        id,
                        position,
                        bytes,
                    } => {
                        snapshot::write_chunk(self.log.dir(), id, position, &bytes)
                            .map_err(storage)?;
                    }
                    Output::InstallSnapshot { id } => {
                        inputs.push_back(self.install_snapshot(id, now)?);
                    }
                    Output::ShutdownComplete { .. } => {}
                    Output::Fatal(reason) => return Err(RaftError::Storage(reason)),
                }
            }
        }
        self.deliver();
        self.publish_addresses();
        Ok(reply)
    }

    /// Feeds an input that may make the leader append a voter change: at once when no
    /// controller records are in flight, else after them (see [`AppendGate`]).
    fn run_gated(&mut self, input: Input, now: i64) {
        self.deferred.push_back(input);
        self.run_deferred(now);
    }

    fn run_deferred(&mut self, now: i64) {
        if self.deferred.is_empty() {
            return;
        }
        let gate = self.gate.clone();
        let mut state = gate.lock();
        while !state.busy() {
            let Some(input) = self.deferred.pop_front() else {
                break;
            };
            self.own_control.clear();
            let result = self.run(input, now);
            state.appended_control(self.own_control.drain(..));
            if let Err(e) = result {
                drop(state);
                self.fail(&e);
                return;
            }
        }
    }

    /// The host:port to reach node `to` for `request`: a bootstrap server by its negative
    /// id, a new voter at the listeners its AddRaftVoter named, anyone else where the core
    /// knows it listens (on this node's controller listener name when it has one).
    fn address_of(&self, to: i32, request: &super::core::rpc::Request) -> Option<String> {
        if to < -1 {
            return self.cfg.bootstrap_servers.get((-2 - to) as usize).cloned();
        }
        let endpoints = match request {
            super::core::rpc::Request::ApiVersions { listeners } => listeners.clone(),
            _ => self.core.known_endpoints(to),
        };
        preferred_endpoint(&endpoints, &self.cfg.controller_listener).map(Endpoint::address)
    }

    /// The connection actor for `to`, started on first use or when the address moved.
    fn peer(
        &mut self,
        to: i32,
        request: &super::core::rpc::Request,
    ) -> Option<&MeteredAddr<RaftPeerActor>> {
        let address = self.address_of(to, request)?;
        let me = self.me.clone()?;
        let current = self.peers.get(&to).is_some_and(|(a, _)| *a == address);
        if !current {
            let actor = RaftPeerActor::new(
                to,
                address.clone(),
                self.cfg.controller_listener.clone(),
                me.recipient(),
                Duration::from_millis(self.cfg.request_timeout_ms.max(1) as u64),
                Duration::from_millis(self.cfg.retry_backoff_ms.max(1) as u64),
                ActorMetrics::new("RaftPeerActor"),
            );
            let addr = crate::runtime::start_supervised_here(
                ActorMetrics::new("RaftPeerActor"),
                move |_| actor,
            );
            // The replaced peer stops once its last address is dropped.
            self.peers.insert(to, (address, addr));
        }
        self.peers.get(&to).map(|(_, p)| p)
    }

    /// Publishes where the controllers are when that changed, and drops the connections to
    /// nodes the quorum no longer involves (removed voters, a past leader, an added voter that
    /// never joined), so voter changes do not accumulate peers.
    fn publish_addresses(&mut self) {
        let mut known = BTreeMap::new();
        let voters = self.core.voters();
        for id in voters.ids().chain(self.core.leader_id()) {
            let endpoints = self.core.known_endpoints(id);
            if let Some(e) = preferred_endpoint(&endpoints, &self.cfg.controller_listener) {
                known.insert(id, e.address());
            }
        }
        let adding = self.core.voter_being_added();
        self.peers
            .retain(|id, _| *id < -1 || known.contains_key(id) || Some(*id) == adding);
        self.addresses_tx.send_if_modified(|current| {
            if **current == known {
                return false;
            }
            *current = Arc::new(known);
            true
        });
    }

    /// Sends the core's answer to an inbound request, reading the log bytes it points at.
    fn reply(&mut self, id: RequestId, response: Response) {
        let Some((version, listener, tx)) = self.replies.remove(&id) else {
            return;
        };
        let mut records = None;
        if let Response::Fetch(f) = &response {
            if let Records::Read {
                from_offset,
                max_bytes,
            } = f.records
            {
                // Raft followers replicate beyond the high watermark: read up to the log end.
                match read_bytes(&self.log, from_offset, max_bytes) {
                    Ok(bytes) => records = bytes.map(kactor_protocol::Records::Memory),
                    Err(e) => {
                        warn!(from_offset, error = %e, "cannot read the metadata log for a Fetch")
                    }
                }
            }
        }
        let snapshot = match &response {
            Response::FetchSnapshot(s) => match s.bytes {
                SnapshotBytes::Read { id, position, len } => {
                    match snapshot::read_chunk(self.log.dir(), id, position, len as usize) {
                        Ok(b) => Some(kactor_protocol::Records::Memory(b)),
                        Err(e) => {
                            warn!(?id, position, error = %e, "cannot read a metadata snapshot for FetchSnapshot");
                            None
                        }
                    }
                }
                _ => None,
            },
            _ => None,
        };
        let _ = tx.send(wire::response_to_wire(
            response, version, &listener, records, snapshot,
        ));
    }

    /// Reads committed batches from `from` up to the high watermark.
    fn read_committed(&self, from: i64) -> Result<Vec<MetadataBatch>, RaftError> {
        let hw = self.core.high_watermark();
        let mut out = Vec::new();
        let mut next = from;
        while next < hw {
            let info = self
                .log
                .read(next, DELIVERY_READ_BYTES, Some(hw), true)
                .map_err(storage)?;
            let Some(slice) = info.records else { break };
            if slice.len == 0 {
                break;
            }
            let bytes = slice.read_to_bytes().map_err(storage)?;
            let batches = decode_batches(bytes).map_err(storage)?;
            let Some(last) = batches.last() else { break };
            next = last.last_offset + 1;
            out.extend(batches.into_iter().filter(|b| b.last_offset >= from));
        }
        Ok(out)
    }

    /// Brings every listener up to the high watermark, then tells it about leadership once it
    /// has everything before the leader's epoch start.
    fn deliver(&mut self) {
        if self.failed.is_some() {
            return;
        }
        let hw = self.core.high_watermark();
        let start = self.log.log_start_offset();
        let snapshot = self
            .loaded
            .clone()
            .filter(|s| s.id.offset > 0 && s.id.offset <= hw);
        let mut cache: Option<(i64, Arc<Vec<MetadataBatch>>)> = None;
        for i in 0..self.listeners.len() {
            let mut from = self.listeners[i].next_offset;
            // Kafka's rule: a listener starting from the beginning, or behind the log start,
            // gets the latest snapshot first, then the log after it.
            let mut load = None;
            if from < hw && (from == 0 || from < start) {
                match &snapshot {
                    Some(s) => {
                        from = s.id.offset;
                        load = Some(s.clone());
                    }
                    // Nothing committed covers what was deleted yet (a follower's snapshot
                    // before the high watermark reaches it): wait.
                    None if from < start => continue,
                    None => {}
                }
            }
            let batches = if from >= hw {
                Arc::new(Vec::new())
            } else {
                match &cache {
                    Some((f, b)) if *f == from => b.clone(),
                    _ => match self.read_committed(from) {
                        Ok(b) => {
                            let b = Arc::new(b);
                            cache = Some((from, b.clone()));
                            b
                        }
                        Err(e) => {
                            self.fail(&e);
                            return;
                        }
                    },
                }
            };
            let l = &mut self.listeners[i];
            if load.is_some() || !batches.is_empty() {
                l.next_offset = batches.last().map_or(from, |b| b.last_offset + 1);
                l.committed.do_send(MetadataBatchesCommitted {
                    snapshot: load,
                    batches,
                    high_watermark: hw,
                });
            }
            if let (Some(notice), Some(to)) = (&self.leader_notice, &l.leader_changes) {
                let ready = notice.next_offset.is_none_or(|n| l.next_offset >= n);
                if ready && l.notified.as_ref() != Some(notice) {
                    to.do_send(notice.clone());
                    l.notified = Some(notice.clone());
                }
            }
        }
    }

    /// Writes a snapshot of the state at `id` (Kafka's `createNewSnapshot` + `freeze`): the
    /// Raft control state in effect there goes into the header batch. Then retention runs.
    fn create_snapshot(
        &mut self,
        id: OffsetAndEpoch,
        last_contained_timestamp_ms: i64,
        values: &[bytes::Bytes],
        now: i64,
    ) -> Result<Option<u64>, RaftError> {
        if self
            .snapshots
            .last()
            .is_some_and(|s| s.id.offset >= id.offset)
        {
            return Ok(None);
        }
        if id.offset > self.core.high_watermark() {
            return Err(RaftError::Storage(format!(
                "snapshot {id:?} is past the high watermark {}",
                self.core.high_watermark()
            )));
        }
        let valid = self
            .core
            .log()
            .validate_offset_and_epoch(id.offset, id.epoch);
        if valid != super::core::log::ValidOffsetAndEpoch::Valid {
            return Err(RaftError::Storage(format!(
                "snapshot {id:?} does not match the log ({valid:?})"
            )));
        }
        let log = self.core.log();
        let kraft_version = log.kraft_version_at(id.offset - 1);
        let mut raft_records = Vec::new();
        if kraft_version >= 1 {
            raft_records.push(ControlRecord::KRaftVersion(kraft_version));
            if let Some(v) = log.voter_set_at(id.offset - 1) {
                raft_records.push(ControlRecord::Voters(v.clone()));
            }
        }
        let bytes = snapshot::encode(id, last_contained_timestamp_ms, now, &raft_records, values)
            .map_err(storage)?;
        let size = snapshot::write(self.log.dir(), id, &bytes).map_err(storage)?;
        self.snapshots.push(snapshot::SnapshotMeta {
            id,
            size,
            last_contained_timestamp_ms,
        });
        self.loaded = Some(Arc::new(LoadedSnapshot {
            id,
            values: values.to_vec(),
            kraft_version: (kraft_version >= 1).then_some(kraft_version),
        }));
        info!(
            ?id,
            size,
            records = values.len(),
            "wrote a metadata snapshot"
        );
        self.run(Input::SnapshotCreated { id, size }, now)?;
        if let Err(e) = self.maybe_clean(now) {
            // Half-cleaned, the log and the core's view of it may disagree.
            self.fail(&e);
            return Err(e);
        }
        Ok(Some(size))
    }

    /// Kafka's `maybeClean`: while retention is exceeded, the oldest snapshot goes and the log
    /// start moves up to the next one, whole segments below it deleted.
    fn maybe_clean(&mut self, now: i64) -> Result<(), RaftError> {
        self.last_clean_ms = now;
        let Some(up_to) = snapshot::clean_up_to(
            &self.snapshots,
            self.log.size(),
            self.cfg.retention_bytes,
            self.cfg.retention_ms,
            now,
        ) else {
            return Ok(());
        };
        if up_to.offset <= self.log.log_start_offset() {
            return Ok(());
        }
        self.log
            .maybe_increment_log_start_offset(up_to.offset)
            .map_err(storage)?;
        let segments = self
            .log
            .delete_old_segments(now, self.core.high_watermark())
            .map_err(storage)?;
        self.forget_snapshots_before(up_to)?;
        info!(
            log_start_offset = up_to.offset,
            segments_deleted = segments,
            "metadata log cleaned up to a snapshot (metadata.max.retention.bytes/ms)"
        );
        self.run(
            Input::LogStartAdvanced {
                start_offset: up_to.offset,
            },
            now,
        )?;
        Ok(())
    }

    fn forget_snapshots_before(&mut self, id: OffsetAndEpoch) -> Result<(), RaftError> {
        for old in self.snapshots.iter().filter(|s| s.id.offset < id.offset) {
            snapshot::delete(self.log.dir(), old.id).map_err(storage)?;
        }
        self.snapshots.retain(|s| s.id.offset >= id.offset);
        Ok(())
    }

    /// A snapshot downloaded from the leader is whole: freeze it and start the log at its end
    /// (Kafka's `truncateToLatestSnapshot`). Listeners now behind the log start load it.
    fn install_snapshot(&mut self, id: OffsetAndEpoch, now: i64) -> Result<Input, RaftError> {
        let dir = self.log.dir().to_path_buf();
        let size = snapshot::freeze(&dir, id).map_err(storage)?;
        let contents = snapshot::read(&dir, id)
            .and_then(|b| snapshot::decode(b).map_err(std::io::Error::other))
            .map_err(|e| storage_at(&snapshot::path(&dir, id), e))?;
        self.log
            .truncate_fully_and_start_at(id.offset, now)
            .map_err(storage)?;
        self.forget_snapshots_before(id)?;
        self.snapshots.retain(|s| s.id != id);
        self.snapshots.push(snapshot::SnapshotMeta {
            id,
            size,
            last_contained_timestamp_ms: contents.last_contained_timestamp_ms,
        });
        info!(?id, size, "installed a metadata snapshot from the leader");
        let input = Input::SnapshotLoaded {
            id,
            voters: contents.voters.clone(),
            kraft_version: contents.kraft_version,
        };
        self.loaded = Some(Arc::new(LoadedSnapshot {
            id,
            values: contents.values,
            kraft_version: contents.kraft_version,
        }));
        Ok(input)
    }
}

/// The latest snapshot read back at start-up, with the voters its header names.
struct OpenedSnapshot {
    snapshot: LoadedSnapshot,
    voters: Option<VoterSet>,
}

/// Reads and checks a whole snapshot file.
fn read_snapshot(dir: &Path, id: OffsetAndEpoch) -> Result<snapshot::SnapshotContents, RaftError> {
    snapshot::read(dir, id)
        .and_then(|b| snapshot::decode(b).map_err(std::io::Error::other))
        .map_err(|e| storage_at(&snapshot::path(dir, id), e))
}

/// The control records of the bootstrap checkpoint (0-0), when no later snapshot exists.
#[derive(Default)]
struct Bootstrap {
    voters: Option<VoterSet>,
    kraft_version: Option<i16>,
}

/// Kafka's `recoverSnapshots` + `truncateToLatestSnapshot` at start-up: the snapshots kept
/// (partial and stale files removed), and the latest one read back. A log that ends before the
/// latest snapshot (a follower that crashed after downloading it) restarts at its end.
fn open_snapshots(
    log: &mut Log,
    now: i64,
) -> Result<
    (
        Vec<snapshot::SnapshotMeta>,
        Option<OpenedSnapshot>,
        Bootstrap,
    ),
    RaftError,
> {
    let dir = log.dir().to_path_buf();
    let found = snapshot::recover(&dir, log.log_start_offset()).map_err(|e| storage_at(&dir, e))?;
    let mut kept = Vec::new();
    let mut latest = None;
    let mut bootstrap = Bootstrap::default();
    for (i, (id, size)) in found.iter().enumerate() {
        // The 0-0 checkpoint `kafka-storage format` may leave holds bootstrap records only:
        // no metadata to load, but (with --standalone / --initial-controllers) the first
        // voter set, which counts only while no later snapshot replaces it.
        if id.offset == 0 {
            if i + 1 == found.len() {
                let c = read_snapshot(&dir, *id)?;
                bootstrap = Bootstrap {
                    voters: c.voters,
                    kraft_version: c.kraft_version,
                };
            }
            continue;
        }
        let ts = if i + 1 == found.len() {
            let c = read_snapshot(&dir, *id)?;
            let ts = c.last_contained_timestamp_ms;
            latest = Some(OpenedSnapshot {
                voters: c.voters,
                snapshot: LoadedSnapshot {
                    id: *id,
                    values: c.values,
                    kraft_version: c.kraft_version,
                },
            });
            ts
        } else {
            snapshot::last_contained_timestamp(&dir, *id)
                .map_err(|e| storage_at(&snapshot::path(&dir, *id), e))?
        };
        kept.push(snapshot::SnapshotMeta {
            id: *id,
            size: *size,
            last_contained_timestamp_ms: ts,
        });
    }
    if let Some(l) = &latest {
        let id = l.snapshot.id;
        let latest_epoch = log.latest_epoch().unwrap_or(0);
        if id.epoch > latest_epoch || (id.epoch == latest_epoch && id.offset > log.log_end_offset())
        {
            info!(
                ?id,
                "the metadata log ends before its latest snapshot; starting it there"
            );
            log.truncate_fully_and_start_at(id.offset, now)
                .map_err(|e| storage_at(&dir, e))?;
        }
    } else if log.log_start_offset() > 0 {
        return Err(storage_at(
            &dir,
            format!(
                "the metadata log starts at {} and no snapshot covers what is before it",
                log.log_start_offset()
            ),
        ));
    }
    Ok((kept, latest, bootstrap))
}

impl Actor for RaftActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.me = Some(MeteredAddr::new(ctx.address(), self.metrics.clone()));
        ctx.run_interval(TICK, |act, _| {
            if act.failed.is_some() {
                return;
            }
            let now = now_ms();
            if let Err(e) = act.run(Input::Tick, now) {
                act.fail(&e);
                return;
            }
            act.run_deferred(now);
            if now - act.last_clean_ms >= CLEAN_INTERVAL_MS {
                if let Err(e) = act.maybe_clean(now) {
                    act.fail(&e);
                    return;
                }
            }
            // Segments deleted below a snapshot go after file.delete.delay.ms.
            if let Err(e) = act.log.purge_deleted_segments(now) {
                warn!(error = %e, "cannot remove deleted metadata log segments");
            }
        });
    }
}

impl Supervised for RaftActor {
    fn restarting(&mut self, _: &mut Context<Self>) {}
}

impl SupervisedActor for RaftActor {
    /// Its core's view of the log cannot be trusted after a panic mid-write: the node stops,
    /// as Kafka halts on a Raft I/O thread failure, and recovery reads the log at restart.
    const ON_PANIC: crate::runtime::OnPanic = crate::runtime::OnPanic::Escalate;
    const MAILBOX_CAPACITY: usize = 1024;
}

crate::supervised_mailbox!(RaftActor);

impl RaftActor {
    /// Runs an input that appends on the controller's behalf and returns where it went.
    fn append_for_controller(&mut self, input: Input) -> Result<Option<AppendedBatch>, RaftError> {
        match self.run(input, now_ms()) {
            Ok(Some(r)) => r,
            Ok(None) => Err(RaftError::Storage("no answer to the append".into())),
            Err(e) => {
                // The metadata log could not be written: nothing more can be committed safely.
                self.fail(&e);
                Err(e)
            }
        }
    }
}

impl Handler<AppendMetadataRecords> for RaftActor {
    type Result = Result<AppendedBatch, RaftError>;

    fn handle(&mut self, msg: AppendMetadataRecords, _: &mut Context<Self>) -> Self::Result {
        let _m = self.metrics.handle();
        let appended = self
            .append_for_controller(Input::Append {
                records: msg.records,
                epoch: msg.epoch,
            })?
            .ok_or_else(|| RaftError::Storage("empty append".into()));
        // The controller's records are placed: a voter change held back for them goes now
        // (not after a kraft.version upgrade's batch, whose feature records the controller
        // places next without predicting again).
        self.gate.leave();
        self.run_deferred(now_ms());
        appended
    }
}

impl Handler<UpgradeKRaftVersion> for RaftActor {
    type Result = Result<Option<AppendedBatch>, RaftError>;

    fn handle(&mut self, msg: UpgradeKRaftVersion, _: &mut Context<Self>) -> Self::Result {
        let _m = self.metrics.handle();
        self.append_for_controller(Input::UpgradeKRaftVersion {
            version: msg.kraft_version,
            validate_only: msg.validate_only,
            epoch: msg.epoch,
        })
    }
}

impl Handler<CreateSnapshot> for RaftActor {
    type Result = Result<Option<u64>, RaftError>;

    fn handle(&mut self, msg: CreateSnapshot, _: &mut Context<Self>) -> Self::Result {
        let _m = self.metrics.handle();
        if let Some(reason) = &self.failed {
            return Err(RaftError::Storage(reason.clone()));
        }
        let id = OffsetAndEpoch::new(msg.last_offset + 1, msg.last_epoch);
        let result =
            self.create_snapshot(id, msg.last_contained_timestamp_ms, &msg.values, now_ms());
        if let Err(RaftError::Storage(e)) = &result {
            // A snapshot that could not be written leaves the log as it was; only a failure
            // after the file is in place (cleaning) touches the log, and that is fatal.
            warn!(?id, error = %e, "metadata snapshot not written");
        }
        result
    }
}

/// Sent by the controller listener's Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch,
/// FetchSnapshot and UpdateRaftVoter handlers, and by AddRaftVoter / RemoveRaftVoter on any
/// listener. Answered when the core replies (a Fetch may wait at the leader up to
/// its max wait). Lost, the peer's request times out and it retries.
#[derive(Debug, Message)]
#[rtype(result = "Option<ResponseBody>")]
pub struct RaftRequest {
    pub body: RequestBody,
    pub api_version: i16,
    pub listener: String,
}

impl Handler<RaftRequest> for RaftActor {
    type Result = ResponseFuture<Option<ResponseBody>>;

    fn handle(&mut self, msg: RaftRequest, _: &mut Context<Self>) -> Self::Result {
        let _m = self.metrics.handle();
        let api_key = msg.body.api_key();
        let request = match wire::request_from_wire(msg.body, msg.api_version) {
            Ok(r) => r,
            Err(code) => {
                let resp = wire::error_response(api_key, code);
                return Box::pin(async move { resp });
            }
        };
        let id = self.next_request_id;
        self.next_request_id += 1;
        let (tx, rx) = oneshot::channel();
        self.replies.insert(id, (msg.api_version, msg.listener, tx));
        let voter_change = matches!(
            request,
            super::core::rpc::Request::RemoveRaftVoter(_)
                | super::core::rpc::Request::UpdateRaftVoter(_)
        );
        let input = Input::Request { id, request };
        if voter_change {
            self.run_gated(input, now_ms());
        } else if let Err(e) = self.run(input, now_ms()) {
            self.fail(&e);
        }
        Box::pin(async move { rx.await.ok() })
    }
}

impl Handler<RaftPeerResult> for RaftActor {
    type Result = ();

    fn handle(&mut self, msg: RaftPeerResult, _: &mut Context<Self>) {
        let _m = self.metrics.handle();
        let input = match msg.result {
            // A new voter's ApiVersions answer is what makes the leader append its
            // VotersRecord.
            Ok(response @ Response::ApiVersions { .. }) => {
                let input = Input::Response {
                    from: msg.from,
                    correlation_id: msg.correlation_id,
                    response,
                };
                return self.run_gated(input, now_ms());
            }
            Ok(response) => Input::Response {
                from: msg.from,
                correlation_id: msg.correlation_id,
                response,
            },
            Err(why) => {
                debug!(peer = msg.from, %why, "Raft request to a peer failed");
                Input::RequestFailed {
                    to: msg.from,
                    correlation_id: msg.correlation_id,
                }
            }
        };
        if let Err(e) = self.run(input, now_ms()) {
            self.fail(&e);
        }
    }
}

impl Handler<RegisterRaftListener> for RaftActor {
    type Result = ();

    fn handle(&mut self, msg: RegisterRaftListener, _: &mut Context<Self>) {
        let _m = self.metrics.handle();
        self.listeners.retain(|l| l.name != msg.name);
        self.listeners.push(Listener {
            name: msg.name,
            committed: msg.committed,
            leader_changes: msg.leader_changes,
            // From the beginning: the latest snapshot, if any, then the log after it.
            next_offset: 0,
            notified: None,
        });
        self.deliver();
    }
}

impl Handler<DescribeQuorumState> for RaftActor {
    type Result = MessageResult<DescribeQuorumState>;

    fn handle(&mut self, _: DescribeQuorumState, _: &mut Context<Self>) -> Self::Result {
        let _m = self.metrics.handle();
        let now = now_ms();
        let d = self.core.describe_quorum(now);
        let replica = |r: &super::core::rpc::ReplicaStateView| QuorumReplicaInfo {
            replica_id: r.key.id,
            directory_id: r.key.wire_directory_id(),
            log_end_offset: r.log_end_offset,
            last_fetch_timestamp_ms: r.last_fetch_timestamp,
            last_caught_up_timestamp_ms: r.last_caught_up_timestamp,
        };
        MessageResult(QuorumInfo {
            leader_id: self.core.leader_id(),
            leader_epoch: self.core.epoch(),
            high_watermark: self.core.high_watermark(),
            log_end_offset: self.core.log_end_offset(),
            voters: d.current_voters.iter().map(replica).collect(),
            observers: d.observers.iter().map(replica).collect(),
            // From the voter set this node has (a follower's answer names no nodes).
            nodes: self
                .core
                .voters()
                .nodes()
                .map(|n| (n.key.id, n.listeners.clone()))
                .collect(),
        })
    }
}

/// The log from `from`, at most `max_bytes` (at least one whole batch). Like Kafka's log
/// reads it may end with part of a batch, which the follower drops (`wire::log_batches`).
fn read_bytes(
    log: &Log,
    from: i64,
    max_bytes: i32,
) -> Result<Option<bytes::Bytes>, crate::log::error::LogError> {
    let info = log.read(from, max_bytes.max(0) as u32, None, true)?;
    match info.records {
        Some(slice) if slice.len > 0 => Ok(Some(slice.read_to_bytes()?)),
        _ => Ok(None),
    }
}

/// What the core needs to know about the log at start-up: its bounds, epoch boundaries, and
/// the voter sets and kraft.version its control records set (Kafka reads the whole log for
/// these, as `KRaftControlRecordStateMachine` does).
fn log_state(log: &Log) -> Result<LogState, RaftError> {
    let mut state = LogState {
        start_offset: log.log_start_offset(),
        end_offset: log.log_end_offset(),
        epochs: log
            .leader_epoch_cache()
            .entries()
            .iter()
            .map(|e| EpochEntry {
                epoch: e.epoch,
                start_offset: e.start_offset,
            })
            .collect(),
        ..LogState::default()
    };
    let mut next = log.log_start_offset();
    while next < log.log_end_offset() {
        let info = log
            .read(next, DELIVERY_READ_BYTES, None, true)
            .map_err(storage)?;
        let Some(slice) = info.records else { break };
        if slice.len == 0 {
            break;
        }
        let batches = decode_batches(slice.read_to_bytes().map_err(storage)?).map_err(storage)?;
        let Some(last) = batches.last() else { break };
        next = last.last_offset + 1;
        for b in batches.iter().filter(|b| b.is_control) {
            for c in control_records(b).map_err(storage)? {
                match c {
                    ControlRecord::Voters(v) => state.voters_records.push((b.base_offset, v)),
                    ControlRecord::KRaftVersion(k) => {
                        state.kraft_version_records.push((b.base_offset, k))
                    }
                    ControlRecord::LeaderChange { .. } => {}
                }
            }
        }
    }
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn lone_voter_leads_appends_and_restarts_into_the_next_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = RaftActorConfig::single_node(1, dir.path());
        let mut a = RaftActor::open(cfg.clone(), ActorMetrics::new("RaftActorTest")).unwrap();
        assert!(a.core.is_leader());
        assert_eq!((a.core.epoch(), a.core.high_watermark()), (1, 1));
        // The file as Kafka 4.4 writes it for a static quorum's leader.
        assert_eq!(
            std::fs::read_to_string(quorum_state::path_in(a.log.dir())).unwrap(),
            r#"{"clusterId":"","leaderId":1,"leaderEpoch":1,"votedId":-1,"appliedOffset":0,"currentVoters":[{"voterId":1}],"data_version":0}"#
        );
        let appended = a
            .run(
                Input::Append {
                    records: vec![Bytes::from_static(b"r1"), Bytes::from_static(b"r2")],
                    epoch: a.core.epoch(),
                },
                now_ms(),
            )
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(
            appended,
            Some(AppendedBatch {
                base_offset: 1,
                last_offset: 2,
                epoch: 1
            })
        );
        assert_eq!(a.core.high_watermark(), 3);
        drop(a);
        // A restarted leader resigns its epoch and leads the next, after the old entries.
        let a = RaftActor::open(cfg, ActorMetrics::new("RaftActorTest")).unwrap();
        assert!(a.core.is_leader());
        assert_eq!(a.core.epoch(), 2);
        assert_eq!((a.log.log_end_offset(), a.core.high_watermark()), (4, 4));
        let batches = a.read_committed(0).unwrap();
        let epochs: Vec<(i64, i32, bool)> = batches
            .iter()
            .map(|b| (b.base_offset, b.epoch, b.is_control))
            .collect();
        assert_eq!(epochs, vec![(0, 1, true), (1, 1, false), (3, 2, true)]);
    }

    #[test]
    fn snapshots_are_written_cleaned_behind_and_read_back_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = RaftActorConfig::single_node(1, dir.path());
        // Tiny segments and no room: every snapshot but the latest goes with the log below.
        cfg.segment_bytes = 200;
        cfg.retention_bytes = 0;
        let mut a = RaftActor::open(cfg.clone(), ActorMetrics::new("RaftActorTest")).unwrap();
        let append = |a: &mut RaftActor, n: usize| {
            for i in 0..n {
                a.run(
                    Input::Append {
                        records: vec![Bytes::from(format!("record-{i}").repeat(10))],
                        epoch: a.core.epoch(),
                    },
                    now_ms(),
                )
                .unwrap();
            }
        };
        append(&mut a, 10);
        let hw = a.core.high_watermark();
        let first = OffsetAndEpoch::new(hw, 1);
        let values = vec![Bytes::from_static(b"state-1")];
        assert!(a
            .create_snapshot(first, 7, &values, now_ms())
            .unwrap()
            .is_some());
        // One at or below the latest is not written again; one past the high watermark is
        // refused.
        assert_eq!(
            a.create_snapshot(first, 7, &values, now_ms()).unwrap(),
            None
        );
        let ahead = OffsetAndEpoch::new(hw + 5, 1);
        assert!(a.create_snapshot(ahead, 7, &values, now_ms()).is_err());
        assert!(snapshot::path(a.log.dir(), first).exists());
        assert_eq!(
            a.log.log_start_offset(),
            0,
            "a single snapshot never cleans"
        );

        append(&mut a, 10);
        let second = OffsetAndEpoch::new(a.core.high_watermark(), 1);
        let values2 = vec![Bytes::from_static(b"state-2"), Bytes::from_static(b"more")];
        a.create_snapshot(second, 9, &values2, now_ms()).unwrap();
        // Over retention: the first snapshot and the log below the second are gone.
        assert_eq!(a.log.log_start_offset(), second.offset);
        assert!(!snapshot::path(a.log.dir(), first).exists());
        assert_eq!(a.core.log().start_offset, second.offset);
        assert_eq!(
            a.snapshots.iter().map(|s| s.id).collect::<Vec<_>>(),
            vec![second]
        );
        drop(a);

        // Reopened: the log starts at the snapshot, which is read back for the listeners.
        let a = RaftActor::open(cfg, ActorMetrics::new("RaftActorTest")).unwrap();
        assert!(a.log.log_start_offset() <= second.offset);
        assert!(a.core.is_leader());
        let loaded = a.loaded.as_ref().expect("latest snapshot loaded");
        assert_eq!((loaded.id, &loaded.values), (second, &values2));
        assert_eq!(
            (
                a.snapshots.len(),
                a.snapshots[0].id,
                a.snapshots[0].last_contained_timestamp_ms
            ),
            (1, second, 9)
        );
        assert_eq!(a.core.log().latest_snapshot(), Some(second));
    }
}
