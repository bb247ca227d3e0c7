//! A seeded, deterministic simulation of a KRaft quorum: voters and observers each run the core
//! over an in-memory log and "disk" (appends are lost on a crash until flushed), on a network
//! that loses, delays, duplicates and reorders messages and can be partitioned (arbitrary
//! splits, an isolated node, one-way cuts). Nodes crash and restart from their durable state,
//! take snapshots and drop the log below them. After every event the Raft invariants are
//! checked; each run ends with a heal phase that must elect a leader and commit a new append.
//!
//! `cargo test raft::core::sim` runs a few hundred seeds; `RAFT_SIM_SEEDS=N` runs N per test
//! and `RAFT_SIM_SEED=S` one seed. A failing seed panics with the seed and the last events.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, VecDeque};

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::log::{EpochEntry, LogState};
use super::rpc::*;
use super::*;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    offset: i64,
    epoch: i32,
    payload: Bytes,
    /// The voter set a VotersRecord in this entry sets (KIP-853 runs).
    voters: Option<VoterSet>,
}

/// One node's "disk" and in-memory log. `entries` holds every entry from offset 0 the node
/// knows (those below `start` came from a snapshot); `durable` counts the entries a crash keeps.
#[derive(Debug, Clone, Default)]
struct Disk {
    entries: Vec<Entry>,
    start: i64,
    durable: i64,
    quorum_state: Option<ElectionState>,
    snapshots: BTreeMap<OffsetAndEpoch, Vec<u8>>,
    /// Offsets of the truncations so far: a flush requested before one covers nothing at or
    /// above it (those entries were replaced).
    truncations: Vec<i64>,
    /// The voter set at the log start (the bootstrap set, or the latest snapshot's), for
    /// KIP-853 runs.
    snapshot_voters: Option<VoterSet>,
}

impl Disk {
    fn end(&self) -> i64 {
        self.entries.len() as i64
    }
    fn log_state(&self) -> LogState {
        let mut epochs: Vec<EpochEntry> = Vec::new();
        for e in &self.entries[self.start as usize..] {
            if epochs.last().is_none_or(|l| l.epoch < e.epoch) {
                epochs.push(EpochEntry {
                    epoch: e.epoch,
                    start_offset: e.offset,
                });
            }
        }
        LogState {
            start_offset: self.start,
            end_offset: self.end(),
            epochs,
            snapshots: self
                .snapshots
                .iter()
                .map(|(id, b)| log::SnapshotInfo {
                    id: *id,
                    size: b.len() as u64,
                })
                .collect(),
            voters_records: self.entries[self.start as usize..]
                .iter()
                .filter_map(|e| e.voters.clone().map(|v| (e.offset, v)))
                .collect(),
            snapshot_voters: self.snapshot_voters.clone(),
            snapshot_kraft_version: self.snapshot_voters.as_ref().map(|_| 1),
            ..LogState::default()
        }
    }
}

fn encode_snapshot(entries: &[Entry], voters: Option<&VoterSet>) -> Vec<u8> {
    let mut out = Vec::new();
    let ids: Vec<i32> = voters.map(|v| v.ids().collect()).unwrap_or_default();
    out.extend_from_slice(&(ids.len() as u32).to_be_bytes());
    for id in ids {
        out.extend_from_slice(&id.to_be_bytes());
    }
    for e in entries {
        out.extend_from_slice(&e.offset.to_be_bytes());
        out.extend_from_slice(&e.epoch.to_be_bytes());
        out.extend_from_slice(&(e.payload.len() as u32).to_be_bytes());
        out.extend_from_slice(&e.payload);
    }
    out
}

fn decode_snapshot(mut b: &[u8]) -> (Vec<Entry>, Option<VoterSet>) {
    let mut out = Vec::new();
    let n = u32::from_be_bytes(b[..4].try_into().unwrap()) as usize;
    let ids: Vec<i32> = (0..n)
        .map(|i| i32::from_be_bytes(b[4 + 4 * i..8 + 4 * i].try_into().unwrap()))
        .collect();
    b = &b[4 + 4 * n..];
    let voters = (!ids.is_empty()).then(|| VoterSet::new(ids.into_iter().map(dyn_voter)));
    while b.len() >= 16 {
        let offset = i64::from_be_bytes(b[..8].try_into().unwrap());
        let epoch = i32::from_be_bytes(b[8..12].try_into().unwrap());
        let len = u32::from_be_bytes(b[12..16].try_into().unwrap()) as usize;
        out.push(Entry {
            offset,
            epoch,
            payload: Bytes::copy_from_slice(&b[16..16 + len]),
            voters: None,
        });
        b = &b[16 + len..];
    }
    (out, voters)
}

fn sim_endpoints(id: i32) -> Endpoints {
    vec![Endpoint {
        listener: "CONTROLLER".into(),
        host: format!("node{id}"),
        port: 9093,
    }]
}

/// A voter of a KIP-853 run: directory id derived from the node id.
fn dyn_voter(id: i32) -> VoterNode {
    VoterNode {
        key: ReplicaKey::of(id, Some(kactor_protocol::Uuid([id as u8; 16]))),
        listeners: sim_endpoints(id),
        supported_kraft_version: KRaftVersionRange::UP_TO_1,
    }
}

struct Node {
    id: i32,
    core: Option<RaftCore>,
    disk: Disk,
    incarnation: u32,
    /// High watermark announced in this incarnation.
    hw: i64,
    /// Highest epoch ever seen on this node (across restarts).
    max_epoch: i32,
    download: Option<(OffsetAndEpoch, Vec<u8>)>,
    /// Inbound request ids awaiting the core's reply: id -> (from, correlation id, incarnation).
    inbound: BTreeMap<RequestId, (i32, u64, u32)>,
    shutting_down: bool,
}

