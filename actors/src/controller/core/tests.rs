use kactor_protocol::errors::*;
use kactor_protocol::metadata::register_broker_record::BrokerFeature;
use kactor_protocol::Uuid;

use super::errors::*;
use super::requests::*;
use super::*;
use crate::metadata::core::{MetadataRecord, PartitionRegistration};

const NOW: i64 = 1_000_000;

fn features() -> Vec<BrokerFeature> {
    SUPPORTED_FEATURES
        .iter()
        .map(|(name, min, max, _)| BrokerFeature {
            name: name.to_string(),
            min_supported_version: *min,
            max_supported_version: *max,
            ..Default::default()
        })
        .collect()
}

fn registration(id: i32) -> BrokerRegistration {
    BrokerRegistration {
        broker_id: id,
        cluster_id: "c1".into(),
        incarnation_id: Uuid([id as u8; 16]),
        listeners: Vec::new(),
        features: features(),
        rack: None,
        log_dirs: vec![Uuid([100 + id as u8; 16])],
        previous_broker_epoch: -1,
    }
}

/// An active controller with brokers 1..=n registered and unfenced.
fn controller(n: i32) -> QuorumControllerCore {
    let mut c = QuorumControllerCore::new(
        ControllerConfig {
            cluster_id: "c1".into(),
            num_partitions: 1,
            ..Default::default()
        },
        7,
    );
    let boot = c.activate(1, NOW);
    assert!(!boot.is_empty());
    for id in 1..=n {
        let r = c.register_broker(&registration(id), NOW);
        assert!(r.response.error.is_ok(), "{:?}", r.response);
        let hb = c.broker_heartbeat(
            &BrokerHeartbeat {
                broker_id: id,
                broker_epoch: r.response.broker_epoch,
                current_metadata_offset: i64::MAX,
                want_fence: false,
                want_shut_down: false,
            },
            NOW,
        );
        assert!(!hb.response.is_fenced);
    }
    c
}

fn topic(name: &str, partitions: i32, rf: i16) -> CreatableTopic {
    CreatableTopic {
        name: name.into(),
        num_partitions: partitions,
        replication_factor: rf,
        ..Default::default()
    }
}

fn create(
    c: &mut QuorumControllerCore,
    t: CreatableTopic,
) -> (Vec<MetadataRecord>, CreatableTopicResult) {
    let r = c.create_topics(&[t], false);
    (r.records, r.response.into_iter().next().unwrap())
}

#[test]
fn bootstrap_matches_kafka_4_4_format() {
    let c = QuorumControllerCore::new(ControllerConfig::default(), 1);
    let recs = c.bootstrap_records();
    let levels: Vec<(String, i16)> = recs
        .iter()
        .filter_map(|r| match r {
            MetadataRecord::FeatureLevel(f) => Some((f.name.clone(), f.feature_level)),
            _ => None,
        })
        .collect();
    assert_eq!(
        levels,
        vec![
            ("metadata.version".to_string(), 33),
            ("group.version".to_string(), 1),
            ("share.version".to_string(), 2),
            ("transaction.version".to_string(), 2),
        ]
    );
    assert!(matches!(
        recs.first(),
        Some(MetadataRecord::BeginTransaction(_))
    ));
    assert!(matches!(
        recs.last(),
        Some(MetadataRecord::EndTransaction(_))
    ));
}

#[test]
fn activation_bootstraps_only_an_empty_log() {
    let mut c = controller(1);
    c.deactivate();
    assert!(c.activate(100, NOW).is_empty());
}

#[test]
fn create_topic_writes_topic_configs_and_partitions() {
    let mut c = controller(1);
    let mut t = topic("orders", 3, -1);
    t.configs = vec![("cleanup.policy".into(), Some("compact".into()))];
    let (recs, res) = create(&mut c, t);
    assert!(res.error.is_ok());
    assert_eq!((res.num_partitions, res.replication_factor), (3, 1));
    assert_ne!(res.topic_id, Uuid::ZERO);
    assert!(matches!(recs[0], MetadataRecord::Topic(_)));
    assert!(matches!(recs[1], MetadataRecord::Config(_)));
    assert_eq!(recs.len(), 5);
    let cfg = res
        .configs
        .iter()
        .find(|c| c.name == "cleanup.policy")
        .unwrap();
    assert_eq!(cfg.value.as_deref(), Some("compact"));
    assert_eq!(
        cfg.config_source,
        topic_configs::source::DYNAMIC_TOPIC_CONFIG
    );
    let p = &c.image().topics.get_by_name("orders").unwrap().partitions[&2];
    assert_eq!((p.leader, p.leader_epoch, p.isr.clone()), (1, 0, vec![1]));
    assert_eq!(p.directories, vec![Uuid([101; 16])]);
}

#[test]
fn create_topic_defaults_come_from_config() {
    let mut c = controller(1);
    let (_, res) = create(&mut c, topic("d", -1, -1));
    assert_eq!((res.num_partitions, res.replication_factor), (1, 1));
}

#[test]
fn create_topic_error_codes() {
    let mut c = controller(1);
    create(&mut c, topic("exists", 1, 1));
    let cases: Vec<(CreatableTopic, i16)> = vec![
        (topic("exists", 1, 1), TOPIC_ALREADY_EXISTS),
        (topic("", 1, 1), INVALID_TOPIC_EXCEPTION),
        (topic(".", 1, 1), INVALID_TOPIC_EXCEPTION),
        (topic("..", 1, 1), INVALID_TOPIC_EXCEPTION),
        (topic("bad/name", 1, 1), INVALID_TOPIC_EXCEPTION),
        (topic(&"x".repeat(250), 1, 1), INVALID_TOPIC_EXCEPTION),
        (topic("p0", 0, 1), INVALID_PARTITIONS),
        (topic("pneg", -5, 1), INVALID_PARTITIONS),
        (topic("rf2", 1, 2), INVALID_REPLICATION_FACTOR),
        (topic("rf0", 1, 0), INVALID_REPLICATION_FACTOR),
    ];
    for (t, code) in cases {
        let name = t.name.clone();
        let (_, res) = create(&mut c, t);
        assert_eq!(res.error.code, code, "{name}: {:?}", res.error);
        if code != NONE {
            assert_eq!((res.num_partitions, res.replication_factor), (-1, -1));
        }
    }
    assert!(c.validate_only_len_249_ok());
}

impl QuorumControllerCore {
    fn validate_only_len_249_ok(&mut self) -> bool {
        let r = self.create_topics(&[topic(&"y".repeat(249), 1, 1)], true);
        r.records.is_empty() && r.response[0].error.is_ok()
    }
}

#[test]
fn topic_name_errors_use_kafkas_words() {
    let msg = |n: &str| validate_topic_name(n).unwrap_err().message.unwrap();
    assert_eq!(
        msg(""),
        "Topic name is invalid: the empty string is not allowed"
    );
    assert_eq!(msg("."), "Topic name is invalid: '.' is not allowed");
    assert_eq!(msg(".."), "Topic name is invalid: '..' is not allowed");
    assert_eq!(
        msg("bad/name"),
        "Topic name is invalid: 'bad/name' contains one or more characters other than \
         ASCII alphanumerics, '.', '_' and '-'"
    );
    let long = "x".repeat(250);
    assert_eq!(
        msg(&long),
        format!(
            "Topic name is invalid: the length of '{long}' is longer than the max allowed \
             length 249"
        )
    );
    assert!(validate_topic_name(&"x".repeat(249)).is_ok());
}

#[test]
fn a_name_that_maps_to_a_supplied_id_deletes_nothing() {
    let mut c = controller(1);
    let (_, res) = create(&mut c, topic("both", 1, 1));
    let id = res.topic_id;
    let r = c.delete_topics(&[TopicRef::Id(id), TopicRef::Name("both".into())]);
    // Kafka: one INVALID_REQUEST row for the name, none for the id, no deletion.
    assert!(r.records.is_empty());
    assert_eq!(r.response.len(), 1);
    assert_eq!(r.response[0].name.as_deref(), Some("both"));
    assert_eq!(r.response[0].topic_id, id);
    assert_eq!(r.response[0].error.code, INVALID_REQUEST);
}

#[test]
fn dot_and_underscore_collide() {
    let mut c = controller(1);
    create(&mut c, topic("a.b", 1, 1));
    let (_, res) = create(&mut c, topic("a_b", 1, 1));
    assert_eq!(res.error.code, INVALID_TOPIC_EXCEPTION);
}

#[test]
fn create_topic_config_errors() {
    let mut c = controller(1);
    for (k, v) in [
        ("no.such.config", Some("1")),
        ("retention.ms", Some("abc")),
        ("cleanup.policy", Some("bogus")),
        ("min.insync.replicas", Some("0")),
        ("retention.ms", None),
    ] {
        let mut t = topic("cfg", 1, 1);
        t.configs = vec![(k.into(), v.map(str::to_string))];
        let (recs, res) = create(&mut c, t);
        assert_eq!(res.error.code, INVALID_CONFIG, "{k}={v:?}");
        assert!(recs.is_empty());
    }
}

#[test]
fn validate_only_writes_nothing() {
    let mut c = controller(1);
    let r = c.create_topics(&[topic("v", 2, 1)], true);
    assert!(r.records.is_empty());
    assert!(r.response[0].error.is_ok());
    assert_eq!(r.response[0].num_partitions, 2);
    assert!(c.image().topics.get_by_name("v").is_none());
}

#[test]
fn duplicate_names_in_one_request_are_rejected() {
    let mut c = controller(1);
    let r = c.create_topics(
        &[topic("dup", 1, 1), topic("ok", 1, 1), topic("dup", 1, 1)],
        false,
    );
    // One row for the twice-named topic, after the others, as Kafka answers.
    let rows: Vec<(&str, i16)> = r
        .response
        .iter()
        .map(|t| (t.name.as_str(), t.error.code))
        .collect();
    assert_eq!(rows, vec![("ok", NONE), ("dup", INVALID_REQUEST)]);
    assert_eq!(
        r.response[1].error.message.as_deref(),
        Some("Duplicate topic name.")
    );
    assert!(c.image().topics.get_by_name("dup").is_none());
}

#[test]
fn validate_only_answers_a_fresh_id_and_manual_assignments_follow_kafkas_order() {
    let mut c = controller(2);
    let r = c.create_topics(&[topic("v", 1, 1)], true);
    assert_ne!(r.response[0].topic_id, Uuid::ZERO);
    assert!(c.image().topics.get_by_name("v").is_none());
    let manual = |n: i32, rf: i16, a: Vec<(i32, Vec<i32>)>| CreatableTopic {
        name: "m".into(),
        num_partitions: n,
        replication_factor: rf,
        assignments: a,
        configs: vec![],
    };
    let mut message = |t: CreatableTopic| {
        let r = c.create_topics(&[t], true);
        (
            r.response[0].error.code,
            r.response[0].error.message.clone().unwrap_or_default(),
        )
    };
    // The replication factor is checked before the partition count.
    let (code, m) = message(manual(2, 2, vec![(0, vec![1])]));
    assert_eq!(code, INVALID_REQUEST);
    assert!(m.contains("replication factor was not set to -1"), "{m}");
    let (_, m) = message(manual(2, -1, vec![(0, vec![1])]));
    assert!(m.contains("numPartitions was not set to -1"), "{m}");
    let (code, m) = message(manual(-1, -1, vec![(0, vec![1]), (0, vec![2])]));
    assert_eq!(code, INVALID_REPLICA_ASSIGNMENT);
    assert_eq!(
        m,
        "Found multiple manual partition assignments for partition 0"
    );
    let (_, m) = message(manual(-1, -1, vec![(1, vec![1])]));
    assert_eq!(
        m,
        "partitions should be a consecutive 0-based integer sequence"
    );
    // Brokers in ascending order: the unknown 0 is found before the repeated 2.
    let (_, m) = message(manual(-1, -1, vec![(0, vec![2, 2, 0])]));
    assert!(m.contains("includes broker 0, but no such broker"), "{m}");
    let (_, m) = message(manual(-1, -1, vec![(0, vec![])]));
    assert_eq!(
        m,
        "The manual partition assignment includes an empty replica list."
    );
}

#[test]
fn manual_assignments_are_checked() {
    let mut c = controller(2);
    let manual = |a: Vec<(i32, Vec<i32>)>| CreatableTopic {
        name: "m".into(),
        num_partitions: -1,
        replication_factor: -1,
        assignments: a,
        configs: vec![],
    };
    let (_, r) = create(&mut c, manual(vec![(0, vec![1, 1])]));
    assert_eq!(r.error.code, INVALID_REPLICA_ASSIGNMENT);
    let (_, r) = create(&mut c, manual(vec![(0, vec![9])]));
    assert_eq!(r.error.code, INVALID_REPLICA_ASSIGNMENT);
    let (_, r) = create(&mut c, manual(vec![(1, vec![1])]));
    assert_eq!(r.error.code, INVALID_REPLICA_ASSIGNMENT);
    let mut bad = manual(vec![(0, vec![1])]);
    bad.num_partitions = 1;
    let (_, r) = create(&mut c, bad);
    assert_eq!(r.error.code, INVALID_REQUEST);
    let (_, r) = create(&mut c, manual(vec![(0, vec![2, 1]), (1, vec![1, 2])]));
    assert!(r.error.is_ok());
    let t = c.image().topics.get_by_name("m").unwrap().clone();
    assert_eq!(t.partitions[&0].leader, 2);
}

