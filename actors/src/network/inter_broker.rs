//! Requests a broker sends to other brokers (the users of Kafka's `InterBrokerSendThread`):
//! WriteTxnMarkers from a transaction coordinator to the leaders of the transaction's
//! partitions (`TransactionMarkerChannelManager`), AddPartitionsToTxn from a partition leader
//! to the transaction's coordinator (KIP-890, `AddPartitionsToTxnManager`), and single
//! requests answered whole ([`InterBrokerClient::request`]: a share-partition leader's state
//! requests to its share coordinator, Kafka's `PersisterStateManager`).
//!
//! One [`BrokerChannelActor`] per (destination broker, [`Lane`]) owns one connection to the
//! destination's inter-broker listener (`inter.broker.listener.name`, its address from the
//! metadata image at each connect, so a broker that registers again elsewhere is found). A
//! channel sends one request at a time; what queues meanwhile goes out together in the next
//! request, as Kafka drains its per-broker queues: markers of many transactions in one
//! WriteTxnMarkers, verifications of many transactional ids in one AddPartitionsToTxn v4+.
//! Markers and verifications use separate lanes, so a marker request waiting for its
//! partitions' replication never holds up a producer's verification.
//!
//! A failed exchange (connect refused, timeout, bad answer) fails every job of that request
//! and drops the connection; callers retry as Kafka's callers do (markers after a backoff, a
//! producer's send on a retriable error).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;
use kactor_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTransaction;
use kactor_protocol::messages::add_partitions_to_txn_response::AddPartitionsToTxnResult;
use kactor_protocol::messages::write_txn_markers_request::WritableTxnMarker;
use kactor_protocol::messages::write_txn_markers_response::WritableTxnMarkerResult;
use kactor_protocol::messages::{
    AddPartitionsToTxnRequest, ApiKey, RequestBody, ResponseBody, WriteTxnMarkersRequest,
};
use tokio::sync::oneshot;

use super::client::{ClientError, KafkaConnection};
use crate::metadata::actor::MetadataImageWatch;
use crate::partition::fetcher_manager::broker_address;
use crate::runtime::{ActorMetrics, MeteredAddr, SupervisedActor};

/// The most markers (or transactions) one request carries; the rest wait for the next.
const MAX_BATCH: usize = 1000;

/// Which queue of a destination a job waits in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lane {
    Markers,
    AddPartitions,
    /// One request at a time, answered whole (share-partition state to its coordinator).
    Single,
}

impl Lane {
    fn label(self) -> &'static str {
        match self {
            Lane::Markers => "markers",
            Lane::AddPartitions => "add-partitions",
            Lane::Single => "single",
        }
    }
}

/// Why a destination could not answer a job.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InterBrokerError {
    #[error("broker {0} has no registered address")]
    UnknownBroker(i32),
    #[error("{0}")]
    Exchange(String),
    /// The response's top-level error code (AddPartitionsToTxn v4+).
    #[error("error code {0}")]
    Code(i16),
    #[error("the channel to broker {0} stopped")]
    Stopped(i32),
}

impl From<ClientError> for InterBrokerError {
    fn from(e: ClientError) -> Self {
        InterBrokerError::Exchange(e.to_string())
    }
}

pub type MarkersReply = oneshot::Sender<Result<Vec<WritableTxnMarkerResult>, InterBrokerError>>;
pub type AddPartitionsReply = oneshot::Sender<Result<AddPartitionsToTxnResult, InterBrokerError>>;
pub type ResponseReply = oneshot::Sender<Result<ResponseBody, InterBrokerError>>;

/// One caller's share of a request.
pub enum Job {
    /// Markers of one transaction (one entry per producer id), answered with their results.
    Markers {
        markers: Vec<WritableTxnMarker>,
        reply: MarkersReply,
    },
    /// One transaction to add to or verify at its coordinator.
    AddPartitions {
        transaction: AddPartitionsToTxnTransaction,
        reply: AddPartitionsReply,
    },
    /// A request sent on its own, answered with the whole response.
    Request {
        body: RequestBody,
        reply: ResponseReply,
    },
}

impl Job {
    fn fail(self, e: InterBrokerError) {
        match self {
            Job::Markers { reply, .. } => {
                let _ = reply.send(Err(e));
            }
            Job::AddPartitions { reply, .. } => {
                let _ = reply.send(Err(e));
            }
            Job::Request { reply, .. } => {
                let _ = reply.send(Err(e));
            }
        }
    }
}