#[derive(Debug, Clone)]
enum Event {
    Tick(i32),
    Deliver(Msg),
    FlushDone {
        node: i32,
        incarnation: u32,
        end: i64,
        truncations: usize,
    },
}

#[derive(Debug, Clone)]
enum Msg {
    Request {
        from: i32,
        to: i32,
        correlation_id: u64,
        incarnation: u32,
        request: Request,
    },
    Response {
        from: i32,
        to: i32,
        correlation_id: u64,
        incarnation: u32,
        response: Response,
    },
    Failed {
        to: i32,
        peer: i32,
        correlation_id: u64,
        incarnation: u32,
    },
}

#[derive(Debug, Clone, Copy)]
struct Faults {
    loss: f64,
    dup: f64,
    max_delay: i64,
}

struct Sim {
    seed: u64,
    rng: StdRng,
    now: i64,
    seq: u64,
    queue: BinaryHeap<Reverse<(i64, u64)>>,
    events: BTreeMap<u64, Event>,
    nodes: BTreeMap<i32, Node>,
    voters: Vec<i32>,
    /// Directed links that drop everything.
    cut: BTreeSet<(i32, i32)>,
    faults: Faults,
    next_request_id: RequestId,
    /// Committed entries as first seen: offset -> (epoch, payload).
    committed: BTreeMap<i64, (i32, Bytes)>,
    committed_end: i64,
    leaders: BTreeMap<i32, i32>,
    trace: VecDeque<String>,
    client_counter: u64,
    crashes_allowed: bool,
    stats: Stats,
    violation: Option<String>,
    /// KIP-853 run: kraft.version 1, voters from the log, voter changes in the chaos.
    dynamic: bool,
}

#[derive(Debug, Default, Clone, Copy)]
struct Stats {
    events: u64,
    elections: u64,
    committed: i64,
    crashes: u64,
    snapshots_installed: u64,
    truncations: u64,
    voter_changes: u64,
}

const TRACE_LEN: usize = 400;

fn sim_config(id: i32, voters: &[i32], all: &[i32], dynamic: bool) -> RaftConfig {
    let set = VoterSet::from_static(voters.iter().map(|v| {
        (
            *v,
            vec![Endpoint {
                listener: "CONTROLLER".into(),
                host: format!("node{v}"),
                port: 9093,
            }],
        )
    }));
    let mut c = RaftConfig::with_static_voters(id, set);
    c.cluster_id = "sim".into();
    // Kafka's defaults scaled down 4x so a run covers many elections.
    c.election_timeout_ms = 250;
    c.fetch_timeout_ms = 500;
    c.election_backoff_max_ms = 250;
    c.request_timeout_ms = 500;
    c.retry_backoff_ms = 20;
    c.fetch_max_wait_ms = 100;
    c.fetch_snapshot_max_bytes = 64;
    if dynamic {
        // KIP-853: the voters come from the log; every node can be asked to fetch.
        c.static_voters = None;
        c.directory_id = kactor_protocol::Uuid([id as u8; 16]);
        c.bootstrap_servers = all.iter().copied().filter(|b| *b != id).collect();
        c.local_listeners = sim_endpoints(id);
    } else if !voters.contains(&id) {
        c.local_listeners = Vec::new();
    }
    c
}

impl Sim {
    fn new(seed: u64, n_voters: usize, n_observers: usize, dynamic: bool) -> Sim {
        let voters: Vec<i32> = (1..=n_voters as i32).collect();
        let observers: Vec<i32> = (0..n_observers as i32).map(|i| 100 + i).collect();
        let mut sim = Sim {
            seed,
            rng: StdRng::seed_from_u64(seed),
            now: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            events: BTreeMap::new(),
            nodes: BTreeMap::new(),
            voters: voters.clone(),
            cut: BTreeSet::new(),
            faults: Faults {
                loss: 0.0,
                dup: 0.0,
                max_delay: 5,
            },
            next_request_id: 0,
            committed: BTreeMap::new(),
            committed_end: 0,
            leaders: BTreeMap::new(),
            trace: VecDeque::new(),
            client_counter: 0,
            crashes_allowed: true,
            stats: Stats::default(),
            violation: None,
            dynamic: false,
        };
        for id in voters.iter().chain(observers.iter()) {
            sim.nodes.insert(
                *id,
                Node {
                    id: *id,
                    core: None,
                    disk: Disk::default(),
                    incarnation: 0,
                    hw: 0,
                    max_epoch: 0,
                    download: None,
                    inbound: BTreeMap::new(),
                    shutting_down: false,
                },
            );
        }
        sim.dynamic = dynamic;
        if dynamic {
            let set = VoterSet::new(voters.iter().map(|v| dyn_voter(*v)));
            for n in sim.nodes.values_mut() {
                n.disk.snapshot_voters = Some(set.clone());
            }
        }
        let ids: Vec<i32> = sim.nodes.keys().copied().collect();
        for id in ids {
            sim.start_node(id, &observers);
            let t = sim.rng.gen_range(0..50);
            sim.schedule(t, Event::Tick(id));
        }
        sim
    }

    fn log(&mut self, line: String) {
        if self.trace.len() == TRACE_LEN {
            self.trace.pop_front();
        }
        self.trace.push_back(format!("[{:>7}] {line}", self.now));
    }