#[test]
fn placement_spreads_replicas() {
    let mut c = controller(3);
    let (_, r) = create(&mut c, topic("spread", 6, 2));
    assert!(r.error.is_ok());
    let t = c.image().topics.get_by_name("spread").unwrap().clone();
    let mut leaders = std::collections::BTreeMap::<i32, usize>::new();
    for p in t.partitions.values() {
        assert_eq!(p.replicas.len(), 2);
        assert_ne!(p.replicas[0], p.replicas[1]);
        *leaders.entry(p.leader).or_default() += 1;
    }
    assert_eq!(leaders.values().copied().collect::<Vec<_>>(), vec![2, 2, 2]);
}

#[test]
fn delete_topics_by_name_and_id() {
    let mut c = controller(1);
    let (_, a) = create(&mut c, topic("a", 1, 1));
    create(&mut c, topic("b", 1, 1));
    let r = c.delete_topics(&[
        TopicRef::Name("a".into()),
        TopicRef::Name("nope".into()),
        TopicRef::Id(Uuid([9; 16])),
    ]);
    assert_eq!(r.records.len(), 1);
    assert_eq!(r.response[0].error.code, NONE);
    assert_eq!(r.response[0].topic_id, a.topic_id);
    assert_eq!(r.response[1].error.code, UNKNOWN_TOPIC_OR_PARTITION);
    assert_eq!(r.response[2].error.code, UNKNOWN_TOPIC_ID);
    let b_id = c.image().topics.by_name["b"];
    let r = c.delete_topics(&[TopicRef::Id(b_id)]);
    assert_eq!(r.response[0].name.as_deref(), Some("b"));
    assert!(c.image().topics.by_name.is_empty());
    // Deletion can be disabled.
    let mut c = controller(1);
    c.cfg.delete_topic_enable = false;
    create(&mut c, topic("a", 1, 1));
    let r = c.delete_topics(&[TopicRef::Name("a".into())]);
    assert_eq!(r.response[0].error.code, TOPIC_DELETION_DISABLED);
}

#[test]
fn create_partitions_paths() {
    let mut c = controller(1);
    create(&mut c, topic("cp", 2, 1));
    let req = |name: &str, count: i32, a: Option<Vec<Vec<i32>>>| CreatePartitionsTopic {
        name: name.into(),
        count,
        assignments: a,
    };
    let r = c.create_partitions(
        &[req("cp", 1, None), req("nope", 3, None), req("cp", 2, None)],
        false,
    );
    // The twice-named topic gets one row, first (Kafka's ControllerApis order).
    let rows: Vec<(&str, i16)> = r
        .response
        .iter()
        .map(|x| (x.name.as_str(), x.error.code))
        .collect();
    assert_eq!(
        rows,
        vec![
            ("cp", INVALID_REQUEST),
            ("nope", UNKNOWN_TOPIC_OR_PARTITION)
        ]
    );
    assert_eq!(
        r.response[0].error.message.as_deref(),
        Some("Duplicate topic name.")
    );
    let r = c.create_partitions(&[req("cp", 1, None)], false);
    assert_eq!(r.response[0].error.code, INVALID_PARTITIONS);
    let r = c.create_partitions(&[req("cp", 2, None)], false);
    assert_eq!(r.response[0].error.code, INVALID_PARTITIONS);
    let r = c.create_partitions(&[req("cp", 4, Some(vec![vec![1]]))], false);
    assert_eq!(r.response[0].error.code, INVALID_REPLICA_ASSIGNMENT);
    let r = c.create_partitions(&[req("cp", 4, None)], true);
    assert!(r.response[0].error.is_ok() && r.records.is_empty());
    let r = c.create_partitions(&[req("cp", 4, None)], false);
    assert!(r.response[0].error.is_ok());
    assert_eq!(r.records.len(), 2);
    assert_eq!(
        c.image().topics.get_by_name("cp").unwrap().partitions.len(),
        4
    );
}

/// Kafka's bound of 10,000 new partitions per request, checked before anything is placed: a
/// request for i32::MAX partitions is answered at once and writes nothing, validate_only too.
#[test]
fn partitions_per_request_are_bounded() {
    let mut c = controller(1);
    for validate_only in [true, false] {
        let r = c.create_topics(&[topic("huge", i32::MAX, 1)], validate_only);
        assert!(r.records.is_empty());
        assert_eq!(r.response[0].error.code, POLICY_VIOLATION);
        assert_eq!(
            r.response[0].error.message.as_deref(),
            Some("Excessively large number of partitions per request.")
        );
    }
    // The sum counts: 5,001 + 5,000 fails both topics; 5,000 + 5,000 passes.
    let r = c.create_topics(&[topic("a", 5_001, 1), topic("b", 5_000, 1)], true);
    assert!(r.response.iter().all(|t| t.error.code == POLICY_VIOLATION));
    let r = c.create_topics(&[topic("a", 5_000, 1), topic("b", 5_000, 1)], true);
    assert!(r.response.iter().all(|t| t.error.is_ok()));

    create(&mut c, topic("grow", 2, 1));
    let grow = |count| CreatePartitionsTopic {
        name: "grow".into(),
        count,
        assignments: None,
    };
    let r = c.create_partitions(&[grow(i32::MAX)], false);
    assert!(r.records.is_empty());
    assert_eq!(r.response[0].error.code, POLICY_VIOLATION);
    assert_eq!(
        r.response[0].error.message.as_deref(),
        Some("Excessively large number of additional partitions per request.")
    );
    assert!(c.create_partitions(&[grow(10_002)], true).response[0]
        .error
        .is_ok());
}

#[test]
fn create_partitions_needs_enough_brokers() {
    let mut c = controller(2);
    create(&mut c, topic("r2", 1, 2));
    // Fence broker 2 by letting its session expire.
    c.session_deadlines.insert(2, NOW);
    c.session_deadlines.insert(1, NOW + 1_000_000);
    c.tick(NOW);
    let r = c.create_partitions(
        &[CreatePartitionsTopic {
            name: "r2".into(),
            count: 2,
            assignments: None,
        }],
        false,
    );
    assert_eq!(r.response[0].error.code, INVALID_REPLICATION_FACTOR);
}

fn set(name: &str, value: &str) -> (String, AlterConfigOp, Option<String>) {
    (name.into(), AlterConfigOp::Set, Some(value.into()))
}

#[test]
fn incremental_alter_configs_topic_and_broker() {
    let mut c = controller(1);
    create(&mut c, topic("t", 1, 1));
    let res = |rt: i8, name: &str, ops| IncrementalAlterConfigsResource {
        resource_type: rt,
        resource_name: name.into(),
        ops,
    };
    let r = c.incremental_alter_configs(
        &[
            res(
                2,
                "t",
                vec![
                    set("retention.ms", "1000"),
                    set("cleanup.policy", "compact"),
                ],
            ),
            res(4, "", vec![set("log.retention.ms", "5000")]),
            res(4, "1", vec![set("num.io.threads", "4")]),
        ],
        false,
    );
    assert!(
        r.response.iter().all(|x| x.error.is_ok()),
        "{:?}",
        r.response
    );
    assert_eq!(r.records.len(), 4);
    assert_eq!(
        c.image().config_overrides(&ConfigResource::broker(""))["log.retention.ms"],
        "5000"
    );
    // APPEND / SUBTRACT on a list config, DELETE of a key.
    let r = c.incremental_alter_configs(
        &[res(
            2,
            "t",
            vec![
                (
                    "cleanup.policy".into(),
                    AlterConfigOp::Append,
                    Some("delete".into()),
                ),
                ("retention.ms".into(), AlterConfigOp::Delete, None),
            ],
        )],
        false,
    );
    assert!(r.response[0].error.is_ok());
    let t = c.image().config_overrides(&ConfigResource::topic("t"));
    assert_eq!(t["cleanup.policy"], "compact,delete");
    assert!(!t.contains_key("retention.ms"));

    let cases = vec![
        (
            res(2, "nope", vec![set("retention.ms", "1")]),
            UNKNOWN_TOPIC_OR_PARTITION,
        ),
        (res(2, "t", vec![set("bogus", "1")]), INVALID_CONFIG),
        (res(2, "t", vec![set("retention.ms", "x")]), INVALID_CONFIG),
        (
            res(
                2,
                "t",
                vec![(
                    "retention.ms".into(),
                    AlterConfigOp::Append,
                    Some("1".into()),
                )],
            ),
            INVALID_CONFIG,
        ),
        (
            res(
                2,
                "t",
                vec![set("retention.ms", "1"), set("retention.ms", "2")],
            ),
            INVALID_REQUEST,
        ),
        (
            res(4, "x", vec![set("log.retention.ms", "1")]),
            INVALID_REQUEST,
        ),
        (res(4, "", vec![set("broker.id", "3")]), INVALID_REQUEST),
        // A broker value that does not parse is Kafka's INVALID_REQUEST (the topic's would be
        // INVALID_CONFIG).
        (
            res(4, "", vec![set("log.retention.ms", "nope")]),
            INVALID_REQUEST,
        ),
        (res(8, "1", vec![set("x", "1")]), INVALID_REQUEST),
    ];
    for (resource, code) in cases {
        let r = c.incremental_alter_configs(std::slice::from_ref(&resource), false);
        assert_eq!(r.response[0].error.code, code, "{resource:?}");
        assert!(r.records.is_empty());
    }
    // validate_only
    let r = c.incremental_alter_configs(&[res(2, "t", vec![set("retention.ms", "7")])], true);
    assert!(r.response[0].error.is_ok() && r.records.is_empty());
}

/// Keys the node's config table declares dynamic only for Kafka's sake (here an SSL key and
/// the metric reporters) are stored like any dynamic key; the per-broker ones only for a
/// broker, never as the cluster default, as Kafka refuses them there.
#[test]
fn declared_dynamic_keys_are_stored_and_per_broker_ones_only_per_broker() {
    let mut c = QuorumControllerCore::new(
        ControllerConfig {
            cluster_id: "c1".into(),
            broker_config_table: [
                ("ssl.client.auth", true),
                ("metric.reporters", true),
                ("listeners", true),
                ("ssl.keystore.type", false),
            ]
            .iter()
            .map(|(k, d)| (k.to_string(), *d))
            .collect(),
            ..Default::default()
        },
        7,
    );
    c.activate(1, NOW);
    let res = |name: &str, key: &str, value: &str| IncrementalAlterConfigsResource {
        resource_type: 4,
        resource_name: name.into(),
        ops: vec![set(key, value)],
    };
    let r = c.incremental_alter_configs(
        &[
            res("1", "ssl.client.auth", "required"),
            res("1", "listeners", "PLAINTEXT://:9092"),
            res("", "metric.reporters", "x.Reporter"),
        ],
        false,
    );
    assert!(
        r.response.iter().all(|x| x.error.is_ok()),
        "{:?}",
        r.response
    );
    assert_eq!(
        c.image().config_overrides(&ConfigResource::broker("1"))["ssl.client.auth"],
        "required"
    );
    for key in ["ssl.client.auth", "listeners"] {
        let r = c.incremental_alter_configs(&[res("", key, "v")], false);
        assert_eq!(r.response[0].error.code, INVALID_REQUEST, "{key}");
        assert_eq!(
            r.response[0].error.message.as_deref(),
            Some(
                format!(
                    "Cannot update these configs at default cluster level, broker id must be specified: [{key}]"
                )
                .as_str()
            )
        );
        assert!(r.records.is_empty());
    }
    // Not declared dynamic: still refused for a broker too.
    let r = c.incremental_alter_configs(&[res("1", "ssl.keystore.type", "PKCS12")], false);
    assert_eq!(r.response[0].error.code, INVALID_REQUEST);
}

/// With the node's table known, a key outside it is a custom config (for plugins), stored for
/// a broker or the cluster default as Kafka stores it; a known static key is still refused.
#[test]
fn custom_broker_keys_are_stored() {
    let mut c = QuorumControllerCore::new(
        ControllerConfig {
            cluster_id: "c1".into(),
            broker_config_table: [("log.dirs", false), ("num.io.threads", true)]
                .iter()
                .map(|(k, d)| (k.to_string(), *d))
                .collect(),
            ..Default::default()
        },
        7,
    );
    c.activate(1, NOW);
    let res = |name: &str, key: &str| IncrementalAlterConfigsResource {
        resource_type: 4,
        resource_name: name.into(),
        ops: vec![set(key, "v")],
    };
    let r = c.incremental_alter_configs(
        &[
            res("1", "my.plugin.setting"),
            res("", "other.plugin.setting"),
        ],
        false,
    );
    assert!(
        r.response.iter().all(|x| x.error.is_ok()),
        "{:?}",
        r.response
    );
    assert_eq!(
        c.image().config_overrides(&ConfigResource::broker("1"))["my.plugin.setting"],
        "v"
    );
    let r = c.incremental_alter_configs(&[res("1", "log.dirs")], false);
    assert_eq!(r.response[0].error.code, INVALID_REQUEST);
    assert_eq!(
        r.response[0].error.message.as_deref(),
        Some("Cannot update these configs dynamically: [log.dirs]")
    );
}

