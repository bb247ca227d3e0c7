//! Cluster administration APIs beside the topic and config ones in `apis.rs`: ElectLeaders
//! (`kafka-leader-election`), AlterPartitionReassignments and ListPartitionReassignments
//! (`kafka-reassign-partitions`), UnregisterBroker (`kafka-cluster unregister`),
//! Describe/AlterUserScramCredentials (`kafka-configs --entity-type users`, SCRAM-SHA-256/512)
//! and ListConfigResources (`kafka-configs --describe --entity-type groups` without a name).
//!
//! Alter/DescribeClientQuotas (`kafka-configs --entity-type users|clients|ips`).
//!
//! Registered with the other admin APIs by `apis::register`; the writes go to the controller
//! (forwarded there from a broker-only node), the Describe/List APIs read the published image.

use std::collections::{BTreeMap, BTreeSet};

use kactor_protocol::errors::*;
use kactor_protocol::messages::{self as m, *};
use kactor_protocol::ResponseBody;

use super::apis::{MetadataApis, DEFAULT_TIMEOUT_MS};
use super::core::client_quotas as quotas;
use super::core::errors::*;
use super::core::requests as cr;
use super::messages as cm;
use crate::metadata::core::{ConfigResourceType, MetadataImage};
use crate::network::router::{HandlerOutcome, RequestContext};

// ---------------------------------------------------------------------------------------------
// ElectLeaders

fn election_rows(
    topic: String,
    partitions: impl IntoIterator<Item = (i32, ApiError)>,
) -> m::elect_leaders_response::ReplicaElectionResult {
    m::elect_leaders_response::ReplicaElectionResult {
        topic,
        partition_result: partitions
            .into_iter()
            .map(
                |(partition_id, e)| m::elect_leaders_response::PartitionResult {
                    partition_id,
                    error_code: e.code,
                    error_message: e.message,
                    ..Default::default()
                },
            )
            .collect(),
        ..Default::default()
    }
}

pub(super) async fn handle_elect_leaders(
    apis: &MetadataApis,
    ctx: &RequestContext,
    req: ElectLeadersRequest,
) -> HandlerOutcome {
    // v0 had no election type: it asked for preferred elections.
    let type_id = if ctx.api_version >= 1 {
        req.election_type
    } else {
        0
    };
    let requested: Option<Vec<(String, Vec<i32>)>> = req
        .topic_partitions
        .map(|tps| tps.into_iter().map(|t| (t.topic, t.partitions)).collect());
    // Kafka answers an unknown type (and a controller failure) with the code at the top and on
    // every requested partition.
    let fail_all = |code: i16, message: Option<String>| {
        let rows = requested
            .iter()
            .flatten()
            .map(|(topic, parts)| {
                let e = ApiError {
                    code,
                    message: message.clone(),
                };
                election_rows(topic.clone(), parts.iter().map(|&p| (p, e.clone())))
            })
            .collect();
        ElectLeadersResponse {
            error_code: code,
            replica_election_results: rows,
            ..Default::default()
        }
    };
    let resp = match cr::ElectionType::from_id(type_id) {
        None => fail_all(
            INVALID_REQUEST,
            Some(format!("Unknown election type {type_id}")),
        ),
        Some(election) => {
            let msg = cm::ElectLeaders {
                election,
                partitions: requested.clone(),
            };
            match apis.ask(msg, req.timeout_ms).await {
                Err(code) => fail_all(code, None),
                Ok(results) => ElectLeadersResponse {
                    replica_election_results: results
                        .into_iter()
                        .map(|t| election_rows(t.topic, t.partitions))
                        .collect(),
                    ..Default::default()
                },
            }
        }
    };
    ctx.record_error(resp.error_code);
    for t in &resp.replica_election_results {
        for p in &t.partition_result {
            ctx.record_error(p.error_code);
        }
    }
    HandlerOutcome::Respond(ResponseBody::ElectLeaders(resp))
}

// ---------------------------------------------------------------------------------------------
// AlterPartitionReassignments