/// Takes the jobs the next request carries from the front of `queue`: consecutive jobs of the
/// front's kind, none naming a producer id (markers) or transactional id (verifications) an
/// earlier one in the batch names, since answers are matched back by those keys; at most
/// [`MAX_BATCH`] entries.
pub fn next_batch(queue: &mut VecDeque<Job>) -> Vec<Job> {
    let mut batch = Vec::new();
    let mut producers = BTreeSet::new();
    let mut ids = BTreeSet::new();
    let mut entries = 0usize;
    if matches!(queue.front(), Some(Job::Request { .. })) {
        return queue.pop_front().into_iter().collect();
    }
    while let Some(front) = queue.front() {
        let fits = match (front, batch.first()) {
            (Job::Markers { markers, .. }, None | Some(Job::Markers { .. })) => {
                entries + markers.len() <= MAX_BATCH.max(markers.len())
                    && markers.iter().all(|m| !producers.contains(&m.producer_id))
            }
            (Job::AddPartitions { transaction, .. }, None | Some(Job::AddPartitions { .. })) => {
                entries < MAX_BATCH && !ids.contains(&transaction.transactional_id)
            }
            _ => false,
        };
        if !fits || entries >= MAX_BATCH {
            break;
        }
        let job = queue.pop_front().expect("front exists");
        match &job {
            Job::Markers { markers, .. } => {
                entries += markers.len();
                producers.extend(markers.iter().map(|m| m.producer_id));
            }
            Job::AddPartitions { transaction, .. } => {
                entries += 1;
                ids.insert(transaction.transactional_id.clone());
            }
            Job::Request { .. } => unreachable!("requests are never batched"),
        }
        batch.push(job);
    }
    batch
}

/// The request for a batch from [`next_batch`].
pub fn batch_request(batch: &[Job]) -> RequestBody {
    match batch.first() {
        Some(Job::Request { body, .. }) => body.clone(),
        Some(Job::AddPartitions { .. }) => {
            RequestBody::AddPartitionsToTxn(AddPartitionsToTxnRequest {
                transactions: batch
                    .iter()
                    .filter_map(|j| match j {
                        Job::AddPartitions { transaction, .. } => Some(transaction.clone()),
                        _ => None,
                    })
                    .collect(),
                ..Default::default()
            })
        }
        _ => RequestBody::WriteTxnMarkers(WriteTxnMarkersRequest {
            markers: batch
                .iter()
                .flat_map(|j| match j {
                    Job::Markers { markers, .. } => markers.clone(),
                    _ => Vec::new(),
                })
                .collect(),
            ..Default::default()
        }),
    }
}

/// Hands each job of `batch` its part of `answer`: markers by producer id, transactions by
/// transactional id. A job the answer leaves out fails (the peer answered something else).
pub fn deliver(mut batch: Vec<Job>, answer: Result<ResponseBody, InterBrokerError>) {
    if let [Job::Request { .. }] = batch.as_slice() {
        if let Some(Job::Request { reply, .. }) = batch.pop() {
            let _ = reply.send(answer);
        }
        return;
    }
    match answer {
        Err(e) => batch.into_iter().for_each(|j| j.fail(e.clone())),
        Ok(ResponseBody::WriteTxnMarkers(resp)) => {
            let mut by_producer: HashMap<i64, WritableTxnMarkerResult> = resp
                .markers
                .into_iter()
                .map(|m| (m.producer_id, m))
                .collect();
            for job in batch {
                let Job::Markers { markers, reply } = job else {
                    job.fail(InterBrokerError::Exchange("answer of another kind".into()));
                    continue;
                };
                let results: Option<Vec<_>> = markers
                    .iter()
                    .map(|m| by_producer.remove(&m.producer_id))
                    .collect();
                let _ = reply.send(results.ok_or_else(|| {
                    InterBrokerError::Exchange("a marker is missing from the answer".into())
                }));
            }
        }
        Ok(ResponseBody::AddPartitionsToTxn(resp)) => {
            if resp.error_code != 0 {
                let e = InterBrokerError::Code(resp.error_code);
                batch.into_iter().for_each(|j| j.fail(e.clone()));
                return;
            }
            let mut by_id: HashMap<String, AddPartitionsToTxnResult> = resp
                .results_by_transaction
                .into_iter()
                .map(|r| (r.transactional_id.clone(), r))
                .collect();
            for job in batch {
                let Job::AddPartitions { transaction, reply } = job else {
                    job.fail(InterBrokerError::Exchange("answer of another kind".into()));
                    continue;
                };
                let _ = reply.send(by_id.remove(&transaction.transactional_id).ok_or_else(|| {
                    InterBrokerError::Exchange("a transaction is missing from the answer".into())
                }));
            }
        }
        Ok(_) => batch
            .into_iter()
            .for_each(|j| j.fail(InterBrokerError::Exchange("answer of another kind".into()))),
    }
}

