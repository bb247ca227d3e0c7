//! The metadata and admin APIs (Kafka's `KafkaApis` / `ControllerApis` handlers for Metadata,
//! CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs, AlterConfigs,
//! IncrementalAlterConfigs, DescribeCluster, DescribeTopicPartitions, DescribeQuorum,
//! UpdateFeatures): wire structs in, controller messages or image reads, wire structs out.
//! Reads come from the published `Arc<MetadataImage>`; writes go to the QuorumControllerActor
//! and are answered once the local image has caught up with them, so a client that creates a
//! topic and then asks for metadata sees it.
//!
//! Registered by the topology with [`register`]:
//! `kactor_actors::controller::apis::register(&mut router, MetadataApis { .. })`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use actix::dev::ToEnvelope;
use actix::prelude::*;
use kactor_protocol::errors::*;
use kactor_protocol::messages::{self as m, *};
use kactor_protocol::{ApiKey, RequestBody, ResponseBody, Uuid};

use super::actor::QuorumControllerActor;
use super::core::client_metrics_configs::CLIENT_METRICS_CONFIGS;
use super::core::errors::*;
use super::core::group_configs::{broker_default, GROUP_CONFIGS};
use super::core::requests as cr;
use super::core::topic_configs::{self, source, ConfigLayers, ConfigType};
use super::core::validate_topic_name;
use super::messages::{self as cm, ControllerError, ControllerReply};
use crate::loggers::BrokerLoggers;
use crate::metadata::actor::{wait_for_offset, MetadataImageWatch};
use crate::metadata::controller_channel::ControllerChannelActor;
use crate::metadata::core::{ConfigResource, MetadataImage, TopicImage};
use crate::network::router::{HandlerOutcome, ListenerKind, RequestContext, RequestRouter};
use crate::raft::actor::RaftActor;
use crate::raft::core::types::preferred_endpoint;
use crate::raft::core::{Endpoint, Endpoints};
use crate::raft::messages::DescribeQuorumState;
use crate::runtime::MeteredAddr;

use crate::authorization::{authorized_operations, ResourceType, AUTHORIZED_OPERATIONS_OMITTED};
/// Upper bound for waiting on the controller when a request carries no timeout.
pub(super) const DEFAULT_TIMEOUT_MS: i32 = 30_000;

/// One broker config as DescribeConfigs reports it, from the process's config (the topology
/// fills these from its `describe()` rows); dynamic values from the image are laid over them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerConfigEntry {
    pub name: String,
    pub value: Option<String>,
    /// Kafka's `ConfigSource` id (4 static, 5 default).
    pub source: i8,
    /// Kafka's `ConfigType` id.
    pub config_type: i8,
    pub read_only: bool,
    pub sensitive: bool,
    /// (name, value, source) as Kafka lists synonyms.
    pub synonyms: Vec<(String, Option<String>, i8)>,
    pub documentation: Option<String>,
}

/// What the handlers need, captured by each registered closure.
/// Where the Raft leader is, for answers that name or come from the active controller.
#[derive(Clone)]
pub struct QuorumView {
    pub leader: tokio::sync::watch::Receiver<Option<i32>>,
    /// host:port of each controller's listener, as the RaftActor knows them.
    pub endpoints: tokio::sync::watch::Receiver<Arc<std::collections::BTreeMap<i32, String>>>,
}

#[derive(Clone)]
pub struct MetadataApis {
    pub node_id: i32,
    pub cluster_id: String,
    /// The co-located controller; None on a broker-only node (its admin writes are forwarded
    /// to the active controller, see [`register_forwarding`]).
    pub controller: Option<MeteredAddr<QuorumControllerActor>>,
    pub raft: MeteredAddr<RaftActor>,
    pub image: MetadataImageWatch,
    /// `auto.create.topics.enable`
    pub auto_create_topics_enable: bool,
    /// A broker's way to the active controller wherever it runs, for the topics a Metadata
    /// request creates (None on a controller-only node, which asks its own controller).
    pub topic_channel: Option<MeteredAddr<ControllerChannelActor>>,
    /// Topics whose auto-creation is under way: clients ask again every ~100 ms while it
    /// lasts, and each ask must not send another CreateTopics (Kafka's
    /// `AutoTopicCreationManager.inflightTopics`).
    pub auto_create_in_flight: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
    pub broker_configs: Arc<Vec<BrokerConfigEntry>>,
    /// This node's controller listeners (name, host, port) for DescribeQuorum v2.
    pub controller_listeners: Vec<(String, String, u16)>,
    /// The other voters, when the quorum has some (the leader may be in another process).
    pub quorum: Option<QuorumView>,
    /// This node's loggers (BROKER_LOGGER resources); None: not served.
    pub loggers: Option<Arc<BrokerLoggers>>,
    /// Whether ACLs are on (`authorizer.class.name`); the ACL APIs answer SECURITY_DISABLED
    /// without.
    pub authz: crate::authorization::Authz,
}

impl MetadataApis {
    /// This node's controller listeners as Raft endpoints.
    fn own_controller_endpoints(&self) -> Endpoints {
        self.controller_listeners
            .iter()
            .map(|(name, host, port)| Endpoint {
                listener: name.clone(),
                host: host.clone(),
                port: *port,
            })
            .collect()
    }

    pub(super) fn snapshot(&self) -> Arc<MetadataImage> {
        self.image.borrow().clone()
    }

    /// Static broker values (source STATIC_BROKER_CONFIG), for topic config resolution.
    fn static_broker_values(&self) -> BTreeMap<String, String> {
        self.broker_configs
            .iter()
            .filter(|e| e.source == source::STATIC_BROKER_CONFIG)
            .filter_map(|e| Some((e.name.clone(), e.value.clone()?)))
            .collect()
    }

    /// Sends a controller message with a deadline, then waits (within the same deadline) for
    /// the local image to include the write.
    pub(super) async fn ask<M, R>(&self, msg: M, timeout_ms: i32) -> Result<R, i16>
    where
        M: Message<Result = ControllerReply<R>> + Send + 'static,
        R: Send + 'static,
        QuorumControllerActor: Handler<M>,
        <QuorumControllerActor as Actor>::Context: ToEnvelope<QuorumControllerActor, M>,
    {
        let ms = if timeout_ms > 0 {
            timeout_ms
        } else {
            DEFAULT_TIMEOUT_MS
        };
        let deadline = tokio::time::Instant::now() + Duration::from_millis(ms as u64);
        let Some(controller) = &self.controller else {
            return Err(NOT_CONTROLLER);
        };
        let reply = tokio::time::timeout_at(deadline, controller.send(msg)).await;
        let committed = match reply {
            Err(_) => return Err(REQUEST_TIMED_OUT),
            Ok(Err(_)) => return Err(NOT_CONTROLLER),
            Ok(Ok(Err(ControllerError::NotController))) => return Err(NOT_CONTROLLER),
            Ok(Ok(Err(ControllerError::WriteFailed(_)))) => return Err(UNKNOWN_SERVER_ERROR),
            Ok(Ok(Ok(c))) => c,
        };
        if committed.offset >= 0 {
            let mut rx = self.image.clone();
            // Answering before the image catches up is still correct, only less convenient.
            let _ =
                tokio::time::timeout_at(deadline, wait_for_offset(&mut rx, committed.offset)).await;
        }
        Ok(committed.response)
    }
}

fn respond(body: ResponseBody) -> HandlerOutcome {
    HandlerOutcome::Respond(body)
}

/// The per-item rows of a controller answer, the shape every admin API shares: on success one
/// row per controller result (`ok`), and when the whole request failed (NOT_CONTROLLER,
/// REQUEST_TIMED_OUT, ...) one row per requested item carrying that code (`failed`).
fn per_item<Q, R, Row>(
    answer: Result<Vec<R>, i16>,
    requested: impl IntoIterator<Item = Q>,
    ok: impl FnMut(R) -> Row,
    mut failed: impl FnMut(Q, i16) -> Row,
) -> Vec<Row> {
    match answer {
        Ok(results) => results.into_iter().map(ok).collect(),
        Err(code) => requested.into_iter().map(|q| failed(q, code)).collect(),
    }
}

/// Counts each row's error code in the request error metrics.
fn record_errors(ctx: &RequestContext, codes: impl IntoIterator<Item = i16>) {
    for code in codes {
        ctx.record_error(code);
    }
}

/// Registers every API of this module on `router`.
pub fn register(router: &mut RequestRouter, apis: MetadataApis) {
    register_with_auto_create_wait(router, apis, AUTO_CREATE_WAIT);
}

/// As [`register`], with `auto_create_wait` instead of [`AUTO_CREATE_WAIT`].
pub fn register_with_auto_create_wait(
    router: &mut RequestRouter,
    apis: MetadataApis,
    auto_create_wait: Duration,
) {
    {
        let apis = apis.clone();
        router.register(ApiKey::Metadata, move |ctx, body| {
            let apis = apis.clone();
            Box::pin(async move {
                let RequestBody::Metadata(req) = body else {
                    return HandlerOutcome::Close(format!(
                        "{:?} body for {:?}",
                        "unexpected", ctx.api_key
                    ));
                };
                handle_metadata(&apis, auto_create_wait, &ctx, req).await
            })
        });
    }
    macro_rules! route {
        ($key:expr, $variant:ident, $f:path) => {{
            let apis = apis.clone();
            router.register($key, move |ctx, body| {
                let apis = apis.clone();
                Box::pin(async move {
                    let RequestBody::$variant(req) = body else {
                        return HandlerOutcome::Close(format!(
                            "{:?} body for {:?}",
                            "unexpected", ctx.api_key
                        ));
                    };
                    $f(&apis, &ctx, req).await
                })
            });
        }};
    }
    route!(ApiKey::CreateTopics, CreateTopics, handle_create_topics);
    route!(ApiKey::DeleteTopics, DeleteTopics, handle_delete_topics);
    route!(
        ApiKey::CreatePartitions,
        CreatePartitions,
        handle_create_partitions
    );
    route!(
        ApiKey::DescribeConfigs,
        DescribeConfigs,
        handle_describe_configs
    );
    route!(ApiKey::AlterConfigs, AlterConfigs, handle_alter_configs);
    route!(
        ApiKey::IncrementalAlterConfigs,
        IncrementalAlterConfigs,
        handle_incremental_alter_configs
    );
    route!(
        ApiKey::DescribeCluster,
        DescribeCluster,
        handle_describe_cluster
    );
    route!(
        ApiKey::DescribeTopicPartitions,
        DescribeTopicPartitions,
        handle_describe_topic_partitions
    );
    route!(
        ApiKey::DescribeQuorum,
        DescribeQuorum,
        handle_describe_quorum
    );
    route!(
        ApiKey::UpdateFeatures,
        UpdateFeatures,
        handle_update_features
    );
    route!(ApiKey::DescribeAcls, DescribeAcls, handle_describe_acls);
    route!(ApiKey::CreateAcls, CreateAcls, handle_create_acls);
    route!(ApiKey::DeleteAcls, DeleteAcls, handle_delete_acls);
    use super::cluster_apis as cluster;
    route!(
        ApiKey::ElectLeaders,
        ElectLeaders,
        cluster::handle_elect_leaders
    );
    route!(
        ApiKey::AlterPartitionReassignments,
        AlterPartitionReassignments,
        cluster::handle_alter_partition_reassignments
    );
    route!(
        ApiKey::ListPartitionReassignments,
        ListPartitionReassignments,
        cluster::handle_list_partition_reassignments
    );
    route!(
        ApiKey::DescribeClientQuotas,
        DescribeClientQuotas,
        cluster::handle_describe_client_quotas
    );
    route!(
        ApiKey::AlterClientQuotas,
        AlterClientQuotas,
        cluster::handle_alter_client_quotas
    );
    route!(
        ApiKey::DescribeUserScramCredentials,
        DescribeUserScramCredentials,
        cluster::handle_describe_user_scram_credentials
    );
    route!(
        ApiKey::AlterUserScramCredentials,
        AlterUserScramCredentials,
        cluster::handle_alter_user_scram_credentials
    );
    route!(
        ApiKey::ListConfigResources,
        ListConfigResources,
        cluster::handle_list_config_resources
    );
    route!(
        ApiKey::UnregisterBroker,
        UnregisterBroker,
        cluster::handle_unregister_broker
    );
}