#[test]
fn legacy_alter_configs_replaces_the_set() {
    let mut c = controller(1);
    let mut t = topic("t", 1, 1);
    t.configs = vec![("retention.ms".into(), Some("1".into()))];
    create(&mut c, t);
    let r = c.legacy_alter_configs(
        &[AlterConfigsResource {
            resource_type: 2,
            resource_name: "t".into(),
            configs: vec![("segment.ms".into(), Some("100".into()))],
        }],
        false,
    );
    assert!(r.response[0].error.is_ok());
    let cfg = c.image().config_overrides(&ConfigResource::topic("t"));
    assert_eq!(cfg.len(), 1);
    assert_eq!(cfg["segment.ms"], "100");
}

#[test]
fn broker_registration_and_heartbeat_lifecycle() {
    let mut c = controller(0);
    let mut bad = registration(1);
    bad.cluster_id = "other".into();
    assert_eq!(
        c.register_broker(&bad, NOW).response.error.code,
        INCONSISTENT_CLUSTER_ID
    );
    let mut old = registration(1);
    old.features.retain(|f| f.name != "metadata.version");
    assert_eq!(
        c.register_broker(&old, NOW).response.error.code,
        UNSUPPORTED_VERSION
    );
    let r = c.register_broker(&registration(1), NOW);
    let epoch = r.response.broker_epoch;
    assert!(
        matches!(&r.records[0], MetadataRecord::RegisterBroker(b) if b.fenced && b.broker_epoch == epoch)
    );
    let hb = |epoch, offset, fence, shut| BrokerHeartbeat {
        broker_id: 1,
        broker_epoch: epoch,
        current_metadata_offset: offset,
        want_fence: fence,
        want_shut_down: shut,
    };
    assert_eq!(
        c.broker_heartbeat(&hb(epoch + 5, 0, false, false), NOW)
            .response
            .error
            .code,
        STALE_BROKER_EPOCH
    );
    let mut unknown = hb(epoch, 0, false, false);
    unknown.broker_id = 9;
    assert_eq!(
        c.broker_heartbeat(&unknown, NOW).response.error.code,
        BROKER_ID_NOT_REGISTERED
    );
    // Not caught up yet: stays fenced.
    let r = c.broker_heartbeat(&hb(epoch, epoch - 1, false, false), NOW);
    assert!(r.response.is_fenced && !r.response.is_caught_up && r.records.is_empty());
    // Caught up: unfenced.
    let r = c.broker_heartbeat(&hb(epoch, epoch, false, false), NOW);
    assert!(!r.response.is_fenced && r.response.is_caught_up);
    assert_eq!(r.records.len(), 1);
    assert!(!c.image().brokers[&1].fenced);
    // Another incarnation while the unfenced session is alive is a duplicate.
    let mut other = registration(1);
    other.incarnation_id = Uuid([55; 16]);
    assert_eq!(
        c.register_broker(&other, NOW + 1).response.error.code,
        DUPLICATE_BROKER_REGISTRATION
    );
    // Session expiry fences it and takes leadership away.
    create(&mut c, topic("t", 1, 1));
    let recs = c.tick(NOW + 60_000);
    assert!(c.image().brokers[&1].fenced);
    assert_eq!(recs.len(), 2);
    let p = &c.image().topics.get_by_name("t").unwrap().partitions[&0];
    assert_eq!((p.leader, p.leader_epoch, p.isr.clone()), (-1, 1, vec![1]));
    // Coming back elects it again.
    let r = c.broker_heartbeat(&hb(epoch, i64::MAX, false, false), NOW + 60_001);
    assert!(!r.response.is_fenced);
    let p = &c.image().topics.get_by_name("t").unwrap().partitions[&0];
    assert_eq!((p.leader, p.leader_epoch), (1, 2));
    // Controlled shutdown: the leader first moves its leaderships away (here to no one,
    // it is the only replica) and stays unfenced; then it may go.
    let r = c.broker_heartbeat(&hb(epoch, i64::MAX, false, true), NOW + 60_002);
    assert!(!r.response.should_shut_down && !r.response.is_fenced);
    assert!(c.image().brokers[&1].in_controlled_shutdown);
    let p = &c.image().topics.get_by_name("t").unwrap().partitions[&0];
    assert_eq!(p.leader, -1);
    let r = c.broker_heartbeat(&hb(epoch, i64::MAX, false, true), NOW + 60_003);
    assert!(r.response.should_shut_down && r.response.is_fenced);
    // Fenced on the way out, it has no session left (Kafka's `hasValidSession`): its next
    // incarnation registers at once instead of waiting out the session timeout.
    let r = c.register_broker(&other, NOW + 60_004);
    assert_eq!(r.response.error.code, 0);
    assert!(r.response.broker_epoch > epoch);
}

#[test]
fn controlled_shutdown_waits_until_every_active_broker_saw_the_new_leaders() {
    let mut c = controller(3);
    create(&mut c, topic("t", 1, 3));
    let leader = c.image().topics.get_by_name("t").unwrap().partitions[&0].leader;
    let others: Vec<i32> = (1..=3).filter(|b| *b != leader).collect();
    let at = |c: &mut QuorumControllerCore, id: i32, offset: i64, shut: bool| {
        let epoch = c.image().brokers[&id].epoch;
        c.broker_heartbeat(
            &BrokerHeartbeat {
                broker_id: id,
                broker_epoch: epoch,
                current_metadata_offset: offset,
                want_fence: false,
                want_shut_down: shut,
            },
            NOW + 1,
        )
        .response
    };
    // The others report an offset from before the shutdown.
    let before = c.applied_offset;
    for b in &others {
        at(&mut c, *b, before, false);
    }
    let r = at(&mut c, leader, i64::MAX, true);
    assert!(!r.should_shut_down && !r.is_fenced);
    let p = &c.image().topics.get_by_name("t").unwrap().partitions[&0];
    assert!(
        others.contains(&p.leader),
        "leadership moved to an ISR member"
    );
    assert!(
        !p.isr.contains(&leader),
        "the shutting-down broker left the ISR"
    );
    // Not yet: the others have not seen the change.
    assert!(!at(&mut c, leader, i64::MAX, true).should_shut_down);
    let now = c.applied_offset;
    for b in &others {
        at(&mut c, *b, now, false);
    }
    let r = at(&mut c, leader, i64::MAX, true);
    assert!(r.should_shut_down && r.is_fenced);
}

#[test]
fn a_broker_leading_nothing_shuts_down_at_once() {
    let mut c = controller(2);
    create(&mut c, topic("t", 1, 1));
    let leader = c.image().topics.get_by_name("t").unwrap().partitions[&0].leader;
    let idle = if leader == 1 { 2 } else { 1 };
    let r = heartbeat(&mut c, idle, NOW + 1, true);
    assert!(r.should_shut_down && r.is_fenced);
}

#[test]
fn restarted_broker_registers_again_and_bumps_leader_epochs() {
    let mut c = controller(1);
    create(&mut c, topic("t", 1, 1));
    let mut again = registration(1);
    again.incarnation_id = Uuid([77; 16]);
    // The old session has expired by the time the restarted broker registers.
    let r = c.register_broker(&again, NOW + 60_000);
    assert!(r.response.error.is_ok());
    let p = &c.image().topics.get_by_name("t").unwrap().partitions[&0];
    assert_eq!(p.leader, -1);
    let r = c.broker_heartbeat(
        &BrokerHeartbeat {
            broker_id: 1,
            broker_epoch: r.response.broker_epoch,
            current_metadata_offset: i64::MAX,
            want_fence: false,
            want_shut_down: false,
        },
        NOW + 60_000,
    );
    assert!(!r.response.is_fenced);
    let p = &c.image().topics.get_by_name("t").unwrap().partitions[&0];
    assert_eq!((p.leader, p.leader_epoch), (1, 2));
}

#[test]
fn update_features_paths() {
    let mut c = controller(1);
    let up = |f: &str, level, t| FeatureUpdate {
        feature: f.into(),
        max_version_level: level,
        upgrade_type: t,
    };
    let err = |r: ControllerResult<UpdateFeaturesReply>| {
        assert!(r.records.is_empty());
        let e = r.response.error;
        assert_eq!(e.code, INVALID_UPDATE_VERSION);
        e.message
            .unwrap()
            .strip_prefix(
                "The update failed for all features since the following feature had an error: ",
            )
            .unwrap()
            .to_string()
    };
    // Messages as Kafka 4.4.0's, in its order of checks.
    assert_eq!(
        err(c.update_features(&[up("group.version", 0, UpgradeType::Upgrade)], false)),
        "Invalid update version 0 for feature group.version. Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade."
    );
    assert_eq!(
        err(c.update_features(&[up("group.version", 9, UpgradeType::SafeDowngrade)], false)),
        "Invalid update version 9 for feature group.version. Local controller 1 only supports versions 0-1"
    );
    assert_eq!(
        err(c.update_features(&[up("no.such", 1, UpgradeType::Upgrade)], false)),
        "Invalid update version 1 for feature no.such. Local controller 1 does not support this feature."
    );
    assert_eq!(
        err(c.update_features(&[up("no.such", 0, UpgradeType::SafeDowngrade)], false)),
        "Invalid update version 0 for feature no.such. Feature no.such not found."
    );
    assert_eq!(
        err(c.update_features(&[up("share.version", 2, UpgradeType::Unknown)], false)),
        "Invalid update version 2 for feature share.version. The controller does not support the given upgrade type."
    );
    assert_eq!(
        err(c.update_features(
            &[up("streams.version", 1, UpgradeType::SafeDowngrade)],
            false
        )),
        "Invalid update version 1 for feature streams.version. Can't downgrade to a newer version."
    );
    assert_eq!(
        err(c.update_features(&[up("group.version", -1, UpgradeType::SafeDowngrade)], false)),
        "Invalid update version -1 for feature group.version. A feature version cannot be less than 0."
    );
    assert_eq!(
        err(c.update_features(&[up("metadata.version", 32, UpgradeType::SafeDowngrade)], false)),
        "Unsupported metadata.version downgrade from 33 to 32. Refusing to perform the requested downgrade because it might delete metadata information."
    );
    assert_eq!(
        err(c.update_features(&[up("metadata.version", 30, UpgradeType::UnsafeDowngrade)], false)),
        "Unsupported metadata.version downgrade from 33 to 30. Unsafe metadata downgrade is not supported in this version."
    );
    assert!(!metadata_changed_between(31, 31) && !metadata_changed_between(30, 31));
    assert!(metadata_changed_between(29, 31));
    // ELR needs metadata.version 23, proposed in the same request or already finalized.
    c.image.features.insert("metadata.version".into(), 22);
    assert_eq!(
        err(c.update_features(&[up("eligible.leader.replicas.version", 1, UpgradeType::Upgrade)], false)),
        "Invalid update version 1 for feature eligible.leader.replicas.version. eligible.leader.replicas.version could not be set to 1 because it depends on metadata.version level 23"
    );
    let r = c.update_features(
        &[
            up("eligible.leader.replicas.version", 1, UpgradeType::Upgrade),
            up("metadata.version", 23, UpgradeType::Upgrade),
        ],
        true,
    );
    assert!(r.response.error.is_ok() && r.records.is_empty());
    c.image.features.insert("metadata.version".into(), 33);

    let r = c.update_features(&[up("group.version", 0, UpgradeType::SafeDowngrade)], true);
    assert!(r.response.error.is_ok() && r.records.is_empty());
    let r = c.update_features(&[up("group.version", 0, UpgradeType::SafeDowngrade)], false);
    assert!(r.response.error.is_ok());
    assert_eq!(r.records.len(), 1);
    assert!(!c.image().features.contains_key("group.version"));
    // All or nothing; a feature named twice counts with its last update.
    let r = c.update_features(
        &[
            up("group.version", 1, UpgradeType::Upgrade),
            up("transaction.version", 7, UpgradeType::Upgrade),
        ],
        false,
    );
    assert!(r.records.is_empty() && !r.response.error.is_ok());
    let r = c.update_features(
        &[
            up("streams.version", 9, UpgradeType::Upgrade),
            up("streams.version", 1, UpgradeType::Upgrade),
        ],
        false,
    );
    assert!(r.response.error.is_ok());
    assert_eq!(c.image().features["streams.version"], 1);
    // kraft.version cannot go down.
    assert_eq!(
        err(c.update_features(&[up("kraft.version", 1, UpgradeType::SafeDowngrade)], false)),
        "Invalid update version 1 for feature kraft.version. Can't downgrade to a newer version."
    );
}