/// How channels reach their peers.
#[derive(Clone)]
pub struct InterBrokerConfig {
    /// `inter.broker.listener.name`
    pub listener: Option<String>,
    /// How long a request may take: the peer's own wait (`request.timeout.ms`, markers wait
    /// for replication) plus a margin.
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
}

type ChannelMap = HashMap<(i32, Lane), MeteredAddr<BrokerChannelActor>>;

/// The handle callers use: finds (or starts) the channel of a destination and lane.
#[derive(Clone)]
pub struct InterBrokerClient {
    node_id: i32,
    image: MetadataImageWatch,
    config: InterBrokerConfig,
    arbiter: Option<ArbiterHandle>,
    channels: Arc<Mutex<ChannelMap>>,
}

impl InterBrokerClient {
    /// Channels start on `arbiter` (the current one when None: tests).
    pub fn new(
        node_id: i32,
        image: MetadataImageWatch,
        config: InterBrokerConfig,
        arbiter: Option<ArbiterHandle>,
    ) -> Self {
        InterBrokerClient {
            node_id,
            image,
            config,
            arbiter,
            channels: Arc::default(),
        }
    }

    /// This broker's id (callers compare destinations with it).
    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    fn channel(&self, node: i32, lane: Lane) -> MeteredAddr<BrokerChannelActor> {
        let mut channels = self.channels.lock().expect("channel map lock");
        if let Some(c) = channels.get(&(node, lane)).filter(|c| c.connected()) {
            return c.clone();
        }
        let image = self.image.clone();
        let config = self.config.clone();
        let metrics = ActorMetrics::new("BrokerChannelActor");
        let m = metrics.clone();
        let make = move |_: &mut Context<BrokerChannelActor>| BrokerChannelActor {
            node,
            lane,
            image,
            config,
            conn: None,
            queue: VecDeque::new(),
            busy: false,
            metrics: m,
        };
        let addr = match &self.arbiter {
            Some(a) => crate::runtime::start_supervised(a, metrics, make),
            None => crate::runtime::start_supervised_here(metrics, make),
        };
        channels.insert((node, lane), addr.clone());
        addr
    }

    /// Sends `markers` (one transaction's, one entry per producer id) to broker `node`.
    pub async fn write_txn_markers(
        &self,
        node: i32,
        markers: Vec<WritableTxnMarker>,
    ) -> Result<Vec<WritableTxnMarkerResult>, InterBrokerError> {
        let (reply, rx) = oneshot::channel();
        self.submit(node, Lane::Markers, Job::Markers { markers, reply }, rx)
            .await
    }

    /// Asks broker `node` (the transaction's coordinator) to add or verify `transaction`.
    pub async fn add_partitions_to_txn(
        &self,
        node: i32,
        transaction: AddPartitionsToTxnTransaction,
    ) -> Result<AddPartitionsToTxnResult, InterBrokerError> {
        let (reply, rx) = oneshot::channel();
        let job = Job::AddPartitions { transaction, reply };
        self.submit(node, Lane::AddPartitions, job, rx).await
    }

    /// Sends `body` to broker `node` on its own and returns the whole response.
    pub async fn request(
        &self,
        node: i32,
        body: RequestBody,
    ) -> Result<ResponseBody, InterBrokerError> {
        let (reply, rx) = oneshot::channel();
        self.submit(node, Lane::Single, Job::Request { body, reply }, rx)
            .await
    }

    async fn submit<T>(
        &self,
        node: i32,
        lane: Lane,
        job: Job,
        rx: oneshot::Receiver<Result<T, InterBrokerError>>,
    ) -> Result<T, InterBrokerError> {
        let channel = self.channel(node, lane);
        channel
            .send(Submit(job))
            .await
            .map_err(|_| InterBrokerError::Stopped(node))?;
        rx.await.unwrap_or(Err(InterBrokerError::Stopped(node)))
    }
}

