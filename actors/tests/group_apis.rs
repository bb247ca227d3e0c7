//! The group API handlers through the request router: every version of every group API gets
//! an answer that encodes at that version (no field the version cannot carry), with the error
//! codes Kafka gives.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::Actor;
use bytes::Bytes;
use kactor_actors::group::apis::{register, GroupApis};
use kactor_actors::group::core::GroupCoordinatorConfig;
use kactor_actors::group::GroupCoordinatorManagerActor;
use kactor_actors::network::{
    ConnectionInfo, HandlerOutcome, ListenerKind, RequestContext, RequestRouter,
};
use kactor_actors::partition::messages::*;
use kactor_actors::partition::testing::memory_registry;
use kactor_protocol::messages::*;
use kactor_protocol::{ApiKey, Message, RequestBody, ResponseBody, Uuid, Writer};

fn ctx(api_key: ApiKey, version: i16) -> RequestContext {
    let addr: SocketAddr = "127.0.0.1:9092".parse().unwrap();
    RequestContext {
        api_key,
        api_version: version,
        header: RequestHeader {
            request_api_key: api_key as i16,
            request_api_version: version,
            correlation_id: 1,
            client_id: Some("test-client".into()),
            ..Default::default()
        },
        connection: ConnectionInfo {
            connection_id: 1,
            peer: "127.0.0.1:50000".parse().unwrap(),
            local: addr,
            listener_name: Arc::from("PLAINTEXT"),
            listener_kind: ListenerKind::Broker,
            security_protocol: "PLAINTEXT",
            principal: Default::default(),
        },
        received_at: Instant::now(),
        request_bytes: 0,
    }
}

async fn call(
    router: &RequestRouter,
    api_key: ApiKey,
    version: i16,
    body: RequestBody,
) -> ResponseBody {
    let route = router.route(api_key).expect("registered");
    match (route.handler)(ctx(api_key, version), body).await {
        HandlerOutcome::Respond(r) => {
            let mut w = Writer::new();
            r.encode(&mut w, version)
                .unwrap_or_else(|e| panic!("{api_key:?} v{version} does not encode: {e}"));
            r
        }
        other => panic!("{api_key:?} v{version}: {other:?}"),
    }
}

