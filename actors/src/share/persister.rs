//! Where a share-partition leader keeps its delivery state (Kafka's `Persister`): the share
//! coordinator of `group:topicId:partition`, which is the leader of that key's
//! `__share_group_state` partition. A leader loads a share-partition from it before the first
//! delivery and writes it after every acknowledgement (answering the client only once it is
//! written) and every release.
//!
//! A coordinator on another broker is sent the same requests on the wire
//! (InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState) over the
//! inter-broker listener, so the state outlives this broker and a Kafka broker's share
//! coordinator can keep it too.

use kactor_protocol::errors::{
    COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, FENCED_LEADER_EPOCH,
    FENCED_STATE_EPOCH, INVALID_REQUEST, NONE, NOT_COORDINATOR, NOT_LEADER_OR_FOLLOWER,
};

/// Whether a write's error says this broker's copy is stale (another leader, a newer state
/// epoch, or the state deleted by the group coordinator: DeleteShareGroupOffsets or
/// DeleteGroups, which answer a later write "uninitialized" with INVALID_REQUEST): the
/// share-partition is dropped and loaded again rather than written again.
pub fn is_stale(code: i16, message: &str) -> bool {
    matches!(
        code,
        FENCED_LEADER_EPOCH | FENCED_STATE_EPOCH | NOT_LEADER_OR_FOLLOWER
    ) || (code == INVALID_REQUEST && message == WRITE_UNINITIALIZED)
}

use super::coordinator::actor::{StateAnswer, StateOp, SHARE_STATE_TOPIC};
use super::coordinator::apis::{ShareStateClient, ShareStateTopicCreator};
use super::coordinator::core::{
    ReadState, StateBatch, StateError, StateKey, StateSummary, WriteState, WRITE_UNINITIALIZED,
};
use super::core::{PersistView, ShareKey};
use crate::network::inter_broker::InterBrokerClient;
use crate::partition::registry::PartitionTableReader;

/// What loading a share-partition found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Loaded {
    /// Kept state: deliver from there.
    State {
        state_epoch: i32,
        start_offset: i64,
        batches: Vec<StateBatch>,
    },
    /// No start offset yet: `share.auto.offset.reset` decides. Writes carry `state_epoch`
    /// (the group coordinator's, when it initialized the state).
    Fresh { state_epoch: i32 },
    /// The coordinator cannot answer now (being created, loading, moving): try again later.
    Unavailable,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    Local,
    /// The broker leading the key's `__share_group_state` partition.
    Remote(i32),
    Missing,
}

#[derive(Clone)]
pub struct SharePersister {
    pub client: ShareStateClient,
    pub partitions: PartitionTableReader,
    /// Creates `__share_group_state` when the first share-partition needs it.
    pub topic: Option<ShareStateTopicCreator>,
    pub node_id: i32,
    /// Reaches coordinators on other brokers (None: their share-partitions stay in memory).
    pub inter_broker: Option<InterBrokerClient>,
}

fn state_key(key: &ShareKey) -> StateKey {
    StateKey::new(&key.group, key.topic_id, key.partition)
}

impl SharePersister {
    fn route(&self, key: &StateKey) -> Route {
        let table = self.partitions.borrow();
        let image = table.image.as_deref();
        let Some(topic) = image.and_then(|i| i.topics.get_by_name(SHARE_STATE_TOPIC)) else {
            if let Some(creator) = &self.topic {
                creator.ensure(image);
            }
            return Route::Missing;
        };
        match topic
            .partitions
            .get(&self.client.partition_for(key))
            .map(|p| p.leader)
        {
            Some(l) if l == self.node_id => Route::Local,
            Some(l) if l >= 0 => Route::Remote(l),
            _ => Route::Missing,
        }
    }

    /// Whether this broker leads the topic partition (a share-partition is kept only there).
    pub fn leads(&self, topic_id: &kactor_protocol::Uuid, partition: i32) -> bool {
        let table = self.partitions.borrow();
        table
            .topic_names
            .get(topic_id)
            .and_then(|name| table.get(name, partition))
            .is_some_and(|h| h.leader == self.node_id)
    }

    /// The leader epoch of the topic partition this broker leads (the writer's fencing epoch).
    fn leader_epoch(&self, key: &ShareKey) -> i32 {
        let table = self.partitions.borrow();
        table
            .topic_names
            .get(&key.topic_id)
            .and_then(|name| table.get(name, key.partition))
            .map_or(0, |h| h.leader_epoch.max(0))
    }