/// Caller → channel: queue a job. Lost (mailbox closed): the caller's reply fails.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Submit(pub Job);

/// One destination broker's queue of one lane and its connection.
pub struct BrokerChannelActor {
    node: i32,
    lane: Lane,
    image: MetadataImageWatch,
    config: InterBrokerConfig,
    conn: Option<KafkaConnection>,
    queue: VecDeque<Job>,
    /// A request is in flight (the connection is out with it).
    busy: bool,
    metrics: ActorMetrics,
}

impl BrokerChannelActor {
    fn pump(&mut self, ctx: &mut Context<Self>) {
        if self.busy || self.queue.is_empty() {
            return;
        }
        let batch = next_batch(&mut self.queue);
        let request = batch_request(&batch);
        let address = broker_address(
            &self.image.borrow(),
            self.node,
            self.config.listener.as_deref(),
        );
        let Some(address) = address else {
            deliver(batch, Err(InterBrokerError::UnknownBroker(self.node)));
            ctx.notify(Pump);
            return;
        };
        self.busy = true;
        let conn = self.conn.take();
        let config = self.config.clone();
        let exchange = async move {
            let mut conn = match conn.filter(|c| c.address() == address) {
                Some(c) => c,
                None => KafkaConnection::connect(&address, "inter-broker", config.connect_timeout)
                    .await
                    .map_err(InterBrokerError::from)
                    .map_err(|e| (None, e))?,
            };
            let key = request.api_key();
            // AddPartitionsToTxn batches exist from v4 (broker-to-broker) on.
            if key == ApiKey::AddPartitionsToTxn && conn.version_for(key).unwrap_or(0) < 4 {
                return Err((
                    Some(conn),
                    InterBrokerError::Exchange(format!(
                        "{address} does not serve batched AddPartitionsToTxn"
                    )),
                ));
            }
            match conn.send(request, config.request_timeout).await {
                Ok((_, resp)) => Ok((conn, resp)),
                Err(e) => Err((None, InterBrokerError::from(e))),
            }
        };
        ctx.spawn(exchange.into_actor(self).map(move |result, act, ctx| {
            act.busy = false;
            match result {
                Ok((conn, resp)) => {
                    act.conn = Some(conn);
                    deliver(batch, Ok(resp));
                }
                Err((conn, e)) => {
                    tracing::warn!(broker = act.node, lane = act.lane.label(), error = %e,
                        "inter-broker request failed");
                    act.conn = conn;
                    deliver(batch, Err(e));
                }
            }
            act.pump(ctx);
        }));
    }
}

/// Channel → itself: look at the queue again.
#[derive(Message)]
#[rtype(result = "()")]
struct Pump;

impl Actor for BrokerChannelActor {
    type Context = Context<Self>;
}

impl Supervised for BrokerChannelActor {
    /// After a caught panic the request in flight is gone (its callers' replies fail with
    /// the dropped senders): start over on a new connection.
    fn restarting(&mut self, _: &mut Context<Self>) {
        self.conn = None;
        self.busy = false;
    }
}

impl SupervisedActor for BrokerChannelActor {
    const MAILBOX_CAPACITY: usize = 1024;
}

crate::supervised_mailbox!(BrokerChannelActor);

impl Handler<Submit> for BrokerChannelActor {
    type Result = ();
    fn handle(&mut self, msg: Submit, ctx: &mut Context<Self>) {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        self.queue.push_back(msg.0);
        self.pump(ctx);
    }
}