#[test]
fn a_kraft_version_upgrade_goes_to_raft_before_its_no_op() {
    let mut c = controller(1);
    let up = |level, t| FeatureUpdate {
        feature: "kraft.version".into(),
        max_version_level: level,
        upgrade_type: t,
    };
    // Raft is asked for every UPGRADE of kraft.version (it does nothing at the same level),
    // never for a downgrade type; the last update of the feature counts.
    assert_eq!(
        c.kraft_version_upgrade(&[up(0, UpgradeType::Upgrade)]),
        Some(0)
    );
    assert_eq!(
        c.kraft_version_upgrade(&[
            up(1, UpgradeType::Upgrade),
            up(0, UpgradeType::SafeDowngrade)
        ]),
        None
    );
    // The same level: a NoOpRecord to wait for.
    let r = c.update_features(&[up(0, UpgradeType::Upgrade)], false);
    assert_eq!(r.records, vec![MetadataRecord::NoOp(Default::default())]);
    assert!(c
        .update_features(&[up(1, UpgradeType::Upgrade)], true)
        .records
        .is_empty());

    // Raft put the control batch (KRaftVersionRecord, VotersRecord) where the next record
    // would go; this request's two records follow it.
    let next = c.applied_offset() + 1;
    assert!(!c.kraft_version_appended(next + 1, next + 2, 1));
    assert!(c.kraft_version_appended(next, next + 1, 1));
    assert_eq!(c.image().features["kraft.version"], 1);
    let r = c.update_features(
        &[
            up(1, UpgradeType::Upgrade),
            FeatureUpdate {
                feature: "streams.version".into(),
                max_version_level: 1,
                upgrade_type: UpgradeType::Upgrade,
            },
        ],
        false,
    );
    assert!(r.response.error.is_ok());
    assert_eq!(r.records.len(), 2);
    assert_eq!(c.applied_offset(), next + 3);
    assert_eq!(
        err_message(c.update_features(&[up(0, UpgradeType::SafeDowngrade)], false)),
        "Invalid update version 0 for feature kraft.version. Can't downgrade the version of this feature."
    );

    // A standby learns it from the committed control batch.
    let mut standby = QuorumControllerCore::new(ControllerConfig::default(), 1);
    standby.replay_kraft_version(next + 1, 1);
    assert_eq!(standby.image().features["kraft.version"], 1);
    assert_eq!(standby.applied_offset(), next + 1);
}

fn err_message(r: ControllerResult<UpdateFeaturesReply>) -> String {
    r.response.error.message.unwrap().replace(
        "The update failed for all features since the following feature had an error: ",
        "",
    )
}

#[test]
fn producer_id_blocks() {
    let mut c = controller(1);
    let epoch = c.image().brokers[&1].epoch;
    let a = c.allocate_producer_ids(1, epoch);
    let b = c.allocate_producer_ids(1, epoch);
    assert_eq!(
        (a.response.producer_id_start, a.response.producer_id_len),
        (0, 1000)
    );
    assert_eq!(b.response.producer_id_start, 1000);
    assert_eq!(c.image().next_producer_id, 2000);
    assert_eq!(
        c.allocate_producer_ids(1, epoch + 1).response.error.code,
        STALE_BROKER_EPOCH
    );
    assert_eq!(
        c.allocate_producer_ids(5, 0).response.error.code,
        BROKER_ID_NOT_REGISTERED
    );
}

#[test]
fn inactive_controller_answers_not_controller() {
    let mut c = QuorumControllerCore::new(ControllerConfig::default(), 1);
    assert_eq!(
        c.create_topics(&[topic("t", 1, 1)], false).response[0]
            .error
            .code,
        NOT_CONTROLLER
    );
    assert_eq!(
        c.delete_topics(&[TopicRef::Name("t".into())]).response[0]
            .error
            .code,
        NOT_CONTROLLER
    );
    assert_eq!(
        c.allocate_producer_ids(1, 1).response.error.code,
        NOT_CONTROLLER
    );
}

#[test]
fn committed_replay_rebuilds_the_same_image() {
    let mut c = controller(2);
    create(&mut c, topic("a", 3, 2));
    let mut all = Vec::new();
    // Re-run the same history and collect the records in order.
    let mut c2 = QuorumControllerCore::new(
        ControllerConfig {
            cluster_id: "c1".into(),
            ..Default::default()
        },
        7,
    );
    let mut offset = 1;
    let boot = c2.activate(offset, NOW);
    offset += boot.len() as i64;
    all.extend(boot);
    for id in 1..=2 {
        let r = c2.register_broker(&registration(id), NOW);
        offset += r.records.len() as i64;
        all.extend(r.records);
        let hb = c2.broker_heartbeat(
            &BrokerHeartbeat {
                broker_id: id,
                broker_epoch: r.response.broker_epoch,
                current_metadata_offset: i64::MAX,
                want_fence: false,
                want_shut_down: false,
            },
            NOW,
        );
        offset += hb.records.len() as i64;
        all.extend(hb.records);
    }
    let r = c2.create_topics(&[topic("a", 3, 2)], false);
    all.extend(r.records);
    let _ = offset;
    let mut follower = QuorumControllerCore::new(ControllerConfig::default(), 99);
    follower.replay_committed(1, &all).unwrap();
    assert_eq!(follower.image().topics, c2.image().topics);
    assert_eq!(follower.image().brokers, c2.image().brokers);
    assert_eq!(follower.image().features, c2.image().features);
    // Replaying again is a no-op (offsets already applied).
    follower.replay_committed(1, &all).unwrap();
    assert_eq!(follower.image().topics, c2.image().topics);
}

#[test]
fn features_agree_with_api_versions() {
    use crate::network::api_versions::{bootstrap_finalized_features, supported_features};
    let c = QuorumControllerCore::new(ControllerConfig::default(), 1);
    let boot: std::collections::BTreeMap<String, i16> = c
        .bootstrap_records()
        .iter()
        .filter_map(|r| match r {
            MetadataRecord::FeatureLevel(f) => Some((f.name.clone(), f.feature_level)),
            _ => None,
        })
        .collect();
    assert_eq!(boot, bootstrap_finalized_features().levels);
    let mut ours: Vec<(String, i16, i16)> = SUPPORTED_FEATURES
        .iter()
        .map(|(n, lo, hi, _)| (n.to_string(), *lo, *hi))
        .collect();
    let mut theirs: Vec<(String, i16, i16)> = supported_features()
        .into_iter()
        .map(|f| (f.name, f.min_version, f.max_version))
        .collect();
    ours.sort();
    theirs.sort();
    assert_eq!(ours, theirs);
}

#[test]
fn a_restarted_node_registers_at_once_but_a_live_duplicate_is_refused() {
    let mut c = controller(1);
    // The controller restarted too: it has not heard from broker 1 in this life.
    c.deactivate();
    c.activate(1000, NOW);
    let mut again = registration(1);
    again.incarnation_id = Uuid([42; 16]);
    assert!(c.register_broker(&again, NOW + 1).response.error.is_ok());
    // Registered fenced, another incarnation may still replace it (Kafka: a fenced broker
    // has no valid session); once broker 1 (incarnation 42) is unfenced and live, yet
    // another incarnation is a duplicate...
    heartbeat(&mut c, 1, NOW + 1, false);
    assert!(!c.image().brokers[&1].fenced);
    let mut third = registration(1);
    third.incarnation_id = Uuid([43; 16]);
    assert_eq!(
        c.register_broker(&third, NOW + 2).response.error.code,
        DUPLICATE_BROKER_REGISTRATION
    );
    // ...unless it names the live registration's epoch (a clean restart).
    third.previous_broker_epoch = c.image().brokers[&1].epoch;
    assert!(c.register_broker(&third, NOW + 3).response.error.is_ok());
}

/// A caught-up heartbeat from broker `id` at its registered epoch.
fn heartbeat(
    c: &mut QuorumControllerCore,
    id: i32,
    now: i64,
    want_shut_down: bool,
) -> BrokerHeartbeatReply {
    let epoch = c.image().brokers[&id].epoch;
    c.broker_heartbeat(
        &BrokerHeartbeat {
            broker_id: id,
            broker_epoch: epoch,
            current_metadata_offset: i64::MAX,
            want_fence: false,
            want_shut_down,
        },
        now,
    )
    .response
}

/// Broker `id` asks for a controlled shutdown (its leadership moves away, it leaves the ISRs
/// it is not the last member of).
fn shut_down(c: &mut QuorumControllerCore, id: i32, now: i64) {
    // A leader first enters controlled shutdown; the next heartbeat (every broker caught
    // up) lets it go.
    if !heartbeat(c, id, now, true).should_shut_down {
        assert!(c.image().brokers[&id].in_controlled_shutdown);
        assert!(heartbeat(c, id, now, true).should_shut_down);
    }
}

/// Sets partition 0 of `topic`'s ISR, as the leader's AlterPartition would.
fn set_isr(c: &mut QuorumControllerCore, topic: &str, isr: Vec<i32>) {
    let topic_id = c.image().topics.get_by_name(topic).unwrap().id;
    c.apply_own(&[MetadataRecord::PartitionChange(PartitionChangeRecord {
        partition_id: 0,
        topic_id,
        isr: Some(isr),
        leader: NO_LEADER_CHANGE,
        ..Default::default()
    })]);
}

fn partition0(c: &QuorumControllerCore, topic: &str) -> (i32, i32, Vec<i32>) {
    let p = &c.image().topics.get_by_name(topic).unwrap().partitions[&0];
    (p.leader, p.leader_epoch, p.isr.clone())
}

/// A 3-broker controller with topic `name` (one partition, on all three brokers) and that
/// partition's replicas.
fn controller_with_replicated_topic(name: &str) -> (QuorumControllerCore, Vec<i32>) {
    let mut c = controller(3);
    create(&mut c, topic(name, 1, 3));
    let replicas = c.image().topics.get_by_name(name).unwrap().partitions[&0]
        .replicas
        .clone();
    (c, replicas)
}

fn elect(
    c: &mut QuorumControllerCore,
    election: ElectionType,
    partitions: Option<&[(String, Vec<i32>)]>,
) -> (Vec<MetadataRecord>, Vec<(String, i32, i16)>) {
    let r = c.elect_leaders(election, partitions);
    let rows = r
        .response
        .into_iter()
        .flat_map(|t| {
            t.partitions
                .into_iter()
                .map(move |(i, e)| (t.topic.clone(), i, e.code))
        })
        .collect();
    (r.records, rows)
}

#[test]
fn preferred_election_moves_leadership_back_to_the_first_replica() {
    let (mut c, replicas) = controller_with_replicated_topic("t");
    let (a, b) = (replicas[0], replicas[1]);
    let t0 = [("t".to_string(), vec![0])];
    assert_eq!(
        elect(&mut c, ElectionType::Preferred, Some(&t0)).1,
        vec![("t".into(), 0, ELECTION_NOT_NEEDED)]
    );
    // The preferred replica shuts down: leadership moves on, and it leaves the ISR.
    shut_down(&mut c, a, NOW + 1);
    let (leader, epoch, isr) = partition0(&c, "t");
    assert_eq!(leader, b);
    assert!(!isr.contains(&a));
    // Back, but not in sync: the preferred replica cannot lead yet and the leader stays.
    c.register_broker(&registration(a), NOW + 60_000);
    heartbeat(&mut c, a, NOW + 60_000, false);
    let (recs, rows) = elect(&mut c, ElectionType::Preferred, Some(&t0));
    assert!(recs.is_empty());
    assert_eq!(rows, vec![("t".into(), 0, PREFERRED_LEADER_NOT_AVAILABLE)]);
    // In sync again: the election gives it leadership, with a new leader epoch.
    set_isr(&mut c, "t", replicas.clone());
    let all = elect(&mut c, ElectionType::Preferred, None);
    assert_eq!(all.0.len(), 1);
    assert_eq!(all.1, vec![("t".into(), 0, NONE)]);
    let (leader, new_epoch, _) = partition0(&c, "t");
    assert_eq!((leader, new_epoch), (a, epoch + 1));
    // Done: naming it again is not needed, and "all partitions" leaves it out.
    assert_eq!(
        elect(&mut c, ElectionType::Preferred, Some(&t0)).1,
        vec![("t".into(), 0, ELECTION_NOT_NEEDED)]
    );
    assert_eq!(
        elect(&mut c, ElectionType::Preferred, None),
        (vec![], vec![])
    );
}

#[test]
fn unclean_election_takes_a_replica_outside_the_isr_only_when_no_leader_is_left() {
    let (mut c, replicas) = controller_with_replicated_topic("u");
    let (a, b) = (replicas[0], replicas[1]);
    let u0 = [("u".to_string(), vec![0])];
    assert_eq!(
        elect(&mut c, ElectionType::Unclean, Some(&u0)).1,
        vec![("u".into(), 0, ELECTION_NOT_NEEDED)]
    );
    // Only the leader is in sync, and it goes away: no leader, the ISR keeps its last member.
    set_isr(&mut c, "u", vec![a]);
    shut_down(&mut c, a, NOW + 1);
    assert_eq!(partition0(&c, "u").0, -1);
    assert_eq!(partition0(&c, "u").2, vec![a]);
    // A preferred election has no in-sync replica to choose.
    assert_eq!(
        elect(&mut c, ElectionType::Preferred, Some(&u0)).1,
        vec![("u".into(), 0, PREFERRED_LEADER_NOT_AVAILABLE)]
    );
    // An unclean one takes the next live replica, which becomes the whole ISR.
    let (recs, rows) = elect(&mut c, ElectionType::Unclean, Some(&u0));
    assert_eq!(rows, vec![("u".into(), 0, NONE)]);
    assert_eq!(recs.len(), 1);
    let (leader, _, isr) = partition0(&c, "u");
    assert_eq!((leader, isr), (b, vec![b]));
}