    /// One request to the coordinator of `key`, here or on another broker.
    async fn call(&self, key: StateKey, op: StateOp) -> Result<StateAnswer, StateError> {
        match self.route(&key) {
            Route::Local => self.client.call(key, op).await,
            Route::Remote(node) => match &self.inter_broker {
                Some(ib) => remote(ib, node, key, op).await,
                None => Err(not_available()),
            },
            Route::Missing => Err(not_available()),
        }
    }

    /// Whether there is a coordinator to keep the state (else it stays in memory here).
    fn kept(&self, key: &StateKey) -> bool {
        !matches!(self.route(key), Route::Remote(_)) || self.inter_broker.is_some()
    }

    pub async fn load(&self, key: &ShareKey) -> Loaded {
        let sk = state_key(key);
        if !self.kept(&sk) {
            return Loaded::Fresh { state_epoch: 0 };
        }
        if self.route(&sk) == Route::Missing {
            return Loaded::Unavailable;
        }
        let leader_epoch = self.leader_epoch(key);
        let read = || self.call(sk.clone(), StateOp::Read { leader_epoch });
        let mut answer = read().await;
        if matches!(&answer, Err((INVALID_REQUEST, _))) {
            // Never initialized: the group coordinator would have done it in Kafka; the first
            // leader to need the state does it here, with no start offset yet.
            let init = StateOp::Initialize {
                state_epoch: 0,
                start_offset: -1,
            };
            if let Err(e) = self.call(sk.clone(), init).await {
                return unavailable(key, e);
            }
            answer = read().await;
        }
        match answer {
            Ok(StateAnswer::Read(s)) if s.start_offset >= 0 => Loaded::State {
                state_epoch: s.state_epoch,
                start_offset: s.start_offset,
                batches: s.batches,
            },
            Ok(StateAnswer::Read(s)) => Loaded::Fresh {
                state_epoch: s.state_epoch,
            },
            Ok(_) => Loaded::Fresh { state_epoch: 0 },
            Err(e) => unavailable(key, e),
        }
    }

    /// One request for the group coordinator (Kafka's `Persister.initializeState`,
    /// `deleteState`, `readSummary`): unlike a share-partition leader's, retried while the
    /// share coordinator is being created, loaded or moved, for up to `patience`.
    pub async fn admin(
        &self,
        group: &str,
        topic_id: kactor_protocol::Uuid,
        partition: i32,
        op: StateOp,
        patience: std::time::Duration,
    ) -> Result<StateAnswer, StateError> {
        let key = StateKey::new(group, topic_id, partition);
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            let answer = match self.route(&key) {
                Route::Remote(_) if self.inter_broker.is_none() => Err(not_available()),
                _ => self.call(key.clone(), op.clone()).await,
            };
            match answer {
                Err((
                    COORDINATOR_NOT_AVAILABLE | COORDINATOR_LOAD_IN_PROGRESS | NOT_COORDINATOR,
                    _,
                )) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                other => return other,
            }
        }
    }

    /// Writes `view` for `key`. In memory only (Ok) when another broker coordinates it.
    pub async fn write(&self, key: &ShareKey, view: PersistView) -> Result<(), StateError> {
        let sk = state_key(key);
        if !self.leads(&key.topic_id, key.partition) {
            // Leadership moved: what this broker holds is stale and must not be written.
            return Err(kactor_protocol::errors::with_default_message(
                NOT_LEADER_OR_FOLLOWER,
            ));
        }
        if !self.kept(&sk) {
            return Ok(());
        }
        let w = WriteState {
            state_epoch: view.state_epoch,
            leader_epoch: self.leader_epoch(key),
            start_offset: view.start_offset,
            delivery_complete_count: view.delivery_complete_count,
            batches: view.batches,
        };
        match self.call(sk, StateOp::Write(w)).await {
            Ok(_) => Ok(()),
            // Kafka's share-partition reports coordinator trouble to the client as
            // COORDINATOR_NOT_AVAILABLE, whatever the coordinator said.
            Err((NOT_COORDINATOR | COORDINATOR_LOAD_IN_PROGRESS, _)) => Err(not_available()),
            Err(e) => Err(e),
        }
    }
}

