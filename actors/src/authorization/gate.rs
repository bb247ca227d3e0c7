//! The per-API checks (Kafka's `KafkaApis` / `ControllerApis` authorization): a layer around
//! every registered handler, installed last, so that a request is checked once, where it
//! enters this node, before any handler, forwarding or coordinator sees it.
//!
//! For each API, [`pre`] decides from the request what Kafka decides: refuse it whole (an
//! error response shaped as Kafka's `getErrorResponse`), or take out the parts the requester
//! may not touch, let the handler serve the rest, and put the refused parts back into the
//! answer with their error codes ([`Post`]). Answers that list what exists (Metadata for all
//! topics, ListGroups, ListTransactions, OffsetFetch of a whole group) are filtered after the
//! handler, and the `AuthorizedOperations` fields are filled for the requester.
//!
//! APIs without a rule here are served only to principals with CLUSTER_ACTION (super users,
//! brokers): anyone else's connection is closed with a log line, so a new API can never be
//! open by omission.

use std::collections::HashSet;
use std::sync::Arc;

use kactor_protocol::errors::*;
use kactor_protocol::messages::{self as m, *};
use kactor_protocol::{ApiKey, RequestBody, ResponseBody, Uuid};

use super::{AclOperation as Op, Authz, ResourceType as R, Subject, AUTHORIZED_OPERATIONS_OMITTED};
use crate::metadata::core::MetadataImage;
use crate::metadata::MetadataImageWatch;
use crate::network::{HandlerOutcome, ListenerKind, RequestContext, RequestRouter};

mod share;

/// Puts refused parts back into (or filters) the handler's answer.
type Post = Box<dyn FnOnce(ResponseBody) -> ResponseBody>;

/// What the check decided before the handler.
enum Pre {
    /// Answer this, without the handler.
    Refuse(ResponseBody),
    /// Close the connection (no response shape to refuse with), with this reason.
    Close(String),
    /// Let the handler serve this (possibly reduced) request, then apply the post step.
    Serve(RequestBody, Option<Post>),
}

/// One request's view for its checks.
#[derive(Clone)]
struct Check {
    authz: Authz,
    who: Arc<Subject>,
    image: Arc<MetadataImage>,
    auto_create_topics: bool,
    /// The API asked, for the denial counter.
    api: &'static str,
}

impl Check {
    /// A check whose denial is an event: logged by the authorizer and counted here.
    fn allow(&self, op: Op, rt: R, name: &str) -> bool {
        let allowed = self
            .authz
            .decide(&self.image.acls, &self.who, op, rt, name, true);
        if !allowed {
            crate::metrics::broker()
                .authorization_denials_total
                .with_label_values(&[self.api])
                .inc();
        }
        allowed
    }

    /// A check whose denial is not an event (listing what may be shown), so not logged.
    fn quietly(&self, op: Op, rt: R, name: &str) -> bool {
        self.authz
            .decide(&self.image.acls, &self.who, op, rt, name, false)
    }

    fn cluster(&self, op: Op) -> bool {
        self.allow(op, R::Cluster, super::CLUSTER_NAME)
    }

    fn ops(&self, rt: R, name: &str) -> i32 {
        self.authz
            .authorized_operations(&self.image.acls, &self.who, rt, name)
    }

    fn topic_name(&self, id: &Uuid) -> Option<String> {
        self.image.topics.get(id).map(|t| t.name.clone())
    }

    /// A topic named by name (older versions) or by id (newer): its name when known.
    fn name_of(&self, name: &str, id: &Uuid) -> Option<String> {
        if *id != Uuid::ZERO {
            self.topic_name(id)
        } else {
            Some(name.to_string())
        }
    }
}

/// Wraps every route of `router` with the checks. Call after every handler (and wrapper such
/// as forwarding) is registered, and before quotas, which measure refused requests too.
pub fn install(
    router: &mut RequestRouter,
    authz: Authz,
    image: MetadataImageWatch,
    auto_create_topics: bool,
) {
    if !authz.enabled() {
        return;
    }
    for key in router.api_keys() {
        let Some(inner) = router.route(key).map(|r| r.handler.clone()) else {
            continue;
        };
        let authz = authz.clone();
        let image = image.clone();
        router.wrap(key, move |ctx, body| {
            // Super users (brokers and admins, most of the traffic) pass without a string
            // formatted or an ACL looked at.
            if authz.is_super_user(&ctx.connection.principal) {
                return inner(ctx, body);
            }
            let inner = inner.clone();
            let who = authz.subject(&ctx.connection.principal, ctx.connection.peer.ip());
            let check = Check {
                authz: authz.clone(),
                who: Arc::new(who),
                image: image.borrow().clone(),
                auto_create_topics,
                api: ctx.api_key.name(),
            };
            Box::pin(async move {
                match pre(&check, &ctx, body) {
                    Pre::Refuse(response) => HandlerOutcome::Respond(response),
                    Pre::Close(reason) => {
                        tracing::info!(
                            connection = ctx.connection.connection_id,
                            principal = %check.who.principal,
                            api = ctx.api_key.name(),
                            "closing connection: {reason}"
                        );
                        HandlerOutcome::Close(reason)
                    }
                    Pre::Serve(body, None) => inner(ctx, body).await,
                    Pre::Serve(body, Some(post)) => map_response(inner(ctx, body).await, post),
                }
            })
        });
    }
}

fn map_response(outcome: HandlerOutcome, post: Post) -> HandlerOutcome {
    match outcome {
        HandlerOutcome::Respond(r) => HandlerOutcome::Respond(post(r)),
        HandlerOutcome::Throttled {
            response: Some(r),
            mute,
        } => HandlerOutcome::Throttled {
            response: Some(post(r)),
            mute,
        },
        other => other,
    }
}

fn post(f: impl FnOnce(ResponseBody) -> ResponseBody + 'static) -> Option<Post> {
    Some(Box::new(f))
}

/// Serves `body` (its refused parts already taken out) and, when some were refused, appends
/// their error entries to the handler's answer with `append`.
fn serve_rest<E: 'static>(
    body: RequestBody,
    errors: Vec<E>,
    append: fn(&mut ResponseBody, Vec<E>),
) -> Pre {
    if errors.is_empty() {
        return Pre::Serve(body, None);
    }
    Pre::Serve(
        body,
        post(move |mut resp| {
            append(&mut resp, errors);
            resp
        }),
    )
}

/// Kafka's default message for an error code.
fn message(code: i16) -> Option<String> {
    Some(ErrorCode::for_code(code).default_message().to_string())
}

/// The checks of one request (see the module comment).
fn pre(c: &Check, ctx: &RequestContext, body: RequestBody) -> Pre {
    let v = ctx.api_version;
    if ctx.connection.listener_kind == ListenerKind::Controller {
        // Controller listeners serve the quorum and brokers (Kafka's ControllerApis: every
        // request there needs CLUSTER_ACTION, admin ones ALTER/DESCRIBE on the cluster).
        let op = match ctx.api_key {
            ApiKey::ApiVersions | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate => {
                return Pre::Serve(body, None)
            }
            // Unlike on a broker, DescribeCluster at a controller needs ALTER on the cluster
            // (Kafka's ControllerApis); answered with its error shape.
            ApiKey::DescribeCluster => {
                return cluster_gate(c, Op::Alter, body, std::convert::identity, |_| {
                    ResponseBody::DescribeCluster(DescribeClusterResponse {
                        error_code: CLUSTER_AUTHORIZATION_FAILED,
                        error_message: message(CLUSTER_AUTHORIZATION_FAILED),
                        cluster_authorized_operations: AUTHORIZED_OPERATIONS_OMITTED,
                        ..Default::default()
                    })
                })
            }
            ApiKey::Vote
            | ApiKey::BeginQuorumEpoch
            | ApiKey::EndQuorumEpoch
            | ApiKey::FetchSnapshot
            | ApiKey::Fetch
            | ApiKey::UpdateRaftVoter
            | ApiKey::BrokerRegistration
            | ApiKey::BrokerHeartbeat
            | ApiKey::ControllerRegistration
            | ApiKey::AlterPartition
            | ApiKey::AllocateProducerIds
            | ApiKey::Envelope => Op::ClusterAction,
            _ => return broker_side(c, ctx, v, body),
        };
        if c.cluster(op) {
            return Pre::Serve(body, None);
        }
        return Pre::Close(format!(
            "{} is not authorized for {:?} on the cluster",
            c.who.principal, op
        ));
    }
    broker_side(c, ctx, v, body)
}