// ---------------------------------------------------------------------------------------------
// ACLs (Kafka's `AclApis`). Without an authorizer every ACL request is answered
// SECURITY_DISABLED with Kafka's message, so admin tools report that ACLs are off rather than
// that the API is missing. With one, DescribeAcls reads this broker's image and Create/Delete
// go to the active controller. Who may call them (ALTER / DESCRIBE on the cluster) is checked
// by the authorization gate before these handlers run.

const NO_AUTHORIZER: &str = "No Authorizer is configured on the broker";
const NO_AUTHORIZER_CONFIGURED: &str = "No Authorizer is configured.";

fn acl_filter(
    resource_type: i8,
    resource_name: Option<String>,
    pattern_type: i8,
    principal: Option<String>,
    host: Option<String>,
    operation: i8,
    permission: i8,
) -> crate::authorization::acls::AclFilter {
    crate::authorization::acls::AclFilter {
        resource_type,
        resource_name,
        pattern_type,
        principal,
        host,
        operation,
        permission,
    }
}

/// What Kafka's `DescribeAclsRequest` checks while parsing, before any authorizer: at v0 a
/// pattern type ANY means LITERAL and anything else but LITERAL is refused; a filter with an
/// UNKNOWN (0) resource type, pattern type, operation or permission is refused. Refused: the
/// connection closes (Kafka fails the parse), with the reason.
pub fn describe_acls_parse(version: i16, req: &mut DescribeAclsRequest) -> Result<(), String> {
    const UNKNOWN: i8 = 0;
    const ANY: i8 = 1;
    const LITERAL: i8 = 3;
    if version == 0 {
        match req.pattern_type_filter {
            ANY => req.pattern_type_filter = LITERAL,
            LITERAL => {}
            other => {
                return Err(format!(
                    "DescribeAcls v0 cannot carry pattern type {other} (only LITERAL)"
                ))
            }
        }
    }
    if [
        req.pattern_type_filter,
        req.resource_type_filter,
        req.permission_type,
        req.operation,
    ]
    .contains(&UNKNOWN)
    {
        return Err("DescribeAcls filter contains UNKNOWN elements".to_string());
    }
    Ok(())
}

async fn handle_describe_acls(
    apis: &MetadataApis,
    ctx: &RequestContext,
    mut req: DescribeAclsRequest,
) -> HandlerOutcome {
    use m::describe_acls_response::{AclDescription, DescribeAclsResource};
    if let Err(reason) = describe_acls_parse(ctx.api_version, &mut req) {
        return HandlerOutcome::Close(reason);
    }
    if !apis.authz.enabled() {
        ctx.record_error(SECURITY_DISABLED);
        return respond(ResponseBody::DescribeAcls(DescribeAclsResponse {
            error_code: SECURITY_DISABLED,
            error_message: Some(NO_AUTHORIZER.to_string()),
            ..Default::default()
        }));
    }
    let filter = acl_filter(
        req.resource_type_filter,
        req.resource_name_filter,
        req.pattern_type_filter,
        req.principal_filter,
        req.host_filter,
        req.operation,
        req.permission_type,
    );
    if let Some(message) = filter.unknown_part() {
        ctx.record_error(INVALID_REQUEST);
        return respond(ResponseBody::DescribeAcls(DescribeAclsResponse {
            error_code: INVALID_REQUEST,
            error_message: Some(message.to_string()),
            ..Default::default()
        }));
    }
    let image = apis.snapshot();
    // One entry per resource pattern, its ACLs under it (Kafka's `aclsResources`).
    let mut by_resource: BTreeMap<(i8, String, i8), Vec<AclDescription>> = BTreeMap::new();
    for (_, acl) in image.acls.iter().filter(|(_, a)| filter.matches(a)) {
        by_resource
            .entry((
                acl.resource_type,
                acl.resource_name.clone(),
                acl.pattern_type,
            ))
            .or_default()
            .push(AclDescription {
                principal: acl.principal.clone(),
                host: acl.host.clone(),
                operation: acl.operation,
                permission_type: acl.permission,
                ..Default::default()
            });
    }
    let resources = by_resource
        .into_iter()
        .map(
            |((resource_type, resource_name, pattern_type), acls)| DescribeAclsResource {
                resource_type,
                resource_name,
                pattern_type,
                acls,
                ..Default::default()
            },
        )
        .collect();
    respond(ResponseBody::DescribeAcls(DescribeAclsResponse {
        resources,
        ..Default::default()
    }))
}

async fn handle_create_acls(
    apis: &MetadataApis,
    ctx: &RequestContext,
    req: CreateAclsRequest,
) -> HandlerOutcome {
    use m::create_acls_response::AclCreationResult;
    let result = |e: ApiError| {
        ctx.record_error(e.code);
        AclCreationResult {
            error_code: e.code,
            error_message: e.message,
            ..Default::default()
        }
    };
    if !apis.authz.enabled() {
        let results = req
            .creations
            .iter()
            .map(|_| result(ApiError::new(SECURITY_DISABLED, NO_AUTHORIZER_CONFIGURED)))
            .collect();
        return respond(ResponseBody::CreateAcls(CreateAclsResponse {
            results,
            ..Default::default()
        }));
    }
    let acls: Vec<crate::authorization::acls::StandardAcl> = req
        .creations
        .into_iter()
        .map(|c| crate::authorization::acls::StandardAcl {
            resource_type: c.resource_type,
            resource_name: c.resource_name,
            pattern_type: c.resource_pattern_type,
            principal: c.principal,
            host: c.host,
            operation: c.operation,
            permission: c.permission_type,
        })
        .collect();
    let n = acls.len();
    let rows = if n == 0 {
        Vec::new()
    } else {
        match apis.ask(cm::CreateAcls { acls }, DEFAULT_TIMEOUT_MS).await {
            Ok(rows) if rows.len() == n => rows,
            // An inactive controller answers nothing.
            Ok(_) => vec![ApiError::code(NOT_CONTROLLER); n],
            Err(code) => vec![ApiError::code(code); n],
        }
    };
    respond(ResponseBody::CreateAcls(CreateAclsResponse {
        results: rows.into_iter().map(result).collect(),
        ..Default::default()
    }))
}

async fn handle_delete_acls(
    apis: &MetadataApis,
    ctx: &RequestContext,
    req: DeleteAclsRequest,
) -> HandlerOutcome {
    use m::delete_acls_response::{DeleteAclsFilterResult, DeleteAclsMatchingAcl};
    let failed = |e: ApiError| {
        ctx.record_error(e.code);
        DeleteAclsFilterResult {
            error_code: e.code,
            error_message: e.message,
            ..Default::default()
        }
    };
    if !apis.authz.enabled() {
        let filter_results = req
            .filters
            .iter()
            .map(|_| failed(ApiError::new(SECURITY_DISABLED, NO_AUTHORIZER_CONFIGURED)))
            .collect();
        return respond(ResponseBody::DeleteAcls(DeleteAclsResponse {
            filter_results,
            ..Default::default()
        }));
    }
    let filters: Vec<_> = req
        .filters
        .into_iter()
        .map(|f| {
            acl_filter(
                f.resource_type_filter,
                f.resource_name_filter,
                f.pattern_type_filter,
                f.principal_filter,
                f.host_filter,
                f.operation,
                f.permission_type,
            )
        })
        .collect();
    let n = filters.len();
    let rows = if n == 0 {
        Vec::new()
    } else {
        match apis
            .ask(cm::DeleteAcls { filters }, DEFAULT_TIMEOUT_MS)
            .await
        {
            Ok(rows) if rows.len() == n => rows,
            Ok(_) => vec![Err(ApiError::code(NOT_CONTROLLER)); n],
            Err(code) => vec![Err(ApiError::code(code)); n],
        }
    };
    let filter_results = rows
        .into_iter()
        .map(|row| match row {
            Err(e) => failed(e),
            Ok(acls) => DeleteAclsFilterResult {
                matching_acls: acls
                    .into_iter()
                    .map(|a| DeleteAclsMatchingAcl {
                        resource_type: a.resource_type,
                        resource_name: a.resource_name,
                        pattern_type: a.pattern_type,
                        principal: a.principal,
                        host: a.host,
                        operation: a.operation,
                        permission_type: a.permission,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            },
        })
        .collect();
    respond(ResponseBody::DeleteAcls(DeleteAclsResponse {
        filter_results,
        ..Default::default()
    }))
}

// ---------------------------------------------------------------------------------------------
// Metadata

/// The broker's endpoint on the listener the request came in on (Kafka answers with the
/// endpoints of the same listener name).
fn endpoint_on<'a>(
    b: &'a crate::metadata::core::BrokerRegistration,
    listener: &str,
) -> Option<&'a kactor_protocol::metadata::register_broker_record::BrokerEndpoint> {
    b.listeners.iter().find(|e| e.name == listener)
}

/// Kafka reports a random live broker as the "controller" to clients in KRaft mode and
/// forwards their admin requests to the active controller; with a deterministic choice (the
/// lowest live id) clients see a stable value. kactor does not forward admin requests yet
/// (Envelope), so with several voters it names the Raft leader's broker when that broker is
/// live: the admin client then sends CreateTopics and the like straight to the node whose
/// controller is active.
fn client_facing_controller(apis: &MetadataApis, image: &MetadataImage) -> i32 {
    let leader = apis.quorum.as_ref().and_then(|q| *q.leader.borrow());
    if let Some(id) = leader.filter(|id| image.brokers.get(id).is_some_and(|b| !b.fenced)) {
        return id;
    }
    image
        .brokers
        .values()
        .find(|b| !b.fenced)
        .map_or(-1, |b| b.id)
}

fn metadata_partitions(
    t: &TopicImage,
    image: &MetadataImage,
    version: i16,
) -> Vec<m::metadata_response::MetadataResponsePartition> {
    t.partitions
        .iter()
        .map(|(index, p)| {
            let leader_alive = image.brokers.get(&p.leader).is_some_and(|b| !b.fenced);
            m::metadata_response::MetadataResponsePartition {
                error_code: if leader_alive {
                    0
                } else {
                    LEADER_NOT_AVAILABLE
                },
                partition_index: *index,
                leader_id: if leader_alive { p.leader } else { -1 },
                leader_epoch: if version >= 7 { p.leader_epoch } else { -1 },
                replica_nodes: p.replicas.clone(),
                isr_nodes: p.isr.clone(),
                offline_replicas: Vec::new(),
                ..Default::default()
            }
        })
        .collect()
}