pub(super) async fn handle_alter_partition_reassignments(
    apis: &MetadataApis,
    ctx: &RequestContext,
    req: AlterPartitionReassignmentsRequest,
) -> HandlerOutcome {
    use m::alter_partition_reassignments_response::{
        ReassignablePartitionResponse, ReassignableTopicResponse,
    };
    // v0 had no flag: any replication factor goes.
    let allow = ctx.api_version < 1 || req.allow_replication_factor_change;
    let topics: Vec<cr::ReassignableTopic> = req
        .topics
        .into_iter()
        .map(|t| cr::ReassignableTopic {
            name: t.name,
            partitions: t
                .partitions
                .into_iter()
                .map(|p| (p.partition_index, p.replicas))
                .collect(),
        })
        .collect();
    let rows = |topic: String, partitions: Vec<(i32, ApiError)>| ReassignableTopicResponse {
        name: topic,
        partitions: partitions
            .into_iter()
            .map(|(partition_index, e)| {
                ctx.record_error(e.code);
                ReassignablePartitionResponse {
                    partition_index,
                    error_code: e.code,
                    error_message: e.message,
                    ..Default::default()
                }
            })
            .collect(),
        ..Default::default()
    };
    // Kafka answers an empty request at once, with the response's defaults.
    if topics.is_empty() {
        return HandlerOutcome::Respond(ResponseBody::AlterPartitionReassignments(
            AlterPartitionReassignmentsResponse::default(),
        ));
    }
    let msg = cm::AlterPartitionReassignments {
        topics: topics.clone(),
        allow_replication_factor_change: allow,
    };
    let resp = match apis.ask(msg, req.timeout_ms).await {
        Ok(results) => AlterPartitionReassignmentsResponse {
            allow_replication_factor_change: allow,
            error_message: None,
            responses: results
                .into_iter()
                .map(|t| rows(t.name, t.partitions))
                .collect(),
            ..Default::default()
        },
        // A failed controller call fails every partition with the request (Kafka's
        // `getErrorResponse`).
        Err(code) => {
            ctx.record_error(code);
            AlterPartitionReassignmentsResponse {
                error_code: code,
                error_message: None,
                responses: topics
                    .into_iter()
                    .map(|t| {
                        let failed = t
                            .partitions
                            .iter()
                            .map(|(i, _)| (*i, ApiError::code(code)))
                            .collect();
                        rows(t.name, failed)
                    })
                    .collect(),
                ..Default::default()
            }
        }
    };
    HandlerOutcome::Respond(ResponseBody::AlterPartitionReassignments(resp))
}

// ---------------------------------------------------------------------------------------------
// ListPartitionReassignments

/// Partitions with a reassignment under way (replicas being added or removed), for every topic
/// or for the ones named; names or indexes that do not exist are left out, as in Kafka.
pub(super) async fn handle_list_partition_reassignments(
    apis: &MetadataApis,
    _ctx: &RequestContext,
    req: ListPartitionReassignmentsRequest,
) -> HandlerOutcome {
    let image = apis.snapshot();
    let wanted: Vec<(String, Option<Vec<i32>>)> = match req.topics {
        Some(topics) => topics
            .into_iter()
            .map(|t| (t.name, Some(t.partition_indexes)))
            .collect(),
        None => image
            .topics
            .by_name
            .keys()
            .map(|n| (n.clone(), None))
            .collect(),
    };
    let mut topics = Vec::new();
    for (name, indexes) in wanted {
        let Some(t) = image.topics.get_by_name(&name) else {
            continue;
        };
        let partitions: Vec<_> = t
            .partitions
            .iter()
            .filter(|(i, _)| indexes.as_ref().is_none_or(|w| w.contains(i)))
            .filter(|(_, p)| !p.adding_replicas.is_empty() || !p.removing_replicas.is_empty())
            .map(
                |(i, p)| m::list_partition_reassignments_response::OngoingPartitionReassignment {
                    partition_index: *i,
                    replicas: p.replicas.clone(),
                    adding_replicas: p.adding_replicas.clone(),
                    removing_replicas: p.removing_replicas.clone(),
                    ..Default::default()
                },
            )
            .collect();
        if !partitions.is_empty() {
            topics.push(
                m::list_partition_reassignments_response::OngoingTopicReassignment {
                    name,
                    partitions,
                    ..Default::default()
                },
            );
        }
    }
    HandlerOutcome::Respond(ResponseBody::ListPartitionReassignments(
        ListPartitionReassignmentsResponse {
            topics,
            // Kafka's is null on success.
            error_message: None,
            ..Default::default()
        },
    ))
}