    fn fail(&self, msg: String) -> String {
        let mut s = format!(
            "raft sim seed {} failed at t={}: {msg}\n--- last events ---\n",
            self.seed, self.now
        );
        for l in &self.trace {
            s.push_str(l);
            s.push('\n');
        }
        s.push_str("--- nodes ---\n");
        for n in self.nodes.values() {
            match &n.core {
                Some(c) => s.push_str(&format!(
                    "node {} {} epoch {} leader {:?} hw {} log [{}, {}) durable {} voters {:?}\n",
                    n.id,
                    c.state_name(),
                    c.epoch(),
                    c.leader_id(),
                    c.high_watermark(),
                    n.disk.start,
                    n.disk.end(),
                    n.disk.durable,
                    c.voters().ids().collect::<Vec<_>>()
                )),
                None => s.push_str(&format!("node {} down\n", n.id)),
            }
        }
        s
    }

    fn schedule(&mut self, delay: i64, ev: Event) {
        self.seq += 1;
        self.queue.push(Reverse((self.now + delay, self.seq)));
        self.events.insert(self.seq, ev);
    }

    fn start_node(&mut self, id: i32, _observers: &[i32]) {
        let voters = self.voters.clone();
        let n = self.nodes.get_mut(&id).unwrap();
        n.incarnation += 1;
        n.hw = 0;
        n.download = None;
        n.inbound.clear();
        n.shutting_down = false;
        let seed = self.seed ^ ((id as u64) << 32) ^ n.incarnation as u64;
        let all: Vec<i32> = self.nodes.keys().copied().collect();
        let n = self.nodes.get_mut(&id).unwrap();
        let mut core = RaftCore::new(sim_config(id, &voters, &all, self.dynamic), seed);
        let input = Input::Start {
            election: n.disk.quorum_state.clone(),
            log: n.disk.log_state(),
        };
        let out = core.handle(input, self.now);
        n.core = Some(core);
        let inc = n.incarnation;
        self.log(format!("node {id} starts (incarnation {inc})"));
        self.process(id, out);
    }

    fn crash(&mut self, id: i32, keep_tail: bool) {
        let n = self.nodes.get_mut(&id).unwrap();
        if n.core.is_none() {
            return;
        }
        n.core = None;
        if !keep_tail {
            let durable = n.disk.durable.max(n.disk.start) as usize;
            n.disk.entries.truncate(durable.max(n.disk.start as usize));
        }
        n.disk.durable = n.disk.end();
        n.download = None;
        self.stats.crashes += 1;
        self.log(format!(
            "node {id} crashes (unflushed tail {})",
            if keep_tail { "kept" } else { "lost" }
        ));
    }

    /// Feeds one input to a live node's core and carries out the outputs.
    fn feed(&mut self, id: i32, input: Input) {
        let now = self.now;
        let n = self.nodes.get_mut(&id).unwrap();
        let Some(core) = n.core.as_mut() else { return };
        let out = core.handle(input, now);
        self.process(id, out);
    }

    fn process(&mut self, id: i32, outputs: Vec<Output>) {
        let mut follow_ups = VecDeque::new();
        for o in outputs {
            self.carry_out(id, o, &mut follow_ups);
        }
        while let Some(input) = follow_ups.pop_front() {
            let now = self.now;
            let n = self.nodes.get_mut(&id).unwrap();
            let Some(core) = n.core.as_mut() else { return };
            let out = core.handle(input, now);
            for o in out {
                self.carry_out(id, o, &mut follow_ups);
            }
        }
    }