fn metadata_topic(
    t: &TopicImage,
    image: &MetadataImage,
    version: i16,
    with_ops: bool,
) -> m::metadata_response::MetadataResponseTopic {
    m::metadata_response::MetadataResponseTopic {
        error_code: 0,
        name: Some(t.name.clone()),
        topic_id: if version >= 10 { t.id } else { Uuid::ZERO },
        is_internal: version >= 1 && crate::metadata::is_internal_topic(&t.name),
        partitions: metadata_partitions(t, image, version),
        topic_authorized_operations: if version >= 8 && with_ops {
            authorized_operations(ResourceType::Topic)
        } else {
            AUTHORIZED_OPERATIONS_OMITTED
        },
        ..Default::default()
    }
}

/// How long a Metadata request that auto-creates topics waits for the creation before
/// answering. Kafka 4.4 answers UNKNOWN_TOPIC_OR_PARTITION at once (checked against the
/// reference broker) and the client asks again after its back-off (`retry.backoff.ms` /
/// librdkafka's fast leader query: 100 ms by default, growing);
/// a single node commits a creation in one metadata-log fsync plus the new log's files (1-3 ms
/// idle, up to a few tens of ms on a loaded disk), so waiting lets the first answer already
/// carry the leader: the same answer Kafka gives a Metadata request arriving a moment later.
/// Kept well under the clients' back-off, so that a creation slower than this costs a client
/// little more than Kafka's immediate answer would. Past the bound the answer is Kafka's
/// UNKNOWN_TOPIC_OR_PARTITION and the creation goes on in the background.
pub const AUTO_CREATE_WAIT: Duration = Duration::from_millis(50);

/// How long an auto-creation may stay in flight: past it the names may be sent again (the
/// controller channel bounds a remote request itself; this also bounds a local controller).
const AUTO_CREATE_GIVE_UP: Duration = Duration::from_secs(60);

/// Names of an auto-creation under way; they leave the in-flight set however it ends.
struct InFlight {
    set: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
    names: Vec<String>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut set = self
            .set
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for name in &self.names {
            set.remove(name);
        }
    }
}