#[test]
fn election_errors_name_the_missing_topic_or_partition() {
    let mut c = controller(1);
    create(&mut c, topic("t", 2, 1));
    let req = [
        ("t".to_string(), vec![1, 1, 5]),
        ("nope".to_string(), vec![0]),
    ];
    let r = c.elect_leaders(ElectionType::Preferred, Some(&req));
    let rows: Vec<(String, i32, ApiError)> = r
        .response
        .into_iter()
        .flat_map(|t| {
            t.partitions
                .into_iter()
                .map(move |(i, e)| (t.topic.clone(), i, e))
        })
        .collect();
    let not_needed = ApiError::new(
        ELECTION_NOT_NEEDED,
        "Leader election not needed for topic partition.",
    );
    assert_eq!(
        rows,
        vec![
            ("t".into(), 1, not_needed.clone()),
            ("t".into(), 1, not_needed),
            (
                "t".into(),
                5,
                ApiError::new(UNKNOWN_TOPIC_OR_PARTITION, "No such partition as t-5")
            ),
            (
                "nope".into(),
                0,
                ApiError::new(UNKNOWN_TOPIC_OR_PARTITION, "No such topic as nope")
            ),
        ]
    );
}

#[test]
fn group_configs_are_validated_as_a_whole_and_stored_as_rendered() {
    let mut c = QuorumControllerCore::new(
        ControllerConfig {
            cluster_id: "c1".into(),
            broker_values: [
                ("group.consumer.min.session.timeout.ms", "45000"),
                ("group.consumer.max.session.timeout.ms", "60000"),
                ("group.consumer.session.timeout.ms", "45000"),
                ("group.consumer.min.heartbeat.interval.ms", "5000"),
                ("group.consumer.max.heartbeat.interval.ms", "15000"),
                ("group.consumer.heartbeat.interval.ms", "5000"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
            ..Default::default()
        },
        7,
    );
    c.activate(1, NOW);
    let alter = |c: &mut QuorumControllerCore, name: &str, ops| {
        let r = c.incremental_alter_configs(
            &[IncrementalAlterConfigsResource {
                resource_type: 32,
                resource_name: name.into(),
                ops,
            }],
            false,
        );
        r.response[0].error.clone()
    };
    let group = ConfigResource::group("g");
    assert!(alter(
        &mut c,
        "g",
        vec![set("consumer.session.timeout.ms", " 50000 ")]
    )
    .is_ok());
    assert_eq!(
        c.image()
            .config_overrides(&group)
            .get("consumer.session.timeout.ms"),
        Some(&"50000".to_string())
    );
    let err = |code, msg: &str| ApiError::new(code, msg);
    assert_eq!(
        alter(
            &mut c,
            "",
            vec![set("consumer.session.timeout.ms", "50000")]
        ),
        err(INVALID_REQUEST, "Default group resources are not allowed.")
    );
    // Names first, whatever the order of the operations.
    assert_eq!(
        alter(
            &mut c,
            "g",
            vec![
                set("consumer.heartbeat.interval.ms", "abc"),
                set("no.such", "1")
            ]
        ),
        err(INVALID_CONFIG, "Unknown group config name: no.such")
    );
    assert_eq!(
        alter(
            &mut c,
            "g",
            vec![set("consumer.session.timeout.ms", "70000")]
        ),
        err(
            INVALID_CONFIG,
            "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."
        )
    );
    assert_eq!(
        alter(
            &mut c,
            "g",
            vec![(
                "streams.rack.aware.assignment.tags".into(),
                AlterConfigOp::Append,
                Some("a".into())
            )]
        ),
        err(
            INVALID_CONFIG,
            "Can't APPEND to key streams.rack.aware.assignment.tags because its type is not LIST."
        )
    );
    assert_eq!(
        alter(
            &mut c,
            "g",
            vec![
                set("consumer.session.timeout.ms", "50000"),
                set("consumer.session.timeout.ms", "51000")
            ]
        ),
        err(INVALID_REQUEST, "Error due to duplicate config keys")
    );
    // Deleting a key the group does not have (even an unknown one) is not an error.
    assert!(alter(
        &mut c,
        "g",
        vec![("no.such".into(), AlterConfigOp::Delete, None)]
    )
    .is_ok());
    // The legacy API replaces the whole set, checked the same way.
    let r = c.legacy_alter_configs(
        &[AlterConfigsResource {
            resource_type: 32,
            resource_name: "g".into(),
            configs: vec![("consumer.heartbeat.interval.ms".into(), Some("6000".into()))],
        }],
        false,
    );
    assert!(r.response[0].error.is_ok());
    assert_eq!(
        c.image().config_overrides(&group),
        BTreeMap::from([(
            "consumer.heartbeat.interval.ms".to_string(),
            "6000".to_string()
        )])
    );
}

#[test]
fn broker_values_are_checked_by_type_and_thread_pools_by_size() {
    let mut c = QuorumControllerCore::new(
        ControllerConfig {
            cluster_id: "c1".into(),
            broker_config_table: [("num.io.threads", true), ("max.connections", true)]
                .into_iter()
                .map(|(k, d)| (k.to_string(), d))
                .collect(),
            broker_value_kinds: [
                (
                    "num.io.threads",
                    topic_configs::ConfigType::Int {
                        min: 1,
                        max: i32::MAX as i64,
                    },
                ),
                (
                    "max.connections",
                    topic_configs::ConfigType::Int {
                        min: 0,
                        max: i32::MAX as i64,
                    },
                ),
            ]
            .into_iter()
            .map(|(k, t)| (k.to_string(), t))
            .collect(),
            broker_values: BTreeMap::from([("num.io.threads".to_string(), "8".to_string())]),
            ..Default::default()
        },
        7,
    );
    c.activate(1, NOW);
    let mut alter = |name: &str, key: &str, value: &str| {
        c.incremental_alter_configs(
            &[IncrementalAlterConfigsResource {
                resource_type: 4,
                resource_name: name.into(),
                ops: vec![set(key, value)],
            }],
            false,
        )
        .response[0]
            .error
            .clone()
    };
    assert_eq!(
        alter("", "num.io.threads", "abc"),
        ApiError::new(
            INVALID_REQUEST,
            "Invalid value abc for configuration num.io.threads: Not a number of type INT"
        )
    );
    assert_eq!(
        alter("", "max.connections", "-1"),
        ApiError::new(
            INVALID_REQUEST,
            "Invalid value -1 for configuration max.connections: Value must be at least 0"
        )
    );
    let pool = |n: i64, rule: &str, old: i64| {
        ApiError::new(
            INVALID_REQUEST,
            format!("Invalid value org.apache.kafka.common.config.ConfigException: Dynamic thread count update validation failed for num.io.threads={n}, value should {rule} the current value {old} for configuration Invalid dynamic configuration"),
        )
    };
    assert_eq!(
        alter("", "num.io.threads", "20"),
        pool(20, "not be greater than double", 8)
    );
    assert_eq!(
        alter("", "num.io.threads", "3"),
        pool(3, "be at least half", 8)
    );
    // Doubling is allowed, and the new size is the current one for the next change.
    assert!(alter("", "num.io.threads", "16").is_ok());
    assert_eq!(
        alter("1", "num.io.threads", "4"),
        pool(4, "be at least half", 16)
    );
    assert!(alter("1", "num.io.threads", "9").is_ok());
}

#[test]
fn scram_credentials_are_records_that_replay_and_encode() {
    use super::scram::{scram_keys, ScramDeletion, ScramUpsertion, SCRAM_SHA_256, SCRAM_SHA_512};
    let mut c = controller(1);
    let up = |name: &str, mechanism| ScramUpsertion {
        name: name.into(),
        mechanism,
        iterations: 8192,
        salt: bytes::Bytes::from_static(b"salt"),
        salted_password: bytes::Bytes::from_static(b"0123456789abcdef"),
    };
    let r1 = c
        .alter_user_scram_credentials(&[], &[up("alice", SCRAM_SHA_256), up("bob", SCRAM_SHA_512)]);
    assert!(r1.response.iter().all(|(_, e)| e.is_ok()));
    let r2 = c.alter_user_scram_credentials(
        &[ScramDeletion {
            name: "bob".into(),
            mechanism: SCRAM_SHA_512,
        }],
        &[],
    );
    assert_eq!(r2.response, vec![("bob".to_string(), ApiError::NONE)]);
    let stored = &c.image().scram_credentials;
    assert_eq!(stored.keys().collect::<Vec<_>>(), vec!["alice"]);
    let (stored_key, server_key) = scram_keys(SCRAM_SHA_256, b"0123456789abcdef").unwrap();
    let alice = &stored["alice"][&SCRAM_SHA_256];
    assert_eq!(
        (
            &alice.stored_key[..],
            &alice.server_key[..],
            alice.iterations
        ),
        (&stored_key[..], &server_key[..], 8192)
    );
    // Through the log's framing and back into another node's image.
    let mut changes = crate::metadata::core::MetadataChanges::default();
    let mut image = crate::metadata::core::MetadataImage::default();
    for r in r1.records.iter().chain(&r2.records) {
        let decoded = MetadataRecord::decode(r.encode().unwrap()).unwrap();
        image.replay(&decoded, &mut changes).unwrap();
    }
    assert_eq!(image.scram_credentials, c.image().scram_credentials);
}

#[test]
fn the_active_controller_writes_no_op_records_and_a_standby_does_not() {
    let mut c = controller(1);
    let before = c.applied_offset();
    let recs = c.no_op();
    assert_eq!(recs, vec![MetadataRecord::NoOp(Default::default())]);
    assert_eq!(c.applied_offset(), before + 1);
    let image = c.image().clone();
    c.deactivate();
    assert!(c.no_op().is_empty());
    assert_eq!(c.applied_offset(), before + 1);
    // Replaying it changes nothing but the offset.
    let mut other = QuorumControllerCore::new(ControllerConfig::default(), 1);
    other.replay_committed(0, &recs).unwrap();
    assert_eq!(other.applied_offset(), 0);
    assert_eq!(*other.image(), MetadataImage::default());
    assert_eq!(*c.image(), image);
}

#[test]
fn unregister_broker_moves_leadership_off_it_then_removes_it() {
    let mut c = controller(2);
    let (_, t) = create(&mut c, topic("t", 2, 2));
    assert!(t.error.is_ok());
    let r = c.unregister_broker(7);
    assert!(r.records.is_empty());
    assert_eq!(
        r.response,
        ApiError::new(
            BROKER_ID_NOT_REGISTERED,
            "Broker ID 7 is not currently registered"
        )
    );
    let epoch = c.image().brokers[&2].epoch;
    let r = c.unregister_broker(2);
    assert!(r.response.is_ok());
    let (last, changes) = r.records.split_last().unwrap();
    assert_eq!(
        *last,
        MetadataRecord::UnregisterBroker(UnregisterBrokerRecord {
            broker_id: 2,
            broker_epoch: epoch,
            ..Default::default()
        })
    );
    // Both partitions had broker 2 in their ISR; one of them it led.
    assert_eq!(changes.len(), 2);
    assert!(!c.image().brokers.contains_key(&2));
    for p in c
        .image()
        .topics
        .get_by_name("t")
        .unwrap()
        .partitions
        .values()
    {
        assert_eq!((p.leader, p.isr.clone()), (1, vec![1]));
    }
    c.deactivate();
    assert_eq!(c.unregister_broker(1).response.code, NOT_CONTROLLER);
}

// ---------------------------------------------------------------------------------------------
// AlterPartition

/// Partition 0 of `topic` as AlterPartition proposes it: the given epochs and ISR (v2 style,
/// epochs unknown), recovered.
fn isr_proposal(leader_epoch: i32, partition_epoch: i32, isr: &[i32]) -> AlterPartitionPartition {
    AlterPartitionPartition {
        partition_index: 0,
        leader_epoch,
        new_isr: isr
            .iter()
            .map(|b| IsrMember {
                broker_id: *b,
                broker_epoch: -1,
            })
            .collect(),
        leader_recovery_state: 0,
        partition_epoch,
    }
}

fn alter_partition(
    c: &mut QuorumControllerCore,
    sender: i32,
    topic_id: Uuid,
    partitions: Vec<AlterPartitionPartition>,
) -> ControllerResult<AlterPartitionReply> {
    let broker_epoch = c.image().brokers.get(&sender).map_or(-1, |b| b.epoch);
    c.alter_partition(&AlterPartition {
        broker_id: sender,
        broker_epoch,
        topics: vec![AlterPartitionTopic {
            topic_id,
            partitions,
        }],
    })
}

/// The only partition row of a one-topic answer.
fn only_row(r: &ControllerResult<AlterPartitionReply>) -> &AlterPartitionPartitionReply {
    assert!(r.response.error.is_ok(), "{:?}", r.response);
    assert_eq!(r.response.topics.len(), 1);
    assert_eq!(r.response.topics[0].partitions.len(), 1);
    &r.response.topics[0].partitions[0]
}

/// The error code of a one-partition AlterPartition, which must write nothing.
fn alter_refused(
    c: &mut QuorumControllerCore,
    sender: i32,
    topic_id: Uuid,
    p: AlterPartitionPartition,
) -> i16 {
    let before = c.image().clone();
    let r = alter_partition(c, sender, topic_id, vec![p]);
    assert!(r.records.is_empty(), "{:?}", r.records);
    assert_eq!(c.image(), &before);
    let row = only_row(&r);
    assert_eq!(
        (row.leader_id, row.leader_epoch, row.partition_epoch),
        (0, 0, 0)
    );
    assert!(row.isr.is_empty());
    row.error_code
}

fn topic_id(c: &QuorumControllerCore, name: &str) -> Uuid {
    c.image().topics.get_by_name(name).unwrap().id
}

fn partition(c: &QuorumControllerCore, name: &str) -> PartitionRegistration {
    c.image().topics.get_by_name(name).unwrap().partitions[&0].clone()
}

#[test]
fn alter_partition_shrinks_and_expands_the_isr() {
    let (mut c, replicas) = controller_with_replicated_topic("t");
    let id = topic_id(&c, "t");
    let leader = replicas[0];
    assert_eq!(partition(&c, "t").isr, replicas);

    // Shrink: one PartitionChangeRecord with the new ISR; replaying it bumps the partition
    // epoch, not the leader epoch (metadata.version 4.4).
    let shrunk = vec![replicas[0], replicas[1]];
    let r = alter_partition(&mut c, leader, id, vec![isr_proposal(0, 0, &shrunk)]);
    assert_eq!(
        r.records,
        vec![MetadataRecord::PartitionChange(PartitionChangeRecord {
            topic_id: id,
            partition_id: 0,
            isr: Some(shrunk.clone()),
            ..Default::default()
        })]
    );
    assert_eq!(r.response.topics[0].topic_id, id);
    assert_eq!(
        only_row(&r),
        &AlterPartitionPartitionReply {
            partition_index: 0,
            error_code: NONE,
            leader_id: leader,
            leader_epoch: 0,
            isr: shrunk.clone(),
            leader_recovery_state: 0,
            partition_epoch: 1,
        }
    );
    let p = partition(&c, "t");
    assert_eq!(
        (p.isr.clone(), p.leader_epoch, p.partition_epoch),
        (shrunk, 0, 1)
    );

    // The old partition epoch is now stale.
    assert_eq!(
        alter_refused(&mut c, leader, id, isr_proposal(0, 0, &replicas)),
        INVALID_UPDATE_VERSION
    );

    // Expand back, in any order the leader likes, at the new epoch (v3: with broker epochs).
    let mut expand = isr_proposal(0, 1, &[replicas[2], replicas[0], replicas[1]]);
    for m in &mut expand.new_isr {
        m.broker_epoch = c.image().brokers[&m.broker_id].epoch;
    }
    let r = alter_partition(&mut c, leader, id, vec![expand]);
    assert_eq!(r.records.len(), 1);
    let row = only_row(&r);
    assert_eq!(row.isr, vec![replicas[2], replicas[0], replicas[1]]);
    assert_eq!((row.leader_epoch, row.partition_epoch), (0, 2));
    assert_eq!(partition(&c, "t").partition_epoch, 2);
}

#[test]
fn alter_partition_without_a_change_writes_nothing_and_answers_the_current_state() {
    let (mut c, replicas) = controller_with_replicated_topic("t");
    let id = topic_id(&c, "t");
    let r = alter_partition(&mut c, replicas[0], id, vec![isr_proposal(0, 0, &replicas)]);
    assert!(r.records.is_empty());
    let row = only_row(&r);
    assert_eq!(
        (
            row.error_code,
            row.leader_id,
            row.isr.clone(),
            row.partition_epoch
        ),
        (NONE, replicas[0], replicas.clone(), 0)
    );
}

#[test]
fn alter_partition_request_level_answers() {
    let (mut c, replicas) = controller_with_replicated_topic("t");
    let id = topic_id(&c, "t");
    let leader = replicas[0];
    let epoch = c.image().brokers[&leader].epoch;
    let request = |broker_id, broker_epoch| AlterPartition {
        broker_id,
        broker_epoch,
        topics: vec![AlterPartitionTopic {
            topic_id: id,
            partitions: vec![isr_proposal(0, 0, &[leader])],
        }],
    };
    // A sender at another epoch, or not registered: the whole request is refused.
    for (broker, broker_epoch) in [(leader, epoch + 1), (leader, -1), (9, epoch)] {
        let r = c.alter_partition(&request(broker, broker_epoch));
        assert_eq!(r.response.error.code, STALE_BROKER_EPOCH);
        assert!(r.response.topics.is_empty() && r.records.is_empty());
    }
    // No topics: nothing to check, not even the sender.
    let r = c.alter_partition(&AlterPartition {
        broker_id: 9,
        broker_epoch: 5,
        topics: Vec::new(),
    });
    assert_eq!(r.response, AlterPartitionReply::failed(ApiError::NONE));

    c.deactivate();
    let r = c.alter_partition(&request(leader, epoch));
    assert_eq!(r.response.error.code, NOT_CONTROLLER);
    assert!(r.records.is_empty());
}

#[test]
fn alter_partition_partition_errors_in_kafkas_order() {
    let (mut c, replicas) = controller_with_replicated_topic("t");
    let id = topic_id(&c, "t");
    let leader = replicas[0];
    let all = replicas.clone();

    // Unknown topic ids (and the zero id) answer every partition named.
    for unknown in [Uuid([9; 16]), Uuid::ZERO] {
        let r = alter_partition(
            &mut c,
            leader,
            unknown,
            vec![isr_proposal(0, 0, &all), {
                let mut p = isr_proposal(0, 0, &all);
                p.partition_index = 4;
                p
            }],
        );
        assert!(r.records.is_empty());
        let t = &r.response.topics[0];
        assert_eq!(t.topic_id, unknown);
        let rows: Vec<(i32, i16)> = t
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.error_code))
            .collect();
        assert_eq!(rows, vec![(0, UNKNOWN_TOPIC_ID), (4, UNKNOWN_TOPIC_ID)]);
    }
    let mut p = isr_proposal(0, 0, &all);
    p.partition_index = 1;
    assert_eq!(
        alter_refused(&mut c, leader, id, p),
        UNKNOWN_TOPIC_OR_PARTITION
    );
    // Epochs ahead of the controller's: it may have lost leadership.
    assert_eq!(
        alter_refused(&mut c, leader, id, isr_proposal(1, 0, &all)),
        NOT_CONTROLLER
    );
    assert_eq!(
        alter_refused(&mut c, leader, id, isr_proposal(0, 1, &all)),
        NOT_CONTROLLER
    );
    // A follower asking: INVALID_REQUEST (Kafka's answer, not NOT_LEADER_OR_FOLLOWER).
    assert_eq!(
        alter_refused(&mut c, replicas[1], id, isr_proposal(0, 0, &all)),
        INVALID_REQUEST
    );
    // Bad ISRs: empty, without the leader, with a non-replica, a duplicate, a negative id.
    for bad in [
        vec![],
        vec![replicas[1], replicas[2]],
        vec![leader, 9],
        vec![leader, leader],
        vec![leader, -1],
    ] {
        assert_eq!(
            alter_refused(&mut c, leader, id, isr_proposal(0, 0, &bad)),
            INVALID_REQUEST,
            "{bad:?}"
        );
    }
    // Recovering (after an unclean election) with more than the leader in sync, or going back
    // from recovered to recovering.
    let mut p = isr_proposal(0, 0, &[leader, replicas[1]]);
    p.leader_recovery_state = 1;
    assert_eq!(alter_refused(&mut c, leader, id, p), INVALID_REQUEST);
    let mut p = isr_proposal(0, 0, &[leader]);
    p.leader_recovery_state = 1;
    assert_eq!(alter_refused(&mut c, leader, id, p), INVALID_REQUEST);
    // A v3 member whose broker epoch is not its registration's.
    let mut p = isr_proposal(0, 0, &all);
    p.new_isr[1].broker_epoch = c.image().brokers[&replicas[1]].epoch + 7;
    assert_eq!(alter_refused(&mut c, leader, id, p), INELIGIBLE_REPLICA);

    // A leader change makes the old leader epoch fenced (the new leader is now the sender
    // Kafka expects, the checks before that come first).
    shut_down(&mut c, leader, NOW + 1);
    let p = partition(&c, "t");
    assert_eq!(p.leader_epoch, 1);
    assert_eq!(
        alter_refused(&mut c, leader, id, isr_proposal(0, 0, &all)),
        FENCED_LEADER_EPOCH
    );
}