    fn carry_out(&mut self, id: i32, o: Output, follow_ups: &mut VecDeque<Input>) {
        let now = self.now;
        match o {
            Output::PersistElection { state, .. } => {
                let n = self.nodes.get_mut(&id).unwrap();
                n.disk.quorum_state = Some(state);
            }
            Output::AppendLeader {
                base_offset,
                epoch,
                content,
            } => {
                let n = self.nodes.get_mut(&id).unwrap();
                assert_eq!(
                    base_offset,
                    n.disk.end(),
                    "leader append not at the log end"
                );
                match content {
                    BatchContent::Data(mut r) => n.disk.entries.push(Entry {
                        offset: base_offset,
                        epoch,
                        payload: r.remove(0),
                        voters: None,
                    }),
                    // The disk holds one entry per offset: a control batch of several records
                    // (a start of epoch with KRaftVersion and Voters) takes several.
                    BatchContent::Control(records) => {
                        for (i, r) in records.into_iter().enumerate() {
                            let voters = match &r {
                                ControlRecord::Voters(v) => Some(v.clone()),
                                _ => None,
                            };
                            n.disk.entries.push(Entry {
                                offset: base_offset + i as i64,
                                epoch,
                                payload: Bytes::from(format!("control:{:?}", [r])),
                                voters,
                            });
                        }
                    }
                }
            }
            Output::AppendFollower { batches } => {
                let n = self.nodes.get_mut(&id).unwrap();
                for b in batches {
                    assert_eq!(
                        b.base_offset,
                        n.disk.end(),
                        "follower append not at the log end"
                    );
                    let voters = b.control.iter().find_map(|c| match c {
                        ControlRecord::Voters(v) => Some(v.clone()),
                        _ => None,
                    });
                    n.disk.entries.push(Entry {
                        offset: b.base_offset,
                        epoch: b.epoch,
                        payload: b.bytes,
                        voters,
                    });
                }
            }
            Output::Truncate { offset } => {
                self.stats.truncations += 1;
                let committed_end = self.committed_end;
                let n = self.nodes.get_mut(&id).unwrap();
                // Never remove a committed entry this node holds.
                let upto = committed_end.min(n.disk.end());
                for o in offset.max(0)..upto {
                    let e = &n.disk.entries[o as usize];
                    if let Some((ep, p)) = self.committed.get(&o) {
                        if *ep == e.epoch && *p == e.payload {
                            self.violation = Some(format!(
                                "node {id} truncates committed entry {o} (truncate to {offset})"
                            ));
                            break;
                        }
                    }
                }
                let n = self.nodes.get_mut(&id).unwrap();
                n.disk.entries.truncate(offset as usize);
                n.disk.durable = n.disk.durable.min(offset);
                n.disk.truncations.push(offset);
                self.log(format!("node {id} truncates to {offset}"));
            }
            Output::Flush { end_offset } => {
                let n = self.nodes.get_mut(&id).unwrap();
                let ev = Event::FlushDone {
                    node: id,
                    incarnation: n.incarnation,
                    end: end_offset,
                    truncations: n.disk.truncations.len(),
                };
                let d = if self.rng.gen_bool(0.5) {
                    0
                } else {
                    self.rng.gen_range(1..15)
                };
                self.schedule(d, ev);
            }
            Output::Send {
                to,
                correlation_id,
                request: Request::ApiVersions { .. },
            } => {
                // The new voter's network layer answers with its kraft.version range.
                let inc = self.nodes[&id].incarnation;
                let up = self.nodes.get(&to).is_some_and(|n| n.core.is_some());
                let msg = if up && !self.cut.contains(&(id, to)) && !self.cut.contains(&(to, id)) {
                    Msg::Response {
                        from: to,
                        to: id,
                        correlation_id,
                        incarnation: inc,
                        response: Response::ApiVersions {
                            error: NONE,
                            kraft_version: Some(KRaftVersionRange::UP_TO_1),
                        },
                    }
                } else {
                    Msg::Failed {
                        to: id,
                        peer: to,
                        correlation_id,
                        incarnation: inc,
                    }
                };
                let d = self.rng.gen_range(1..=self.faults.max_delay);
                self.schedule(d, Event::Deliver(msg));
            }
            Output::Send {
                to,
                correlation_id,
                request,
            } => {
                let inc = self.nodes[&id].incarnation;
                self.send(Msg::Request {
                    from: id,
                    to,
                    correlation_id,
                    incarnation: inc,
                    request,
                });
            }
            Output::Reply { id: rid, response } => {
                let Some((to, correlation_id, inc)) =
                    self.nodes.get_mut(&id).unwrap().inbound.remove(&rid)
                else {
                    return;
                };
                let response = self.fill(id, response);
                self.send(Msg::Response {
                    from: id,
                    to,
                    correlation_id,
                    incarnation: inc,
                    response,
                });
            }
            Output::Appended { .. }
            | Output::AppendRejected { .. }
            | Output::KRaftVersionUnchanged
            | Output::KRaftUpgradeRefused { .. } => {}
            Output::HighWatermark(hw) => self.on_high_watermark(id, hw),
            Output::LeaderChanged {
                leader_id, epoch, ..
            } => {
                self.log(format!(
                    "node {id} leader change: {leader_id:?} in epoch {epoch}"
                ));
                if leader_id == Some(id) {
                    self.stats.elections += 1;
                    if let Some(prev) = self.leaders.insert(epoch, id) {
                        if prev != id {
                            self.violation =
                                Some(format!("two leaders in epoch {epoch}: {prev} and {id}"));
                        }
                    }
                }
            }
            Output::BeginSnapshot { id: sid } => {
                self.nodes.get_mut(&id).unwrap().download = Some((sid, Vec::new()));
            }
            Output::WriteSnapshotChunk {
                id: sid,
                position,
                bytes,
            } => {
                let n = self.nodes.get_mut(&id).unwrap();
                match &mut n.download {
                    Some((d, buf)) if *d == sid && buf.len() as u64 == position => {
                        buf.extend_from_slice(&bytes)
                    }
                    other => {
                        let msg =
                            format!("snapshot chunk {sid:?}@{position} does not fit {other:?}");
                        self.violation = Some(msg);
                    }
                }
            }
            Output::InstallSnapshot { id: sid } => {
                self.stats.snapshots_installed += 1;
                let n = self.nodes.get_mut(&id).unwrap();
                let Some((d, buf)) = n.download.take() else {
                    self.violation = Some(format!("node {id} installs {sid:?} without download"));
                    return;
                };
                assert_eq!(d, sid);
                let (entries, snap_voters) = decode_snapshot(&buf);
                if entries.len() as i64 != sid.offset {
                    self.violation =
                        Some(format!("snapshot {sid:?} holds {} entries", entries.len()));
                    return;
                }
                n.disk.entries = entries;
                n.disk.start = sid.offset;
                n.disk.durable = sid.offset;
                n.disk.truncations.push(0);
                n.disk.snapshots.insert(sid, buf);
                if snap_voters.is_some() {
                    n.disk.snapshot_voters = snap_voters.clone();
                }
                self.log(format!("node {id} installs snapshot {sid:?}"));
                let kraft_version = snap_voters.as_ref().map(|_| 1);
                follow_ups.push_back(Input::SnapshotLoaded {
                    id: sid,
                    voters: snap_voters,
                    kraft_version,
                });
            }
            Output::ShutdownComplete { timed_out } => {
                self.log(format!("node {id} shut down (timed out: {timed_out})"));
                // A graceful shutdown flushes everything.
                let n = self.nodes.get_mut(&id).unwrap();
                n.disk.durable = n.disk.end();
                self.crash(id, true);
                if !self.crashes_allowed {
                    // Healing: the node comes straight back.
                    self.start_node(id, &[]);
                }
            }
            Output::Fatal(msg) => {
                self.violation = Some(format!("node {id} fatal: {msg}"));
            }
        }
        let _ = now;
    }