fn broker_side(c: &Check, ctx: &RequestContext, v: i16, body: RequestBody) -> Pre {
    match body {
        RequestBody::ApiVersions(_)
        | RequestBody::SaslHandshake(_)
        | RequestBody::SaslAuthenticate(_) => Pre::Serve(body, None),
        RequestBody::Produce(r) => produce(c, r),
        RequestBody::Fetch(r) => fetch(c, r),
        RequestBody::Metadata(r) => metadata(c, v, r),
        RequestBody::ListOffsets(r) => list_offsets(c, r),
        RequestBody::OffsetForLeaderEpoch(r) => offset_for_leader_epoch(c, r),
        RequestBody::FindCoordinator(r) => find_coordinator(c, v, r),
        RequestBody::JoinGroup(r) => {
            if c.allow(Op::Read, R::Group, &r.group_id) {
                return Pre::Serve(RequestBody::JoinGroup(r), None);
            }
            let out = crate::group::core::api::JoinGroupOutput::error(
                GROUP_AUTHORIZATION_FAILED,
                &r.member_id,
            );
            Pre::Refuse(ResponseBody::JoinGroup(
                crate::group::apis::join_group_response(v, out),
            ))
        }
        RequestBody::SyncGroup(r) => {
            if c.allow(Op::Read, R::Group, &r.group_id) {
                return Pre::Serve(RequestBody::SyncGroup(r), None);
            }
            let out = crate::group::core::api::SyncGroupOutput::error(GROUP_AUTHORIZATION_FAILED);
            Pre::Refuse(ResponseBody::SyncGroup(
                crate::group::apis::sync_group_response(v, out),
            ))
        }
        RequestBody::Heartbeat(r) => {
            if c.allow(Op::Read, R::Group, &r.group_id) {
                return Pre::Serve(RequestBody::Heartbeat(r), None);
            }
            Pre::Refuse(ResponseBody::Heartbeat(HeartbeatResponse {
                error_code: GROUP_AUTHORIZATION_FAILED,
                ..Default::default()
            }))
        }
        RequestBody::LeaveGroup(r) => {
            if c.allow(Op::Read, R::Group, &r.group_id) {
                return Pre::Serve(RequestBody::LeaveGroup(r), None);
            }
            Pre::Refuse(ResponseBody::LeaveGroup(LeaveGroupResponse {
                error_code: GROUP_AUTHORIZATION_FAILED,
                ..Default::default()
            }))
        }
        RequestBody::ConsumerGroupHeartbeat(r) => {
            let code = if !c.allow(Op::Read, R::Group, &r.group_id) {
                GROUP_AUTHORIZATION_FAILED
            } else if r
                .subscribed_topic_names
                .iter()
                .flatten()
                .any(|t| !c.allow(Op::Describe, R::Topic, t))
            {
                // Subscribing to a topic one may not describe (KIP-848).
                TOPIC_AUTHORIZATION_FAILED
            } else {
                return Pre::Serve(RequestBody::ConsumerGroupHeartbeat(r), None);
            };
            Pre::Refuse(ResponseBody::ConsumerGroupHeartbeat(
                ConsumerGroupHeartbeatResponse {
                    error_code: code,
                    error_message: message(code),
                    member_epoch: 0,
                    ..Default::default()
                },
            ))
        }
        RequestBody::OffsetCommit(r) => offset_commit(c, r),
        RequestBody::TxnOffsetCommit(r) => txn_offset_commit(c, r),
        RequestBody::OffsetFetch(r) => offset_fetch(c, v, r),
        RequestBody::OffsetDelete(r) => offset_delete(c, r),
        RequestBody::DescribeGroups(r) => describe_groups(c, v, r),
        RequestBody::ConsumerGroupDescribe(r) => consumer_group_describe(c, r),
        RequestBody::ShareGroupHeartbeat(r) => share::heartbeat(c, r),
        RequestBody::ShareGroupDescribe(r) => share::describe(c, r),
        RequestBody::ShareFetch(r) => share::fetch(c, r),
        RequestBody::ShareAcknowledge(r) => share::acknowledge(c, r),
        RequestBody::DescribeShareGroupOffsets(r) => share::describe_offsets(c, r),
        RequestBody::AlterShareGroupOffsets(r) => share::alter_offsets(c, r),
        RequestBody::DeleteShareGroupOffsets(r) => share::delete_offsets(c, r),
        body @ (RequestBody::InitializeShareGroupState(_)
        | RequestBody::ReadShareGroupState(_)
        | RequestBody::WriteShareGroupState(_)
        | RequestBody::DeleteShareGroupState(_)
        | RequestBody::ReadShareGroupStateSummary(_)) => share::state(c, body),
        RequestBody::ListGroups(r) => {
            if c.quietly(Op::Describe, R::Cluster, super::CLUSTER_NAME) {
                return Pre::Serve(RequestBody::ListGroups(r), None);
            }
            let c = c.clone();
            Pre::Serve(
                RequestBody::ListGroups(r),
                post(move |resp| match resp {
                    ResponseBody::ListGroups(mut l) => {
                        l.groups
                            .retain(|g| c.quietly(Op::Describe, R::Group, &g.group_id));
                        ResponseBody::ListGroups(l)
                    }
                    other => other,
                }),
            )
        }
        RequestBody::DeleteGroups(r) => delete_groups(c, r),
        RequestBody::InitProducerId(r) => init_producer_id(c, r),
        RequestBody::AddPartitionsToTxn(r) => add_partitions_to_txn(c, v, r),
        RequestBody::AddOffsetsToTxn(r) => {
            let code = if !c.allow(Op::Write, R::TransactionalId, &r.transactional_id) {
                TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            } else if !c.allow(Op::Read, R::Group, &r.group_id) {
                GROUP_AUTHORIZATION_FAILED
            } else {
                return Pre::Serve(RequestBody::AddOffsetsToTxn(r), None);
            };
            Pre::Refuse(ResponseBody::AddOffsetsToTxn(AddOffsetsToTxnResponse {
                error_code: code,
                ..Default::default()
            }))
        }
        RequestBody::EndTxn(r) => {
            if c.allow(Op::Write, R::TransactionalId, &r.transactional_id) {
                return Pre::Serve(RequestBody::EndTxn(r), None);
            }
            Pre::Refuse(ResponseBody::EndTxn(EndTxnResponse {
                error_code: TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                producer_id: -1,
                producer_epoch: -1,
                ..Default::default()
            }))
        }
        RequestBody::CreateTopics(r) => create_topics(c, r),
        RequestBody::DeleteTopics(r) => delete_topics(c, v, r),
        RequestBody::CreatePartitions(r) => create_partitions(c, r),
        RequestBody::DeleteRecords(r) => delete_records(c, r),
        RequestBody::DescribeConfigs(r) => describe_configs(c, r),
        RequestBody::AlterConfigs(r) => alter_configs(c, r),
        RequestBody::IncrementalAlterConfigs(r) => incremental_alter_configs(c, r),
        RequestBody::DescribeCluster(r) => {
            let include = r.include_cluster_authorized_operations;
            let c = c.clone();
            Pre::Serve(
                RequestBody::DescribeCluster(r),
                post(move |resp| match resp {
                    ResponseBody::DescribeCluster(mut d) if include => {
                        d.cluster_authorized_operations = if c.cluster(Op::Describe) {
                            c.ops(R::Cluster, super::CLUSTER_NAME)
                        } else {
                            0
                        };
                        ResponseBody::DescribeCluster(d)
                    }
                    other => other,
                }),
            )
        }
        RequestBody::DescribeProducers(r) => describe_producers(c, r),
        RequestBody::DescribeTransactions(r) => describe_transactions(c, r),
        RequestBody::ListTransactions(r) => {
            let c = c.clone();
            Pre::Serve(
                RequestBody::ListTransactions(r),
                post(move |resp| match resp {
                    ResponseBody::ListTransactions(mut l) => {
                        l.transaction_states.retain(|t| {
                            c.quietly(Op::Describe, R::TransactionalId, &t.transactional_id)
                        });
                        ResponseBody::ListTransactions(l)
                    }
                    other => other,
                }),
            )
        }
        RequestBody::DescribeTopicPartitions(r) => describe_topic_partitions(c, r),
        // Cluster-wide admin APIs: one check, Kafka's error response.
        RequestBody::DescribeAcls(r) => {
            cluster_gate(c, Op::Describe, r, RequestBody::DescribeAcls, |_| {
                ResponseBody::DescribeAcls(DescribeAclsResponse {
                    error_code: CLUSTER_AUTHORIZATION_FAILED,
                    error_message: message(CLUSTER_AUTHORIZATION_FAILED),
                    ..Default::default()
                })
            })
        }
        RequestBody::CreateAcls(r) => cluster_gate(c, Op::Alter, r, RequestBody::CreateAcls, |r| {
            ResponseBody::CreateAcls(CreateAclsResponse {
                results: r
                    .creations
                    .iter()
                    .map(|_| m::create_acls_response::AclCreationResult {
                        error_code: CLUSTER_AUTHORIZATION_FAILED,
                        error_message: message(CLUSTER_AUTHORIZATION_FAILED),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
        }),
        RequestBody::DeleteAcls(r) => cluster_gate(c, Op::Alter, r, RequestBody::DeleteAcls, |r| {
            ResponseBody::DeleteAcls(DeleteAclsResponse {
                filter_results: r
                    .filters
                    .iter()
                    .map(|_| m::delete_acls_response::DeleteAclsFilterResult {
                        error_code: CLUSTER_AUTHORIZATION_FAILED,
                        error_message: message(CLUSTER_AUTHORIZATION_FAILED),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
        }),
        RequestBody::DescribeClientQuotas(r) => cluster_gate(
            c,
            Op::DescribeConfigs,
            r,
            RequestBody::DescribeClientQuotas,
            |_| {
                ResponseBody::DescribeClientQuotas(DescribeClientQuotasResponse {
                    error_code: CLUSTER_AUTHORIZATION_FAILED,
                    error_message: None,
                    entries: None,
                    ..Default::default()
                })
            },
        ),
        RequestBody::AlterClientQuotas(r) => cluster_gate(
            c,
            Op::AlterConfigs,
            r,
            RequestBody::AlterClientQuotas,
            |r| {
                ResponseBody::AlterClientQuotas(AlterClientQuotasResponse {
                    entries: r
                        .entries
                        .iter()
                        .map(|e| m::alter_client_quotas_response::EntryData {
                            error_code: CLUSTER_AUTHORIZATION_FAILED,
                            error_message: message(CLUSTER_AUTHORIZATION_FAILED),
                            entity: e
                                .entity
                                .iter()
                                .map(|x| m::alter_client_quotas_response::EntityData {
                                    entity_type: x.entity_type.clone(),
                                    entity_name: x.entity_name.clone(),
                                    ..Default::default()
                                })
                                .collect(),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                })
            },
        ),
        RequestBody::DescribeUserScramCredentials(r) => {
            cluster_gate(
                c,
                Op::Describe,
                r,
                RequestBody::DescribeUserScramCredentials,
                |r| {
                    // Kafka's error response has one result per user asked for, unnamed.
                    let results = r
                    .users
                    .iter()
                    .flatten()
                    .map(|_| {
                        m::describe_user_scram_credentials_response::DescribeUserScramCredentialsResult {
                            user: String::new(),
                            error_code: CLUSTER_AUTHORIZATION_FAILED,
                            error_message: message(CLUSTER_AUTHORIZATION_FAILED),
                            ..Default::default()
                        }
                    })
                    .collect();
                    ResponseBody::DescribeUserScramCredentials(
                        DescribeUserScramCredentialsResponse {
                            error_code: CLUSTER_AUTHORIZATION_FAILED,
                            error_message: message(CLUSTER_AUTHORIZATION_FAILED),
                            results,
                            ..Default::default()
                        },
                    )
                },
            )
        }
        RequestBody::AlterUserScramCredentials(r) => cluster_gate(
            c,
            Op::Alter,
            r,
            RequestBody::AlterUserScramCredentials,
            |r| {
                let users = r
                    .deletions
                    .iter()
                    .map(|d| d.name.clone())
                    .chain(r.upsertions.iter().map(|u| u.name.clone()));
                let mut seen = HashSet::new();
                ResponseBody::AlterUserScramCredentials(AlterUserScramCredentialsResponse {
                results: users
                    .filter(|u| seen.insert(u.clone()))
                    .map(|user| {
                        m::alter_user_scram_credentials_response::AlterUserScramCredentialsResult {
                            user,
                            error_code: CLUSTER_AUTHORIZATION_FAILED,
                            error_message: message(CLUSTER_AUTHORIZATION_FAILED),
                            ..Default::default()
                        }
                    })
                    .collect(),
                ..Default::default()
            })
            },
        ),
        RequestBody::DescribeLogDirs(r) => {
            cluster_gate(c, Op::Describe, r, RequestBody::DescribeLogDirs, |_| {
                ResponseBody::DescribeLogDirs(DescribeLogDirsResponse {
                    error_code: CLUSTER_AUTHORIZATION_FAILED,
                    ..Default::default()
                })
            })
        }
        RequestBody::ElectLeaders(r) => {
            cluster_gate(c, Op::Alter, r, RequestBody::ElectLeaders, |r| {
                use m::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
                // Every partition named, refused (none when all partitions were asked for).
                let replica_election_results = r
                    .topic_partitions
                    .iter()
                    .flatten()
                    .map(|t| ReplicaElectionResult {
                        topic: t.topic.clone(),
                        partition_result: t
                            .partitions
                            .iter()
                            .map(|p| PartitionResult {
                                partition_id: *p,
                                error_code: CLUSTER_AUTHORIZATION_FAILED,
                                error_message: message(CLUSTER_AUTHORIZATION_FAILED),
                                ..Default::default()
                            })
                            .collect(),
                        ..Default::default()
                    })
                    .collect();
                ResponseBody::ElectLeaders(ElectLeadersResponse {
                    // The top-level code exists from v1.
                    error_code: if v >= 1 {
                        CLUSTER_AUTHORIZATION_FAILED
                    } else {
                        NONE
                    },
                    replica_election_results,
                    ..Default::default()
                })
            })
        }
        RequestBody::AlterPartitionReassignments(r) => cluster_gate(
            c,
            Op::Alter,
            r,
            RequestBody::AlterPartitionReassignments,
            |r| {
                use m::alter_partition_reassignments_response::{
                    ReassignablePartitionResponse, ReassignableTopicResponse,
                };
                let responses = r
                    .topics
                    .iter()
                    .map(|t| ReassignableTopicResponse {
                        name: t.name.clone(),
                        partitions: t
                            .partitions
                            .iter()
                            .map(|p| ReassignablePartitionResponse {
                                partition_index: p.partition_index,
                                error_code: CLUSTER_AUTHORIZATION_FAILED,
                                error_message: message(CLUSTER_AUTHORIZATION_FAILED),
                                ..Default::default()
                            })
                            .collect(),
                        ..Default::default()
                    })
                    .collect();
                ResponseBody::AlterPartitionReassignments(AlterPartitionReassignmentsResponse {
                    error_code: CLUSTER_AUTHORIZATION_FAILED,
                    error_message: message(CLUSTER_AUTHORIZATION_FAILED),
                    responses,
                    ..Default::default()
                })
            },
        ),
        RequestBody::ListPartitionReassignments(r) => cluster_gate(
            c,
            Op::Describe,
            r,
            RequestBody::ListPartitionReassignments,
            |_| {
                ResponseBody::ListPartitionReassignments(ListPartitionReassignmentsResponse {
                    error_code: CLUSTER_AUTHORIZATION_FAILED,
                    error_message: message(CLUSTER_AUTHORIZATION_FAILED),
                    ..Default::default()
                })
            },
        ),
        RequestBody::UpdateFeatures(r) => {
            cluster_gate(c, Op::Alter, r, RequestBody::UpdateFeatures, |_| {
                ResponseBody::UpdateFeatures(UpdateFeaturesResponse {
                    error_code: CLUSTER_AUTHORIZATION_FAILED,
                    error_message: message(CLUSTER_AUTHORIZATION_FAILED),
                    ..Default::default()
                })
            })
        }
        RequestBody::DescribeQuorum(r) => {
            cluster_gate(c, Op::Describe, r, RequestBody::DescribeQuorum, |_| {
                ResponseBody::DescribeQuorum(DescribeQuorumResponse {
                    error_code: CLUSTER_AUTHORIZATION_FAILED,
                    error_message: message(CLUSTER_AUTHORIZATION_FAILED),
                    ..Default::default()
                })
            })
        }
        RequestBody::ListConfigResources(r) => cluster_gate(
            c,
            Op::DescribeConfigs,
            r,
            RequestBody::ListConfigResources,
            |_| {
                ResponseBody::ListConfigResources(ListConfigResourcesResponse {
                    error_code: CLUSTER_AUTHORIZATION_FAILED,
                    ..Default::default()
                })
            },
        ),
        RequestBody::UnregisterBroker(r) => {
            cluster_gate(c, Op::Alter, r, RequestBody::UnregisterBroker, |_| {
                ResponseBody::UnregisterBroker(UnregisterBrokerResponse {
                    error_code: CLUSTER_AUTHORIZATION_FAILED,
                    error_message: message(CLUSTER_AUTHORIZATION_FAILED),
                    ..Default::default()
                })
            })
        }
        // ControllerApis: a voter change needs ALTER on the cluster.
        RequestBody::AddRaftVoter(r) => {
            cluster_gate(c, Op::Alter, r, RequestBody::AddRaftVoter, |_| {
                ResponseBody::AddRaftVoter(AddRaftVoterResponse {
                    error_code: CLUSTER_AUTHORIZATION_FAILED,
                    error_message: message(CLUSTER_AUTHORIZATION_FAILED),
                    ..Default::default()
                })
            })
        }
        RequestBody::RemoveRaftVoter(r) => {
            cluster_gate(c, Op::Alter, r, RequestBody::RemoveRaftVoter, |_| {
                ResponseBody::RemoveRaftVoter(RemoveRaftVoterResponse {
                    error_code: CLUSTER_AUTHORIZATION_FAILED,
                    error_message: message(CLUSTER_AUTHORIZATION_FAILED),
                    ..Default::default()
                })
            })
        }
        RequestBody::WriteTxnMarkers(_) => {
            if c.quietly(Op::Alter, R::Cluster, super::CLUSTER_NAME) || c.cluster(Op::ClusterAction)
            {
                Pre::Serve(body, None)
            } else {
                Pre::Close(format!(
                    "{} is not authorized for CLUSTER_ACTION on the cluster",
                    c.who.principal
                ))
            }
        }
        // Inter-broker APIs on a broker listener (AddPartitionsToTxn v4+ is handled above).
        RequestBody::Envelope(_) | RequestBody::AlterPartition(_) => {
            if c.cluster(Op::ClusterAction) {
                Pre::Serve(body, None)
            } else {
                Pre::Close(format!(
                    "{} is not authorized for CLUSTER_ACTION on the cluster",
                    c.who.principal
                ))
            }
        }
        other => {
            if c.cluster(Op::ClusterAction) {
                return Pre::Serve(other, None);
            }
            Pre::Close(format!(
                "{} is served to super users only while an authorizer is set",
                ctx.api_key.name()
            ))
        }
    }
}

/// One check of `op` on the cluster for the whole request: served as it is, or refused with
/// the answer `refuse` shapes from it.
fn cluster_gate<T>(
    c: &Check,
    op: Op,
    req: T,
    serve: fn(T) -> RequestBody,
    refuse: impl FnOnce(&T) -> ResponseBody,
) -> Pre {
    if c.cluster(op) {
        Pre::Serve(serve(req), None)
    } else {
        Pre::Refuse(refuse(&req))
    }
}

// ---------------------------------------------------------------------------------------------
// Produce and Fetch

fn produce(c: &Check, mut r: ProduceRequest) -> Pre {
    use m::produce_response::{PartitionProduceResponse, TopicProduceResponse};
    let error_topic = |t: &m::produce_request::TopicProduceData, code: i16| TopicProduceResponse {
        name: t.name.clone(),
        topic_id: t.topic_id,
        partition_responses: t
            .partition_data
            .iter()
            .map(|p| PartitionProduceResponse {
                index: p.index,
                error_code: code,
                base_offset: -1,
                log_append_time_ms: -1,
                log_start_offset: -1,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    // Kafka checks the transactional id only when some batch is transactional, and refuses
    // transactional batches that come without one.
    if has_transactional_records(&r) {
        let allowed = r
            .transactional_id
            .as_deref()
            .is_some_and(|txn| c.allow(Op::Write, R::TransactionalId, txn));
        if !allowed {
            if r.acks == 0 {
                return Pre::Close("transactional id not authorized (acks=0)".into());
            }
            return Pre::Refuse(ResponseBody::Produce(ProduceResponse {
                responses: r
                    .topic_data
                    .iter()
                    .map(|t| error_topic(t, TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
                    .collect(),
                ..Default::default()
            }));
        }
    }
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut r.topic_data)
        .into_iter()
        .partition(|t| match c.name_of(&t.name, &t.topic_id) {
            Some(name) => c.allow(Op::Write, R::Topic, &name),
            // An unknown id: the handler answers UNKNOWN_TOPIC_ID.
            None => true,
        });
    if r.acks == 0 && !refused.is_empty() {
        // Kafka closes an acks=0 producer's connection on any error, so that it notices.
        return Pre::Close("topic not authorized for WRITE (acks=0)".into());
    }
    let errors: Vec<_> = refused
        .iter()
        .map(|t| error_topic(t, TOPIC_AUTHORIZATION_FAILED))
        .collect();
    if allowed.is_empty() && !errors.is_empty() {
        return Pre::Refuse(ResponseBody::Produce(ProduceResponse {
            responses: errors,
            ..Default::default()
        }));
    }
    r.topic_data = allowed;
    serve_rest(RequestBody::Produce(r), errors, |resp, e| {
        if let ResponseBody::Produce(p) = resp {
            p.responses.extend(e);
        }
    })
}

/// Kafka's `RequestUtils.hasTransactionalRecords`: the first batch of some partition is
/// transactional.
fn has_transactional_records(r: &ProduceRequest) -> bool {
    r.topic_data
        .iter()
        .flat_map(|t| &t.partition_data)
        .any(|p| match &p.records {
            Some(kactor_protocol::codec::Records::Memory(bytes)) => {
                kactor_protocol::records::BatchHeader::parse(bytes)
                    .is_ok_and(|h| h.is_transactional())
            }
            _ => false,
        })
}

/// Fetch topics as a request names them: by id (v13+) or by name, looked up without copies.
#[derive(Default)]
struct TopicSet {
    ids: HashSet<Uuid>,
    names: HashSet<String>,
}

impl TopicSet {
    fn of<'a>(topics: impl Iterator<Item = (&'a str, Uuid)>) -> Self {
        let mut set = TopicSet::default();
        for (name, id) in topics {
            if id == Uuid::ZERO {
                set.names.insert(name.to_string());
            } else {
                set.ids.insert(id);
            }
        }
        set
    }

    fn contains(&self, name: &str, id: Uuid) -> bool {
        if id == Uuid::ZERO {
            self.names.contains(name)
        } else {
            self.ids.contains(&id)
        }
    }
}

fn is_follower_fetch(r: &FetchRequest) -> bool {
    r.replica_id >= 0 || r.replica_state.replica_id >= 0
}

fn fetch(c: &Check, mut r: FetchRequest) -> Pre {
    use m::fetch_response::FetchableTopicResponse;
    let error_partition = |index: i32| {
        crate::partition::apis::fetch_partition_error(index, TOPIC_AUTHORIZATION_FAILED)
    };
    let error_topic = |t: &m::fetch_request::FetchTopic| FetchableTopicResponse {
        topic: t.topic.clone(),
        topic_id: t.topic_id,
        partitions: t
            .partitions
            .iter()
            .map(|p| error_partition(p.partition))
            .collect(),
        ..Default::default()
    };
    if is_follower_fetch(&r) {
        if c.cluster(Op::ClusterAction) {
            return Pre::Serve(RequestBody::Fetch(r), None);
        }
        return Pre::Refuse(ResponseBody::Fetch(FetchResponse {
            responses: r.topics.iter().map(error_topic).collect(),
            session_id: 0,
            ..Default::default()
        }));
    }
    let (allowed, refused): (Vec<_>, Vec<_>) =
        std::mem::take(&mut r.topics).into_iter().partition(|t| {
            match c.name_of(&t.topic, &t.topic_id) {
                Some(name) => c.allow(Op::Read, R::Topic, &name),
                None => true,
            }
        });
    let errors: Vec<_> = refused.iter().map(error_topic).collect();
    // Checked just now: only topics the session carries without naming them are checked
    // again below.
    let checked = TopicSet::of(allowed.iter().map(|t| (t.topic.as_str(), t.topic_id)));
    r.topics = allowed;
    let c = c.clone();
    // Partitions an incremental fetch session already holds are served without being named
    // again: an ACL removed since they were added still takes their data away.
    Pre::Serve(
        RequestBody::Fetch(r),
        post(move |resp| match resp {
            ResponseBody::Fetch(mut f) => {
                for t in &mut f.responses {
                    if checked.contains(&t.topic, t.topic_id) {
                        continue;
                    }
                    let allowed = match c.name_of(&t.topic, &t.topic_id) {
                        Some(name) => c.quietly(Op::Read, R::Topic, &name),
                        None => true,
                    };
                    if !allowed {
                        for p in &mut t.partitions {
                            *p = error_partition(p.partition_index);
                        }
                    }
                }
                // A refused topic the session also carries is answered once.
                if !errors.is_empty() {
                    let shown =
                        TopicSet::of(f.responses.iter().map(|t| (t.topic.as_str(), t.topic_id)));
                    f.responses.extend(
                        errors
                            .into_iter()
                            .filter(|t| !shown.contains(&t.topic, t.topic_id)),
                    );
                }
                ResponseBody::Fetch(f)
            }
            other => other,
        }),
    )
}

fn list_offsets(c: &Check, mut r: ListOffsetsRequest) -> Pre {
    use m::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut r.topics)
        .into_iter()
        .partition(|t| c.allow(Op::Describe, R::Topic, &t.name));
    let errors: Vec<_> = refused
        .iter()
        .map(|t| ListOffsetsTopicResponse {
            name: t.name.clone(),
            partitions: t
                .partitions
                .iter()
                .map(|p| ListOffsetsPartitionResponse {
                    partition_index: p.partition_index,
                    error_code: TOPIC_AUTHORIZATION_FAILED,
                    timestamp: -1,
                    offset: -1,
                    leader_epoch: -1,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    r.topics = allowed;
    serve_rest(RequestBody::ListOffsets(r), errors, |resp, e| {
        if let ResponseBody::ListOffsets(l) = resp {
            l.topics.extend(e);
        }
    })
}

fn offset_for_leader_epoch(c: &Check, mut r: OffsetForLeaderEpochRequest) -> Pre {
    use m::offset_for_leader_epoch_response::{EpochEndOffset, OffsetForLeaderTopicResult};
    if c.quietly(Op::ClusterAction, R::Cluster, super::CLUSTER_NAME) {
        return Pre::Serve(RequestBody::OffsetForLeaderEpoch(r), None);
    }
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut r.topics)
        .into_iter()
        .partition(|t| c.allow(Op::Describe, R::Topic, &t.topic));
    let errors: Vec<_> = refused
        .iter()
        .map(|t| OffsetForLeaderTopicResult {
            topic: t.topic.clone(),
            partitions: t
                .partitions
                .iter()
                .map(|p| EpochEndOffset {
                    partition: p.partition,
                    error_code: TOPIC_AUTHORIZATION_FAILED,
                    leader_epoch: -1,
                    end_offset: -1,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    r.topics = allowed;
    serve_rest(RequestBody::OffsetForLeaderEpoch(r), errors, |resp, e| {
        if let ResponseBody::OffsetForLeaderEpoch(o) = resp {
            o.topics.extend(e);
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Metadata

fn metadata(c: &Check, v: i16, mut r: MetadataRequest) -> Pre {
    use m::metadata_response::MetadataResponseTopic;
    let include_topic_ops = r.include_topic_authorized_operations;
    let include_cluster_ops = v >= 8 && r.include_cluster_authorized_operations;
    let mut errors: Vec<MetadataResponseTopic> = Vec::new();
    // Null asks for every topic; so does an empty list at v0.
    let all_topics = match &r.topics {
        None => true,
        Some(t) => v == 0 && t.is_empty(),
    };
    // Every named topic refused: nothing of the handler's answer may be shown (at v0 the
    // empty list left would ask for all topics).
    let mut none_left = false;
    if !all_topics {
        let topics = r.topics.take().unwrap_or_default();
        let auto_create = c.auto_create_topics && (v < 4 || r.allow_auto_topic_creation);
        let may_create_any = auto_create && c.quietly(Op::Create, R::Cluster, super::CLUSTER_NAME);
        let mut kept = Vec::new();
        for t in topics {
            let by_id = t.name.is_none() && t.topic_id != Uuid::ZERO;
            let name = match &t.name {
                Some(n) => Some(n.clone()),
                None => c.topic_name(&t.topic_id),
            };
            let Some(name) = name else {
                kept.push(t);
                continue;
            };
            if !c.allow(Op::Describe, R::Topic, &name) {
                // By id, the id is no secret (Kafka answers it back); by name, the existence
                // of the topic is not disclosed.
                errors.push(MetadataResponseTopic {
                    error_code: TOPIC_AUTHORIZATION_FAILED,
                    name: (!by_id).then(|| name.clone()),
                    topic_id: if by_id { t.topic_id } else { Uuid::ZERO },
                    topic_authorized_operations: AUTHORIZED_OPERATIONS_OMITTED,
                    ..Default::default()
                });
                continue;
            }
            let missing = c.image.topics.get_by_name(&name).is_none();
            if missing && auto_create && !may_create_any && !c.allow(Op::Create, R::Topic, &name) {
                errors.push(MetadataResponseTopic {
                    error_code: TOPIC_AUTHORIZATION_FAILED,
                    name: Some(name),
                    topic_authorized_operations: AUTHORIZED_OPERATIONS_OMITTED,
                    ..Default::default()
                });
                continue;
            }
            kept.push(t);
        }
        none_left = kept.is_empty() && !errors.is_empty();
        r.topics = Some(kept);
    }
    let c = c.clone();
    Pre::Serve(
        RequestBody::Metadata(r),
        post(move |resp| match resp {
            ResponseBody::Metadata(mut md) => {
                if none_left {
                    md.topics.clear();
                }
                if all_topics {
                    md.topics.retain(|t| {
                        t.name
                            .as_deref()
                            .is_none_or(|n| c.quietly(Op::Describe, R::Topic, n))
                    });
                }
                if include_topic_ops {
                    // Every topic the requester may describe, found or not (Kafka fills the
                    // field for UNKNOWN_TOPIC_OR_PARTITION answers too).
                    for t in &mut md.topics {
                        if let Some(name) = t.name.as_deref() {
                            t.topic_authorized_operations = c.ops(R::Topic, name);
                        }
                    }
                }
                if include_cluster_ops {
                    md.cluster_authorized_operations = if c.cluster(Op::Describe) {
                        c.ops(R::Cluster, super::CLUSTER_NAME)
                    } else {
                        0
                    };
                }
                md.topics.extend(errors);
                ResponseBody::Metadata(md)
            }
            other => other,
        }),
    )
}

fn describe_topic_partitions(c: &Check, mut r: DescribeTopicPartitionsRequest) -> Pre {
    use m::describe_topic_partitions_response::DescribeTopicPartitionsResponseTopic;
    let named = !r.topics.is_empty();
    if !named {
        // Every topic: page over the ones the requester may describe only, so that neither
        // the answer nor its cursor names another (the handler pages an explicit list alike).
        r.topics = c
            .image
            .topics
            .by_name
            .keys()
            .filter(|n| c.quietly(Op::Describe, R::Topic, n))
            .map(|n| m::describe_topic_partitions_request::TopicRequest {
                name: n.clone(),
                ..Default::default()
            })
            .collect();
        if r.topics.is_empty() {
            return Pre::Refuse(ResponseBody::DescribeTopicPartitions(
                DescribeTopicPartitionsResponse {
                    next_cursor: None,
                    ..Default::default()
                },
            ));
        }
    }
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut r.topics)
        .into_iter()
        .partition(|t| c.allow(Op::Describe, R::Topic, &t.name));
    let errors: Vec<_> = refused
        .into_iter()
        .map(|t| DescribeTopicPartitionsResponseTopic {
            error_code: TOPIC_AUTHORIZATION_FAILED,
            name: Some(t.name),
            topic_authorized_operations: AUTHORIZED_OPERATIONS_OMITTED,
            ..Default::default()
        })
        .collect();
    if named && allowed.is_empty() {
        return Pre::Refuse(ResponseBody::DescribeTopicPartitions(
            DescribeTopicPartitionsResponse {
                topics: errors,
                next_cursor: None,
                ..Default::default()
            },
        ));
    }
    r.topics = allowed;
    let c = c.clone();
    Pre::Serve(
        RequestBody::DescribeTopicPartitions(r),
        post(move |resp| match resp {
            ResponseBody::DescribeTopicPartitions(mut d) => {
                d.topics.retain(|t| {
                    t.name
                        .as_deref()
                        .is_none_or(|n| c.quietly(Op::Describe, R::Topic, n))
                });
                for t in &mut d.topics {
                    if let Some(name) = t.name.as_deref() {
                        if t.topic_authorized_operations != AUTHORIZED_OPERATIONS_OMITTED {
                            t.topic_authorized_operations = c.ops(R::Topic, name);
                        }
                    }
                }
                d.topics.extend(errors);
                ResponseBody::DescribeTopicPartitions(d)
            }
            other => other,
        }),
    )
}

// ---------------------------------------------------------------------------------------------
// Coordinators and groups

fn find_coordinator(c: &Check, v: i16, r: FindCoordinatorRequest) -> Pre {
    use m::find_coordinator_response::Coordinator;
    let refusal = |key_type: i8, key: &str| -> Option<i16> {
        match key_type {
            0 if !c.allow(Op::Describe, R::Group, key) => Some(GROUP_AUTHORIZATION_FAILED),
            1 if !c.allow(Op::Describe, R::TransactionalId, key) => {
                Some(TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            }
            // Share-group state coordinators are for brokers.
            2 if !c.cluster(Op::ClusterAction) => Some(CLUSTER_AUTHORIZATION_FAILED),
            _ => None,
        }
    };
    if v < 4 {
        return match refusal(r.key_type, &r.key) {
            None => Pre::Serve(RequestBody::FindCoordinator(r), None),
            Some(code) => Pre::Refuse(ResponseBody::FindCoordinator(FindCoordinatorResponse {
                error_code: code,
                // The message field exists from v1.
                error_message: if v >= 1 { message(code) } else { None },
                node_id: -1,
                host: String::new(),
                port: -1,
                ..Default::default()
            })),
        };
    }
    let refused: Vec<(usize, i16)> = r
        .coordinator_keys
        .iter()
        .enumerate()
        .filter_map(|(i, k)| refusal(r.key_type, k).map(|code| (i, code)))
        .collect();
    if refused.is_empty() {
        return Pre::Serve(RequestBody::FindCoordinator(r), None);
    }
    let keys = r.coordinator_keys.clone();
    // Kafka's v4+ answer leaves the message empty.
    let error = |i: usize, code: i16| Coordinator {
        key: keys[i].clone(),
        node_id: -1,
        host: String::new(),
        port: -1,
        error_code: code,
        error_message: Some(String::new()),
        ..Default::default()
    };
    let errors: Vec<(usize, Coordinator)> = refused
        .iter()
        .map(|&(i, code)| (i, error(i, code)))
        .collect();
    if refused.len() == keys.len() {
        return Pre::Refuse(ResponseBody::FindCoordinator(FindCoordinatorResponse {
            coordinators: errors.into_iter().map(|(_, e)| e).collect(),
            ..Default::default()
        }));
    }
    let mut reduced = r;
    let refused_at: HashSet<usize> = refused.iter().map(|(i, _)| *i).collect();
    reduced.coordinator_keys = keys
        .iter()
        .enumerate()
        .filter(|(i, _)| !refused_at.contains(i))
        .map(|(_, k)| k.clone())
        .collect();
    Pre::Serve(
        RequestBody::FindCoordinator(reduced),
        post(move |resp| match resp {
            ResponseBody::FindCoordinator(mut f) => {
                // Back in request order.
                let mut served = std::mem::take(&mut f.coordinators).into_iter();
                let mut errors = errors.into_iter().peekable();
                for i in 0..keys.len() {
                    match errors.peek() {
                        Some((at, _)) if *at == i => {
                            f.coordinators.push(errors.next().expect("peeked").1)
                        }
                        _ => f.coordinators.extend(served.next()),
                    }
                }
                ResponseBody::FindCoordinator(f)
            }
            other => other,
        }),
    )
}

fn offset_commit(c: &Check, mut r: OffsetCommitRequest) -> Pre {
    use m::offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
    let error_topic = |t: &m::offset_commit_request::OffsetCommitRequestTopic, code: i16| {
        OffsetCommitResponseTopic {
            name: t.name.clone(),
            topic_id: t.topic_id,
            partitions: t
                .partitions
                .iter()
                .map(|p| OffsetCommitResponsePartition {
                    partition_index: p.partition_index,
                    error_code: code,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    };
    if !c.allow(Op::Read, R::Group, &r.group_id) {
        return Pre::Refuse(ResponseBody::OffsetCommit(OffsetCommitResponse {
            topics: r
                .topics
                .iter()
                .map(|t| error_topic(t, GROUP_AUTHORIZATION_FAILED))
                .collect(),
            ..Default::default()
        }));
    }
    let (allowed, refused): (Vec<_>, Vec<_>) =
        std::mem::take(&mut r.topics).into_iter().partition(|t| {
            match c.name_of(&t.name, &t.topic_id) {
                Some(name) => c.allow(Op::Read, R::Topic, &name),
                None => true,
            }
        });
    let errors: Vec<_> = refused
        .iter()
        .map(|t| error_topic(t, TOPIC_AUTHORIZATION_FAILED))
        .collect();
    if allowed.is_empty() && !errors.is_empty() {
        return Pre::Refuse(ResponseBody::OffsetCommit(OffsetCommitResponse {
            topics: errors,
            ..Default::default()
        }));
    }
    r.topics = allowed;
    serve_rest(RequestBody::OffsetCommit(r), errors, |resp, e| {
        if let ResponseBody::OffsetCommit(o) = resp {
            o.topics.extend(e);
        }
    })
}

fn txn_offset_commit(c: &Check, mut r: TxnOffsetCommitRequest) -> Pre {
    use m::txn_offset_commit_response::{
        TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
    };
    let error_topic = |t: &m::txn_offset_commit_request::TxnOffsetCommitRequestTopic, code: i16| {
        TxnOffsetCommitResponseTopic {
            name: t.name.clone(),
            topic_id: t.topic_id,
            partitions: t
                .partitions
                .iter()
                .map(|p| TxnOffsetCommitResponsePartition {
                    partition_index: p.partition_index,
                    error_code: code,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    };
    let whole = if !c.allow(Op::Write, R::TransactionalId, &r.transactional_id) {
        Some(TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    } else if !c.allow(Op::Read, R::Group, &r.group_id) {
        Some(GROUP_AUTHORIZATION_FAILED)
    } else {
        None
    };
    if let Some(code) = whole {
        return Pre::Refuse(ResponseBody::TxnOffsetCommit(TxnOffsetCommitResponse {
            topics: r.topics.iter().map(|t| error_topic(t, code)).collect(),
            ..Default::default()
        }));
    }
    let (allowed, refused): (Vec<_>, Vec<_>) =
        std::mem::take(&mut r.topics).into_iter().partition(|t| {
            match c.name_of(&t.name, &t.topic_id) {
                Some(name) => c.allow(Op::Read, R::Topic, &name),
                None => true,
            }
        });
    let errors: Vec<_> = refused
        .iter()
        .map(|t| error_topic(t, TOPIC_AUTHORIZATION_FAILED))
        .collect();
    if allowed.is_empty() && !errors.is_empty() {
        return Pre::Refuse(ResponseBody::TxnOffsetCommit(TxnOffsetCommitResponse {
            topics: errors,
            ..Default::default()
        }));
    }
    r.topics = allowed;
    serve_rest(RequestBody::TxnOffsetCommit(r), errors, |resp, e| {
        if let ResponseBody::TxnOffsetCommit(o) = resp {
            o.topics.extend(e);
        }
    })
}

fn offset_fetch(c: &Check, v: i16, mut r: OffsetFetchRequest) -> Pre {
    use m::offset_fetch_response::OffsetFetchResponseGroup;
    if v < 8 {
        if !c.allow(Op::Describe, R::Group, &r.group_id) {
            // Before v2 there is no top-level code: every partition asked for carries it.
            use m::offset_fetch_response::{
                OffsetFetchResponsePartition, OffsetFetchResponseTopic,
            };
            let topics = if v < 2 {
                r.topics
                    .iter()
                    .flatten()
                    .map(|t| OffsetFetchResponseTopic {
                        name: t.name.clone(),
                        partitions: t
                            .partition_indexes
                            .iter()
                            .map(|p| OffsetFetchResponsePartition {
                                partition_index: *p,
                                committed_offset: -1,
                                committed_leader_epoch: -1,
                                metadata: Some(String::new()),
                                error_code: GROUP_AUTHORIZATION_FAILED,
                                ..Default::default()
                            })
                            .collect(),
                        ..Default::default()
                    })
                    .collect()
            } else {
                Vec::new()
            };
            return Pre::Refuse(ResponseBody::OffsetFetch(OffsetFetchResponse {
                error_code: if v >= 2 {
                    GROUP_AUTHORIZATION_FAILED
                } else {
                    NONE
                },
                topics,
                ..Default::default()
            }));
        }
        let c = c.clone();
        let named: Option<HashSet<String>> = r
            .topics
            .as_ref()
            .map(|ts| ts.iter().map(|t| t.name.clone()).collect());
        return Pre::Serve(
            RequestBody::OffsetFetch(r),
            post(move |resp| match resp {
                ResponseBody::OffsetFetch(mut o) => {
                    // Named topics the requester may not describe are answered
                    // TOPIC_AUTHORIZATION_FAILED; a whole-group fetch just leaves them out.
                    o.topics.retain_mut(|t| {
                        if c.quietly(Op::Describe, R::Topic, &t.name) {
                            return true;
                        }
                        if named.is_some() {
                            for p in &mut t.partitions {
                                p.error_code = TOPIC_AUTHORIZATION_FAILED;
                                p.committed_offset = -1;
                                p.committed_leader_epoch = -1;
                                p.metadata = Some(String::new());
                            }
                            return true;
                        }
                        false
                    });
                    ResponseBody::OffsetFetch(o)
                }
                other => other,
            }),
        );
    }
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut r.groups)
        .into_iter()
        .partition(|g| c.allow(Op::Describe, R::Group, &g.group_id));
    let errors: Vec<_> = refused
        .iter()
        .map(|g| OffsetFetchResponseGroup {
            group_id: g.group_id.clone(),
            error_code: GROUP_AUTHORIZATION_FAILED,
            ..Default::default()
        })
        .collect();
    if allowed.is_empty() {
        return Pre::Refuse(ResponseBody::OffsetFetch(OffsetFetchResponse {
            groups: errors,
            ..Default::default()
        }));
    }
    let named: HashSet<String> = allowed
        .iter()
        .filter(|g| g.topics.is_some())
        .map(|g| g.group_id.clone())
        .collect();
    r.groups = allowed;
    let c = c.clone();
    Pre::Serve(
        RequestBody::OffsetFetch(r),
        post(move |resp| match resp {
            ResponseBody::OffsetFetch(mut o) => {
                for g in &mut o.groups {
                    let listed = named.contains(&g.group_id);
                    g.topics.retain_mut(|t| {
                        let name = c.name_of(&t.name, &t.topic_id).unwrap_or_default();
                        if c.quietly(Op::Describe, R::Topic, &name) {
                            return true;
                        }
                        if listed {
                            for p in &mut t.partitions {
                                p.error_code = TOPIC_AUTHORIZATION_FAILED;
                                p.committed_offset = -1;
                                p.committed_leader_epoch = -1;
                                p.metadata = Some(String::new());
                            }
                            return true;
                        }
                        false
                    });
                }
                o.groups.extend(errors);
                ResponseBody::OffsetFetch(o)
            }
            other => other,
        }),
    )
}

fn offset_delete(c: &Check, mut r: OffsetDeleteRequest) -> Pre {
    use m::offset_delete_response::{OffsetDeleteResponsePartition, OffsetDeleteResponseTopic};
    if !c.allow(Op::Delete, R::Group, &r.group_id) {
        return Pre::Refuse(ResponseBody::OffsetDelete(OffsetDeleteResponse {
            error_code: GROUP_AUTHORIZATION_FAILED,
            ..Default::default()
        }));
    }
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut r.topics)
        .into_iter()
        .partition(|t| c.allow(Op::Read, R::Topic, &t.name));
    let errors: Vec<_> = refused
        .iter()
        .map(|t| OffsetDeleteResponseTopic {
            name: t.name.clone(),
            partitions: t
                .partitions
                .iter()
                .map(|p| OffsetDeleteResponsePartition {
                    partition_index: p.partition_index,
                    error_code: TOPIC_AUTHORIZATION_FAILED,
                })
                .collect(),
        })
        .collect();
    r.topics = allowed;
    serve_rest(RequestBody::OffsetDelete(r), errors, |resp, e| {
        if let ResponseBody::OffsetDelete(o) = resp {
            o.topics.extend(e);
        }
    })
}

fn describe_groups(c: &Check, v: i16, mut r: DescribeGroupsRequest) -> Pre {
    use m::describe_groups_response::DescribedGroup;
    let include = r.include_authorized_operations;
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut r.groups)
        .into_iter()
        .partition(|g| c.allow(Op::Describe, R::Group, g));
    let errors: Vec<_> = refused
        .into_iter()
        .map(|group_id| DescribedGroup {
            error_code: GROUP_AUTHORIZATION_FAILED,
            // The message field exists from v6.
            error_message: if v >= 6 {
                message(GROUP_AUTHORIZATION_FAILED)
            } else {
                None
            },
            group_id,
            authorized_operations: AUTHORIZED_OPERATIONS_OMITTED,
            ..Default::default()
        })
        .collect();
    if allowed.is_empty() {
        return Pre::Refuse(ResponseBody::DescribeGroups(DescribeGroupsResponse {
            groups: errors,
            ..Default::default()
        }));
    }
    r.groups = allowed;
    let c = c.clone();
    Pre::Serve(
        RequestBody::DescribeGroups(r),
        post(move |resp| match resp {
            ResponseBody::DescribeGroups(mut d) => {
                if include {
                    for g in &mut d.groups {
                        if g.error_code == 0 {
                            g.authorized_operations = c.ops(R::Group, &g.group_id);
                        }
                    }
                }
                d.groups.extend(errors);
                ResponseBody::DescribeGroups(d)
            }
            other => other,
        }),
    )
}

fn consumer_group_describe(c: &Check, mut r: ConsumerGroupDescribeRequest) -> Pre {
    use m::consumer_group_describe_response::DescribedGroup;
    let include = r.include_authorized_operations;
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut r.group_ids)
        .into_iter()
        .partition(|g| c.allow(Op::Describe, R::Group, g));
    let errors: Vec<_> = refused
        .into_iter()
        .map(|group_id| DescribedGroup {
            error_code: GROUP_AUTHORIZATION_FAILED,
            error_message: message(GROUP_AUTHORIZATION_FAILED),
            group_id,
            authorized_operations: AUTHORIZED_OPERATIONS_OMITTED,
            ..Default::default()
        })
        .collect();
    if allowed.is_empty() {
        return Pre::Refuse(ResponseBody::ConsumerGroupDescribe(
            ConsumerGroupDescribeResponse {
                groups: errors,
                ..Default::default()
            },
        ));
    }
    r.group_ids = allowed;
    let c = c.clone();
    Pre::Serve(
        RequestBody::ConsumerGroupDescribe(r),
        post(move |resp| match resp {
            ResponseBody::ConsumerGroupDescribe(mut d) => {
                // A group whose members subscribe to or are assigned topics the requester
                // may not describe is not shown (Kafka 4.x: TOPIC_AUTHORIZATION_FAILED for
                // the group), so its topic names do not leak.
                for g in &mut d.groups {
                    if g.error_code != 0 {
                        continue;
                    }
                    let hidden = g.members.iter().any(|m| {
                        m.subscribed_topic_names
                            .iter()
                            .chain(
                                m.assignment
                                    .topic_partitions
                                    .iter()
                                    .chain(&m.target_assignment.topic_partitions)
                                    .map(|t| &t.topic_name),
                            )
                            .any(|t| !c.quietly(Op::Describe, R::Topic, t))
                    });
                    if hidden {
                        g.error_code = TOPIC_AUTHORIZATION_FAILED;
                        g.error_message = message(TOPIC_AUTHORIZATION_FAILED);
                        g.members.clear();
                        g.authorized_operations = AUTHORIZED_OPERATIONS_OMITTED;
                    }
                }
                if include {
                    for g in &mut d.groups {
                        if g.error_code == 0 {
                            g.authorized_operations = c.ops(R::Group, &g.group_id);
                        }
                    }
                }
                d.groups.extend(errors);
                ResponseBody::ConsumerGroupDescribe(d)
            }
            other => other,
        }),
    )
}

fn delete_groups(c: &Check, mut r: DeleteGroupsRequest) -> Pre {
    use m::delete_groups_response::DeletableGroupResult;
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut r.groups_names)
        .into_iter()
        .partition(|g| c.allow(Op::Delete, R::Group, g));
    let errors: Vec<_> = refused
        .into_iter()
        .map(|group_id| DeletableGroupResult {
            group_id,
            error_code: GROUP_AUTHORIZATION_FAILED,
            ..Default::default()
        })
        .collect();
    if allowed.is_empty() {
        return Pre::Refuse(ResponseBody::DeleteGroups(DeleteGroupsResponse {
            results: errors,
            ..Default::default()
        }));
    }
    r.groups_names = allowed;
    serve_rest(RequestBody::DeleteGroups(r), errors, |resp, e| {
        if let ResponseBody::DeleteGroups(d) = resp {
            d.results.extend(e);
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Transactions

fn init_producer_id(c: &Check, r: InitProducerIdRequest) -> Pre {
    let code = match r.transactional_id.as_deref() {
        Some(txn) if !c.allow(Op::Write, R::TransactionalId, txn) => {
            TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        }
        Some(_) => return Pre::Serve(RequestBody::InitProducerId(r), None),
        // An idempotent producer: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic.
        None => {
            if c.quietly(Op::IdempotentWrite, R::Cluster, super::CLUSTER_NAME)
                || c.authz
                    .decide_any(&c.image.acls, &c.who, Op::Write, R::Topic)
            {
                return Pre::Serve(RequestBody::InitProducerId(r), None);
            }
            CLUSTER_AUTHORIZATION_FAILED
        }
    };
    Pre::Refuse(ResponseBody::InitProducerId(InitProducerIdResponse {
        error_code: code,
        producer_id: -1,
        producer_epoch: -1,
        ongoing_txn_producer_id: -1,
        ongoing_txn_producer_epoch: -1,
        ..Default::default()
    }))
}

fn add_partitions_to_txn(c: &Check, v: i16, r: AddPartitionsToTxnRequest) -> Pre {
    use crate::txn::apis::topic_results;
    if v >= 4 {
        // From brokers verifying a transaction (KIP-890).
        if c.cluster(Op::ClusterAction) {
            return Pre::Serve(RequestBody::AddPartitionsToTxn(r), None);
        }
        return Pre::Refuse(ResponseBody::AddPartitionsToTxn(
            AddPartitionsToTxnResponse {
                error_code: CLUSTER_AUTHORIZATION_FAILED,
                ..Default::default()
            },
        ));
    }
    let refuse = |code_for: &dyn Fn(&str) -> i16| {
        Pre::Refuse(ResponseBody::AddPartitionsToTxn(
            AddPartitionsToTxnResponse {
                results_by_topic_v3_and_below: topic_results(&r.v3_and_below_topics, |t, _| {
                    code_for(t)
                }),
                ..Default::default()
            },
        ))
    };
    if !c.allow(
        Op::Write,
        R::TransactionalId,
        &r.v3_and_below_transactional_id,
    ) {
        return refuse(&|_| TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
    }
    let refused: HashSet<String> = r
        .v3_and_below_topics
        .iter()
        .filter(|t| !c.allow(Op::Write, R::Topic, &t.name))
        .map(|t| t.name.clone())
        .collect();
    if refused.is_empty() {
        return Pre::Serve(RequestBody::AddPartitionsToTxn(r), None);
    }
    // Kafka adds nothing when any topic is refused: the others are OPERATION_NOT_ATTEMPTED.
    refuse(&|name| {
        if refused.contains(name) {
            TOPIC_AUTHORIZATION_FAILED
        } else {
            OPERATION_NOT_ATTEMPTED
        }
    })
}

fn describe_producers(c: &Check, mut r: DescribeProducersRequest) -> Pre {
    use m::describe_producers_response::{PartitionResponse, TopicResponse};
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut r.topics)
        .into_iter()
        .partition(|t| c.allow(Op::Read, R::Topic, &t.name));
    let errors: Vec<_> = refused
        .iter()
        .map(|t| TopicResponse {
            name: t.name.clone(),
            partitions: t
                .partition_indexes
                .iter()
                .map(|p| PartitionResponse {
                    partition_index: *p,
                    error_code: TOPIC_AUTHORIZATION_FAILED,
                    error_message: message(TOPIC_AUTHORIZATION_FAILED),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    r.topics = allowed;
    serve_rest(RequestBody::DescribeProducers(r), errors, |resp, e| {
        if let ResponseBody::DescribeProducers(d) = resp {
            d.topics.extend(e);
        }
    })
}

fn describe_transactions(c: &Check, mut r: DescribeTransactionsRequest) -> Pre {
    use m::describe_transactions_response::TransactionState;
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut r.transactional_ids)
        .into_iter()
        .partition(|t| c.allow(Op::Describe, R::TransactionalId, t));
    let errors: Vec<_> = refused
        .into_iter()
        .map(|transactional_id| TransactionState {
            error_code: TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            transactional_id,
            producer_id: -1,
            producer_epoch: -1,
            transaction_start_time_ms: -1,
            ..Default::default()
        })
        .collect();
    r.transactional_ids = allowed;
    let c = c.clone();
    Pre::Serve(
        RequestBody::DescribeTransactions(r),
        post(move |resp| match resp {
            ResponseBody::DescribeTransactions(mut d) => {
                // Only the partitions of topics the requester may describe.
                for s in &mut d.transaction_states {
                    s.topics
                        .retain(|t| c.quietly(Op::Describe, R::Topic, &t.topic));
                }
                d.transaction_states.extend(errors);
                ResponseBody::DescribeTransactions(d)
            }
            other => other,
        }),
    )
}

// ---------------------------------------------------------------------------------------------
// Topic administration

fn create_topics(c: &Check, mut r: CreateTopicsRequest) -> Pre {
    use m::create_topics_response::CreatableTopicResult;
    let cluster_create = c.quietly(Op::Create, R::Cluster, super::CLUSTER_NAME);
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut r.topics)
        .into_iter()
        .partition(|t| cluster_create || c.allow(Op::Create, R::Topic, &t.name));
    let errors: Vec<_> = refused
        .into_iter()
        .map(|t| CreatableTopicResult {
            name: t.name,
            error_code: TOPIC_AUTHORIZATION_FAILED,
            error_message: Some("Authorization failed.".into()),
            topic_config_error_code: TOPIC_AUTHORIZATION_FAILED,
            num_partitions: -1,
            replication_factor: -1,
            configs: None,
            ..Default::default()
        })
        .collect();
    if !errors.is_empty() && allowed.is_empty() {
        return Pre::Refuse(ResponseBody::CreateTopics(CreateTopicsResponse {
            topics: errors,
            ..Default::default()
        }));
    }
    r.topics = allowed;
    let c = c.clone();
    Pre::Serve(
        RequestBody::CreateTopics(r),
        post(move |resp| match resp {
            ResponseBody::CreateTopics(mut ct) => {
                // The created topic's configs are reported only with DESCRIBE_CONFIGS on it.
                for t in &mut ct.topics {
                    if t.error_code == 0
                        && t.name != "__cluster_metadata"
                        && !c.quietly(Op::DescribeConfigs, R::Topic, &t.name)
                    {
                        t.topic_config_error_code = TOPIC_AUTHORIZATION_FAILED;
                        t.num_partitions = -1;
                        t.replication_factor = -1;
                        t.configs = t.configs.as_ref().map(|_| Vec::new());
                    }
                }
                ct.topics.extend(errors);
                ResponseBody::CreateTopics(ct)
            }
            other => other,
        }),
    )
}

fn delete_topics(c: &Check, v: i16, mut r: DeleteTopicsRequest) -> Pre {
    use m::delete_topics_response::DeletableTopicResult;
    let error = |name: Option<String>, id: Uuid| DeletableTopicResult {
        name,
        topic_id: id,
        error_code: TOPIC_AUTHORIZATION_FAILED,
        // The message field exists from v5.
        error_message: if v >= 5 {
            message(TOPIC_AUTHORIZATION_FAILED)
        } else {
            None
        },
        ..Default::default()
    };
    // DELETE on the cluster allows every topic (Kafka's ControllerApis `hasClusterAuth`).
    if c.quietly(Op::Delete, R::Cluster, super::CLUSTER_NAME) {
        return Pre::Serve(RequestBody::DeleteTopics(r), None);
    }
    let mut errors = Vec::new();
    if v >= 6 {
        let topics = std::mem::take(&mut r.topics);
        for t in topics {
            let by_id = t.name.is_none();
            let name = match &t.name {
                Some(n) => Some(n.clone()),
                None => c.topic_name(&t.topic_id),
            };
            match name {
                // By id: an id the requester may not describe is not confirmed to exist.
                Some(n) if by_id && !c.allow(Op::Describe, R::Topic, &n) => {
                    errors.push(error(None, t.topic_id))
                }
                Some(n) if !c.allow(Op::Delete, R::Topic, &n) => {
                    errors.push(error(Some(n), t.topic_id))
                }
                _ => r.topics.push(t),
            }
        }
    } else {
        let names = std::mem::take(&mut r.topic_names);
        for n in names {
            if c.allow(Op::Delete, R::Topic, &n) {
                r.topic_names.push(n);
            } else {
                errors.push(error(Some(n), Uuid::ZERO));
            }
        }
    }
    if errors.is_empty() {
        return Pre::Serve(RequestBody::DeleteTopics(r), None);
    }
    if r.topics.is_empty() && r.topic_names.is_empty() {
        return Pre::Refuse(ResponseBody::DeleteTopics(DeleteTopicsResponse {
            responses: errors,
            ..Default::default()
        }));
    }
    serve_rest(RequestBody::DeleteTopics(r), errors, |resp, e| {
        if let ResponseBody::DeleteTopics(d) = resp {
            d.responses.extend(e);
        }
    })
}

fn create_partitions(c: &Check, mut r: CreatePartitionsRequest) -> Pre {
    use m::create_partitions_response::CreatePartitionsTopicResult;
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut r.topics)
        .into_iter()
        .partition(|t| c.allow(Op::Alter, R::Topic, &t.name));
    let errors: Vec<_> = refused
        .into_iter()
        .map(|t| CreatePartitionsTopicResult {
            name: t.name,
            error_code: TOPIC_AUTHORIZATION_FAILED,
            error_message: None,
            ..Default::default()
        })
        .collect();
    if allowed.is_empty() && !errors.is_empty() {
        return Pre::Refuse(ResponseBody::CreatePartitions(CreatePartitionsResponse {
            results: errors,
            ..Default::default()
        }));
    }
    r.topics = allowed;
    serve_rest(RequestBody::CreatePartitions(r), errors, |resp, e| {
        if let ResponseBody::CreatePartitions(p) = resp {
            p.results.extend(e);
        }
    })
}

fn delete_records(c: &Check, mut r: DeleteRecordsRequest) -> Pre {
    use m::delete_records_response::{DeleteRecordsPartitionResult, DeleteRecordsTopicResult};
    let (allowed, refused): (Vec<_>, Vec<_>) = std::mem::take(&mut r.topics)
        .into_iter()
        .partition(|t| c.allow(Op::Delete, R::Topic, &t.name));
    let errors: Vec<_> = refused
        .iter()
        .map(|t| DeleteRecordsTopicResult {
            name: t.name.clone(),
            partitions: t
                .partitions
                .iter()
                .map(|p| DeleteRecordsPartitionResult {
                    partition_index: p.partition_index,
                    low_watermark: -1,
                    error_code: TOPIC_AUTHORIZATION_FAILED,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    if allowed.is_empty() && !errors.is_empty() {
        return Pre::Refuse(ResponseBody::DeleteRecords(DeleteRecordsResponse {
            topics: errors,
            ..Default::default()
        }));
    }
    r.topics = allowed;
    serve_rest(RequestBody::DeleteRecords(r), errors, |resp, e| {
        if let ResponseBody::DeleteRecords(d) = resp {
            d.topics.extend(e);
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Configs

/// Config resource types (Kafka's `ConfigResource.Type` ids).
const CONFIG_TOPIC: i8 = 2;
const CONFIG_BROKER: i8 = 4;
const CONFIG_BROKER_LOGGER: i8 = 8;
const CONFIG_CLIENT_METRICS: i8 = 16;
const CONFIG_GROUP: i8 = 32;

/// Whether the requester may do `op` (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a config
/// resource, and the error code when not (Kafka's `configsAuthorizationApiError`).
fn config_access(c: &Check, op: Op, resource_type: i8, name: &str) -> Result<(), i16> {
    let (allowed, code) = match resource_type {
        CONFIG_TOPIC => (c.allow(op, R::Topic, name), TOPIC_AUTHORIZATION_FAILED),
        CONFIG_GROUP => (c.allow(op, R::Group, name), GROUP_AUTHORIZATION_FAILED),
        CONFIG_BROKER | CONFIG_BROKER_LOGGER | CONFIG_CLIENT_METRICS => {
            (c.cluster(op), CLUSTER_AUTHORIZATION_FAILED)
        }
        // Unknown types: the handler answers them INVALID_REQUEST.
        _ => (true, NONE),
    };
    if allowed {
        Ok(())
    } else {
        Err(code)
    }
}

/// Splits config resources into the ones the requester may `op` and the refused ones, made
/// into answer entries by `refused(resource, code)`.
fn split_configs<Q, A>(
    c: &Check,
    op: Op,
    resources: Vec<Q>,
    key: impl Fn(&Q) -> (i8, &str),
    refused: impl Fn(Q, i16) -> A,
) -> (Vec<Q>, Vec<A>) {
    let mut kept = Vec::new();
    let mut errors = Vec::new();
    for res in resources {
        let (resource_type, name) = key(&res);
        match config_access(c, op, resource_type, name) {
            Ok(()) => kept.push(res),
            Err(code) => errors.push(refused(res, code)),
        }
    }
    (kept, errors)
}

fn describe_configs(c: &Check, mut r: DescribeConfigsRequest) -> Pre {
    use m::describe_configs_response::DescribeConfigsResult;
    let (kept, errors) = split_configs(
        c,
        Op::DescribeConfigs,
        std::mem::take(&mut r.resources),
        |q| (q.resource_type, q.resource_name.as_str()),
        |q, code| DescribeConfigsResult {
            error_code: code,
            error_message: message(code),
            resource_type: q.resource_type,
            resource_name: q.resource_name,
            ..Default::default()
        },
    );
    if kept.is_empty() && !errors.is_empty() {
        return Pre::Refuse(ResponseBody::DescribeConfigs(DescribeConfigsResponse {
            results: errors,
            ..Default::default()
        }));
    }
    r.resources = kept;
    serve_rest(RequestBody::DescribeConfigs(r), errors, |resp, e| {
        if let ResponseBody::DescribeConfigs(d) = resp {
            d.results.extend(e);
        }
    })
}

fn alter_configs(c: &Check, mut r: AlterConfigsRequest) -> Pre {
    use m::alter_configs_response::AlterConfigsResourceResponse;
    let (kept, errors) = split_configs(
        c,
        Op::AlterConfigs,
        std::mem::take(&mut r.resources),
        |q| (q.resource_type, q.resource_name.as_str()),
        |q, code| AlterConfigsResourceResponse {
            error_code: code,
            error_message: message(code),
            resource_type: q.resource_type,
            resource_name: q.resource_name,
            ..Default::default()
        },
    );
    if kept.is_empty() && !errors.is_empty() {
        return Pre::Refuse(ResponseBody::AlterConfigs(AlterConfigsResponse {
            responses: errors,
            ..Default::default()
        }));
    }
    r.resources = kept;
    serve_rest(RequestBody::AlterConfigs(r), errors, |resp, e| {
        if let ResponseBody::AlterConfigs(a) = resp {
            a.responses.extend(e);
        }
    })
}

fn incremental_alter_configs(c: &Check, mut r: IncrementalAlterConfigsRequest) -> Pre {
    use m::incremental_alter_configs_response::AlterConfigsResourceResponse;
    let (kept, errors) = split_configs(
        c,
        Op::AlterConfigs,
        std::mem::take(&mut r.resources),
        |q| (q.resource_type, q.resource_name.as_str()),
        |q, code| AlterConfigsResourceResponse {
            error_code: code,
            error_message: message(code),
            resource_type: q.resource_type,
            resource_name: q.resource_name,
            ..Default::default()
        },
    );
    if kept.is_empty() && !errors.is_empty() {
        return Pre::Refuse(ResponseBody::IncrementalAlterConfigs(
            IncrementalAlterConfigsResponse {
                responses: errors,
                ..Default::default()
            },
        ));
    }
    r.resources = kept;
    serve_rest(
        RequestBody::IncrementalAlterConfigs(r),
        errors,
        |resp, e| {
            if let ResponseBody::IncrementalAlterConfigs(a) = resp {
                a.responses.extend(e);
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authorization::acls::StandardAcl;
    use crate::authorization::{codes, AuthorizerConfig};
    use crate::network::ConnectionInfo;
    use crate::security::KafkaPrincipal;

    fn allow(resource_type: i8, name: &str, pattern: i8, op: i8) -> StandardAcl {
        StandardAcl {
            resource_type,
            resource_name: name.into(),
            pattern_type: pattern,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: op,
            permission: codes::permission::ALLOW,
        }
    }

    /// alice's view of an image holding `acls`, through a Check as `install` builds one.
    fn check(acls: &[StandardAcl]) -> Check {
        let mut image = MetadataImage::default();
        for a in acls {
            Arc::make_mut(&mut image.acls).insert(Uuid::random(), a.clone());
        }
        let image = Arc::new(image);
        let authz = Authz::standard(AuthorizerConfig::default());
        let who = authz.subject(&KafkaPrincipal::user("alice"), "127.0.0.1".parse().unwrap());
        Check {
            authz,
            who: Arc::new(who),
            image,
            auto_create_topics: true,
            api: "Test",
        }
    }

    fn ctx(api_key: ApiKey, version: i16, listener_kind: ListenerKind) -> RequestContext {
        RequestContext {
            api_key,
            api_version: version,
            header: Default::default(),
            connection: ConnectionInfo {
                connection_id: 1,
                peer: "127.0.0.1:5000".parse().unwrap(),
                local: "127.0.0.1:9092".parse().unwrap(),
                listener_name: Arc::from("SASL_PLAINTEXT"),
                listener_kind,
                security_protocol: "SASL_PLAINTEXT",
                principal: KafkaPrincipal::user("alice"),
            },
            received_at: std::time::Instant::now(),
            request_bytes: 0,
        }
    }

    fn produce_to(topics: &[&str], acks: i16) -> ProduceRequest {
        ProduceRequest {
            acks,
            topic_data: topics
                .iter()
                .map(|t| m::produce_request::TopicProduceData {
                    name: t.to_string(),
                    partition_data: vec![m::produce_request::PartitionProduceData {
                        index: 0,
                        ..Default::default()
                    }],
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_produce_is_served_for_the_topics_allowed_and_refused_for_the_rest() {
        let c = check(&[allow(
            codes::resource::TOPIC,
            "ok-",
            codes::pattern::PREFIXED,
            codes::operation::WRITE,
        )]);
        let body = RequestBody::Produce(produce_to(&["ok-1", "secret"], 1));
        let Pre::Serve(RequestBody::Produce(served), Some(post)) =
            pre(&c, &ctx(ApiKey::Produce, 9, ListenerKind::Broker), body)
        else {
            panic!("expected a reduced request with a merge step");
        };
        assert_eq!(served.topic_data.len(), 1);
        assert_eq!(served.topic_data[0].name, "ok-1");
        let ResponseBody::Produce(merged) = post(ResponseBody::Produce(ProduceResponse::default()))
        else {
            panic!("a Produce answer");
        };
        assert_eq!(merged.responses.len(), 1);
        assert_eq!(merged.responses[0].name, "secret");
        assert_eq!(
            merged.responses[0].partition_responses[0].error_code,
            TOPIC_AUTHORIZATION_FAILED
        );
        // acks=0 has no answer to carry the error: the connection is closed, as Kafka does.
        let body = RequestBody::Produce(produce_to(&["ok-1", "secret"], 0));
        assert!(matches!(
            pre(&c, &ctx(ApiKey::Produce, 9, ListenerKind::Broker), body),
            Pre::Close(_)
        ));
        // ... and served as it is when every topic is allowed.
        let body = RequestBody::Produce(produce_to(&["ok-1", "ok-2"], 0));
        assert!(matches!(
            pre(&c, &ctx(ApiKey::Produce, 9, ListenerKind::Broker), body),
            Pre::Serve(_, None)
        ));
    }

    #[test]
    fn metadata_v0_with_every_topic_refused_lists_nothing() {
        let c = check(&[]);
        let body = RequestBody::Metadata(MetadataRequest {
            topics: Some(vec![m::metadata_request::MetadataRequestTopic {
                name: Some("secret".into()),
                ..Default::default()
            }]),
            ..Default::default()
        });
        let Pre::Serve(_, Some(post)) =
            pre(&c, &ctx(ApiKey::Metadata, 0, ListenerKind::Broker), body)
        else {
            panic!("expected a merge step");
        };
        // Whatever the handler listed for the (now empty, i.e. all-topics) v0 request is
        // dropped; only the refusal is left.
        let handler = MetadataResponse {
            topics: vec![m::metadata_response::MetadataResponseTopic {
                name: Some("other".into()),
                ..Default::default()
            }],
            ..Default::default()
        };
        let ResponseBody::Metadata(md) = post(ResponseBody::Metadata(handler)) else {
            panic!("a Metadata answer");
        };
        let topics: Vec<_> = md
            .topics
            .iter()
            .map(|t| (t.name.clone().unwrap(), t.error_code))
            .collect();
        assert_eq!(
            topics,
            vec![("secret".to_string(), TOPIC_AUTHORIZATION_FAILED)]
        );
    }

    #[test]
    fn apis_without_a_rule_and_quorum_apis_are_closed_to_ordinary_users() {
        let c = check(&[]);
        let vote = RequestBody::Vote(Default::default());
        assert!(matches!(
            pre(&c, &ctx(ApiKey::Vote, 0, ListenerKind::Controller), vote),
            Pre::Close(_)
        ));
        let registration = RequestBody::BrokerRegistration(Default::default());
        assert!(matches!(
            pre(
                &c,
                &ctx(ApiKey::BrokerRegistration, 4, ListenerKind::Broker),
                registration
            ),
            Pre::Close(_)
        ));
        let versions = RequestBody::ApiVersions(Default::default());
        assert!(matches!(
            pre(
                &c,
                &ctx(ApiKey::ApiVersions, 3, ListenerKind::Controller),
                versions
            ),
            Pre::Serve(_, None)
        ));
    }

    #[test]
    fn each_request_decides_against_the_acls_of_its_snapshot() {
        let topic = || {
            RequestBody::ListOffsets(ListOffsetsRequest {
                topics: vec![m::list_offsets_request::ListOffsetsTopic {
                    name: "t".into(),
                    ..Default::default()
                }],
                ..Default::default()
            })
        };
        let list = ctx(ApiKey::ListOffsets, 7, ListenerKind::Broker);
        assert!(matches!(
            pre(&check(&[]), &list, topic()),
            Pre::Serve(_, Some(_))
        ));
        // The next request's Check is built from an image that has the ACL.
        let c = check(&[allow(
            codes::resource::TOPIC,
            "t",
            codes::pattern::LITERAL,
            codes::operation::DESCRIBE,
        )]);
        assert!(matches!(pre(&c, &list, topic()), Pre::Serve(_, None)));
    }
}