#[test]
fn alter_partition_refuses_fenced_shutting_down_and_unregistered_members() {
    let (mut c, replicas) = controller_with_replicated_topic("t");
    let id = topic_id(&c, "t");
    let leader = replicas[0];
    // Fence the third replica: it leaves the ISR; proposing it back is refused.
    let third = replicas[2];
    let third_epoch = c.image().brokers[&third].epoch;
    let r = c.broker_heartbeat(
        &BrokerHeartbeat {
            broker_id: third,
            broker_epoch: third_epoch,
            current_metadata_offset: i64::MAX,
            want_fence: true,
            want_shut_down: false,
        },
        NOW + 1,
    );
    assert!(r.response.is_fenced);
    let p = partition(&c, "t");
    assert_eq!(p.isr, vec![replicas[0], replicas[1]]);
    let e = (p.leader_epoch, p.partition_epoch);
    assert_eq!(
        alter_refused(&mut c, leader, id, isr_proposal(e.0, e.1, &replicas)),
        INELIGIBLE_REPLICA
    );
    // Unregistered: still a replica, not a broker.
    assert!(c.unregister_broker(third).response.is_ok());
    let p = partition(&c, "t");
    assert_eq!(
        alter_refused(
            &mut c,
            leader,
            id,
            isr_proposal(p.leader_epoch, p.partition_epoch, &replicas)
        ),
        INELIGIBLE_REPLICA
    );
    // In controlled shutdown (marked as Kafka's controller marks a broker that still leads).
    let second = replicas[1];
    let second_epoch = c.image().brokers[&second].epoch;
    c.apply_own(&[MetadataRecord::BrokerRegistrationChange(
        kactor_protocol::metadata::BrokerRegistrationChangeRecord {
            broker_id: second,
            broker_epoch: second_epoch,
            in_controlled_shutdown: 1,
            ..Default::default()
        },
    )]);
    assert!(c.image().brokers[&second].in_controlled_shutdown);
    let p = partition(&c, "t");
    assert_eq!(
        alter_refused(
            &mut c,
            leader,
            id,
            isr_proposal(p.leader_epoch, p.partition_epoch, &[leader, second])
        ),
        INELIGIBLE_REPLICA
    );
}

#[test]
fn alter_partition_unknown_recovery_state_fails_the_whole_request() {
    let (mut c, replicas) = controller_with_replicated_topic("t");
    let id = topic_id(&c, "t");
    let leader = replicas[0];
    let mut bad = isr_proposal(0, 0, &[leader]);
    bad.leader_recovery_state = 2;
    // The first partition alone would be changed; nothing is, and no rows are answered.
    let r = alter_partition(
        &mut c,
        leader,
        id,
        vec![isr_proposal(0, 0, &[leader, replicas[1]]), bad.clone()],
    );
    assert_eq!(r.response.error.code, UNKNOWN_SERVER_ERROR);
    assert!(r.response.topics.is_empty() && r.records.is_empty());
    assert_eq!(partition(&c, "t").partition_epoch, 0);
    // A partition refused earlier never reaches that check.
    bad.leader_epoch = 5;
    assert_eq!(alter_refused(&mut c, leader, id, bad), NOT_CONTROLLER);
}

#[test]
fn alter_partition_judges_every_entry_on_the_state_before_the_request() {
    let (mut c, replicas) = controller_with_replicated_topic("t");
    let id = topic_id(&c, "t");
    let leader = replicas[0];
    let r = alter_partition(
        &mut c,
        leader,
        id,
        vec![
            isr_proposal(0, 0, &[leader, replicas[1]]),
            isr_proposal(0, 0, &[leader, replicas[2]]),
        ],
    );
    assert_eq!(r.records.len(), 2);
    let rows = &r.response.topics[0].partitions;
    assert_eq!(
        rows.iter()
            .map(|p| (p.error_code, p.isr.clone(), p.partition_epoch))
            .collect::<Vec<_>>(),
        vec![
            (NONE, vec![leader, replicas[1]], 1),
            (NONE, vec![leader, replicas[2]], 1)
        ]
    );
    // Both records are replayed: the last ISR stands, at partition epoch 2.
    let p = partition(&c, "t");
    assert_eq!((p.isr, p.partition_epoch), (vec![leader, replicas[2]], 2));
}