    /// Fills the records a reply points at from the replying node's log.
    fn fill(&mut self, id: i32, response: Response) -> Response {
        let max_batches = self.rng.gen_range(1..=6);
        let n = &self.nodes[&id];
        match response {
            Response::Fetch(mut f) => {
                if let Records::Read { from_offset, .. } = f.records {
                    assert!(from_offset >= n.disk.start, "read below the log start");
                    let batches = n.disk.entries[from_offset as usize..]
                        .iter()
                        .take(max_batches)
                        .map(|e| LogBatch {
                            base_offset: e.offset,
                            last_offset: e.offset,
                            epoch: e.epoch,
                            control: e
                                .voters
                                .clone()
                                .map(ControlRecord::Voters)
                                .into_iter()
                                .collect(),
                            is_control: e.payload.starts_with(b"control:"),
                            bytes: e.payload.clone(),
                        })
                        .collect();
                    f.records = Records::Batches(batches);
                }
                Response::Fetch(f)
            }
            Response::FetchSnapshot(mut f) => {
                if let SnapshotBytes::Read {
                    id: sid,
                    position,
                    len,
                } = f.bytes
                {
                    let b = &n.disk.snapshots[&sid];
                    let end = (position + len) as usize;
                    f.bytes =
                        SnapshotBytes::Bytes(Bytes::copy_from_slice(&b[position as usize..end]));
                }
                Response::FetchSnapshot(f)
            }
            other => other,
        }
    }