#[actix_rt::test]
async fn every_version_of_every_group_api_answers() {
    let registry = memory_registry(None);
    let partitions = registry.send(SubscribePartitionTable).await.unwrap();
    registry
        .send(ApplyPartitionChanges {
            // "orders" exists: OffsetCommit refuses a topic the cluster does not have, as Kafka.
            changes: [
                ("__consumer_offsets", Uuid([9; 16])),
                ("orders", Uuid([4; 16])),
            ]
            .into_iter()
            .map(|(topic, topic_id)| PartitionChange {
                kind: PartitionChangeKind::BecomeLeader,
                topic: topic.into(),
                topic_id,
                partition: 0,
                leader: 1,
                leader_epoch: 0,
                partition_epoch: 0,
                replicas: vec![1],
                isr: vec![1],
                config_overrides: BTreeMap::new(),
            })
            .collect(),
        })
        .await
        .unwrap();
    let config = GroupCoordinatorConfig {
        offsets_topic_num_partitions: 1,
        group_initial_rebalance_delay_ms: 0,
        ..Default::default()
    };
    let manager = GroupCoordinatorManagerActor::new(1, config, partitions.clone());
    let shards = manager.shard_table();
    let _manager = manager.start();
    let mut router = RequestRouter::new();
    register(
        &mut router,
        GroupApis {
            shards: shards.clone(),
            partitions,
            transaction_state_num_partitions: 50,
            offsets_topic: None,
            share_state_num_partitions: 50,
            share_state_topic: None,
            share_state: None,
        },
    );
    // Wait until the shard is up and loaded (ListGroups answers without error).
    for _ in 0..100 {
        if !shards.borrow().shards.is_empty() {
            if let ResponseBody::ListGroups(r) = call(
                &router,
                ApiKey::ListGroups,
                0,
                RequestBody::ListGroups(Default::default()),
            )
            .await
            {
                if r.error_code == 0 {
                    break;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let (lo, hi) = FindCoordinatorResponse::VALID_VERSIONS;
    for v in lo..=hi {
        let r = call(
            &router,
            ApiKey::FindCoordinator,
            v,
            RequestBody::FindCoordinator(FindCoordinatorRequest {
                key: if v < 4 { "g".into() } else { String::new() },
                coordinator_keys: if v >= 4 { vec!["g".into()] } else { vec![] },
                ..Default::default()
            }),
        )
        .await;
        let ResponseBody::FindCoordinator(r) = r else {
            panic!()
        };
        // No metadata image in this test: the coordinator is not available yet.
        let code = if v < 4 {
            r.error_code
        } else {
            r.coordinators[0].error_code
        };
        assert_eq!(code, 15, "v{v}");
    }

    let (lo, hi) = JoinGroupResponse::VALID_VERSIONS;
    for v in lo..=hi {
        let group = format!("join-v{v}");
        let r = call(
            &router,
            ApiKey::JoinGroup,
            v,
            RequestBody::JoinGroup(JoinGroupRequest {
                group_id: group.clone(),
                session_timeout_ms: 10_000,
                rebalance_timeout_ms: 10_000,
                protocol_type: "consumer".into(),
                protocols: vec![join_group_request::JoinGroupRequestProtocol {
                    name: "range".into(),
                    metadata: Bytes::from_static(b"m"),
                    ..Default::default()
                }],
                ..Default::default()
            }),
        )
        .await;
        let ResponseBody::JoinGroup(j) = r else {
            panic!()
        };
        if v >= 4 {
            assert_eq!(j.error_code, 79, "v{v} MEMBER_ID_REQUIRED");
            continue;
        }
        assert_eq!((j.error_code, j.generation_id), (0, 1), "v{v}");
        let sv = v.min(SyncGroupResponse::VALID_VERSIONS.1);
        let r = call(
            &router,
            ApiKey::SyncGroup,
            sv,
            RequestBody::SyncGroup(SyncGroupRequest {
                group_id: group.clone(),
                generation_id: 1,
                member_id: j.member_id.clone(),
                assignments: vec![sync_group_request::SyncGroupRequestAssignment {
                    member_id: j.member_id.clone(),
                    assignment: Bytes::from_static(b"a"),
                    ..Default::default()
                }],
                ..Default::default()
            }),
        )
        .await;
        let ResponseBody::SyncGroup(s) = r else {
            panic!()
        };
        assert_eq!((s.error_code, &s.assignment[..]), (0, &b"a"[..]));
        for hv in HeartbeatResponse::VALID_VERSIONS.0..=HeartbeatResponse::VALID_VERSIONS.1 {
            let r = call(
                &router,
                ApiKey::Heartbeat,
                hv,
                RequestBody::Heartbeat(HeartbeatRequest {
                    group_id: group.clone(),
                    generation_id: 1,
                    member_id: j.member_id.clone(),
                    ..Default::default()
                }),
            )
            .await;
            let ResponseBody::Heartbeat(h) = r else {
                panic!()
            };
            assert_eq!(h.error_code, 0);
        }
    }

    for v in OffsetCommitResponse::VALID_VERSIONS.0..=OffsetCommitResponse::VALID_VERSIONS.1 {
        let r = call(
            &router,
            ApiKey::OffsetCommit,
            v,
            RequestBody::OffsetCommit(OffsetCommitRequest {
                group_id: "simple".into(),
                generation_id_or_member_epoch: -1,
                retention_time_ms: -1,
                topics: vec![offset_commit_request::OffsetCommitRequestTopic {
                    name: if v < 10 {
                        "orders".into()
                    } else {
                        String::new()
                    },
                    topic_id: if v >= 10 { Uuid([3; 16]) } else { Uuid::ZERO },
                    partitions: vec![offset_commit_request::OffsetCommitRequestPartition {
                        partition_index: 0,
                        committed_offset: 100 + v as i64,
                        committed_leader_epoch: -1,
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }),
        )
        .await;
        let ResponseBody::OffsetCommit(c) = r else {
            panic!()
        };
        // v10 names topics by id; this broker knows no topic with that id.
        let expected = if v >= 10 { 100 } else { 0 };
        assert_eq!(c.topics[0].partitions[0].error_code, expected, "v{v}");
    }
    for v in OffsetFetchResponse::VALID_VERSIONS.0..=OffsetFetchResponse::VALID_VERSIONS.1 {
        let body = if v < 8 {
            OffsetFetchRequest {
                group_id: "simple".into(),
                topics: Some(vec![offset_fetch_request::OffsetFetchRequestTopic {
                    name: "orders".into(),
                    partition_indexes: vec![0],
                    ..Default::default()
                }]),
                ..Default::default()
            }
        } else {
            OffsetFetchRequest {
                groups: vec![offset_fetch_request::OffsetFetchRequestGroup {
                    group_id: "simple".into(),
                    member_epoch: -1,
                    topics: None,
                    ..Default::default()
                }],
                ..Default::default()
            }
        };
        let r = call(
            &router,
            ApiKey::OffsetFetch,
            v,
            RequestBody::OffsetFetch(body),
        )
        .await;
        let ResponseBody::OffsetFetch(f) = r else {
            panic!()
        };
        let offset = if v < 8 {
            f.topics[0].partitions[0].committed_offset
        } else {
            f.groups[0].topics[0].partitions[0].committed_offset
        };
        assert_eq!(offset, 109, "v{v}: the last v9 commit");
    }

    for v in DescribeGroupsResponse::VALID_VERSIONS.0..=DescribeGroupsResponse::VALID_VERSIONS.1 {
        let r = call(
            &router,
            ApiKey::DescribeGroups,
            v,
            RequestBody::DescribeGroups(DescribeGroupsRequest {
                groups: vec!["join-v0".into(), "missing".into()],
                ..Default::default()
            }),
        )
        .await;
        let ResponseBody::DescribeGroups(d) = r else {
            panic!()
        };
        assert_eq!(d.groups[0].group_state, "Stable");
        assert_eq!(d.groups[1].error_code, if v >= 6 { 69 } else { 0 });
    }
    for v in ListGroupsResponse::VALID_VERSIONS.0..=ListGroupsResponse::VALID_VERSIONS.1 {
        let r = call(
            &router,
            ApiKey::ListGroups,
            v,
            RequestBody::ListGroups(Default::default()),
        )
        .await;
        let ResponseBody::ListGroups(l) = r else {
            panic!()
        };
        assert!(l.groups.len() >= 5, "v{v}");
    }
    for v in LeaveGroupResponse::VALID_VERSIONS.0..=LeaveGroupResponse::VALID_VERSIONS.1 {
        let r = call(
            &router,
            ApiKey::LeaveGroup,
            v,
            RequestBody::LeaveGroup(LeaveGroupRequest {
                group_id: "missing".into(),
                member_id: "m".into(),
                members: vec![leave_group_request::MemberIdentity {
                    member_id: "m".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }),
        )
        .await;
        let ResponseBody::LeaveGroup(l) = r else {
            panic!()
        };
        let code = if v < 3 {
            l.error_code
        } else {
            l.members[0].error_code
        };
        assert_eq!(code, 25, "v{v}");
    }
    for v in OffsetDeleteResponse::VALID_VERSIONS.0..=OffsetDeleteResponse::VALID_VERSIONS.1 {
        let r = call(
            &router,
            ApiKey::OffsetDelete,
            v,
            RequestBody::OffsetDelete(OffsetDeleteRequest {
                group_id: "simple".into(),
                topics: vec![offset_delete_request::OffsetDeleteRequestTopic {
                    name: "orders".into(),
                    partitions: vec![offset_delete_request::OffsetDeleteRequestPartition {
                        partition_index: 0,
                    }],
                }],
            }),
        )
        .await;
        let ResponseBody::OffsetDelete(d) = r else {
            panic!()
        };
        assert_eq!((d.error_code, d.topics[0].partitions[0].error_code), (0, 0));
    }
    for v in DeleteGroupsResponse::VALID_VERSIONS.0..=DeleteGroupsResponse::VALID_VERSIONS.1 {
        let r = call(
            &router,
            ApiKey::DeleteGroups,
            v,
            RequestBody::DeleteGroups(DeleteGroupsRequest {
                groups_names: vec!["missing".into()],
                ..Default::default()
            }),
        )
        .await;
        let ResponseBody::DeleteGroups(d) = r else {
            panic!()
        };
        assert_eq!(d.results[0].error_code, 69);
    }
    for v in ConsumerGroupHeartbeatResponse::VALID_VERSIONS.0
        ..=ConsumerGroupHeartbeatResponse::VALID_VERSIONS.1
    {
        let r = call(
            &router,
            ApiKey::ConsumerGroupHeartbeat,
            v,
            RequestBody::ConsumerGroupHeartbeat(ConsumerGroupHeartbeatRequest {
                group_id: format!("cg-v{v}"),
                member_id: if v >= 1 {
                    "member-1".into()
                } else {
                    String::new()
                },
                member_epoch: 0,
                rebalance_timeout_ms: 30_000,
                subscribed_topic_names: Some(vec!["orders".into()]),
                topic_partitions: Some(vec![]),
                ..Default::default()
            }),
        )
        .await;
        let ResponseBody::ConsumerGroupHeartbeat(h) = r else {
            panic!()
        };
        // A new group starts at epoch 1, so its first member joins at 2 (Kafka 4.4).
        assert_eq!(
            (h.error_code, h.member_epoch),
            (0, 2),
            "v{v}: {:?}",
            h.error_message
        );
        assert!(h.member_id.is_some());
    }
    for v in ConsumerGroupDescribeResponse::VALID_VERSIONS.0
        ..=ConsumerGroupDescribeResponse::VALID_VERSIONS.1
    {
        let r = call(
            &router,
            ApiKey::ConsumerGroupDescribe,
            v,
            RequestBody::ConsumerGroupDescribe(ConsumerGroupDescribeRequest {
                group_ids: vec!["cg-v1".into(), "join-v0".into()],
                ..Default::default()
            }),
        )
        .await;
        let ResponseBody::ConsumerGroupDescribe(d) = r else {
            panic!()
        };
        assert_eq!((d.groups[0].error_code, d.groups[0].members.len()), (0, 1));
        assert_eq!(d.groups[1].error_code, 69, "a classic group");
    }
}