#[test]
fn alter_partition_before_3_6_bumps_the_leader_epoch_on_a_shrink() {
    let (mut c, replicas) = controller_with_replicated_topic("t");
    let id = topic_id(&c, "t");
    let leader = replicas[0];
    c.apply_own(&[MetadataRecord::FeatureLevel(FeatureLevelRecord {
        name: "metadata.version".into(),
        feature_level: 11,
        ..Default::default()
    })]);
    let r = alter_partition(&mut c, leader, id, vec![isr_proposal(0, 0, &[leader])]);
    match &r.records[..] {
        [MetadataRecord::PartitionChange(change)] => {
            assert_eq!(
                (change.leader, change.isr.clone()),
                (leader, Some(vec![leader]))
            )
        }
        other => panic!("{other:?}"),
    }
    let row = only_row(&r);
    assert_eq!((row.leader_epoch, row.partition_epoch), (1, 1));
    // An expansion does not.
    let r = alter_partition(&mut c, leader, id, vec![isr_proposal(1, 1, &replicas)]);
    let row = only_row(&r);
    assert_eq!((row.leader_epoch, row.partition_epoch), (1, 2));
}

#[test]
fn alter_partition_recovers_the_leader_and_clears_a_leftover_elr() {
    let (mut c, replicas) = controller_with_replicated_topic("t");
    let id = topic_id(&c, "t");
    let leader = replicas[0];
    // As after an unclean election under a Kafka controller with ELR on: the leader alone,
    // recovering, the others in the ELR.
    c.apply_own(&[MetadataRecord::PartitionChange(PartitionChangeRecord {
        topic_id: id,
        partition_id: 0,
        isr: Some(vec![leader]),
        eligible_leader_replicas: Some(vec![replicas[1]]),
        leader_recovery_state: 1,
        ..Default::default()
    })]);
    let p = partition(&c, "t");
    let r = alter_partition(
        &mut c,
        leader,
        id,
        vec![isr_proposal(p.leader_epoch, p.partition_epoch, &[leader])],
    );
    assert_eq!(
        r.records,
        vec![MetadataRecord::PartitionChange(PartitionChangeRecord {
            topic_id: id,
            partition_id: 0,
            eligible_leader_replicas: Some(Vec::new()),
            leader_recovery_state: 0,
            ..Default::default()
        })]
    );
    let row = only_row(&r);
    assert_eq!(
        (row.leader_recovery_state, row.isr.clone()),
        (0, vec![leader])
    );
    let p = partition(&c, "t");
    assert!(p.elr.is_empty());
    assert_eq!(p.leader_recovery_state, 0);
}

#[test]
fn alter_partition_completes_a_reassignment() {
    let (mut c, replicas) = controller_with_replicated_topic("t");
    let id = topic_id(&c, "t");
    let [a, b, d] = [replicas[0], replicas[1], replicas[2]];
    // A reassignment (written by a Kafka controller) from [a, b] to [b, d]: d is being added,
    // a removed; only a and b are in sync yet, a leads.
    c.apply_own(&[MetadataRecord::PartitionChange(PartitionChangeRecord {
        topic_id: id,
        partition_id: 0,
        isr: Some(vec![a, b]),
        replicas: Some(vec![b, d, a]),
        directories: Some(c.directories_for(&[b, d, a])),
        removing_replicas: Some(vec![a]),
        adding_replicas: Some(vec![d]),
        ..Default::default()
    })]);
    let p = partition(&c, "t");
    let (le, pe) = (p.leader_epoch, p.partition_epoch);
    // d catching up completes it: a leaves the replicas and the ISR, and, as it led, the
    // leadership goes to b; a is told NEW_LEADER_ELECTED.
    let r = alter_partition(&mut c, a, id, vec![isr_proposal(le, pe, &[a, b, d])]);
    assert_eq!(
        r.records,
        vec![MetadataRecord::PartitionChange(PartitionChangeRecord {
            topic_id: id,
            partition_id: 0,
            isr: Some(vec![b, d]),
            leader: b,
            replicas: Some(vec![b, d]),
            directories: Some(c.directories_for(&[b, d])),
            removing_replicas: Some(Vec::new()),
            adding_replicas: Some(Vec::new()),
            ..Default::default()
        })]
    );
    assert_eq!(
        only_row(&r),
        &AlterPartitionPartitionReply {
            partition_index: 0,
            error_code: NEW_LEADER_ELECTED,
            ..Default::default()
        }
    );
    let p = partition(&c, "t");
    assert_eq!(
        (p.leader, p.leader_epoch, p.replicas.clone(), p.isr.clone()),
        (b, le + 1, vec![b, d], vec![b, d])
    );
}

// ---------------------------------------------------------------------------------------------
// AlterPartitionReassignments

/// An active controller with brokers 1..=4 and topic `name`: one partition on `replicas`
/// (the first leads, all in sync).
fn controller_with_assigned_topic(name: &str, replicas: &[i32]) -> QuorumControllerCore {
    let mut c = controller(4);
    let (_, r) = create(
        &mut c,
        CreatableTopic {
            name: name.into(),
            num_partitions: -1,
            replication_factor: -1,
            assignments: vec![(0, replicas.to_vec())],
            ..Default::default()
        },
    );
    assert!(r.error.is_ok(), "{r:?}");
    c
}

/// Reassigns partition 0 of `topic` (None: cancels); the partition's outcome and the records.
fn reassign(
    c: &mut QuorumControllerCore,
    topic: &str,
    target: Option<&[i32]>,
    allow_rf_change: bool,
) -> (ApiError, Vec<MetadataRecord>) {
    let r = c.alter_partition_reassignments(
        &[ReassignableTopic {
            name: topic.into(),
            partitions: vec![(0, target.map(<[i32]>::to_vec))],
        }],
        allow_rf_change,
    );
    assert_eq!(r.response.len(), 1);
    assert_eq!(r.response[0].name, topic);
    let (index, e) = r.response[0].partitions[0].clone();
    assert_eq!(index, 0);
    (e, r.records)
}

#[test]
fn reassignment_adds_the_target_first_and_completes_once_it_is_in_sync() {
    let mut c = controller_with_assigned_topic("t", &[1, 2]);
    let id = topic_id(&c, "t");
    // [1, 2] -> [2, 3]: the target then the removed replica; 1 still leads (it is in sync and
    // the reassignment is not complete), and no epoch moves but the partition epoch.
    let (e, records) = reassign(&mut c, "t", Some(&[2, 3]), true);
    assert_eq!(e, ApiError::NONE);
    assert_eq!(
        records,
        vec![MetadataRecord::PartitionChange(PartitionChangeRecord {
            topic_id: id,
            partition_id: 0,
            replicas: Some(vec![2, 3, 1]),
            directories: Some(c.directories_for(&[2, 3, 1])),
            removing_replicas: Some(vec![1]),
            adding_replicas: Some(vec![3]),
            ..Default::default()
        })]
    );
    let p = partition(&c, "t");
    assert_eq!(
        (p.leader, p.leader_epoch, p.partition_epoch, p.isr.clone()),
        (1, 0, 1, vec![1, 2])
    );
    // The leader admits 3 once it caught up: 1 leaves, and leadership with it.
    let r = alter_partition(&mut c, 1, id, vec![isr_proposal(0, 1, &[1, 2, 3])]);
    assert_eq!(only_row(&r).error_code, NEW_LEADER_ELECTED);
    let p = partition(&c, "t");
    assert_eq!(
        (
            p.leader,
            p.leader_epoch,
            p.replicas.clone(),
            p.isr.clone(),
            p.adding_replicas.clone(),
            p.removing_replicas.clone()
        ),
        (2, 1, vec![2, 3], vec![2, 3], vec![], vec![])
    );
}

#[test]
fn reassignment_within_the_isr_completes_at_once() {
    let mut c = controller_with_assigned_topic("t", &[1, 2, 3]);
    let id = topic_id(&c, "t");
    // Dropping the leader: the target is in sync, so one change completes it and the first
    // target replica leads.
    let (e, records) = reassign(&mut c, "t", Some(&[3, 2]), true);
    assert_eq!(e, ApiError::NONE);
    assert_eq!(
        records,
        vec![MetadataRecord::PartitionChange(PartitionChangeRecord {
            topic_id: id,
            partition_id: 0,
            leader: 3,
            isr: Some(vec![2, 3]),
            replicas: Some(vec![3, 2]),
            directories: Some(c.directories_for(&[3, 2])),
            ..Default::default()
        })]
    );
    // Reordering: only the replica list changes, leadership and epochs stay.
    let (e, records) = reassign(&mut c, "t", Some(&[2, 3]), true);
    assert_eq!(e, ApiError::NONE);
    assert_eq!(
        records,
        vec![MetadataRecord::PartitionChange(PartitionChangeRecord {
            topic_id: id,
            partition_id: 0,
            replicas: Some(vec![2, 3]),
            directories: Some(c.directories_for(&[2, 3])),
            ..Default::default()
        })]
    );
    let p = partition(&c, "t");
    assert_eq!((p.leader, p.leader_epoch), (3, 1));
    // The same replicas again: nothing to write.
    let (e, records) = reassign(&mut c, "t", Some(&[2, 3]), false);
    assert_eq!((e, records), (ApiError::NONE, vec![]));
}