impl Handler<Pump> for BrokerChannelActor {
    type Result = ();
    fn handle(&mut self, _: Pump, ctx: &mut Context<Self>) {
        self.pump(ctx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kactor_protocol::messages::write_txn_markers_request::WritableTxnMarkerTopic;
    use kactor_protocol::messages::WriteTxnMarkersResponse;

    fn marker(producer_id: i64) -> WritableTxnMarker {
        WritableTxnMarker {
            producer_id,
            producer_epoch: 1,
            transaction_result: true,
            topics: vec![WritableTxnMarkerTopic {
                name: "t".into(),
                partition_indexes: vec![0],
                ..Default::default()
            }],
            coordinator_epoch: 3,
            ..Default::default()
        }
    }

    fn markers_job(
        ids: &[i64],
    ) -> (
        Job,
        oneshot::Receiver<Result<Vec<WritableTxnMarkerResult>, InterBrokerError>>,
    ) {
        let (reply, rx) = oneshot::channel();
        (
            Job::Markers {
                markers: ids.iter().map(|&i| marker(i)).collect(),
                reply,
            },
            rx,
        )
    }

    fn txn_job(
        id: &str,
    ) -> (
        Job,
        oneshot::Receiver<Result<AddPartitionsToTxnResult, InterBrokerError>>,
    ) {
        let (reply, rx) = oneshot::channel();
        (
            Job::AddPartitions {
                transaction: AddPartitionsToTxnTransaction {
                    transactional_id: id.into(),
                    ..Default::default()
                },
                reply,
            },
            rx,
        )
    }

    #[test]
    fn a_batch_takes_consecutive_jobs_of_one_kind_with_distinct_keys() {
        let mut q = VecDeque::new();
        q.push_back(markers_job(&[1, 2]).0);
        q.push_back(markers_job(&[3]).0);
        // Producer 2 again: its answer could not be told apart, so it waits.
        q.push_back(markers_job(&[2]).0);
        q.push_back(txn_job("a").0);
        let b = next_batch(&mut q);
        assert_eq!(b.len(), 2);
        let RequestBody::WriteTxnMarkers(r) = batch_request(&b) else {
            panic!("markers batch");
        };
        assert_eq!(
            r.markers.iter().map(|m| m.producer_id).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        assert_eq!(next_batch(&mut q).len(), 1);
        let b = next_batch(&mut q);
        assert!(matches!(
            batch_request(&b),
            RequestBody::AddPartitionsToTxn(_)
        ));
        assert!(q.is_empty());
    }

    #[test]
    fn verifications_batch_by_transactional_id() {
        let mut q = VecDeque::new();
        q.push_back(txn_job("a").0);
        q.push_back(txn_job("b").0);
        q.push_back(txn_job("a").0);
        let b = next_batch(&mut q);
        let RequestBody::AddPartitionsToTxn(r) = batch_request(&b) else {
            panic!("verification batch");
        };
        assert_eq!(r.transactions.len(), 2);
        assert_eq!(q.len(), 1);
    }

    #[test]
    fn answers_go_back_by_producer_id_whatever_their_order() {
        let (j1, mut r1) = markers_job(&[1, 2]);
        let (j2, mut r2) = markers_job(&[3]);
        let resp = WriteTxnMarkersResponse {
            markers: [3, 2, 1]
                .iter()
                .map(|&p| WritableTxnMarkerResult {
                    producer_id: p,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        deliver(vec![j1, j2], Ok(ResponseBody::WriteTxnMarkers(resp)));
        let got1 = r1.try_recv().unwrap().unwrap();
        assert_eq!(
            got1.iter().map(|m| m.producer_id).collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert_eq!(r2.try_recv().unwrap().unwrap()[0].producer_id, 3);
    }

    #[test]
    fn a_missing_answer_or_a_failed_exchange_fails_the_job() {
        let (j1, mut r1) = markers_job(&[1]);
        deliver(
            vec![j1],
            Ok(ResponseBody::WriteTxnMarkers(
                WriteTxnMarkersResponse::default(),
            )),
        );
        assert!(r1.try_recv().unwrap().is_err());
        let (j2, mut r2) = txn_job("a");
        deliver(vec![j2], Err(InterBrokerError::UnknownBroker(7)));
        assert_eq!(
            r2.try_recv().unwrap().unwrap_err(),
            InterBrokerError::UnknownBroker(7)
        );
    }

    #[test]
    fn single_requests_go_alone_and_get_the_whole_answer() {
        let (reply, mut rx) = oneshot::channel();
        let body = RequestBody::ReadShareGroupState(Default::default());
        let mut queue: VecDeque<Job> = VecDeque::new();
        queue.push_back(Job::Request {
            body: body.clone(),
            reply,
        });
        let (markers, _m) = markers_job(&[1]);
        queue.push_back(markers);
        let batch = next_batch(&mut queue);
        assert_eq!(batch.len(), 1, "a request is never batched with others");
        assert_eq!(queue.len(), 1);
        assert_eq!(batch_request(&batch), body);
        let answer = ResponseBody::ReadShareGroupState(Default::default());
        deliver(batch, Ok(answer.clone()));
        assert_eq!(rx.try_recv().unwrap().unwrap(), answer);
    }
}