    fn send(&mut self, msg: Msg) {
        let (from, to) = match &msg {
            Msg::Request { from, to, .. } | Msg::Response { from, to, .. } => (*from, *to),
            Msg::Failed { .. } => unreachable!(),
        };
        if self.rng.gen_bool(self.faults.loss) {
            return;
        }
        let copies = if self.rng.gen_bool(self.faults.dup) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let d = self.rng.gen_range(1..=self.faults.max_delay);
            self.schedule(d, Event::Deliver(msg.clone()));
        }
        let _ = (from, to);
    }

    fn deliver(&mut self, msg: Msg) {
        match msg {
            Msg::Request {
                from,
                to,
                correlation_id,
                incarnation,
                request,
            } => {
                let up = self.nodes.get(&to).is_some_and(|n| n.core.is_some());
                if self.cut.contains(&(from, to)) {
                    return;
                }
                if !up {
                    // A down node refuses the connection: the sender hears soon.
                    if self.rng.gen_bool(0.5) {
                        let d = self.rng.gen_range(1..=self.faults.max_delay);
                        self.schedule(
                            d,
                            Event::Deliver(Msg::Failed {
                                to: from,
                                peer: to,
                                correlation_id,
                                incarnation,
                            }),
                        );
                    }
                    return;
                }
                self.next_request_id += 1;
                let rid = self.next_request_id;
                self.nodes
                    .get_mut(&to)
                    .unwrap()
                    .inbound
                    .insert(rid, (from, correlation_id, incarnation));
                self.log(format!(
                    "{from} -> {to} #{correlation_id} {}",
                    short_request(&request)
                ));
                self.feed(to, Input::Request { id: rid, request });
            }
            Msg::Response {
                from,
                to,
                correlation_id,
                incarnation,
                response,
            } => {
                if self.cut.contains(&(from, to)) {
                    return;
                }
                let Some(n) = self.nodes.get(&to) else { return };
                if n.core.is_none() || n.incarnation != incarnation {
                    return;
                }
                self.log(format!(
                    "{from} => {to} #{correlation_id} {}",
                    short_response(&response)
                ));
                self.feed(
                    to,
                    Input::Response {
                        from,
                        correlation_id,
                        response,
                    },
                );
            }
            Msg::Failed {
                to,
                peer,
                correlation_id,
                incarnation,
            } => {
                let Some(n) = self.nodes.get(&to) else { return };
                if n.core.is_none() || n.incarnation != incarnation {
                    return;
                }
                self.feed(
                    to,
                    Input::RequestFailed {
                        to: peer,
                        correlation_id,
                    },
                );
            }
        }
    }

    fn on_high_watermark(&mut self, id: i32, hw: i64) {
        let n = self.nodes.get_mut(&id).unwrap();
        if hw < n.hw {
            self.violation = Some(format!(
                "node {id} high watermark went back {} -> {hw}",
                n.hw
            ));
            return;
        }
        n.hw = hw;
        if hw > n.disk.end() {
            self.violation = Some(format!("node {id} high watermark {hw} beyond its log end"));
            return;
        }
        // Everything below the high watermark must match what was committed before.
        for o in 0..hw {
            let e = &n.disk.entries[o as usize];
            match self.committed.get(&o) {
                Some((ep, p)) => {
                    if *ep != e.epoch || *p != e.payload {
                        self.violation = Some(format!(
                            "node {id} committed entry {o} differs: ({}, {:?}) vs ({ep}, {p:?})",
                            e.epoch, e.payload
                        ));
                        return;
                    }
                }
                None => {
                    if e.voters.is_some() {
                        self.stats.voter_changes += 1;
                    }
                    self.committed.insert(o, (e.epoch, e.payload.clone()));
                }
            }
        }
        // The voters a commit needs: the static set, or the leader's current set (KIP-853; a
        // follower only learns a high watermark its leader announced first).
        let voter_ids: Option<Vec<i32>> = if self.dynamic {
            self.nodes[&id]
                .core
                .as_ref()
                // Outputs are carried out after the input: a leader that committed its own
                // removal has resigned by now.
                .filter(|c| c.is_leader() || c.state_name() == "Resigned")
                .map(|c| c.voters().ids().collect())
        } else {
            Some(self.voters.clone())
        };
        if hw > self.committed_end {
            let Some(voter_ids) = voter_ids else {
                self.violation = Some(format!("follower {id} commits {hw} before any leader"));
                return;
            };
            // Newly committed entries must be durable on a majority of voters.
            for o in self.committed_end..hw {
                let (ep, p) = self.committed[&o].clone();
                let holders = self
                    .nodes
                    .values()
                    .filter(|n| voter_ids.contains(&n.id))
                    .filter(|n| {
                        o < n.disk.durable.max(n.disk.start)
                            && n.disk
                                .entries
                                .get(o as usize)
                                .is_some_and(|e| e.epoch == ep && e.payload == p)
                    })
                    .count();
                if holders < voter_ids.len() / 2 + 1 {
                    self.violation = Some(format!(
                        "entry {o} committed (by node {id}) but durable on only {holders} voters"
                    ));
                    return;
                }
            }
            self.committed_end = hw;
            self.stats.committed = hw;
        }
    }

    fn check_epochs(&mut self) {
        for n in self.nodes.values_mut() {
            if let Some(c) = &n.core {
                let e = c.epoch();
                if e < n.max_epoch {
                    self.violation = Some(format!(
                        "node {} epoch went back {} -> {e}",
                        n.id, n.max_epoch
                    ));
                    return;
                }
                n.max_epoch = e;
            }
        }
    }

    fn step(&mut self) -> bool {
        let Some(Reverse((t, seq))) = self.queue.pop() else {
            return false;
        };
        self.now = t;
        let ev = self.events.remove(&seq).unwrap();
        self.stats.events += 1;
        match ev {
            Event::Tick(id) => {
                self.feed(id, Input::Tick);
                let d = self.rng.gen_range(10..40);
                self.schedule(d, Event::Tick(id));
            }
            Event::Deliver(m) => self.deliver(m),
            Event::FlushDone {
                node,
                incarnation,
                end,
                truncations,
            } => {
                let n = self.nodes.get_mut(&node).unwrap();
                if n.incarnation == incarnation && n.core.is_some() {
                    let low = n.disk.truncations[truncations..].iter().copied().min();
                    let end = end.min(n.disk.end()).min(low.unwrap_or(i64::MAX));
                    n.disk.durable = n.disk.durable.max(end);
                    self.feed(node, Input::Flushed { end_offset: end });
                }
            }
        }
        self.check_epochs();
        true
    }

    /// A random fault or client action.
    fn chaos(&mut self, observers: &[i32]) {
        let ids: Vec<i32> = self.nodes.keys().copied().collect();
        let r: f64 = self.rng.gen();
        if r < 0.30 {
            self.client_append();
        } else if r < 0.36 && self.crashes_allowed {
            let id = ids[self.rng.gen_range(0..ids.len())];
            if self.nodes[&id].core.is_some() {
                let keep = self.rng.gen_bool(0.5);
                self.crash(id, keep);
            } else {
                self.start_node(id, observers);
            }
        } else if r < 0.42 {
            let id = ids[self.rng.gen_range(0..ids.len())];
            if self.nodes[&id].core.is_none() {
                self.start_node(id, observers);
            }
        } else if r < 0.50 {
            self.partition();
        } else if r < 0.56 {
            self.cut.clear();
            self.log("network heals".into());
        } else if r < 0.64 {
            self.take_snapshot();
        } else if r < 0.66 {
            // Graceful shutdown (the node stops once it completes).
            let id = ids[self.rng.gen_range(0..ids.len())];
            let n = self.nodes.get_mut(&id).unwrap();
            if n.core.is_some() && !n.shutting_down {
                n.shutting_down = true;
                self.log(format!("node {id} shuts down"));
                self.feed(id, Input::Shutdown { timeout_ms: 1000 });
            }
        } else if r < 0.68 {
            let leaders: Vec<(i32, i32)> = self
                .nodes
                .values()
                .filter_map(|n| {
                    n.core
                        .as_ref()
                        .filter(|c| c.is_leader())
                        .map(|c| (n.id, c.epoch()))
                })
                .collect();
            for (id, epoch) in leaders {
                self.log(format!("node {id} asked to resign"));
                self.feed(id, Input::Resign { epoch });
            }
        } else if r < 0.70 && self.dynamic {
            self.change_voters();
        } else if r < 0.72 {
            self.faults = Faults {
                loss: *[0.0, 0.01, 0.05, 0.2]
                    .get(self.rng.gen_range(0..4))
                    .unwrap(),
                dup: *[0.0, 0.02, 0.1].get(self.rng.gen_range(0..3)).unwrap(),
                max_delay: *[2, 10, 40, 150].get(self.rng.gen_range(0..4)).unwrap(),
            };
            let f = self.faults;
            self.log(format!("network faults {f:?}"));
        }
    }

    /// An admin asks the leader to add a node that is not a voter, or to remove a voter.
    fn change_voters(&mut self) {
        let Some((leader, voters)) = self.nodes.values().find_map(|n| {
            n.core
                .as_ref()
                .filter(|c| c.is_leader())
                .map(|c| (n.id, c.voters()))
        }) else {
            return;
        };
        let ids: Vec<i32> = self.nodes.keys().copied().collect();
        let x = ids[self.rng.gen_range(0..ids.len())];
        if x == leader && voters.len() == 2 {
            // Kafka 4.4 cannot recover from this one (seed 4001026): the leader appends its
            // own removal from a 2-voter set and crashes before it commits; it restarts an
            // observer of its own log, never campaigns, and denies the other voter (whose
            // log is shorter) the vote that voter needs. Not exercised here.
            return;
        }
        let request = if voters.contains_id(x) {
            Request::RemoveRaftVoter(RemoveRaftVoterRequest {
                cluster_id: None,
                voter: dyn_voter(x).key,
            })
        } else {
            Request::AddRaftVoter(AddRaftVoterRequest {
                cluster_id: None,
                timeout_ms: 2_000,
                voter: dyn_voter(x).key,
                listeners: sim_endpoints(x),
                ack_when_committed: true,
            })
        };
        self.log(format!("admin -> {leader}: {}({x})", request.name()));
        self.next_request_id += 1;
        let rid = self.next_request_id;
        // Replies to the admin go nowhere (node -1000 does not exist).
        self.nodes
            .get_mut(&leader)
            .unwrap()
            .inbound
            .insert(rid, (-1000, 0, 0));
        self.feed(leader, Input::Request { id: rid, request });
    }

    fn partition(&mut self) {
        let ids: Vec<i32> = self.nodes.keys().copied().collect();
        self.cut.clear();
        match self.rng.gen_range(0..3) {
            0 => {
                // Two sides.
                let side: BTreeSet<i32> = ids
                    .iter()
                    .copied()
                    .filter(|_| self.rng.gen_bool(0.5))
                    .collect();
                for a in &ids {
                    for b in &ids {
                        if side.contains(a) != side.contains(b) {
                            self.cut.insert((*a, *b));
                        }
                    }
                }
                self.log(format!("partition {side:?} | rest"));
            }
            1 => {
                let x = ids[self.rng.gen_range(0..ids.len())];
                for b in &ids {
                    if *b != x {
                        self.cut.insert((x, *b));
                        self.cut.insert((*b, x));
                    }
                }
                self.log(format!("node {x} isolated"));
            }
            _ => {
                let a = ids[self.rng.gen_range(0..ids.len())];
                let b = ids[self.rng.gen_range(0..ids.len())];
                if a != b {
                    self.cut.insert((a, b));
                    self.log(format!("one-way cut {a} -> {b}"));
                }
            }
        }
    }

    /// Appends a unique record on the current leader: (leader, its epoch, offset, payload).
    fn client_append(&mut self) -> Option<(i32, i32, i64, Bytes)> {
        let (leader, epoch) = self
            .nodes
            .values()
            .filter_map(|n| {
                n.core
                    .as_ref()
                    .filter(|c| c.is_leader())
                    .map(|c| (n.id, c.epoch()))
            })
            .next()?;
        self.client_counter += 1;
        let payload = Bytes::from(format!("s{}-c{}", self.seed, self.client_counter));
        let offset = self.nodes[&leader].disk.end();
        self.feed(
            leader,
            Input::Append {
                records: vec![payload.clone()],
                epoch,
            },
        );
        let accepted = self.nodes[&leader].disk.end() > offset;
        accepted.then_some((leader, epoch, offset, payload))
    }

    fn take_snapshot(&mut self) {
        let ids: Vec<i32> = self.nodes.keys().copied().collect();
        let id = ids[self.rng.gen_range(0..ids.len())];
        let n = &self.nodes[&id];
        let Some(core) = &n.core else { return };
        let hw = core.high_watermark();
        if hw <= n.disk.start + 3
            || n.disk
                .snapshots
                .keys()
                .next_back()
                .is_some_and(|s| s.offset >= hw)
        {
            return;
        }
        let sid = OffsetAndEpoch::new(hw, n.disk.entries[hw as usize - 1].epoch);
        let snap_voters = self
            .dynamic
            .then(|| core.log().voter_set_at(hw - 1).cloned())
            .flatten();
        let bytes = encode_snapshot(&n.disk.entries[..hw as usize], snap_voters.as_ref());
        let size = bytes.len() as u64;
        let advance = self.rng.gen_bool(0.6);
        let n = self.nodes.get_mut(&id).unwrap();
        n.disk.snapshots.insert(sid, bytes);
        self.log(format!(
            "node {id} snapshots at {sid:?}{}",
            if advance {
                " and drops the log below"
            } else {
                ""
            }
        ));
        self.feed(id, Input::SnapshotCreated { id: sid, size });
        if advance {
            let n = self.nodes.get_mut(&id).unwrap();
            if n.core.is_some() && hw <= n.disk.end() {
                if snap_voters.is_some() {
                    n.disk.snapshot_voters = snap_voters;
                }
                n.disk.start = hw;
                n.disk.snapshots.retain(|s, _| s.offset >= hw);
                self.feed(id, Input::LogStartAdvanced { start_offset: hw });
            }
        }
    }
}

