//! The metadata/admin API handlers over a started single-node KRaft: each request goes through
//! the router's handler as a connection would call it, every response must encode at the
//! request's version, and the answers follow Kafka's semantics (topic ids, config sources,
//! error codes, paging, the quorum view).

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use kactor_actors::controller::apis::{register, BrokerConfigEntry, MetadataApis};
use kactor_actors::controller::start_kraft;
use kactor_actors::network::router::{ListenerKind, RequestRouter};
use kactor_protocol::messages::{self as m, *};
use kactor_protocol::{ApiKey, RequestBody, ResponseBody, Uuid};

mod common;
use common::kraft::{call_on, kraft_config, until_running as running, CLUSTER};

struct Harness {
    router: RequestRouter,
}

impl Harness {
    async fn call(&self, key: ApiKey, version: i16, body: RequestBody) -> ResponseBody {
        call_on(
            &self.router,
            ListenerKind::Broker,
            "PLAINTEXT",
            key,
            version,
            body,
        )
        .await
    }

    async fn call_on(
        &self,
        kind: ListenerKind,
        listener: &str,
        key: ApiKey,
        version: i16,
        body: RequestBody,
    ) -> ResponseBody {
        call_on(&self.router, kind, listener, key, version, body).await
    }
}

#[test]
fn metadata_and_admin_apis() {
    let dir = tempfile::tempdir().unwrap();
    System::new().block_on(async move {
        let h = start_kraft(&Arbiter::current(), kraft_config(dir.path())).unwrap();
        running(&h).await;
        let mut router = RequestRouter::new();
        register(
            &mut router,
            MetadataApis {
                node_id: 1,
                cluster_id: CLUSTER.into(),
                controller: Some(h.controller.clone().unwrap()),
                raft: h.raft.clone(),
                image: h.image.clone(),
                auto_create_topics_enable: true,
                topic_channel: h.topic_channel.clone(),
                auto_create_in_flight: Default::default(),
                broker_configs: Arc::new(vec![BrokerConfigEntry {
                    name: "log.retention.hours".into(),
                    value: Some("1".into()),
                    source: 4,
                    config_type: 3,
                    read_only: false,
                    sensitive: false,
                    synonyms: vec![("log.retention.hours".into(), Some("1".into()), 4)],
                    documentation: None,
                }]),
                controller_listeners: vec![("CONTROLLER".into(), "127.0.0.1".into(), 9093)],
                quorum: None,
                loggers: None,
                authz: kactor_actors::authorization::Authz::off(),
            },
        );
        let hs = Harness { router };

        // CreateTopics at every version we might serve.
        for v in 2..=7i16 {
            let name = format!("t{v}");
            let r = hs
                .call(
                    ApiKey::CreateTopics,
                    v,
                    RequestBody::CreateTopics(CreateTopicsRequest {
                        topics: vec![m::create_topics_request::CreatableTopic {
                            name: name.clone(),
                            num_partitions: 3,
                            replication_factor: 1,
                            configs: vec![m::create_topics_request::CreatableTopicConfig {
                                name: "cleanup.policy".into(),
                                value: Some("compact".into()),
                                ..Default::default()
                            }],
                            ..Default::default()
                        }],
                        timeout_ms: 5000,
                        ..Default::default()
                    }),
                )
                .await;
            let ResponseBody::CreateTopics(r) = r else {
                panic!()
            };
            assert_eq!(r.topics[0].error_code, 0, "{:?}", r.topics[0]);
            assert_eq!(r.topics[0].topic_id != Uuid::ZERO, v >= 7);
            assert_eq!(r.topics[0].configs.is_some(), v >= 5);
        }
        // Errors: exists, bad RF, bad name.
        let r = hs
            .call(
                ApiKey::CreateTopics,
                7,
                RequestBody::CreateTopics(CreateTopicsRequest {
                    topics: ["t7", "rf", "bad/"]
                        .iter()
                        .map(|n| m::create_topics_request::CreatableTopic {
                            name: n.to_string(),
                            num_partitions: 1,
                            replication_factor: if *n == "rf" { 3 } else { 1 },
                            ..Default::default()
                        })
                        .collect(),
                    timeout_ms: 5000,
                    ..Default::default()
                }),
            )
            .await;
        let ResponseBody::CreateTopics(r) = r else {
            panic!()
        };
        let codes: Vec<i16> = r.topics.iter().map(|t| t.error_code).collect();
        assert_eq!(codes, vec![36, 38, 17]);

        // Metadata: all topics, by name, unknown (auto-created), by id.
        for v in [0i16, 1, 4, 9, 10, 12, 13] {
            let r = hs
                .call(
                    ApiKey::Metadata,
                    v,
                    RequestBody::Metadata(MetadataRequest {
                        topics: if v == 0 { Some(vec![]) } else { None },
                        allow_auto_topic_creation: false,
                        ..Default::default()
                    }),
                )
                .await;
            let ResponseBody::Metadata(r) = r else {
                panic!()
            };
            assert_eq!(r.brokers.len(), 1);
            assert_eq!(r.brokers[0].port, 9092);
            assert!(r.topics.len() >= 6, "v{v}");
            assert!(r
                .topics
                .iter()
                .all(|t| t.partitions.iter().all(|p| p.leader_id == 1)));
        }
        let r = hs
            .call(
                ApiKey::Metadata,
                12,
                RequestBody::Metadata(MetadataRequest {
                    topics: Some(vec![
                        m::metadata_request::MetadataRequestTopic {
                            name: Some("auto".into()),
                            ..Default::default()
                        },
                        m::metadata_request::MetadataRequestTopic {
                            topic_id: Uuid([1; 16]),
                            name: None,
                            ..Default::default()
                        },
                    ]),
                    allow_auto_topic_creation: true,
                    ..Default::default()
                }),
            )
            .await;
        let ResponseBody::Metadata(r) = r else {
            panic!()
        };
        // Kafka 4.4's UNKNOWN_TOPIC_OR_PARTITION while the creation is in flight, or (once it
        // reached the image within the handler's short wait, AUTO_CREATE_WAIT) the topic and
        // its leader.
        match r.topics[0].error_code {
            3 => assert!(r.topics[0].partitions.is_empty()),
            0 => assert_eq!(r.topics[0].partitions[0].leader_id, 1),
            other => panic!("auto-created topic answered {other}"),
        }
        assert_eq!(r.topics[1].error_code, 100);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(h.image.borrow().topics.get_by_name("auto").is_some());

        // DescribeConfigs: topic override vs static broker synonym.
        let r = hs
            .call(
                ApiKey::DescribeConfigs,
                4,
                RequestBody::DescribeConfigs(DescribeConfigsRequest {
                    resources: vec![
                        m::describe_configs_request::DescribeConfigsResource {
                            resource_type: 2,
                            resource_name: "t7".into(),
                            configuration_keys: None,
                            ..Default::default()
                        },
                        m::describe_configs_request::DescribeConfigsResource {
                            resource_type: 2,
                            resource_name: "nope".into(),
                            configuration_keys: None,
                            ..Default::default()
                        },
                    ],
                    include_synonyms: true,
                    ..Default::default()
                }),
            )
            .await;
        let ResponseBody::DescribeConfigs(r) = r else {
            panic!()
        };
        let cfg = |n: &str| {
            r.results[0]
                .configs
                .iter()
                .find(|c| c.name == n)
                .unwrap()
                .clone()
        };
        assert_eq!(
            (
                cfg("cleanup.policy").value.as_deref(),
                cfg("cleanup.policy").config_source
            ),
            (Some("compact"), 1)
        );
        assert_eq!(
            (
                cfg("retention.ms").value.as_deref(),
                cfg("retention.ms").config_source
            ),
            (Some("3600000"), 4)
        );
        // Synonyms as Kafka lists them: the topic's own value, then the broker family from
        // its primary name on (retention.ms has only log.retention.hours set, so none).
        let syn = |n: &str| -> Vec<(String, Option<String>, i8)> {
            cfg(n)
                .synonyms
                .into_iter()
                .map(|s| (s.name, s.value, s.source))
                .collect()
        };
        assert_eq!(
            syn("cleanup.policy"),
            vec![
                ("cleanup.policy".into(), Some("compact".into()), 1),
                ("log.cleanup.policy".into(), Some("delete".into()), 5)
            ]
        );
        assert_eq!(syn("retention.ms"), vec![]);
        assert_eq!(syn("segment.ms"), vec![]);
        assert_eq!(syn("flush.ms"), vec![]);
        assert_eq!(
            syn("max.message.bytes"),
            vec![("message.max.bytes".into(), Some("1048588".into()), 5)]
        );
        assert_eq!(r.results[1].error_code, 3);

        // IncrementalAlterConfigs on the default broker entity, then DescribeConfigs sees it.
        let r = hs
            .call(
                ApiKey::IncrementalAlterConfigs,
                1,
                RequestBody::IncrementalAlterConfigs(IncrementalAlterConfigsRequest {
                    resources: vec![m::incremental_alter_configs_request::AlterConfigsResource {
                        resource_type: 4,
                        resource_name: "".into(),
                        configs: vec![m::incremental_alter_configs_request::AlterableConfig {
                            name: "log.retention.ms".into(),
                            config_operation: 0,
                            value: Some("7000".into()),
                            ..Default::default()
                        }],
                        ..Default::default()
                    }],
                    validate_only: false,
                    ..Default::default()
                }),
            )
            .await;
        let ResponseBody::IncrementalAlterConfigs(r) = r else {
            panic!()
        };
        assert_eq!(r.responses[0].error_code, 0);
        let r = hs
            .call(
                ApiKey::DescribeConfigs,
                4,
                RequestBody::DescribeConfigs(DescribeConfigsRequest {
                    resources: vec![
                        m::describe_configs_request::DescribeConfigsResource {
                            resource_type: 2,
                            resource_name: "t7".into(),
                            configuration_keys: Some(vec!["retention.ms".into()]),
                            ..Default::default()
                        },
                        m::describe_configs_request::DescribeConfigsResource {
                            resource_type: 4,
                            resource_name: "".into(),
                            configuration_keys: None,
                            ..Default::default()
                        },
                    ],
                    ..Default::default()
                }),
            )
            .await;
        let ResponseBody::DescribeConfigs(r) = r else {
            panic!()
        };
        assert_eq!(r.results[0].configs[0].value.as_deref(), Some("7000"));
        assert_eq!(r.results[0].configs[0].config_source, 3);
        assert!(r.results[1]
            .configs
            .iter()
            .any(|c| c.name == "log.retention.ms" && c.config_source == 3));

        // CreatePartitions, DeleteTopics by id and by name.
        let r = hs
            .call(
                ApiKey::CreatePartitions,
                3,
                RequestBody::CreatePartitions(CreatePartitionsRequest {
                    topics: vec![m::create_partitions_request::CreatePartitionsTopic {
                        name: "t7".into(),
                        count: 5,
                        assignments: None,
                        ..Default::default()
                    }],
                    timeout_ms: 5000,
                    ..Default::default()
                }),
            )
            .await;
        let ResponseBody::CreatePartitions(r) = r else {
            panic!()
        };
        assert_eq!(r.results[0].error_code, 0);
        assert_eq!(
            h.image
                .borrow()
                .topics
                .get_by_name("t7")
                .unwrap()
                .partitions
                .len(),
            5
        );
        let t6 = h.image.borrow().topics.by_name["t6"];
        let r = hs
            .call(
                ApiKey::DeleteTopics,
                6,
                RequestBody::DeleteTopics(DeleteTopicsRequest {
                    topics: vec![
                        m::delete_topics_request::DeleteTopicState {
                            name: None,
                            topic_id: t6,
                            ..Default::default()
                        },
                        m::delete_topics_request::DeleteTopicState {
                            name: Some("t5".into()),
                            topic_id: Uuid::ZERO,
                            ..Default::default()
                        },
                        m::delete_topics_request::DeleteTopicState {
                            name: None,
                            topic_id: Uuid([8; 16]),
                            ..Default::default()
                        },
                    ],
                    timeout_ms: 5000,
                    ..Default::default()
                }),
            )
            .await;
        let ResponseBody::DeleteTopics(r) = r else {
            panic!()
        };
        let codes: Vec<i16> = r.responses.iter().map(|t| t.error_code).collect();
        assert_eq!(codes, vec![0, 0, 100]);
        assert_eq!(r.responses[0].name.as_deref(), Some("t6"));
        let r = hs
            .call(
                ApiKey::DeleteTopics,
                3,
                RequestBody::DeleteTopics(DeleteTopicsRequest {
                    topic_names: vec!["t4".into(), "gone".into()],
                    timeout_ms: 5000,
                    ..Default::default()
                }),
            )
            .await;
        let ResponseBody::DeleteTopics(r) = r else {
            panic!()
        };
        let codes: Vec<i16> = r.responses.iter().map(|t| t.error_code).collect();
        assert_eq!(codes, vec![0, 3]);

        // DescribeCluster, DescribeTopicPartitions paging, DescribeQuorum, UpdateFeatures.
        for v in 0..=2i16 {
            let r = hs
                .call(
                    ApiKey::DescribeCluster,
                    v,
                    RequestBody::DescribeCluster(DescribeClusterRequest {
                        endpoint_type: 1,
                        ..Default::default()
                    }),
                )
                .await;
            let ResponseBody::DescribeCluster(r) = r else {
                panic!()
            };
            assert_eq!(
                (r.cluster_id.as_str(), r.controller_id, r.brokers.len()),
                (CLUSTER, 1, 1)
            );
        }
        // `--bootstrap-controller` tools ask a controller listener for controllers.
        let r = hs
            .call_on(
                ListenerKind::Controller,
                "CONTROLLER",
                ApiKey::DescribeCluster,
                1,
                RequestBody::DescribeCluster(DescribeClusterRequest {
                    endpoint_type: 2,
                    ..Default::default()
                }),
            )
            .await;
        let ResponseBody::DescribeCluster(r) = r else {
            panic!()
        };
        assert_eq!((r.error_code, r.controller_id), (0, 1));
        assert_eq!(r.brokers[0].port, 9093);
        let r = hs
            .call(
                ApiKey::DescribeCluster,
                1,
                RequestBody::DescribeCluster(DescribeClusterRequest {
                    endpoint_type: 2,
                    ..Default::default()
                }),
            )
            .await;
        let ResponseBody::DescribeCluster(r) = r else {
            panic!()
        };
        // A known type on the wrong kind of listener: MISMATCHED_ENDPOINT_TYPE, as Kafka.
        assert_eq!(r.error_code, 114);
        assert_eq!(r.endpoint_type, 1);
        assert_eq!(r.cluster_id, "");
        let r = hs
            .call(
                ApiKey::DescribeTopicPartitions,
                0,
                RequestBody::DescribeTopicPartitions(DescribeTopicPartitionsRequest {
                    topics: vec![m::describe_topic_partitions_request::TopicRequest {
                        name: "t7".into(),
                        ..Default::default()
                    }],
                    response_partition_limit: 2,
                    cursor: None,
                    ..Default::default()
                }),
            )
            .await;
        let ResponseBody::DescribeTopicPartitions(r) = r else {
            panic!()
        };
        assert_eq!(r.topics[0].partitions.len(), 2);
        assert_eq!(r.next_cursor.as_ref().unwrap().partition_index, 2);
        for v in 0..=2i16 {
            let r = hs
                .call(
                    ApiKey::DescribeQuorum,
                    v,
                    RequestBody::DescribeQuorum(DescribeQuorumRequest {
                        topics: vec![m::describe_quorum_request::TopicData {
                            topic_name: "__cluster_metadata".into(),
                            partitions: vec![m::describe_quorum_request::PartitionData {
                                partition_index: 0,
                                ..Default::default()
                            }],
                            ..Default::default()
                        }],
                        ..Default::default()
                    }),
                )
                .await;
            let ResponseBody::DescribeQuorum(r) = r else {
                panic!()
            };
            let p = &r.topics[0].partitions[0];
            assert_eq!((p.error_code, p.leader_id, p.leader_epoch), (0, 1, 1));
            assert!(p.high_watermark > 0);
            assert_eq!(p.current_voters[0].replica_id, 1);
        }
        for v in 0..=2i16 {
            let r = hs
                .call(
                    ApiKey::UpdateFeatures,
                    v,
                    RequestBody::UpdateFeatures(UpdateFeaturesRequest {
                        timeout_ms: 5000,
                        feature_updates: vec![m::update_features_request::FeatureUpdateKey {
                            feature: "group.version".into(),
                            max_version_level: 9,
                            upgrade_type: 1,
                            ..Default::default()
                        }],
                        ..Default::default()
                    }),
                )
                .await;
            let ResponseBody::UpdateFeatures(r) = r else {
                panic!()
            };
            // Kafka 4.4 reports a failure at the top for every version, with no rows.
            assert_eq!(r.error_code, 95);
            assert!(r.results.is_empty());
        }
        System::current().stop();
    });
}