// ---------------------------------------------------------------------------------------------
// DescribeClientQuotas

const QUOTA_ENTITY_TYPES: [&str; 3] = ["user", "client-id", "ip"];
const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_SPECIFIED: i8 = 2;

/// Kafka's checks of a quota filter (`ClientQuotasImage.describe`), in its order and words.
fn check_quota_filter(
    components: &[m::describe_client_quotas_request::ComponentData],
) -> Result<(), (i16, String)> {
    let invalid = |msg: String| Err((INVALID_REQUEST, msg));
    let mut seen = BTreeSet::new();
    for c in components {
        let ty = c.entity_type.as_str();
        if ty.is_empty() {
            return invalid("Invalid empty entity type.".into());
        }
        if !seen.insert(ty) {
            return invalid(format!(
                "Entity type {ty} cannot appear more than once in the filter."
            ));
        }
        if !QUOTA_ENTITY_TYPES.contains(&ty) {
            return Err((UNSUPPORTED_VERSION, format!("Unsupported entity type {ty}")));
        }
        match (c.match_type, &c.match_) {
            (MATCH_EXACT, None) => {
                return invalid(
                    "Request specified MATCH_TYPE_EXACT, but set match string to null.".into(),
                )
            }
            (MATCH_DEFAULT, Some(_)) => {
                return invalid(
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                        .into(),
                )
            }
            (MATCH_SPECIFIED, Some(_)) => {
                return invalid(
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
                        .into(),
                )
            }
            (MATCH_EXACT | MATCH_DEFAULT | MATCH_SPECIFIED, _) => {}
            (other, _) => return invalid(format!("Unknown match type {other}")),
        }
    }
    if seen.contains("ip") && (seen.contains("user") || seen.contains("client-id")) {
        return invalid(
            "Invalid entity filter component combination. IP filter component should not be \
             used with user or clientId filter component."
                .into(),
        );
    }
    Ok(())
}

/// The stored quotas that match the filter (Kafka's `ClientQuotasImage.describe`), read from
/// the served image.
pub(super) async fn handle_describe_client_quotas(
    apis: &MetadataApis,
    ctx: &RequestContext,
    req: DescribeClientQuotasRequest,
) -> HandlerOutcome {
    use m::describe_client_quotas_response::{EntityData, EntryData, ValueData};
    let resp = match check_quota_filter(&req.components) {
        Err((code, message)) => DescribeClientQuotasResponse {
            error_code: code,
            error_message: Some(message),
            entries: None,
            ..Default::default()
        },
        Ok(()) => {
            let mut exact = BTreeMap::new();
            let mut any = BTreeSet::new();
            for c in &req.components {
                match c.match_type {
                    MATCH_SPECIFIED => {
                        any.insert(c.entity_type.clone());
                    }
                    // Exact with its name, default with none (checked above).
                    _ => {
                        exact.insert(c.entity_type.clone(), c.match_.clone());
                    }
                }
            }
            let image = apis.snapshot();
            let entries = quotas::matching_entities(&image.client_quotas, &exact, &any, req.strict)
                .into_iter()
                .map(|(entity, values)| {
                    let sent: Vec<_> = entity.iter().map(|(t, n)| (t.clone(), n.clone())).collect();
                    EntryData {
                        entity: quotas::entity_components(&sent)
                            .into_iter()
                            .map(|(entity_type, entity_name)| EntityData {
                                entity_type,
                                entity_name,
                                ..Default::default()
                            })
                            .collect(),
                        values: values
                            .iter()
                            .map(|(key, value)| ValueData {
                                key: key.clone(),
                                value: *value,
                                ..Default::default()
                            })
                            .collect(),
                        ..Default::default()
                    }
                })
                .collect();
            DescribeClientQuotasResponse {
                entries: Some(entries),
                ..Default::default()
            }
        }
    };
    ctx.record_error(resp.error_code);
    HandlerOutcome::Respond(ResponseBody::DescribeClientQuotas(resp))
}