fn short_request(r: &Request) -> String {
    match r {
        Request::Vote(v) => format!(
            "{}Vote(epoch {}, last {}@{})",
            if v.pre_vote { "Pre" } else { "" },
            v.candidate_epoch,
            v.last_offset,
            v.last_offset_epoch
        ),
        Request::BeginQuorumEpoch(b) => format!("BeginQuorumEpoch({})", b.leader_epoch),
        Request::EndQuorumEpoch(e) => format!("EndQuorumEpoch({})", e.leader_epoch),
        Request::Fetch(f) => format!(
            "Fetch(epoch {}, offset {}@{}, hw {})",
            f.current_leader_epoch, f.fetch_offset, f.last_fetched_epoch, f.high_watermark
        ),
        Request::FetchSnapshot(f) => format!("FetchSnapshot({:?}@{})", f.snapshot_id, f.position),
        other => other.name().to_string(),
    }
}

fn short_response(r: &Response) -> String {
    match r {
        Response::Vote(v) => format!(
            "Vote(err {}/{}, leader {} epoch {}, granted {})",
            v.common.error,
            v.common.partition_error,
            v.common.leader_id,
            v.common.leader_epoch,
            v.vote_granted
        ),
        Response::BeginQuorumEpoch(q) | Response::EndQuorumEpoch(q) => {
            format!(
                "Quorum(err {}/{}, leader {} epoch {})",
                q.error, q.partition_error, q.leader_id, q.leader_epoch
            )
        }
        Response::Fetch(f) => format!(
            "Fetch(err {}/{}, leader {} epoch {}, hw {}, div {:?}, snap {:?}, {} batches)",
            f.error,
            f.partition_error,
            f.leader_id,
            f.leader_epoch,
            f.high_watermark,
            f.diverging_epoch,
            f.snapshot_id,
            match &f.records {
                Records::Batches(b) => b.len(),
                _ => 0,
            }
        ),
        Response::FetchSnapshot(f) => format!(
            "FetchSnapshot(err {}/{}, {:?} pos {} size {})",
            f.error, f.partition_error, f.snapshot_id, f.position, f.size
        ),
        other => format!("{other:?}"),
    }
}

