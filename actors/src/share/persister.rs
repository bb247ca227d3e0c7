//! Where a share-partition leader keeps its delivery state (Kafka's `Persister`): the share
//! coordinator of `group:topicId:partition`, which is the leader of that key's
//! `__share_group_state` partition. A leader loads a share-partition from it before the first
//! delivery and writes it after every acknowledgement (answering the client only once it is
//! written) and every release.
//!
//! When the coordinator is another broker the state stays in memory here: kactor brokers do
//! not send each other these requests yet (docs/architecture.md, share groups: known gaps).

use kactor_protocol::errors::{
    COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, INVALID_REQUEST, NOT_COORDINATOR,
};

use super::coordinator::actor::{StateAnswer, StateOp, SHARE_STATE_TOPIC};
use super::coordinator::apis::{ShareStateClient, ShareStateTopicCreator};
use super::coordinator::core::{StateBatch, StateError, StateKey, WriteState};
use super::core::{PersistView, ShareKey};
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
    /// No start offset yet: `share.auto.offset.reset` decides.
    Fresh,
    /// The coordinator cannot answer now (being created, loading, moving): try again later.
    Unavailable,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    Local,
    Remote,
    Missing,
}

#[derive(Clone)]
pub struct SharePersister {
    pub client: ShareStateClient,
    pub partitions: PartitionTableReader,
    /// Creates `__share_group_state` when the first share-partition needs it.
    pub topic: Option<ShareStateTopicCreator>,
    pub node_id: i32,
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
            Some(l) if l >= 0 => Route::Remote,
            _ => Route::Missing,
        }
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

    pub async fn load(&self, key: &ShareKey) -> Loaded {
        let sk = state_key(key);
        match self.route(&sk) {
            Route::Remote => return Loaded::Fresh,
            Route::Missing => return Loaded::Unavailable,
            Route::Local => {}
        }
        let leader_epoch = self.leader_epoch(key);
        let read = || self.client.call(sk.clone(), StateOp::Read { leader_epoch });
        let mut answer = read().await;
        if matches!(&answer, Err((INVALID_REQUEST, _))) {
            // Never initialized: the group coordinator would have done it in Kafka; the first
            // leader to need the state does it here, with no start offset yet.
            let init = StateOp::Initialize {
                state_epoch: 0,
                start_offset: -1,
            };
            if let Err(e) = self.client.call(sk.clone(), init).await {
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
            Ok(_) => Loaded::Fresh,
            Err(e) => unavailable(key, e),
        }
    }

    /// Writes `view` for `key`. In memory only (Ok) when another broker coordinates it.
    pub async fn write(&self, key: &ShareKey, view: PersistView) -> Result<(), StateError> {
        let sk = state_key(key);
        match self.route(&sk) {
            Route::Remote => return Ok(()),
            Route::Missing => return Err(not_available()),
            Route::Local => {}
        }
        let w = WriteState {
            state_epoch: view.state_epoch,
            leader_epoch: self.leader_epoch(key),
            start_offset: view.start_offset,
            delivery_complete_count: view.delivery_complete_count,
            batches: view.batches,
        };
        match self.client.call(sk, StateOp::Write(w)).await {
            Ok(_) => Ok(()),
            // Kafka's share-partition reports coordinator trouble to the client as
            // COORDINATOR_NOT_AVAILABLE, whatever the coordinator said.
            Err((NOT_COORDINATOR | COORDINATOR_LOAD_IN_PROGRESS, _)) => Err(not_available()),
            Err(e) => Err(e),
        }
    }
}

fn not_available() -> StateError {
    (
        COORDINATOR_NOT_AVAILABLE,
        kactor_protocol::errors::ErrorCode::for_code(COORDINATOR_NOT_AVAILABLE)
            .default_message()
            .to_string(),
    )
}

fn unavailable(key: &ShareKey, (code, message): StateError) -> Loaded {
    tracing::debug!(group = %key.group, topic_id = %key.topic_id, partition = key.partition,
        code, %message, "share-partition state not loaded yet");
    Loaded::Unavailable
}