/// `op` on the wire to broker `node`, its answer read back into the shard's vocabulary.
async fn remote(
    ib: &InterBrokerClient,
    node: i32,
    key: StateKey,
    op: StateOp,
) -> Result<StateAnswer, StateError> {
    use kactor_protocol::messages::{
        delete_share_group_state_request as dreq, initialize_share_group_state_request as ireq,
        read_share_group_state_request as rreq, read_share_group_state_summary_request as sreq,
        write_share_group_state_request as wreq, DeleteShareGroupStateRequest,
        InitializeShareGroupStateRequest, ReadShareGroupStateRequest,
        ReadShareGroupStateSummaryRequest, WriteShareGroupStateRequest,
    };
    use kactor_protocol::{RequestBody, ResponseBody};
    let body = match &op {
        StateOp::Initialize {
            state_epoch,
            start_offset,
        } => RequestBody::InitializeShareGroupState(InitializeShareGroupStateRequest {
            group_id: key.group.clone(),
            topics: vec![ireq::InitializeStateData {
                topic_id: key.topic_id,
                partitions: vec![ireq::PartitionData {
                    partition: key.partition,
                    state_epoch: *state_epoch,
                    start_offset: *start_offset,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        StateOp::Read { leader_epoch } => {
            RequestBody::ReadShareGroupState(ReadShareGroupStateRequest {
                group_id: key.group.clone(),
                topics: vec![rreq::ReadStateData {
                    topic_id: key.topic_id,
                    partitions: vec![rreq::PartitionData {
                        partition: key.partition,
                        leader_epoch: *leader_epoch,
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            })
        }
        StateOp::Write(w) => RequestBody::WriteShareGroupState(WriteShareGroupStateRequest {
            group_id: key.group.clone(),
            topics: vec![wreq::WriteStateData {
                topic_id: key.topic_id,
                partitions: vec![wreq::PartitionData {
                    partition: key.partition,
                    state_epoch: w.state_epoch,
                    leader_epoch: w.leader_epoch,
                    start_offset: w.start_offset,
                    delivery_complete_count: w.delivery_complete_count,
                    state_batches: w.batches.iter().map(Into::into).collect(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        StateOp::Delete => RequestBody::DeleteShareGroupState(DeleteShareGroupStateRequest {
            group_id: key.group.clone(),
            topics: vec![dreq::DeleteStateData {
                topic_id: key.topic_id,
                partitions: vec![dreq::PartitionData {
                    partition: key.partition,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        StateOp::Summary => {
            RequestBody::ReadShareGroupStateSummary(ReadShareGroupStateSummaryRequest {
                group_id: key.group.clone(),
                topics: vec![sreq::ReadStateSummaryData {
                    topic_id: key.topic_id,
                    partitions: vec![sreq::PartitionData {
                        partition: key.partition,
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            })
        }
    };
    let answer = ib.request(node, body).await.map_err(|e| {
        tracing::debug!(node, error = %e, "share coordinator request failed");
        not_available()
    })?;
    // Each answer carries the one partition asked for: its error, or what it says.
    macro_rules! only_partition {
        ($r:expr, $p:ident => $ok:expr) => {
            match $r.results.first().and_then(|t| t.partitions.first()) {
                Some($p) if $p.error_code == NONE => Ok($ok),
                Some($p) => Err(match &$p.error_message {
                    Some(m) => ($p.error_code, m.clone()),
                    None => kactor_protocol::errors::with_default_message($p.error_code),
                }),
                None => Err(not_available()),
            }
        };
    }
    match answer {
        ResponseBody::InitializeShareGroupState(r) => only_partition!(r, _p => StateAnswer::Done),
        ResponseBody::WriteShareGroupState(r) => only_partition!(r, _p => StateAnswer::Done),
        ResponseBody::DeleteShareGroupState(r) => only_partition!(r, _p => StateAnswer::Done),
        ResponseBody::ReadShareGroupStateSummary(r) => only_partition!(r, p => {
            StateAnswer::Summary(StateSummary {
                state_epoch: p.state_epoch,
                leader_epoch: p.leader_epoch,
                start_offset: p.start_offset,
                delivery_complete_count: p.delivery_complete_count,
            })
        }),
        ResponseBody::ReadShareGroupState(r) => {
            only_partition!(r, p => StateAnswer::Read(ReadState {
                state_epoch: p.state_epoch,
                start_offset: p.start_offset,
                batches: p.state_batches.iter().map(StateBatch::from).collect(),
            }))
        }
        _ => Err(not_available()),
    }
}

fn not_available() -> StateError {
    kactor_protocol::errors::with_default_message(COORDINATOR_NOT_AVAILABLE)
}

fn unavailable(key: &ShareKey, (code, message): StateError) -> Loaded {
    tracing::debug!(group = %key.group, topic_id = %key.topic_id, partition = key.partition,
        code, %message, "share-partition state not loaded yet");
    Loaded::Unavailable
}