impl Sim {
    fn take_violation(&mut self) -> Option<String> {
        self.violation.take()
    }
}

/// One seeded run: chaos rounds each followed by a heal phase with a liveness check.
fn run_seed(
    seed: u64,
    n_voters: usize,
    n_observers: usize,
    dynamic: bool,
) -> Result<Stats, String> {
    let observers: Vec<i32> = (0..n_observers as i32).map(|i| 100 + i).collect();
    let mut sim = Sim::new(seed, n_voters, n_observers, dynamic);
    let rounds = 3;
    for round in 0..rounds {
        // Chaos: about 4 s of simulated time.
        sim.crashes_allowed = true;
        let chaos_end = sim.now + 4_000;
        let mut next_action = sim.now;
        while sim.now < chaos_end {
            if sim.now >= next_action {
                sim.chaos(&observers);
                next_action = sim.now + sim.rng.gen_range(20..200);
            }
            if !sim.step() {
                break;
            }
            if let Some(v) = sim.take_violation() {
                return Err(sim.fail(v));
            }
        }
        // Heal: every node up, no partitions, a mild network; a leader must be elected and
        // a new append committed within the bound.
        sim.crashes_allowed = false;
        sim.cut.clear();
        sim.faults = Faults {
            loss: 0.0,
            dup: 0.0,
            max_delay: 5,
        };
        let ids: Vec<i32> = sim.nodes.keys().copied().collect();
        for id in ids {
            if sim.nodes[&id].core.is_none() {
                sim.start_node(id, &observers);
            }
        }
        sim.log(format!("round {round}: healed"));
        let healed_at = sim.now;
        let bound = 10_000;
        let mut probe: Option<(i32, i32, i64, Bytes)> = None;
        loop {
            if sim.now > healed_at + bound {
                return Err(sim.fail(format!(
                    "no progress within {bound} ms of healing (probe {probe:?})"
                )));
            }
            // A probe whose leader lost its epoch may be lost with it: append again.
            if let Some((l, epoch, _, _)) = &probe {
                let still = sim.nodes[l]
                    .core
                    .as_ref()
                    .is_some_and(|c| c.is_leader() && c.epoch() == *epoch);
                if !still {
                    probe = None;
                }
            }
            if probe.is_none() {
                probe = sim.client_append();
                if let Some((l, _, offset, _)) = &probe {
                    sim.log(format!("probe appended at {offset} on leader {l}"));
                }
            }
            if let Some((_, _, offset, payload)) = &probe {
                if sim.committed.get(offset).is_some_and(|(_, p)| p == payload) {
                    break;
                }
            }
            if !sim.step() {
                break;
            }
            if let Some(v) = sim.take_violation() {
                return Err(sim.fail(v));
            }
        }
    }
    Ok(sim.stats)
}

/// The seeds a test runs: `base + 0..count` (`RAFT_SIM_SEEDS` overrides the count), or only
/// `RAFT_SIM_SEED` when it belongs to this test's base (the millions digit names the setup).
fn seeds(base: u64, default: u64) -> Vec<u64> {
    if let Ok(s) = std::env::var("RAFT_SIM_SEED") {
        let seed: u64 = s.parse().expect("RAFT_SIM_SEED is a number");
        return if seed / 1_000_000 * 1_000_000 == base {
            vec![seed]
        } else {
            vec![]
        };
    }
    let n = std::env::var("RAFT_SIM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    (0..n).map(|i| base + i).collect()
}

fn run_many(base: u64, count: u64, voters: usize, observers: usize, dynamic: bool) {
    let mut total = Stats::default();
    for seed in seeds(base, count) {
        match run_seed(seed, voters, observers, dynamic) {
            Ok(st) => {
                total.events += st.events;
                total.elections += st.elections;
                total.committed += st.committed;
                total.crashes += st.crashes;
                total.snapshots_installed += st.snapshots_installed;
                total.truncations += st.truncations;
                total.voter_changes += st.voter_changes;
            }
            Err(report) => panic!("{report}"),
        }
    }
    let kind = if dynamic { "KIP-853 " } else { "" };
    eprintln!("raft sim {kind}{voters} voters + {observers} observers: {total:?}");
}

#[test]
fn three_voters_one_observer() {
    run_many(1_000_000, 150, 3, 1, false);
}

#[test]
fn five_voters_two_observers() {
    run_many(2_000_000, 100, 5, 2, false);
}

#[test]
fn three_voters_no_observer() {
    run_many(3_000_000, 150, 3, 0, false);
}

#[test]
fn kip853_voters_change_under_faults() {
    run_many(4_000_000, 150, 3, 2, true);
}