#[test]
fn reassignment_refusals_carry_kafkas_codes_and_write_nothing() {
    let mut c = controller_with_assigned_topic("t", &[1, 2]);
    let before = c.image().clone();
    let refused = |c: &mut QuorumControllerCore, topic: &str, index: i32, target, allow| {
        let r = c.alter_partition_reassignments(
            &[ReassignableTopic {
                name: topic.into(),
                partitions: vec![(index, target)],
            }],
            allow,
        );
        assert!(r.records.is_empty());
        r.response[0].partitions[0].1.clone()
    };
    /// (topic, partition, target, allow_replication_factor_change, answer)
    type Case = (&'static str, i32, Option<Vec<i32>>, bool, ApiError);
    let cases: Vec<Case> = vec![
        (
            "nope",
            0,
            Some(vec![1]),
            true,
            ApiError::new(
                UNKNOWN_TOPIC_OR_PARTITION,
                "Unable to find a topic named nope.",
            ),
        ),
        (
            "t",
            5,
            Some(vec![1]),
            true,
            ApiError::new(UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition t:5."),
        ),
        (
            "t",
            0,
            Some(vec![]),
            true,
            ApiError::new(
                INVALID_REPLICA_ASSIGNMENT,
                "The manual partition assignment includes an empty replica list.",
            ),
        ),
        // Ids are checked in ascending order: the duplicate 2 comes before the unknown 9.
        (
            "t",
            0,
            Some(vec![9, 2, 2]),
            true,
            ApiError::new(
                INVALID_REPLICA_ASSIGNMENT,
                "The manual partition assignment includes the broker 2 more than once.",
            ),
        ),
        (
            "t",
            0,
            Some(vec![9, 1]),
            true,
            ApiError::new(
                INVALID_REPLICA_ASSIGNMENT,
                "The manual partition assignment includes broker 9, but no such broker is registered.",
            ),
        ),
        (
            "t",
            0,
            None,
            true,
            ApiError::code(NO_REASSIGNMENT_IN_PROGRESS),
        ),
        (
            "t",
            0,
            Some(vec![1, 2, 3]),
            false,
            ApiError::new(
                INVALID_REPLICATION_FACTOR,
                "The replication factor is changed from 2 to 3",
            ),
        ),
    ];
    for (topic, index, target, allow, want) in cases {
        assert_eq!(refused(&mut c, topic, index, target, allow), want);
        assert_eq!(c.image(), &before);
    }
    // The replication factor may change when the request allows it.
    let (e, records) = reassign(&mut c, "t", Some(&[1, 2, 3]), true);
    assert_eq!((e, records.len()), (ApiError::NONE, 1));
    // Under way, the replication factor compared is the target's.
    assert_eq!(
        refused(&mut c, "t", 0, Some(vec![1, 2]), false).code,
        INVALID_REPLICATION_FACTOR
    );
    let (e, records) = reassign(&mut c, "t", Some(&[2, 1, 4]), false);
    assert_eq!((e, records.len()), (ApiError::NONE, 1));
}

#[test]
fn cancelling_reverts_to_the_original_replicas() {
    let mut c = controller_with_assigned_topic("t", &[1, 2]);
    let id = topic_id(&c, "t");
    reassign(&mut c, "t", Some(&[2, 3]), true);
    // The added replica leaves; the removed one stays, after the others (Kafka's order). The
    // replica set loses a member, so the leader epoch moves.
    let (e, records) = reassign(&mut c, "t", None, true);
    assert_eq!(e, ApiError::NONE);
    assert_eq!(
        records,
        vec![MetadataRecord::PartitionChange(PartitionChangeRecord {
            topic_id: id,
            partition_id: 0,
            leader: 1,
            replicas: Some(vec![2, 1]),
            directories: Some(c.directories_for(&[2, 1])),
            removing_replicas: Some(vec![]),
            adding_replicas: Some(vec![]),
            ..Default::default()
        })]
    );
    let p = partition(&c, "t");
    assert_eq!(
        (p.leader, p.leader_epoch, p.isr.clone()),
        (1, 1, vec![1, 2])
    );
}

#[test]
fn cancelling_when_only_added_replicas_are_in_sync_needs_unclean_election() {
    let mut c = controller_with_assigned_topic("t", &[1, 2]);
    let id = topic_id(&c, "t");
    // [1, 2] -> [3, 4] under way, and only 3 in sync (as after 1 and 2 fell behind).
    c.apply_own(&[MetadataRecord::PartitionChange(PartitionChangeRecord {
        topic_id: id,
        partition_id: 0,
        leader: 3,
        isr: Some(vec![3]),
        replicas: Some(vec![3, 4, 1, 2]),
        directories: Some(c.directories_for(&[3, 4, 1, 2])),
        removing_replicas: Some(vec![1, 2]),
        adding_replicas: Some(vec![3, 4]),
        ..Default::default()
    })]);
    let (e, records) = reassign(&mut c, "t", None, true);
    assert_eq!(
        e,
        ApiError::new(
            INVALID_REPLICA_ASSIGNMENT,
            "Unable to revert partition assignment for t:0 because it would require an unclean leader election."
        )
    );
    assert!(records.is_empty());
    // With unclean elections on for the topic, the first original replica takes over alone.
    allow_unclean_elections(&mut c, "t");
    let (e, _) = reassign(&mut c, "t", None, true);
    assert_eq!(e, ApiError::NONE);
    let p = partition(&c, "t");
    assert_eq!(
        (
            p.leader,
            p.replicas.clone(),
            p.isr.clone(),
            p.adding_replicas.is_empty()
        ),
        (1, vec![1, 2], vec![1], true)
    );
}

#[test]
fn reassignment_completes_without_a_lagging_replica_that_stays_as_in_kafka_4_4() {
    let mut c = controller_with_assigned_topic("t", &[1, 2]);
    let id = topic_id(&c, "t");
    // 2 fell out of the ISR; [1, 2] -> [2, 3] adds as many replicas as it removes, so once 3 is
    // in sync it completes without waiting for 2, and 3 (in sync) takes the leadership off 1.
    let r = alter_partition(&mut c, 1, id, vec![isr_proposal(0, 0, &[1])]);
    assert_eq!(only_row(&r).isr, vec![1]);
    reassign(&mut c, "t", Some(&[2, 3]), true);
    let p = partition(&c, "t");
    let r = alter_partition(
        &mut c,
        1,
        id,
        vec![isr_proposal(p.leader_epoch, p.partition_epoch, &[1, 3])],
    );
    assert_eq!(only_row(&r).error_code, NEW_LEADER_ELECTED);
    let p = partition(&c, "t");
    assert_eq!(
        (p.leader, p.replicas.clone(), p.isr.clone()),
        (3, vec![2, 3], vec![3])
    );
    // A shrink must wait for every replica that stays: [2, 3] -> [2] with 2 out of sync is
    // left under way.
    let (e, _) = reassign(&mut c, "t", Some(&[2]), true);
    assert_eq!(e, ApiError::NONE);
    let p = partition(&c, "t");
    assert_eq!(
        (p.replicas.clone(), p.removing_replicas.clone()),
        (vec![2, 3], vec![3])
    );
}

#[test]
fn a_new_target_without_additions_keeps_the_replicas_being_added() {
    let mut c = controller_with_assigned_topic("t", &[1, 2]);
    // [1, 2] -> [3, 1] under way, then [2, 1]: 3 is removed now, but nothing is added, so the
    // adding list (3) stays and the reassignment waits for 3 (Kafka keeps lists that come out
    // empty as they were).
    reassign(&mut c, "t", Some(&[3, 1]), true);
    let (e, _) = reassign(&mut c, "t", Some(&[2, 1]), false);
    assert_eq!(e, ApiError::NONE);
    let p = partition(&c, "t");
    assert_eq!(
        (
            p.replicas.clone(),
            p.adding_replicas.clone(),
            p.removing_replicas.clone()
        ),
        (vec![2, 1, 3], vec![3], vec![3])
    );
}

/// Turns `unclean.leader.election.enable` on for `topic`.
fn allow_unclean_elections(c: &mut QuorumControllerCore, topic: &str) {
    c.apply_own(&[MetadataRecord::Config(ConfigRecord {
        resource_type: ConfigResourceType::Topic.id(),
        resource_name: topic.into(),
        name: "unclean.leader.election.enable".into(),
        value: Some("true".into()),
        ..Default::default()
    })]);
}

/// Broker `id` asks to be fenced (or, `fence` false, to be unfenced) at its registered epoch.
fn set_fenced(c: &mut QuorumControllerCore, id: i32, fence: bool) {
    let epoch = c.image().brokers[&id].epoch;
    c.broker_heartbeat(
        &BrokerHeartbeat {
            broker_id: id,
            broker_epoch: epoch,
            current_metadata_offset: i64::MAX,
            want_fence: fence,
            want_shut_down: false,
        },
        NOW,
    );
    assert_eq!(c.image().brokers[&id].fenced, fence);
}

#[test]
fn a_fenced_leader_hands_over_in_replica_order_skipping_brokers_shutting_down() {
    let mut c = controller_with_assigned_topic("t", &[1, 3, 2]);
    assert_eq!(partition(&c, "t").leader, 1);
    // 3 is shutting down (it leads nothing, so it stays in controlled shutdown only while
    // another partition holds it; mark it as the image would show it).
    c.apply_own(&[MetadataRecord::BrokerRegistrationChange(
        BrokerRegistrationChangeRecord {
            broker_id: 3,
            broker_epoch: c.image().brokers[&3].epoch,
            in_controlled_shutdown: 1,
            ..Default::default()
        },
    )]);
    set_fenced(&mut c, 1, true);
    let p = partition(&c, "t");
    assert_eq!((p.leader, p.isr.clone()), (2, vec![3, 2]));
}

#[test]
fn leadership_goes_back_to_the_preferred_replica_on_the_periodic_pass() {
    let mut c = controller_with_assigned_topic("t", &[1, 2, 3]);
    set_fenced(&mut c, 1, true);
    assert_eq!(partition(&c, "t").leader, 2);
    // Back, but out of the ISR: no move yet.
    set_fenced(&mut c, 1, false);
    let (records, more) = c.balance_partition_leaders();
    assert!(records.is_empty() && !more);
    // In sync again: the pass gives it its leadership back.
    let id = topic_id(&c, "t");
    let p = partition(&c, "t");
    let r = alter_partition(
        &mut c,
        2,
        id,
        vec![isr_proposal(p.leader_epoch, p.partition_epoch, &[2, 3, 1])],
    );
    assert!(r.response.error.is_ok());
    let (records, more) = c.balance_partition_leaders();
    assert_eq!(records.len(), 1);
    assert!(!more);
    assert_eq!(partition(&c, "t").leader, 1);
    // Nothing left to balance.
    assert!(c.balance_partition_leaders().0.is_empty());
}

#[test]
fn leaderless_partitions_get_an_unclean_leader_only_where_the_topic_allows_it() {
    let mut c = controller_with_assigned_topic("t", &[1, 2]);
    // 2 falls out of the ISR, then 1 (the last ISR member) is fenced: no leader.
    let id = topic_id(&c, "t");
    let p = partition(&c, "t");
    alter_partition(
        &mut c,
        1,
        id,
        vec![isr_proposal(p.leader_epoch, p.partition_epoch, &[1])],
    );
    set_fenced(&mut c, 1, true);
    assert_eq!(partition(&c, "t").leader, -1);
    assert!(
        c.elect_unclean_leaders().0.is_empty(),
        "not allowed by default"
    );
    allow_unclean_elections(&mut c, "t");
    let (records, _) = c.elect_unclean_leaders();
    assert_eq!(records.len(), 1);
    let p = partition(&c, "t");
    assert_eq!((p.leader, p.isr.clone()), (2, vec![2]));
}

#[test]
fn a_fenced_last_leader_is_replaced_at_once_where_unclean_election_is_on() {
    let mut c = controller_with_assigned_topic("t", &[1, 2]);
    allow_unclean_elections(&mut c, "t");
    let id = topic_id(&c, "t");
    let p = partition(&c, "t");
    alter_partition(
        &mut c,
        1,
        id,
        vec![isr_proposal(p.leader_epoch, p.partition_epoch, &[1])],
    );
    set_fenced(&mut c, 1, true);
    let p = partition(&c, "t");
    assert_eq!((p.leader, p.isr.clone()), (2, vec![2]));
}

#[test]
fn controller_gauges_count_offline_and_imbalanced_partitions_and_fenced_brokers() {
    use crate::controller::metrics::ControllerCounts;
    let mut c = controller_with_assigned_topic("t", &[1, 2]);
    let counts = ControllerCounts::of(c.image());
    assert_eq!(
        (counts.topics, counts.partitions, counts.offline_partitions),
        (1, 1, 0)
    );
    assert_eq!(counts.preferred_replica_imbalance, 0);
    // 1 fenced: 2 leads (imbalanced); then 2 fenced too: offline.
    set_fenced(&mut c, 1, true);
    let counts = ControllerCounts::of(c.image());
    assert_eq!(
        (counts.preferred_replica_imbalance, counts.fenced_brokers),
        (1, 1)
    );
    set_fenced(&mut c, 2, true);
    let counts = ControllerCounts::of(c.image());
    assert_eq!(counts.offline_partitions, 1);
    assert_eq!(counts.fenced_brokers + counts.active_brokers, 4);
}

/// Issue #30: after the whole node was SIGSTOPped longer than a broker session, the first
/// session check fenced this node's own broker before it could heartbeat (its Metadata answers
/// then listed no broker, and librdkafka consumers dropped their only broker for good).
#[test]
fn a_stalled_controller_fences_only_for_silence_it_observed() {
    let mut c = controller(2);
    let session = c.cfg.broker_session_timeout_ms;
    let heartbeat = |c: &mut QuorumControllerCore, id: i32, now: i64| {
        let epoch = c.image().brokers[&id].epoch;
        let r = c.broker_heartbeat(
            &BrokerHeartbeat {
                broker_id: id,
                broker_epoch: epoch,
                current_metadata_offset: i64::MAX,
                want_fence: false,
                want_shut_down: false,
            },
            now,
        );
        assert!(!r.response.is_fenced);
    };
    // Regular checks while both brokers heartbeat.
    let mut now = NOW;
    for _ in 0..8 {
        now += 250;
        heartbeat(&mut c, 1, now);
        heartbeat(&mut c, 2, now);
        assert!(c.tick(now).is_empty());
    }
    // Broker 2 dies; then the whole process stops for longer than a session.
    let last_from_2 = now;
    now += 250;
    heartbeat(&mut c, 1, now);
    assert!(c.tick(now).is_empty());
    let silent_before_stall = now - last_from_2;
    let resumed = now + session + 3_000;
    assert!(
        c.tick(resumed).is_empty(),
        "a session check right after the controller's own stall fences no one"
    );
    assert!(!c.image().brokers[&1].fenced && !c.image().brokers[&2].fenced);
    // Broker 1 heartbeats again on resume; broker 2 never does and is fenced once the
    // controller has itself watched it stay silent for a whole session.
    now = resumed;
    heartbeat(&mut c, 1, now + 10);
    let mut fenced_at = None;
    while fenced_at.is_none() && now < resumed + 2 * session {
        now += 250;
        heartbeat(&mut c, 1, now);
        if !c.tick(now).is_empty() {
            fenced_at = Some(now);
        }
    }
    let fenced_at = fenced_at.expect("the silent broker is fenced");
    assert!(c.image().brokers[&2].fenced && !c.image().brokers[&1].fenced);
    let observed_silence = silent_before_stall + (fenced_at - resumed);
    assert!(
        observed_silence >= session,
        "fenced after {observed_silence} ms of observed silence"
    );
    assert!(
        fenced_at - resumed <= session + 500,
        "fenced late: {fenced_at}"
    );
}

/// A voter change Raft appended between two of the active controller's writes: the next
/// records go after it, and a batch anywhere else is refused (the shell resigns).
#[test]
fn raft_control_batches_are_stepped_over() {
    let mut c = controller(1);
    let next = c.applied_offset() + 1;
    assert!(!c.raft_control_appended(next + 1, next + 1));
    assert!(c.raft_control_appended(next, next));
    assert_eq!(c.applied_offset(), next);
    // Already counted (or before the activation): nothing moves.
    assert!(c.raft_control_appended(next, next));
    assert_eq!(c.applied_offset(), next);
    let r = c.no_op();
    assert_eq!(r.len(), 1);
    assert_eq!(c.applied_offset(), next + 1);
}