/// How long an ip entity's name may take to resolve before it counts as unresolvable.
const IP_RESOLVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The ip entity names that are neither an address nor a host that resolves (Kafka's
/// `InetAddress.getByName` check). Looked up here, in the handler, so that the controller's
/// core does no I/O.
async fn unresolvable_ips(alterations: &[quotas::QuotaAlteration]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let names: BTreeSet<&str> = alterations
        .iter()
        .flat_map(|a| a.entity.iter())
        .filter(|(t, _)| t == quotas::IP)
        .filter_map(|(_, n)| n.as_deref())
        .filter(|n| !n.is_empty() && n.parse::<std::net::IpAddr>().is_err())
        .collect();
    for name in names {
        let resolved = tokio::time::timeout(IP_RESOLVE_TIMEOUT, tokio::net::lookup_host((name, 0)))
            .await
            .ok()
            .and_then(Result::ok)
            .is_some_and(|mut addrs| addrs.next().is_some());
        if !resolved {
            out.insert(name.to_string());
        }
    }
    out
}

/// Sets or removes client quotas through the controller (forwarded there from a broker-only
/// node); each entity is answered with Kafka's outcome and message.
pub(super) async fn handle_alter_client_quotas(
    apis: &MetadataApis,
    ctx: &RequestContext,
    req: AlterClientQuotasRequest,
) -> HandlerOutcome {
    use m::alter_client_quotas_response::{EntityData, EntryData};
    let alterations: Vec<quotas::QuotaAlteration> = req
        .entries
        .iter()
        .map(|e| quotas::QuotaAlteration {
            entity: e
                .entity
                .iter()
                .map(|c| (c.entity_type.clone(), c.entity_name.clone()))
                .collect(),
            ops: e
                .ops
                .iter()
                .map(|o| (o.key.clone(), (!o.remove).then_some(o.value)))
                .collect(),
        })
        .collect();
    let rows = if alterations.is_empty() {
        // Kafka answers an empty request without going to the controller.
        Vec::new()
    } else {
        let distinct = |code: i16| {
            let mut seen: Vec<quotas::EntityComponents> = Vec::new();
            for a in &alterations {
                let c = quotas::entity_components(&a.entity);
                if !seen.contains(&c) {
                    seen.push(c);
                }
            }
            seen.into_iter()
                .map(|c| (c, ApiError::code(code)))
                .collect::<Vec<_>>()
        };
        let msg = cm::AlterClientQuotas {
            unresolvable: unresolvable_ips(&alterations).await,
            alterations: alterations.clone(),
            validate_only: req.validate_only,
        };
        match apis.ask(msg, DEFAULT_TIMEOUT_MS).await {
            // An inactive controller answers nothing: say so for every entity.
            Ok(rows) if rows.is_empty() => distinct(NOT_CONTROLLER),
            Ok(rows) => rows,
            Err(code) => distinct(code),
        }
    };
    let entries = rows
        .into_iter()
        .map(|(entity, e)| {
            ctx.record_error(e.code);
            EntryData {
                error_code: e.code,
                error_message: e.message,
                entity: entity
                    .into_iter()
                    .map(|(entity_type, entity_name)| EntityData {
                        entity_type,
                        entity_name,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }
        })
        .collect();
    HandlerOutcome::Respond(ResponseBody::AlterClientQuotas(AlterClientQuotasResponse {
        entries,
        ..Default::default()
    }))
}

// ---------------------------------------------------------------------------------------------
// SCRAM credentials

/// The names in the order first given, each once, and those given more than once.
fn distinct_names<'a>(
    names: impl IntoIterator<Item = &'a str>,
) -> (Vec<&'a str>, BTreeSet<&'a str>) {
    let mut seen = BTreeSet::new();
    let mut distinct = Vec::new();
    let mut repeated = BTreeSet::new();
    for name in names {
        if seen.insert(name) {
            distinct.push(name);
        } else {
            repeated.insert(name);
        }
    }
    (distinct, repeated)
}

/// Each user's mechanisms and iteration counts, for all users with credentials (no names
/// given) or for the named ones: a user without any is RESOURCE_NOT_FOUND, one named twice
/// gets a single DUPLICATE_RESOURCE row, as in Kafka.
pub(super) async fn handle_describe_user_scram_credentials(
    apis: &MetadataApis,
    ctx: &RequestContext,
    req: DescribeUserScramCredentialsRequest,
) -> HandlerOutcome {
    use m::describe_user_scram_credentials_response::{
        CredentialInfo, DescribeUserScramCredentialsResult,
    };
    let image = apis.snapshot();
    let names: Vec<String> = match req.users {
        Some(users) if !users.is_empty() => users.into_iter().map(|u| u.name).collect(),
        _ => image.scram_credentials.keys().cloned().collect(),
    };
    let (distinct, duplicated) = distinct_names(names.iter().map(String::as_str));
    let results = distinct
        .into_iter()
        .map(|user| {
            let row = |code: i16, message: String| {
                ctx.record_error(code);
                DescribeUserScramCredentialsResult {
                    user: user.to_string(),
                    error_code: code,
                    error_message: Some(message),
                    ..Default::default()
                }
            };
            if duplicated.contains(user) {
                return row(
                    DUPLICATE_RESOURCE,
                    format!("Cannot describe SCRAM credentials for the same user twice in a single request: {user}"),
                );
            }
            match image.scram_credentials.get(user) {
                None => row(
                    RESOURCE_NOT_FOUND,
                    format!("Attempt to describe a user credential that does not exist: {user}"),
                ),
                Some(mechanisms) => DescribeUserScramCredentialsResult {
                    user: user.to_string(),
                    credential_infos: mechanisms
                        .iter()
                        .map(|(mechanism, c)| CredentialInfo {
                            mechanism: *mechanism,
                            iterations: c.iterations,
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                },
            }
        })
        .collect();
    HandlerOutcome::Respond(ResponseBody::DescribeUserScramCredentials(
        DescribeUserScramCredentialsResponse {
            results,
            ..Default::default()
        },
    ))
}

pub(super) async fn handle_alter_user_scram_credentials(
    apis: &MetadataApis,
    ctx: &RequestContext,
    req: AlterUserScramCredentialsRequest,
) -> HandlerOutcome {
    use super::core::scram::{ScramDeletion, ScramUpsertion};
    let (requested, _) = distinct_names(
        req.deletions
            .iter()
            .map(|d| d.name.as_str())
            .chain(req.upsertions.iter().map(|u| u.name.as_str())),
    );
    let requested: Vec<String> = requested.into_iter().map(String::from).collect();
    let msg = cm::AlterUserScramCredentials {
        deletions: req
            .deletions
            .into_iter()
            .map(|d| ScramDeletion {
                name: d.name,
                mechanism: d.mechanism,
            })
            .collect(),
        upsertions: req
            .upsertions
            .into_iter()
            .map(|u| ScramUpsertion {
                name: u.name,
                mechanism: u.mechanism,
                iterations: u.iterations,
                salt: u.salt,
                salted_password: u.salted_password,
            })
            .collect(),
    };
    let answer = apis.ask(msg, DEFAULT_TIMEOUT_MS).await;
    let rows: Vec<(String, ApiError)> = match answer {
        Ok(rows) => rows,
        Err(code) => requested
            .into_iter()
            .map(|user| (user, ApiError::code(code)))
            .collect(),
    };
    let results = rows
        .into_iter()
        .map(|(user, e)| {
            ctx.record_error(e.code);
            m::alter_user_scram_credentials_response::AlterUserScramCredentialsResult {
                user,
                error_code: e.code,
                error_message: e.message,
                ..Default::default()
            }
        })
        .collect();
    HandlerOutcome::Respond(ResponseBody::AlterUserScramCredentials(
        AlterUserScramCredentialsResponse {
            results,
            ..Default::default()
        },
    ))
}

// ---------------------------------------------------------------------------------------------
// ListConfigResources

/// Types listed when a v1 request names none (Kafka 4.4's set): those kactor can describe
/// configs of. BROKER_LOGGER is one where this node serves its loggers.
const LISTED_CONFIG_TYPES: [ConfigResourceType; 5] = [
    ConfigResourceType::Topic,
    ConfigResourceType::Broker,
    ConfigResourceType::BrokerLogger,
    ConfigResourceType::ClientMetrics,
    ConfigResourceType::Group,
];

/// The resources of one type, as Kafka lists them: every topic, every registered broker, this
/// node for its loggers, and the client-metrics and group resources that have configs set (a
/// group with committed offsets but no config is not one).
fn config_resources_of(
    apis: &MetadataApis,
    image: &MetadataImage,
    ty: ConfigResourceType,
) -> Vec<String> {
    match ty {
        ConfigResourceType::Topic => image.topics.by_name.keys().cloned().collect(),
        ConfigResourceType::Broker => image.brokers.keys().map(|id| id.to_string()).collect(),
        ConfigResourceType::BrokerLogger => apis
            .loggers
            .iter()
            .map(|_| apis.node_id.to_string())
            .collect(),
        _ => image
            .configs
            .iter()
            .filter(|(r, values)| r.resource_type == ty && !values.is_empty())
            .map(|(r, _)| r.name.clone())
            .collect(),
    }
}

pub(super) async fn handle_list_config_resources(
    apis: &MetadataApis,
    ctx: &RequestContext,
    req: ListConfigResourcesRequest,
) -> HandlerOutcome {
    let image = apis.snapshot();
    // v0 (ListClientMetricsResources) lists client-metrics resources only.
    let requested: Vec<i8> = if ctx.api_version == 0 {
        vec![ConfigResourceType::ClientMetrics.id()]
    } else if req.resource_types.is_empty() {
        LISTED_CONFIG_TYPES.iter().map(|t| t.id()).collect()
    } else {
        req.resource_types.clone()
    };
    let types: Option<Vec<ConfigResourceType>> = requested
        .iter()
        .map(|&id| {
            let ty = ConfigResourceType::from_id(id);
            LISTED_CONFIG_TYPES.contains(&ty).then_some(ty)
        })
        .collect();
    let resp = match types {
        None => ListConfigResourcesResponse {
            error_code: UNSUPPORTED_VERSION,
            ..Default::default()
        },
        Some(types) => ListConfigResourcesResponse {
            config_resources: types
                .into_iter()
                .flat_map(|ty| {
                    config_resources_of(apis, &image, ty)
                        .into_iter()
                        .map(
                            move |name| m::list_config_resources_response::ConfigResource {
                                resource_name: name,
                                resource_type: ty.id(),
                                ..Default::default()
                            },
                        )
                })
                .collect(),
            ..Default::default()
        },
    };
    ctx.record_error(resp.error_code);
    HandlerOutcome::Respond(ResponseBody::ListConfigResources(resp))
}

// ---------------------------------------------------------------------------------------------
// UnregisterBroker

pub(super) async fn handle_unregister_broker(
    apis: &MetadataApis,
    ctx: &RequestContext,
    req: UnregisterBrokerRequest,
) -> HandlerOutcome {
    let error = match apis
        .ask(
            cm::UnregisterBroker {
                broker_id: req.broker_id,
            },
            DEFAULT_TIMEOUT_MS,
        )
        .await
    {
        Ok(e) => e,
        Err(code) => ApiError::code(code),
    };
    ctx.record_error(error.code);
    HandlerOutcome::Respond(ResponseBody::UnregisterBroker(UnregisterBrokerResponse {
        error_code: error.code,
        error_message: error.message,
        ..Default::default()
    }))
}