/// Asks the active controller to create `names` with the broker defaults and waits (at most
/// `bound`) until the served image holds the result (on a broker, that is once this broker
/// hosts the partitions it leads, so the Produce the answer invites finds them); returns that
/// image, or None if the wait ran out or the creation failed.
///
/// The active controller may be in another process (a broker-only node, or a combined node
/// that is not the Raft leader), so the request goes through the broker's topic-creation
/// channel, as Kafka's `AutoTopicCreationManager` sends CreateTopics over a controller channel.
async fn auto_create(
    apis: &MetadataApis,
    bound: Duration,
    names: Vec<String>,
) -> Option<Arc<MetadataImage>> {
    // Only the names no other request is creating right now; the rest are waited for.
    let to_send: Vec<String> = {
        let mut in_flight = apis
            .auto_create_in_flight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        names
            .iter()
            .filter(|n| in_flight.insert((*n).clone()))
            .cloned()
            .collect()
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let sent = to_send.clone();
    if !to_send.is_empty() {
        let request = cm::CreateTopics {
            topics: to_send
                .iter()
                .map(|name| cr::CreatableTopic {
                    name: name.clone(),
                    num_partitions: -1,
                    replication_factor: -1,
                    ..Default::default()
                })
                .collect(),
            validate_only: false,
        };
        let guard = InFlight {
            set: apis.auto_create_in_flight.clone(),
            names: to_send,
        };
        let channel = apis.topic_channel.clone();
        let controller = apis.controller.clone();
        // Spawned, so the creation completes (and its names leave the in-flight set) even
        // when this request stops waiting for it.
        actix::spawn(async move {
            let _guard = guard;
            let send = async move {
                match (channel, controller) {
                    (Some(channel), _) => channel.send(request).await,
                    (None, Some(controller)) => controller.send(request).await,
                    (None, None) => Ok(Err(ControllerError::NotController)),
                }
            };
            let reply = tokio::time::timeout(AUTO_CREATE_GIVE_UP, send)
                .await
                .unwrap_or(Ok(Err(ControllerError::NotController)));
            let _ = tx.send(reply);
        });
    } else {
        drop(tx);
    }
    let mut image = apis.image.clone();
    let wait = async move {
        // Wait for the names created (or found existing) by this request's CreateTopics, or,
        // when another request is creating them, for all of them; a name the controller
        // refused (a replication factor above the broker count, ...) or a creation that
        // failed as a whole (no active controller) is not waited for.
        let mut expected = names;
        match rx.await {
            Ok(Ok(Ok(committed))) => {
                let failed: std::collections::HashSet<&str> = committed
                    .response
                    .iter()
                    .filter(|r| !matches!(r.error.code, NONE | TOPIC_ALREADY_EXISTS))
                    .map(|r| r.name.as_str())
                    .collect();
                expected.retain(|n| !failed.contains(n.as_str()));
                if committed.offset >= 0 && !wait_for_offset(&mut image, committed.offset).await {
                    return None;
                }
            }
            Ok(_) => expected.retain(|n| !sent.contains(n)),
            // Nothing sent by this request: another one is creating them.
            Err(_) => {}
        }
        if expected.is_empty() {
            return None;
        }
        // Committed by a controller elsewhere (no offset comes back) or by another request:
        // wait for the topics themselves to reach this broker's image.
        let arrived = image
            .wait_for(|img| expected.iter().all(|n| img.topics.get_by_name(n).is_some()))
            .await
            .is_ok();
        if !arrived {
            return None;
        }
        let snapshot = image.borrow().clone();
        Some(snapshot)
    };
    tokio::time::timeout(bound, wait).await.ok().flatten()
}

async fn handle_metadata(
    apis: &MetadataApis,
    auto_create_wait: Duration,
    ctx: &RequestContext,
    req: MetadataRequest,
) -> HandlerOutcome {
    let v = ctx.api_version;
    let image = apis.snapshot();
    if image
        .brokers
        .get(&apis.node_id)
        .is_some_and(|b| b.shut_down())
    {
        // Let go by the controller, this broker is fenced while its listeners still serve for
        // a few milliseconds (Kafka stops processing requests right after too, and can also
        // answer in between: 2 such answers in 6 stops of Kafka 4.4). An answer now
        // would leave this broker out (on a single node: list no broker at all), and
        // librdkafka (2.16) drops every broker a Metadata answer leaves out, bootstrap ones
        // included, and never connects again (issue #30). The connection closes instead, as
        // the shutdown is about to close it.
        return HandlerOutcome::Close("Metadata asked of a broker shutting down".into());
    }
    let listener = &*ctx.connection.listener_name;
    let brokers = image
        .brokers
        .values()
        .filter(|b| !b.fenced)
        .filter_map(|b| {
            let e = endpoint_on(b, listener)?;
            Some(m::metadata_response::MetadataResponseBroker {
                node_id: b.id,
                host: e.host.clone(),
                port: e.port as i32,
                rack: if v >= 1 { b.rack.clone() } else { None },
                ..Default::default()
            })
        })
        .collect();
    let with_ops = req.include_topic_authorized_operations;
    // v0 asks for all topics with an empty list; v1+ with null.
    let all = match &req.topics {
        None => true,
        Some(t) => t.is_empty() && v == 0,
    };
    let mut topics = Vec::new();
    if all {
        for id in image.topics.by_name.values() {
            if let Some(t) = image.topics.get(id) {
                topics.push(metadata_topic(t, &image, v, with_ops));
            }
        }
    } else {
        let allow_auto_create =
            (v < 4 || req.allow_auto_topic_creation) && apis.auto_create_topics_enable;
        let mut to_create = Vec::new();
        // Kafka takes the requested topics as a set: one named twice is answered once.
        let mut asked = std::collections::HashSet::new();
        for rt in req.topics.as_deref().unwrap_or_default() {
            if !asked.insert((rt.topic_id, rt.name.clone())) {
                continue;
            }
            let by_id = v >= 10 && rt.topic_id != Uuid::ZERO;
            let found = if by_id {
                image.topics.get(&rt.topic_id)
            } else {
                rt.name.as_deref().and_then(|n| image.topics.get_by_name(n))
            };
            if let Some(t) = found {
                topics.push(metadata_topic(t, &image, v, with_ops));
                continue;
            }
            let (code, name) = if by_id {
                (UNKNOWN_TOPIC_ID, None)
            } else {
                let name = rt.name.clone().unwrap_or_default();
                if validate_topic_name(&name).is_err() {
                    (INVALID_TOPIC_EXCEPTION, Some(name))
                } else if allow_auto_create {
                    // Kafka 4.4 (KRaft) answers an auto-created topic UNKNOWN_TOPIC_OR_PARTITION
                    // while the creation is in flight (LEADER_NOT_AVAILABLE was ZooKeeper mode's
                    // answer); clients retry either way.
                    to_create.push(name.clone());
                    (UNKNOWN_TOPIC_OR_PARTITION, Some(name))
                } else {
                    (UNKNOWN_TOPIC_OR_PARTITION, Some(name))
                }
            };
            topics.push(m::metadata_response::MetadataResponseTopic {
                error_code: code,
                // An unknown id is echoed (Kafka's `unknownTopicIdsTopicMetadata`).
                topic_id: if by_id { rt.topic_id } else { Uuid::ZERO },
                name: if v < 12 {
                    Some(name.unwrap_or_default())
                } else {
                    name
                },
                // Kafka sets the bit set on every row it looked up by name, found or not.
                topic_authorized_operations: if v >= 8 && with_ops && !by_id {
                    authorized_operations(ResourceType::Topic)
                } else {
                    AUTHORIZED_OPERATIONS_OMITTED
                },
                ..Default::default()
            });
        }
        if !to_create.is_empty() {
            let requested = to_create.clone();
            if let Some(created) = auto_create(apis, auto_create_wait, to_create).await {
                // The topics are in the image now: answer as a Metadata request arriving a
                // moment later would be answered (a partition may still lack a live leader).
                for t in topics.iter_mut() {
                    let Some(name) = t
                        .name
                        .as_deref()
                        .filter(|n| requested.iter().any(|r| r == n))
                    else {
                        continue;
                    };
                    if let Some(found) = created.topics.get_by_name(name) {
                        *t = metadata_topic(found, &created, v, with_ops);
                    }
                }
            }
        }
    }
    respond(ResponseBody::Metadata(MetadataResponse {
        throttle_time_ms: 0,
        brokers,
        cluster_id: if v >= 2 {
            Some(apis.cluster_id.clone())
        } else {
            None
        },
        controller_id: if v >= 1 {
            client_facing_controller(apis, &image)
        } else {
            -1
        },
        topics,
        cluster_authorized_operations: if (8..=10).contains(&v)
            && req.include_cluster_authorized_operations
        {
            authorized_operations(ResourceType::Cluster)
        } else {
            AUTHORIZED_OPERATIONS_OMITTED
        },
        error_code: 0,
        ..Default::default()
    }))
}

// ---------------------------------------------------------------------------------------------
// CreateTopics / DeleteTopics / CreatePartitions

async fn handle_create_topics(
    apis: &MetadataApis,
    ctx: &RequestContext,
    req: CreateTopicsRequest,
) -> HandlerOutcome {
    let v = ctx.api_version;
    let topics: Vec<cr::CreatableTopic> = req
        .topics
        .iter()
        .map(|t| cr::CreatableTopic {
            name: t.name.clone(),
            num_partitions: t.num_partitions,
            replication_factor: t.replication_factor,
            assignments: t
                .assignments
                .iter()
                .map(|a| (a.partition_index, a.broker_ids.clone()))
                .collect(),
            configs: t
                .configs
                .iter()
                .map(|c| (c.name.clone(), c.value.clone()))
                .collect(),
        })
        .collect();
    let results = apis
        .ask(
            cm::CreateTopics {
                topics,
                validate_only: req.validate_only,
            },
            req.timeout_ms,
        )
        .await;
    let out: Vec<m::create_topics_response::CreatableTopicResult> = per_item(
        results,
        &req.topics,
        |r| {
            m::create_topics_response::CreatableTopicResult {
                name: r.name,
                topic_id: if v >= 7 { r.topic_id } else { Uuid::ZERO },
                error_code: r.error.code,
                error_message: if v >= 1 { r.error.message } else { None },
                num_partitions: if v >= 5 { r.num_partitions } else { -1 },
                replication_factor: if v >= 5 { r.replication_factor } else { -1 },
                // Kafka sends an empty array, not null, on error rows too.
                configs: (v >= 5).then(|| {
                    r.configs
                        .into_iter()
                        .map(|c| m::create_topics_response::CreatableTopicConfigs {
                            name: c.name,
                            value: c.value,
                            read_only: c.read_only,
                            config_source: c.config_source,
                            is_sensitive: c.is_sensitive,
                            ..Default::default()
                        })
                        .collect()
                }),
                ..Default::default()
            }
        },
        |t, code| m::create_topics_response::CreatableTopicResult {
            name: t.name.clone(),
            error_code: code,
            configs: (v >= 5).then(Vec::new),
            ..Default::default()
        },
    );
    record_errors(ctx, out.iter().map(|r| r.error_code));
    respond(ResponseBody::CreateTopics(CreateTopicsResponse {
        throttle_time_ms: 0,
        topics: out,
        ..Default::default()
    }))
}

async fn handle_delete_topics(
    apis: &MetadataApis,
    ctx: &RequestContext,
    req: DeleteTopicsRequest,
) -> HandlerOutcome {
    let v = ctx.api_version;
    // v6 names topics by name or id (exactly one); earlier versions by name only. As Kafka's
    // ControllerApis.deleteTopics: a malformed entry, and each name or id given more than once,
    // gets one INVALID_REQUEST row and is not deleted. (Kafka shuffles the rows, so their
    // order carries no meaning.)
    let row = |name: Option<String>, topic_id: Uuid, message: &str| {
        m::delete_topics_response::DeletableTopicResult {
            name,
            topic_id,
            error_code: INVALID_REQUEST,
            error_message: Some(message.into()),
            ..Default::default()
        }
    };
    let mut given = Vec::new();
    let mut out = Vec::new();
    if v >= 6 {
        for t in &req.topics {
            match (&t.name, t.topic_id != Uuid::ZERO) {
                (Some(n), false) => given.push(cr::TopicRef::Name(n.clone())),
                (None, true) => given.push(cr::TopicRef::Id(t.topic_id)),
                (None, false) => out.push(row(
                    None,
                    Uuid::ZERO,
                    "Neither topic name nor id were specified.",
                )),
                (Some(n), true) => out.push(row(
                    Some(n.clone()),
                    t.topic_id,
                    "You may not specify both topic name and topic id.",
                )),
            }
        }
    } else {
        given.extend(req.topic_names.iter().cloned().map(cr::TopicRef::Name));
    }
    let mut refs = Vec::new();
    let mut duplicates = Vec::new();
    for (i, r) in given.iter().enumerate() {
        let repeated = given.iter().filter(|o| *o == r).count() > 1;
        if !repeated {
            refs.push(r.clone());
        } else if !given[..i].contains(r) {
            duplicates.push(r.clone());
        }
    }
    for r in duplicates {
        out.push(match r {
            cr::TopicRef::Name(n) => row(Some(n), Uuid::ZERO, "Duplicate topic name."),
            cr::TopicRef::Id(id) => row(None, id, "Duplicate topic id."),
        });
    }
    let answer = apis
        .ask(
            cm::DeleteTopics {
                topics: refs.clone(),
            },
            req.timeout_ms,
        )
        .await;
    out.extend(per_item(
        answer,
        refs,
        |r| m::delete_topics_response::DeletableTopicResult {
            name: if v >= 6 {
                r.name
            } else {
                Some(r.name.unwrap_or_default())
            },
            topic_id: if v >= 6 { r.topic_id } else { Uuid::ZERO },
            error_code: r.error.code,
            error_message: if v >= 5 { r.error.message } else { None },
            ..Default::default()
        },
        |r, code| {
            let (name, topic_id) = match r {
                cr::TopicRef::Name(n) => (Some(n), Uuid::ZERO),
                cr::TopicRef::Id(id) => (None, id),
            };
            m::delete_topics_response::DeletableTopicResult {
                name: if v >= 6 {
                    name
                } else {
                    Some(name.unwrap_or_default())
                },
                topic_id: if v >= 6 { topic_id } else { Uuid::ZERO },
                error_code: code,
                ..Default::default()
            }
        },
    ));
    if v < 5 {
        for r in &mut out {
            r.error_message = None;
        }
    }
    record_errors(ctx, out.iter().map(|r| r.error_code));
    respond(ResponseBody::DeleteTopics(DeleteTopicsResponse {
        throttle_time_ms: 0,
        responses: out,
        ..Default::default()
    }))
}

async fn handle_create_partitions(
    apis: &MetadataApis,
    ctx: &RequestContext,
    req: CreatePartitionsRequest,
) -> HandlerOutcome {
    let topics: Vec<cr::CreatePartitionsTopic> = req
        .topics
        .iter()
        .map(|t| cr::CreatePartitionsTopic {
            name: t.name.clone(),
            count: t.count,
            assignments: t
                .assignments
                .as_ref()
                .map(|a| a.iter().map(|x| x.broker_ids.clone()).collect()),
        })
        .collect();
    let answer = apis
        .ask(
            cm::CreatePartitions {
                topics,
                validate_only: req.validate_only,
            },
            req.timeout_ms,
        )
        .await;
    let results: Vec<m::create_partitions_response::CreatePartitionsTopicResult> = per_item(
        answer,
        &req.topics,
        |r| m::create_partitions_response::CreatePartitionsTopicResult {
            name: r.name,
            error_code: r.error.code,
            error_message: r.error.message,
            ..Default::default()
        },
        |t, code| m::create_partitions_response::CreatePartitionsTopicResult {
            name: t.name.clone(),
            error_code: code,
            ..Default::default()
        },
    );
    record_errors(ctx, results.iter().map(|r| r.error_code));
    respond(ResponseBody::CreatePartitions(CreatePartitionsResponse {
        throttle_time_ms: 0,
        results,
        ..Default::default()
    }))
}

// ---------------------------------------------------------------------------------------------
// Configs

/// Kafka's `ConfigType` id of a topic config.
fn config_type_id(kind: ConfigType) -> i8 {
    match kind {
        ConfigType::Boolean => 1,
        ConfigType::Enum(_) => 2,
        ConfigType::Int { .. } => 3,
        ConfigType::Long { .. } => 5,
        ConfigType::Double { .. } => 6,
        ConfigType::List(_) | ConfigType::AnyList => 7,
    }
}

fn describe_topic(
    apis: &MetadataApis,
    image: &MetadataImage,
    name: &str,
    keys: Option<&[String]>,
    synonyms: bool,
    v: i16,
) -> Result<Vec<m::describe_configs_response::DescribeConfigsResourceResult>, (i16, Option<String>)>
{
    // Kafka's ConfigHelper checks the name first (Topic.validate), then that the topic
    // exists; that answer carries an empty message, not null.
    if let Err(e) = validate_topic_name(name) {
        return Err((e.code, e.message));
    }
    if image.topics.get_by_name(name).is_none() {
        return Err((UNKNOWN_TOPIC_OR_PARTITION, Some(String::new())));
    }
    let topic = image.config_overrides(&ConfigResource::topic(name));
    let dyn_broker = image.config_overrides(&ConfigResource::broker(&apis.node_id.to_string()));
    let dyn_default = image.config_overrides(&ConfigResource::broker(""));
    let stat = apis.static_broker_values();
    let layers = ConfigLayers {
        topic: &topic,
        dynamic_broker: &dyn_broker,
        dynamic_default_broker: &dyn_default,
        static_broker: &stat,
    };
    let mut out = Vec::new();
    for def in topic_configs::TOPIC_CONFIGS {
        if keys.is_some_and(|k| !k.iter().any(|k| k == def.name)) {
            continue;
        }
        let r = topic_configs::resolve(def, layers);
        let mut syn = Vec::new();
        if synonyms && v >= 1 {
            if let Some(val) = topic.get(def.name) {
                syn.push((
                    def.name.to_string(),
                    Some(val.clone()),
                    source::DYNAMIC_TOPIC_CONFIG,
                ));
            }
            let mut broker = Vec::new();
            for (map, src) in [
                (&dyn_broker, source::DYNAMIC_BROKER_CONFIG),
                (&dyn_default, source::DYNAMIC_DEFAULT_BROKER_CONFIG),
                (&stat, source::STATIC_BROKER_CONFIG),
            ] {
                for (s, _) in def.synonyms {
                    if let Some(val) = map.get(*s) {
                        broker.push((s.to_string(), Some(val.clone()), src));
                    }
                }
            }
            // With unit variants (ms / minutes / hours) only the coarsest has a default in
            // Kafka (`log.retention.hours=168`).
            if let Some((s, mult)) = def.synonyms.last() {
                let value = match def.default.parse::<i64>() {
                    Ok(n) if *mult > 1 => (n / mult).to_string(),
                    _ => def.default.to_string(),
                };
                broker.push((s.to_string(), Some(value), source::DEFAULT_CONFIG));
            }
            if let Some((primary, _)) = def.synonyms.first() {
                syn.extend(drop_until_own_name(primary, broker));
            }
        }
        out.push(
            m::describe_configs_response::DescribeConfigsResourceResult {
                name: def.name.to_string(),
                value: Some(r.value),
                read_only: false,
                config_source: if v >= 1 { r.source } else { -1 },
                is_sensitive: false,
                synonyms: syn
                    .into_iter()
                    .map(|(name, value, source)| {
                        m::describe_configs_response::DescribeConfigsSynonym {
                            name,
                            value,
                            source,
                            ..Default::default()
                        }
                    })
                    .collect(),
                config_type: if v >= 3 { config_type_id(def.kind) } else { 0 },
                documentation: None,
                ..Default::default()
            },
        );
    }
    Ok(out)
}

/// A group's configs (resource type 32): the group's own value (DYNAMIC_GROUP_CONFIG), else
/// the broker key that supplies its default, as set at start-up (STATIC_BROKER_CONFIG) or
/// Kafka's default (DEFAULT_CONFIG); synonyms list the same layers in that order. Any group
/// name can be described, whether or not the group exists, as in Kafka.
fn describe_group(
    apis: &MetadataApis,
    image: &MetadataImage,
    name: &str,
    keys: Option<&[String]>,
    (synonyms, docs): (bool, bool),
    v: i16,
) -> Result<Vec<m::describe_configs_response::DescribeConfigsResourceResult>, (i16, Option<String>)>
{
    if name.is_empty() {
        return Err((INVALID_REQUEST, Some("Group name must not be empty".into())));
    }
    let group = image.config_overrides(&ConfigResource::group(name));
    let stat = apis.static_broker_values();
    let mut out = Vec::new();
    for def in GROUP_CONFIGS {
        if keys.is_some_and(|k| !k.iter().any(|k| k == def.name)) {
            continue;
        }
        let synonym_name = def.broker_key.unwrap_or(def.name);
        let mut layers = Vec::new();
        if let Some(val) = group.get(def.name) {
            layers.push((def.name, val.clone(), source::DYNAMIC_GROUP_CONFIG));
        }
        if def.broker_key.is_some_and(|k| stat.contains_key(k)) {
            layers.push((
                synonym_name,
                broker_default(def, &stat),
                source::STATIC_BROKER_CONFIG,
            ));
        }
        layers.push((
            synonym_name,
            def.default.to_string(),
            source::DEFAULT_CONFIG,
        ));
        let (_, value, src) = layers[0].clone();
        out.push(
            m::describe_configs_response::DescribeConfigsResourceResult {
                name: def.name.to_string(),
                value: Some(value),
                read_only: false,
                config_source: if v >= 1 { src } else { -1 },
                is_sensitive: false,
                synonyms: if synonyms && v >= 1 {
                    layers
                        .into_iter()
                        .map(|(name, value, source)| {
                            m::describe_configs_response::DescribeConfigsSynonym {
                                name: name.to_string(),
                                value: Some(value),
                                source,
                                ..Default::default()
                            }
                        })
                        .collect()
                } else {
                    Vec::new()
                },
                config_type: if v >= 3 { def.kind.type_id() } else { 0 },
                documentation: (v >= 3 && docs).then(|| def.doc.to_string()),
                ..Default::default()
            },
        );
    }
    Ok(out)
}

/// The broker-logger resource's name must be this node's id (Kafka's `ConfigHelper` wording).
fn check_logger_node(apis: &MetadataApis, name: &str) -> Result<(), (i16, Option<String>)> {
    let bad = |m: String| Err((INVALID_REQUEST, Some(m)));
    if name.is_empty() {
        return bad("Broker id must not be empty".into());
    }
    match name.parse::<i32>() {
        Err(_) => bad(format!("Broker id must be an integer, but it is: {name}")),
        Ok(id) if id != apis.node_id => bad(format!(
            "Unexpected broker id, expected {} but received {name}",
            apis.node_id
        )),
        Ok(_) => Ok(()),
    }
}

/// This node's loggers (resource type 8) with their levels, as Kafka reports them: source
/// DYNAMIC_BROKER_LOGGER_CONFIG, type UNKNOWN, no synonyms, an empty documentation; an empty
/// key list asks for all of them.
fn describe_broker_loggers(
    apis: &MetadataApis,
    loggers: &BrokerLoggers,
    name: &str,
    keys: Option<&[String]>,
    v: i16,
) -> Result<Vec<m::describe_configs_response::DescribeConfigsResourceResult>, (i16, Option<String>)>
{
    check_logger_node(apis, name)?;
    Ok(loggers
        .describe(keys)
        .into_iter()
        .map(
            |(logger, level)| m::describe_configs_response::DescribeConfigsResourceResult {
                name: logger,
                value: Some(level.to_string()),
                read_only: false,
                config_source: if v >= 1 {
                    source::DYNAMIC_BROKER_LOGGER_CONFIG
                } else {
                    -1
                },
                is_sensitive: false,
                config_type: 0,
                documentation: (v >= 3).then(String::new),
                ..Default::default()
            },
        )
        .collect())
}

/// A client metrics subscription's configs (resource type 16): all three keys, each the
/// subscription's own value (DYNAMIC_CLIENT_METRICS_CONFIG, listed as its one synonym) or
/// Kafka's default (DEFAULT_CONFIG, no synonym). Any name can be described, whether or not
/// anything is set for it, as in Kafka.
fn describe_client_metrics(
    image: &MetadataImage,
    name: &str,
    keys: Option<&[String]>,
    (synonyms, docs): (bool, bool),
    v: i16,
) -> Result<Vec<m::describe_configs_response::DescribeConfigsResourceResult>, (i16, Option<String>)>
{
    if name.is_empty() {
        return Err((
            INVALID_REQUEST,
            Some("Client metrics subscription name must not be empty".into()),
        ));
    }
    let set = image.config_overrides(&ConfigResource::client_metrics(name));
    let mut defs: Vec<_> = CLIENT_METRICS_CONFIGS
        .iter()
        .filter(|d| keys.is_none_or(|k| k.iter().any(|k| k == d.name)))
        .collect();
    defs.sort_by_key(|d| d.name);
    Ok(defs
        .into_iter()
        .map(|def| {
            let (value, src) = match set.get(def.name) {
                Some(v) => (v.clone(), source::DYNAMIC_CLIENT_METRICS_CONFIG),
                None => (def.default.to_string(), source::DEFAULT_CONFIG),
            };
            let listed = synonyms && v >= 1 && src == source::DYNAMIC_CLIENT_METRICS_CONFIG;
            m::describe_configs_response::DescribeConfigsResourceResult {
                name: def.name.to_string(),
                value: Some(value.clone()),
                read_only: false,
                config_source: if v >= 1 { src } else { -1 },
                is_sensitive: false,
                synonyms: listed
                    .then(|| m::describe_configs_response::DescribeConfigsSynonym {
                        name: def.name.to_string(),
                        value: Some(value),
                        source: src,
                        ..Default::default()
                    })
                    .into_iter()
                    .collect(),
                config_type: if v >= 3 { def.kind.type_id() } else { 0 },
                documentation: (v >= 3 && docs).then(|| def.doc.to_string()),
                ..Default::default()
            }
        })
        .collect())
}

/// Kafka lists a config's synonyms source by source and then drops every entry before the
/// first one named like the config itself (`ConfigHelper.configSynonyms`): describing
/// `log.retention.ms` with only the default `log.retention.hours=168` lists no synonym.
fn drop_until_own_name(
    name: &str,
    synonyms: Vec<(String, Option<String>, i8)>,
) -> Vec<(String, Option<String>, i8)> {
    synonyms
        .into_iter()
        .skip_while(|(n, _, _)| n != name)
        .collect()
}

/// A broker config's synonym family (Kafka's `DynamicBrokerConfig.brokerConfigSynonyms`): the
/// ms / minutes / hours variants that stand for the same topic default, else the key alone.
fn broker_synonym_family(name: &str) -> Vec<&str> {
    match topic_configs::topic_config_for_broker_synonym(name) {
        Some((def, _)) if def.synonyms.len() > 1 => def.synonyms.iter().map(|(s, _)| *s).collect(),
        _ => vec![name],
    }
}

/// How a broker quota config (dynamic only, no row in the static table) is described once set:
/// LONG, not secret, changeable, as Kafka types it from `DynamicConfig.Broker`.
fn broker_quota_entry(name: &str) -> Option<BrokerConfigEntry> {
    topic_configs::BROKER_QUOTA_CONFIGS
        .contains(&name)
        .then(|| BrokerConfigEntry {
            name: name.to_string(),
            value: None,
            source: source::DEFAULT_CONFIG,
            config_type: config_type_id(topic_configs::BROKER_QUOTA_CONFIG_TYPE),
            read_only: false,
            sensitive: false,
            synonyms: Vec::new(),
            documentation: None,
        })
}

fn describe_broker(
    apis: &MetadataApis,
    image: &MetadataImage,
    name: &str,
    keys: Option<&[String]>,
    synonyms: bool,
    v: i16,
) -> Result<Vec<m::describe_configs_response::DescribeConfigsResourceResult>, (i16, Option<String>)>
{
    let dyn_default = image.config_overrides(&ConfigResource::broker(""));
    let wanted = |n: &str| keys.is_none_or(|k| k.iter().any(|k| k == n));
    let result = |name: String,
                  value: Option<String>,
                  src: i8,
                  e: Option<&BrokerConfigEntry>,
                  syn: Vec<(String, Option<String>, i8)>| {
        // A secret (a password key, wherever its value came from) is never sent back, in the
        // entry or in its synonyms. A custom key (not in the config table) may be one too:
        // Kafka treats those as sensitive.
        let sensitive = e.is_none_or(|e| e.sensitive);
        m::describe_configs_response::DescribeConfigsResourceResult {
            name,
            value: if sensitive { None } else { value },
            read_only: e.is_some_and(|e| e.read_only),
            config_source: if v >= 1 { src } else { -1 },
            is_sensitive: sensitive,
            synonyms: if synonyms && v >= 1 {
                syn.into_iter()
                    .map(|(name, value, source)| {
                        m::describe_configs_response::DescribeConfigsSynonym {
                            name,
                            value: if sensitive { None } else { value },
                            source,
                            ..Default::default()
                        }
                    })
                    .collect()
            } else {
                Vec::new()
            },
            config_type: if v >= 3 {
                e.map_or(0, |e| e.config_type)
            } else {
                0
            },
            documentation: None,
            ..Default::default()
        }
    };
    if name.is_empty() {
        // The cluster-wide default entity lists only its dynamic values.
        return Ok(dyn_default
            .iter()
            .filter(|(k, _)| wanted(k))
            .map(|(k, val)| {
                let quota = broker_quota_entry(k);
                let e = apis
                    .broker_configs
                    .iter()
                    .find(|e| &e.name == k)
                    .or(quota.as_ref());
                result(
                    k.clone(),
                    Some(val.clone()),
                    source::DYNAMIC_DEFAULT_BROKER_CONFIG,
                    e,
                    vec![(
                        k.clone(),
                        Some(val.clone()),
                        source::DYNAMIC_DEFAULT_BROKER_CONFIG,
                    )],
                )
            })
            .collect());
    }
    // Kafka's ConfigHelper wording: a name that is no number, then one that is another id.
    let Ok(id) = name.parse::<i32>() else {
        return Err((
            INVALID_REQUEST,
            Some(format!("Broker id must be an integer, but it is: {name}")),
        ));
    };
    if id != apis.node_id {
        return Err((
            INVALID_REQUEST,
            Some(format!(
                "Unexpected broker id, expected {} or empty string, but received {name}",
                apis.node_id
            )),
        ));
    }
    let dyn_broker = image.config_overrides(&ConfigResource::broker(name));
    let mut out = Vec::new();
    for e in apis.broker_configs.iter().filter(|e| wanted(&e.name)) {
        let (value, src) = if let Some(v) = dyn_broker.get(&e.name) {
            (Some(v.clone()), source::DYNAMIC_BROKER_CONFIG)
        } else if let Some(v) = dyn_default.get(&e.name) {
            (Some(v.clone()), source::DYNAMIC_DEFAULT_BROKER_CONFIG)
        } else {
            (e.value.clone(), e.source)
        };
        // Kafka's order: every synonym of the family from each source in turn (dynamic broker,
        // dynamic default, then the static and default ones in `e.synonyms`).
        let mut syn = Vec::new();
        let family = broker_synonym_family(&e.name);
        for (map, src) in [
            (&dyn_broker, source::DYNAMIC_BROKER_CONFIG),
            (&dyn_default, source::DYNAMIC_DEFAULT_BROKER_CONFIG),
        ] {
            for s in &family {
                if let Some(v) = map.get(*s) {
                    syn.push((s.to_string(), Some(v.clone()), src));
                }
            }
        }
        syn.extend(e.synonyms.iter().cloned());
        let syn = drop_until_own_name(&e.name, syn);
        out.push(result(e.name.clone(), value, src, Some(e), syn));
    }
    // Custom keys someone stored (no entry in the table): listed as Kafka lists them, from the
    // broker's own entity first, then the cluster default, values withheld.
    let mut custom: BTreeMap<&String, (&String, i8)> = BTreeMap::new();
    for (map, src) in [
        (&dyn_default, source::DYNAMIC_DEFAULT_BROKER_CONFIG),
        (&dyn_broker, source::DYNAMIC_BROKER_CONFIG),
    ] {
        for (k, val) in map.iter() {
            if wanted(k) && !apis.broker_configs.iter().any(|e| &e.name == k) {
                custom.insert(k, (val, src));
            }
        }
    }
    for (k, (val, src)) in custom {
        let quota = broker_quota_entry(k);
        out.push(result(
            k.clone(),
            Some(val.clone()),
            src,
            quota.as_ref(),
            vec![(k.clone(), Some(val.clone()), src)],
        ));
    }
    Ok(out)
}

async fn handle_describe_configs(
    apis: &MetadataApis,
    ctx: &RequestContext,
    req: DescribeConfigsRequest,
) -> HandlerOutcome {
    let v = ctx.api_version;
    let image = apis.snapshot();
    let results = req
        .resources
        .iter()
        .map(|r| {
            let keys = r.configuration_keys.as_deref();
            let described = match r.resource_type {
                2 => describe_topic(
                    apis,
                    &image,
                    &r.resource_name,
                    keys,
                    req.include_synonyms,
                    v,
                ),
                4 => describe_broker(
                    apis,
                    &image,
                    &r.resource_name,
                    keys,
                    req.include_synonyms,
                    v,
                ),
                8 => match &apis.loggers {
                    Some(loggers) => {
                        describe_broker_loggers(apis, loggers, &r.resource_name, keys, v)
                    }
                    None => Err((INVALID_REQUEST, Some(MALFORMED_REQUEST.into()))),
                },
                16 => describe_client_metrics(
                    &image,
                    &r.resource_name,
                    keys,
                    (req.include_synonyms, req.include_documentation),
                    v,
                ),
                32 => describe_group(
                    apis,
                    &image,
                    &r.resource_name,
                    keys,
                    (req.include_synonyms, req.include_documentation),
                    v,
                ),
                // Kafka answers an unknown type with INVALID_REQUEST's generic message.
                _ => Err((INVALID_REQUEST, Some(MALFORMED_REQUEST.into()))),
            };
            let (code, msg, configs) = match described {
                // Kafka sends an empty message, not a null one, with success.
                Ok(c) => (0, Some(String::new()), c),
                Err((code, msg)) => (code, msg, Vec::new()),
            };
            ctx.record_error(code);
            m::describe_configs_response::DescribeConfigsResult {
                error_code: code,
                error_message: msg,
                resource_type: r.resource_type,
                resource_name: r.resource_name.clone(),
                configs,
                ..Default::default()
            }
        })
        .collect();
    respond(ResponseBody::DescribeConfigs(DescribeConfigsResponse {
        throttle_time_ms: 0,
        results,
        ..Default::default()
    }))
}

fn alter_results(
    res: Result<Vec<cr::AlterConfigsResourceResult>, i16>,
    requested: Vec<(i8, String)>,
) -> Vec<(i16, Option<String>, i8, String)> {
    per_item(
        res,
        requested,
        |r| {
            (
                r.error.code,
                r.error.message,
                r.resource_type,
                r.resource_name,
            )
        },
        |(t, n), code| (code, None, t, n),
    )
}

async fn handle_alter_configs(
    apis: &MetadataApis,
    ctx: &RequestContext,
    req: AlterConfigsRequest,
) -> HandlerOutcome {
    let requested = req
        .resources
        .iter()
        .map(|r| (r.resource_type, r.resource_name.clone()))
        .collect();
    let resources = req
        .resources
        .iter()
        .map(|r| cr::AlterConfigsResource {
            resource_type: r.resource_type,
            resource_name: r.resource_name.clone(),
            configs: r
                .configs
                .iter()
                .map(|c| (c.name.clone(), c.value.clone()))
                .collect(),
        })
        .collect();
    let res = apis
        .ask(
            cm::AlterConfigs {
                resources,
                validate_only: req.validate_only,
            },
            DEFAULT_TIMEOUT_MS,
        )
        .await;
    let responses = alter_results(res, requested)
        .into_iter()
        .map(|(code, msg, t, n)| {
            ctx.record_error(code);
            m::alter_configs_response::AlterConfigsResourceResponse {
                error_code: code,
                error_message: msg,
                resource_type: t,
                resource_name: n,
                ..Default::default()
            }
        })
        .collect();
    respond(ResponseBody::AlterConfigs(AlterConfigsResponse {
        throttle_time_ms: 0,
        responses,
        ..Default::default()
    }))
}

/// Kafka's default message of INVALID_REQUEST.
const MALFORMED_REQUEST: &str = "This most likely occurs because of a request being malformed \
     by the client library or the message was sent to an incompatible broker. See the broker \
     logs for more details.";

/// ConfigResource type BROKER_LOGGER.
const BROKER_LOGGER_TYPE: i8 = 8;

/// One broker-logger resource of an IncrementalAlterConfigs request, checked in Kafka's order
/// (`ConfigAdminManager.preprocess`, then `RuntimeLoggerManager`): repeated names, missing
/// values, the node id, then each operation.
fn alter_broker_loggers(
    apis: &MetadataApis,
    loggers: &BrokerLoggers,
    r: &m::incremental_alter_configs_request::AlterConfigsResource,
    validate_only: bool,
) -> Result<(), ApiError> {
    let mut names = std::collections::BTreeSet::new();
    if !r.configs.iter().all(|c| names.insert(c.name.as_str())) {
        return Err(ApiError::new(
            INVALID_REQUEST,
            "Error due to duplicate config keys",
        ));
    }
    let null: Vec<&str> = r
        .configs
        .iter()
        .filter(|c| c.config_operation != 1 && c.value.is_none())
        .map(|c| c.name.as_str())
        .collect();
    if !null.is_empty() {
        return Err(ApiError::new(
            INVALID_REQUEST,
            format!("Null value not supported for : {}", null.join(", ")),
        ));
    }
    match r.resource_name.parse::<i32>() {
        Err(_) => {
            return Err(ApiError::new(
                INVALID_REQUEST,
                format!("Node id must be an integer, but it is: {}", r.resource_name),
            ))
        }
        Ok(id) if id != apis.node_id => {
            return Err(ApiError::new(
                INVALID_REQUEST,
                format!(
                    "Unexpected node id. Expected {}, but received {id}",
                    apis.node_id
                ),
            ))
        }
        Ok(_) => {}
    }
    let ops: Vec<_> = r
        .configs
        .iter()
        .map(|c| {
            let op = cr::AlterConfigOp::from_id(c.config_operation).ok_or(c.config_operation);
            (c.name.clone(), op, c.value.clone())
        })
        .collect();
    loggers.alter(&ops, validate_only)
}

async fn handle_incremental_alter_configs(
    apis: &MetadataApis,
    ctx: &RequestContext,
    req: IncrementalAlterConfigsRequest,
) -> HandlerOutcome {
    let requested: Vec<(i8, String)> = req
        .resources
        .iter()
        .map(|r| (r.resource_type, r.resource_name.clone()))
        .collect();
    let mut bad = BTreeMap::new();
    let mut resources = Vec::new();
    // Broker loggers are this node's own business, answered here (Kafka's broker handles them
    // before forwarding the rest to the controller).
    let mut local: BTreeMap<(i8, String), (i16, Option<String>)> = BTreeMap::new();
    for r in &req.resources {
        if let (BROKER_LOGGER_TYPE, Some(loggers)) = (r.resource_type, &apis.loggers) {
            let e = alter_broker_loggers(apis, loggers, r, req.validate_only)
                .err()
                .unwrap_or(ApiError::NONE);
            local.insert(
                (r.resource_type, r.resource_name.clone()),
                (e.code, e.message),
            );
            continue;
        }
        let mut ops = Vec::new();
        for c in &r.configs {
            match cr::AlterConfigOp::from_id(c.config_operation) {
                Some(op) => ops.push((c.name.clone(), op, c.value.clone())),
                None => {
                    bad.insert(
                        (r.resource_type, r.resource_name.clone()),
                        c.config_operation,
                    );
                }
            }
        }
        resources.push(cr::IncrementalAlterConfigsResource {
            resource_type: r.resource_type,
            resource_name: r.resource_name.clone(),
            ops,
        });
    }
    resources.retain(|r| !bad.contains_key(&(r.resource_type, r.resource_name.clone())));
    let res = if resources.is_empty() {
        Ok(Vec::new())
    } else {
        apis.ask(
            cm::IncrementalAlterConfigs {
                resources,
                validate_only: req.validate_only,
            },
            DEFAULT_TIMEOUT_MS,
        )
        .await
    };
    let good: Vec<(i8, String)> = requested
        .iter()
        .filter(|k| !bad.contains_key(*k) && !local.contains_key(*k))
        .cloned()
        .collect();
    let mut done: BTreeMap<(i8, String), (i16, Option<String>)> = alter_results(res, good)
        .into_iter()
        .map(|(c, msg, t, n)| ((t, n), (c, msg)))
        .collect();
    for (k, op) in bad {
        done.insert(
            k,
            (
                INVALID_REQUEST,
                Some(format!("Unknown config operation {op}")),
            ),
        );
    }
    done.extend(local);
    let responses = requested
        .into_iter()
        .map(|(t, n)| {
            let (code, msg) = done.get(&(t, n.clone())).cloned().unwrap_or((0, None));
            ctx.record_error(code);
            m::incremental_alter_configs_response::AlterConfigsResourceResponse {
                error_code: code,
                error_message: msg,
                resource_type: t,
                resource_name: n,
                ..Default::default()
            }
        })
        .collect();
    respond(ResponseBody::IncrementalAlterConfigs(
        IncrementalAlterConfigsResponse {
            throttle_time_ms: 0,
            responses,
            ..Default::default()
        },
    ))
}

// ---------------------------------------------------------------------------------------------
// Cluster, partitions, quorum, features

async fn handle_describe_cluster(
    apis: &MetadataApis,
    ctx: &RequestContext,
    req: DescribeClusterRequest,
) -> HandlerOutcome {
    let v = ctx.api_version;
    let image = apis.snapshot();
    let endpoint_type = if v >= 1 { req.endpoint_type } else { 1 };
    // Kafka's endpoint types: 1 = brokers (asked of a broker listener), 2 = controllers
    // (asked of a controller listener, e.g. by `--bootstrap-controller` tools).
    let on_controller = ctx.connection.listener_kind == ListenerKind::Controller;
    if endpoint_type == 2 && on_controller {
        let quorum = apis.raft.send(DescribeQuorumState).await.ok();
        let leader = quorum.as_ref().and_then(|q| q.leader_id).unwrap_or(-1);
        let listener = &*ctx.connection.listener_name;
        // The voters where this listener's name reaches them (the voter set knows where they
        // listen), and this node: tools given `--bootstrap-controller` send on to the active
        // controller, which must be among them.
        let mut nodes: BTreeMap<i32, Endpoint> = quorum
            .iter()
            .flat_map(|q| q.nodes.iter())
            .filter_map(|(id, listeners)| {
                Some((*id, preferred_endpoint(listeners, listener)?.clone()))
            })
            .collect();
        if let Some(own) = preferred_endpoint(&apis.own_controller_endpoints(), listener) {
            nodes.entry(apis.node_id).or_insert_with(|| own.clone());
        }
        let brokers = nodes
            .into_iter()
            .map(
                |(id, e)| m::describe_cluster_response::DescribeClusterBroker {
                    broker_id: id,
                    host: e.host,
                    port: e.port as i32,
                    rack: None,
                    ..Default::default()
                },
            )
            .collect();
        return respond(ResponseBody::DescribeCluster(DescribeClusterResponse {
            endpoint_type,
            cluster_id: apis.cluster_id.clone(),
            controller_id: leader,
            brokers,
            cluster_authorized_operations: if req.include_cluster_authorized_operations {
                authorized_operations(ResourceType::Cluster)
            } else {
                AUTHORIZED_OPERATIONS_OMITTED
            },
            ..Default::default()
        }));
    }
    let own_type: i8 = if on_controller { 2 } else { 1 };
    if endpoint_type != own_type {
        // Kafka's AuthHelper.computeDescribeClusterResponse: a type it does not know is
        // unsupported, a known one on the other kind of listener mismatched; either way the
        // rest of the answer keeps its defaults (EndpointType 1, empty ClusterId).
        let type_name = |t: i8| match t {
            1 => "BROKER",
            _ => "CONTROLLER",
        };
        let (error_code, message) = if !(1..=2).contains(&endpoint_type) {
            (
                UNSUPPORTED_ENDPOINT_TYPE,
                format!("Unsupported endpoint type {endpoint_type}"),
            )
        } else {
            (
                MISMATCHED_ENDPOINT_TYPE,
                format!(
                    "The request was sent to an endpoint of type {}, but we wanted an endpoint of type {}",
                    type_name(own_type),
                    type_name(endpoint_type)
                ),
            )
        };
        ctx.record_error(error_code);
        return respond(ResponseBody::DescribeCluster(DescribeClusterResponse {
            error_code,
            error_message: Some(message),
            ..Default::default()
        }));
    }
    let include_fenced = v >= 2 && req.include_fenced_brokers;
    let listener = &*ctx.connection.listener_name;
    let brokers = image
        .brokers
        .values()
        .filter(|b| include_fenced || !b.fenced)
        .filter_map(|b| {
            let e = endpoint_on(b, listener)?;
            Some(m::describe_cluster_response::DescribeClusterBroker {
                broker_id: b.id,
                host: e.host.clone(),
                port: e.port as i32,
                rack: b.rack.clone(),
                is_fenced: v >= 2 && b.fenced,
                ..Default::default()
            })
        })
        .collect();
    respond(ResponseBody::DescribeCluster(DescribeClusterResponse {
        throttle_time_ms: 0,
        error_code: 0,
        error_message: None,
        endpoint_type,
        cluster_id: apis.cluster_id.clone(),
        controller_id: client_facing_controller(apis, &image),
        brokers,
        cluster_authorized_operations: if req.include_cluster_authorized_operations {
            authorized_operations(ResourceType::Cluster)
        } else {
            AUTHORIZED_OPERATIONS_OMITTED
        },
        ..Default::default()
    }))
}

async fn handle_describe_topic_partitions(
    apis: &MetadataApis,
    _ctx: &RequestContext,
    req: DescribeTopicPartitionsRequest,
) -> HandlerOutcome {
    use m::describe_topic_partitions_response as r;
    let image = apis.snapshot();
    let mut names: Vec<String> = if req.topics.is_empty() {
        image.topics.by_name.keys().cloned().collect()
    } else {
        req.topics.iter().map(|t| t.name.clone()).collect()
    };
    names.sort();
    names.dedup();
    let (start_topic, start_partition) = req.cursor.as_ref().map_or((String::new(), 0), |c| {
        (c.topic_name.clone(), c.partition_index)
    });
    // Kafka's DescribeTopicPartitionsRequestHandler: a cursor must name one of the listed
    // topics and a partition >= 0, else the request fails with INVALID_REQUEST, which answers
    // a bare row per requested topic.
    let bad_cursor = req.cursor.as_ref().is_some_and(|c| {
        (!req.topics.is_empty() && !names.contains(&c.topic_name)) || c.partition_index < 0
    });
    if bad_cursor {
        return respond(ResponseBody::DescribeTopicPartitions(
            DescribeTopicPartitionsResponse {
                topics: req
                    .topics
                    .iter()
                    .map(|t| r::DescribeTopicPartitionsResponseTopic {
                        error_code: INVALID_REQUEST,
                        name: Some(t.name.clone()),
                        topic_authorized_operations: AUTHORIZED_OPERATIONS_OMITTED,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            },
        ));
    }
    let mut budget = req.response_partition_limit.max(1);
    let mut topics = Vec::new();
    let mut next_cursor = None;
    for name in names.into_iter().filter(|n| *n >= start_topic) {
        let Some(t) = image.topics.get_by_name(&name) else {
            topics.push(r::DescribeTopicPartitionsResponseTopic {
                error_code: UNKNOWN_TOPIC_OR_PARTITION,
                name: Some(name),
                // Kafka fills the operations in for every row it answers, unknown topics too.
                topic_authorized_operations: authorized_operations(ResourceType::Topic),
                ..Default::default()
            });
            continue;
        };
        if budget == 0 {
            next_cursor = Some(r::Cursor {
                topic_name: name,
                partition_index: 0,
                ..Default::default()
            });
            break;
        }
        let first = if name == start_topic {
            start_partition
        } else {
            0
        };
        let mut partitions = Vec::new();
        for (index, p) in t.partitions.range(first..) {
            if budget == 0 {
                next_cursor = Some(r::Cursor {
                    topic_name: name.clone(),
                    partition_index: *index,
                    ..Default::default()
                });
                break;
            }
            budget -= 1;
            let alive = image.brokers.get(&p.leader).is_some_and(|b| !b.fenced);
            partitions.push(r::DescribeTopicPartitionsResponsePartition {
                error_code: if alive { 0 } else { LEADER_NOT_AVAILABLE },
                partition_index: *index,
                leader_id: if alive { p.leader } else { -1 },
                leader_epoch: p.leader_epoch,
                replica_nodes: p.replicas.clone(),
                isr_nodes: p.isr.clone(),
                eligible_leader_replicas: Some(p.elr.clone()),
                last_known_elr: Some(p.last_known_elr.clone()),
                offline_replicas: Vec::new(),
                ..Default::default()
            });
        }
        topics.push(r::DescribeTopicPartitionsResponseTopic {
            error_code: 0,
            name: Some(name.clone()),
            topic_id: t.id,
            is_internal: crate::metadata::is_internal_topic(&name),
            partitions,
            topic_authorized_operations: authorized_operations(ResourceType::Topic),
            ..Default::default()
        });
        if next_cursor.is_some() {
            break;
        }
    }
    respond(ResponseBody::DescribeTopicPartitions(
        DescribeTopicPartitionsResponse {
            throttle_time_ms: 0,
            topics,
            next_cursor,
            ..Default::default()
        },
    ))
}

async fn handle_describe_quorum(
    apis: &MetadataApis,
    ctx: &RequestContext,
    req: DescribeQuorumRequest,
) -> HandlerOutcome {
    use m::describe_quorum_response as r;
    let v = ctx.api_version;
    // Only the leader knows every replica's progress: another voter asks it, as Kafka's
    // broker forwards DescribeQuorum to the active controller.
    if let Some(q) = &apis.quorum {
        let leader = *q.leader.borrow();
        let leader_address = leader
            .filter(|l| *l != apis.node_id)
            .and_then(|l| q.endpoints.borrow().get(&l).cloned());
        if let Some(addr) = &leader_address {
            let timeout = Duration::from_millis(DEFAULT_TIMEOUT_MS as u64);
            let asked = async {
                let mut conn = crate::network::client::KafkaConnection::connect(
                    addr,
                    "describe-quorum",
                    timeout,
                )
                .await
                .ok()?;
                let version = conn.version_for(ApiKey::DescribeQuorum)?.min(v);
                conn.send_at(RequestBody::DescribeQuorum(req.clone()), version, timeout)
                    .await
                    .ok()
            };
            if let Some(ResponseBody::DescribeQuorum(resp)) = asked.await {
                return respond(ResponseBody::DescribeQuorum(resp));
            }
        }
    }
    let info = match apis.raft.send(DescribeQuorumState).await {
        Ok(i) => i,
        Err(_) => {
            return respond(ResponseBody::DescribeQuorum(DescribeQuorumResponse {
                error_code: NOT_CONTROLLER,
                ..Default::default()
            }))
        }
    };
    let replica = |s: &crate::raft::messages::QuorumReplicaInfo| r::ReplicaState {
        replica_id: s.replica_id,
        // Known from the VotersRecord (kraft.version 1) or, for observers, their Fetch; the
        // field exists from v2 on.
        replica_directory_id: if v >= 2 { s.directory_id } else { Uuid::ZERO },
        log_end_offset: s.log_end_offset,
        last_fetch_timestamp: if v >= 1 {
            s.last_fetch_timestamp_ms
        } else {
            -1
        },
        last_caught_up_timestamp: if v >= 1 {
            s.last_caught_up_timestamp_ms
        } else {
            -1
        },
        ..Default::default()
    };
    // Kafka's KafkaRaftClient answers only a request for exactly __cluster_metadata-0; any
    // other shape gets UNKNOWN_TOPIC_OR_PARTITION on every partition it names, and no Nodes.
    let valid = matches!(
        &req.topics[..],
        [t] if t.topic_name == "__cluster_metadata"
            && matches!(&t.partitions[..], [p] if p.partition_index == 0)
    );
    if !valid {
        let topics = req
            .topics
            .iter()
            .map(|t| r::TopicData {
                topic_name: t.topic_name.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| r::PartitionData {
                        partition_index: p.partition_index,
                        error_code: UNKNOWN_TOPIC_OR_PARTITION,
                        error_message: Some(
                            "This server does not host this topic-partition.".into(),
                        ),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect();
        return respond(ResponseBody::DescribeQuorum(DescribeQuorumResponse {
            error_code: 0,
            // Kafka's default: an empty string, not null.
            error_message: Some(String::new()),
            topics,
            ..Default::default()
        }));
    }
    let topics = vec![r::TopicData {
        topic_name: "__cluster_metadata".into(),
        partitions: vec![r::PartitionData {
            partition_index: 0,
            error_code: if info.leader_id.is_some() {
                0
            } else {
                NOT_CONTROLLER
            },
            error_message: Some(String::new()),
            leader_id: info.leader_id.unwrap_or(-1),
            leader_epoch: info.leader_epoch,
            high_watermark: info.high_watermark,
            current_voters: info.voters.iter().map(replica).collect(),
            observers: info.observers.iter().map(replica).collect(),
            ..Default::default()
        }],
        ..Default::default()
    }];
    // Every voter with the listeners the voter set gives it (this node's own when the set
    // names none, as a voter set built without endpoints does).
    let nodes = if v >= 2 {
        let own = apis.own_controller_endpoints();
        info.nodes
            .iter()
            .filter_map(|(id, listeners)| {
                let listeners = match listeners.is_empty() && *id == apis.node_id {
                    true => &own,
                    false => listeners,
                };
                (!listeners.is_empty()).then(|| r::Node {
                    node_id: *id,
                    listeners: listeners
                        .iter()
                        .map(|e| r::Listener {
                            name: e.listener.clone(),
                            host: e.host.clone(),
                            port: e.port,
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    respond(ResponseBody::DescribeQuorum(DescribeQuorumResponse {
        error_code: 0,
        error_message: Some(String::new()),
        topics,
        nodes,
        ..Default::default()
    }))
}

async fn handle_update_features(
    apis: &MetadataApis,
    ctx: &RequestContext,
    req: UpdateFeaturesRequest,
) -> HandlerOutcome {
    let v = ctx.api_version;
    let updates = req
        .feature_updates
        .iter()
        .map(|u| cr::FeatureUpdate {
            feature: u.feature.clone(),
            max_version_level: u.max_version_level,
            upgrade_type: if v == 0 {
                // v0 had a boolean: downgrades were "safe" ones.
                if u.allow_downgrade {
                    cr::UpgradeType::SafeDowngrade
                } else {
                    cr::UpgradeType::Upgrade
                }
            } else {
                cr::UpgradeType::from_id(u.upgrade_type)
            },
        })
        .collect();
    let res = apis
        .ask(
            cm::UpdateFeatures {
                updates,
                validate_only: v >= 1 && req.validate_only,
            },
            req.timeout_ms,
        )
        .await;
    let error = match res {
        Ok(reply) => reply.error,
        Err(code) => ApiError::code(code),
    };
    // As Kafka 4.4 answers every version: the outcome at the top; before v2, on success, a row
    // per requested feature too, with NONE's name as its message.
    let results = if v < 2 && error.is_ok() {
        req.feature_updates
            .iter()
            .map(|u| m::update_features_response::UpdatableFeatureResult {
                feature: u.feature.clone(),
                error_code: 0,
                error_message: Some("NONE".into()),
                ..Default::default()
            })
            .collect()
    } else {
        Vec::new()
    };
    ctx.record_error(error.code);
    respond(ResponseBody::UpdateFeatures(UpdateFeaturesResponse {
        throttle_time_ms: 0,
        error_code: error.code,
        error_message: error.message,
        results,
        ..Default::default()
    }))
}

// ---------------------------------------------------------------------------------------------
// Forwarding to the active controller

/// The admin writes a node forwards when the active controller is elsewhere.
pub const FORWARDED: &[ApiKey] = &[
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::CreatePartitions,
    ApiKey::AlterConfigs,
    ApiKey::IncrementalAlterConfigs,
    ApiKey::UpdateFeatures,
    ApiKey::ElectLeaders,
    ApiKey::AlterPartitionReassignments,
    ApiKey::AlterUserScramCredentials,
    ApiKey::AlterClientQuotas,
    ApiKey::CreateAcls,
    ApiKey::DeleteAcls,
    ApiKey::AddRaftVoter,
    ApiKey::RemoveRaftVoter,
    ApiKey::UnregisterBroker,
];

/// Wraps the [`FORWARDED`] routes so that, while the Raft leader is another node, the request
/// goes to that node's controller listener at the client's version and its answer comes back
/// unchanged (Kafka's broker forwards these to the active controller too, inside an Envelope;
/// kactor sends the request itself, which the controller listener serves as it would from
/// `--bootstrap-controller` tools). While this node leads, the local handler answers.
///
/// During a failover (no leader known, or the known one unreachable) the request waits for the
/// next leader, up to [`FORWARD_WAIT`], as Kafka's forwarding channel queues it: clients see
/// latency rather than NOT_CONTROLLER, which some (librdkafka's admin API) pass straight to the
/// application. Past the wait the local answer (NOT_CONTROLLER without an active controller
/// here) goes back and the client decides.
pub fn register_forwarding(router: &mut RequestRouter, node_id: i32, quorum: QuorumView) {
    for &key in FORWARDED {
        let Some(local) = router.route(key).map(|r| r.handler.clone()) else {
            continue;
        };
        let quorum = quorum.clone();
        router.register(key, move |ctx, body| {
            let local = local.clone();
            let mut quorum = quorum.clone();
            Box::pin(async move {
                // A controller answers voter changes itself (NOT_LEADER_OR_FOLLOWER unless it
                // leads); only brokers forward them.
                let voter_change = matches!(key, ApiKey::AddRaftVoter | ApiKey::RemoveRaftVoter);
                if voter_change && ctx.connection.listener_kind == ListenerKind::Controller {
                    return local(ctx, body).await;
                }
                let deadline = tokio::time::Instant::now() + FORWARD_WAIT;
                loop {
                    let leader = *quorum.leader.borrow_and_update();
                    if leader == Some(node_id) {
                        return local(ctx, body).await;
                    }
                    let target = leader.and_then(|l| quorum.endpoints.borrow().get(&l).cloned());
                    if let Some(address) = target {
                        match forward(&address, &ctx, body.clone(), deadline).await {
                            // A controller that lost (or has not yet taken up) leadership
                            // refuses the whole request: look again, as Kafka's channel does.
                            Ok(resp)
                                if says_not_controller(&resp)
                                    && tokio::time::Instant::now() < deadline => {}
                            Ok(resp) => return HandlerOutcome::Respond(resp),
                            Err(ForwardFailed::Unsupported) => return local(ctx, body).await,
                            Err(ForwardFailed::Unreachable) => {}
                        }
                    }
                    // No leader, or it did not answer: wait for a change (or poll again
                    // shortly, since an unreachable leader may not be replaced at once).
                    let now = tokio::time::Instant::now();
                    if now >= deadline {
                        return local(ctx, body).await;
                    }
                    let nap = (deadline - now).min(FORWARD_RETRY);
                    let _ = tokio::time::timeout(nap, quorum.leader.changed()).await;
                }
            })
        });
    }
}

/// How long a forwarded admin request waits for an active controller during a failover.
const FORWARD_WAIT: Duration = Duration::from_secs(15);
/// How often a request waiting for an active controller looks again without a leader change.
const FORWARD_RETRY: Duration = Duration::from_millis(200);

/// Whether a forwarded admin response says the controller it reached is not the active one
/// (a controller answers NOT_CONTROLLER for every item when it is not).
fn says_not_controller(resp: &ResponseBody) -> bool {
    let nc = |code: i16| code == NOT_CONTROLLER;
    match resp {
        ResponseBody::CreateTopics(r) => r.topics.iter().any(|t| nc(t.error_code)),
        ResponseBody::DeleteTopics(r) => r.responses.iter().any(|t| nc(t.error_code)),
        ResponseBody::CreatePartitions(r) => r.results.iter().any(|t| nc(t.error_code)),
        ResponseBody::AlterConfigs(r) => r.responses.iter().any(|t| nc(t.error_code)),
        ResponseBody::IncrementalAlterConfigs(r) => r.responses.iter().any(|t| nc(t.error_code)),
        ResponseBody::AlterUserScramCredentials(r) => r.results.iter().any(|t| nc(t.error_code)),
        ResponseBody::AlterClientQuotas(r) => r.entries.iter().any(|t| nc(t.error_code)),
        ResponseBody::CreateAcls(r) => r.results.iter().any(|t| nc(t.error_code)),
        ResponseBody::DeleteAcls(r) => r.filter_results.iter().any(|t| nc(t.error_code)),
        ResponseBody::ElectLeaders(r) => nc(r.error_code),
        // A voter change reached a node that is no longer the Raft leader.
        ResponseBody::AddRaftVoter(r) => nc(r.error_code) || r.error_code == NOT_LEADER_OR_FOLLOWER,
        ResponseBody::RemoveRaftVoter(r) => {
            nc(r.error_code) || r.error_code == NOT_LEADER_OR_FOLLOWER
        }
        ResponseBody::AlterPartitionReassignments(r) => nc(r.error_code),
        ResponseBody::UnregisterBroker(r) => nc(r.error_code),
        ResponseBody::UpdateFeatures(r) => {
            nc(r.error_code) || r.results.iter().any(|t| nc(t.error_code))
        }
        _ => false,
    }
}

/// Why a forward did not bring an answer back.
enum ForwardFailed {
    /// Not connected or no answer before the deadline: another leader may answer.
    Unreachable,
    /// The controller does not serve this version: no other one will either.
    Unsupported,
}

async fn forward(
    address: &str,
    ctx: &RequestContext,
    body: RequestBody,
    deadline: tokio::time::Instant,
) -> Result<ResponseBody, ForwardFailed> {
    let timeout = deadline.saturating_duration_since(tokio::time::Instant::now());
    let mut conn = crate::network::client::KafkaConnection::connect(address, "forwarding", timeout)
        .await
        .map_err(|_| ForwardFailed::Unreachable)?;
    let supported = conn
        .api_versions
        .api_keys
        .iter()
        .find(|k| k.api_key == ctx.api_key as i16)
        .is_some_and(|k| (k.min_version..=k.max_version).contains(&ctx.api_version));
    if !supported {
        return Err(ForwardFailed::Unsupported);
    }
    let timeout = deadline.saturating_duration_since(tokio::time::Instant::now());
    conn.send_at(body, ctx.api_version, timeout)
        .await
        .map_err(|_| ForwardFailed::Unreachable)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(resource: i8, pattern: i8, operation: i8, permission: i8) -> DescribeAclsRequest {
        DescribeAclsRequest {
            resource_type_filter: resource,
            pattern_type_filter: pattern,
            operation,
            permission_type: permission,
            ..Default::default()
        }
    }

    #[test]
    fn describe_acls_filters_are_checked_as_kafka_parses_them() {
        // ANY (1) everywhere: served.
        assert!(describe_acls_parse(3, &mut filter(1, 1, 1, 1)).is_ok());
        // An UNKNOWN (0) part anywhere: refused, at any version.
        for bad in [
            filter(0, 1, 1, 1),
            filter(1, 0, 1, 1),
            filter(1, 1, 0, 1),
            filter(1, 1, 1, 0),
        ] {
            assert!(describe_acls_parse(3, &mut bad.clone()).is_err(), "{bad:?}");
        }
        // v0 knows literal names only: ANY reads as LITERAL (3), PREFIXED (4) is refused.
        let mut any = filter(1, 1, 1, 1);
        assert!(describe_acls_parse(0, &mut any).is_ok());
        assert_eq!(any.pattern_type_filter, 3);
        assert!(describe_acls_parse(0, &mut filter(1, 4, 1, 1)).is_err());
    }
}
