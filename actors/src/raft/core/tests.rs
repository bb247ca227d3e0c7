//! Unit tests of the core's RPC paths against Kafka 4.4's answers (error codes and fields as
//! `KafkaRaftClient` fills them).

use super::log::{EpochEntry, LogState, SnapshotInfo};
use super::*;

fn ep(id: i32) -> Endpoints {
    vec![Endpoint {
        listener: "CONTROLLER".into(),
        host: format!("node{id}"),
        port: 9093,
    }]
}

fn cfg(node: i32, voters: &[i32]) -> RaftConfig {
    let set = VoterSet::from_static(voters.iter().map(|v| (*v, ep(*v))));
    let mut c = RaftConfig::with_static_voters(node, set);
    c.cluster_id = "cluster".into();
    c
}

fn log_with(end: i64, epochs: &[(i32, i64)]) -> LogState {
    LogState {
        end_offset: end,
        epochs: epochs
            .iter()
            .map(|(e, o)| EpochEntry {
                epoch: *e,
                start_offset: *o,
            })
            .collect(),
        ..LogState::default()
    }
}

fn started(
    node: i32,
    voters: &[i32],
    election: Option<ElectionState>,
    log: LogState,
) -> (RaftCore, Vec<Output>) {
    let mut c = RaftCore::new(cfg(node, voters), 7);
    let out = c.handle(Input::Start { election, log }, 0);
    (c, out)
}

fn replies(out: &[Output]) -> Vec<Response> {
    out.iter()
        .filter_map(|o| match o {
            Output::Reply { response, .. } => Some(response.clone()),
            _ => None,
        })
        .collect()
}

fn sends(out: &[Output]) -> Vec<(i32, u64, Request)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Send {
                to,
                correlation_id,
                request,
            } => Some((*to, *correlation_id, request.clone())),
            _ => None,
        })
        .collect()
}

fn persisted(out: &[Output]) -> Vec<ElectionState> {
    out.iter()
        .filter_map(|o| match o {
            Output::PersistElection { state, .. } => Some(state.clone()),
            _ => None,
        })
        .collect()
}

fn vote_req(cand: i32, epoch: i32, last_epoch: i32, last_offset: i64, pre_vote: bool) -> Request {
    Request::Vote(VoteRequest {
        cluster_id: Some("cluster".into()),
        voter_key: None,
        candidate: ReplicaKey::without_dir(cand),
        candidate_epoch: epoch,
        last_offset_epoch: last_epoch,
        last_offset,
        pre_vote,
    })
}

fn vote(c: &mut RaftCore, req: Request, now: i64) -> (VoteResponse, Vec<Output>) {
    let out = c.handle(
        Input::Request {
            id: 1,
            request: req,
        },
        now,
    );
    let r = match replies(&out).pop() {
        Some(Response::Vote(v)) => v,
        other => panic!("expected a vote response, got {other:?}"),
    };
    (r, out)
}

fn fetch_req(replica: i32, epoch: i32, offset: i64, last_epoch: i32) -> FetchRequest {
    FetchRequest {
        cluster_id: Some("cluster".into()),
        replica: ReplicaKey::without_dir(replica),
        max_wait_ms: 0,
        max_bytes: 1 << 20,
        current_leader_epoch: epoch,
        fetch_offset: offset,
        last_fetched_epoch: last_epoch,
        high_watermark: -1,
    }
}

fn fetch(c: &mut RaftCore, r: FetchRequest, now: i64) -> FetchResponse {
    let out = c.handle(
        Input::Request {
            id: 9,
            request: Request::Fetch(r),
        },
        now,
    );
    match replies(&out).pop() {
        Some(Response::Fetch(f)) => f,
        other => panic!("expected a fetch response, got {other:?}"),
    }
}

/// Drives a 3-voter node 1 to leadership in epoch 1 (pre-vote, vote, LeaderChange flushed).
fn leader_of_three() -> RaftCore {
    leader_of_three_with(cfg(1, &[1, 2, 3]))
}

fn leader_of_three_with(config: RaftConfig) -> RaftCore {
    let mut c = RaftCore::new(config, 7);
    c.handle(
        Input::Start {
            election: None,
            log: LogState::default(),
        },
        0,
    );
    // Election timeout (≤ 2 s) passes: Prospective, pre-votes out.
    let out = c.handle(Input::Tick, 2_000);
    assert_eq!(c.state_name(), "Prospective");
    let pre = sends(&out);
    assert_eq!(pre.len(), 2);
    assert!(pre
        .iter()
        .all(|(_, _, r)| matches!(r, Request::Vote(v) if v.pre_vote && v.candidate_epoch == 0)));
    let granted = |epoch| {
        Response::Vote(VoteResponse {
            common: QuorumResponse {
                error: NONE,
                partition_error: NONE,
                leader_id: -1,
                leader_epoch: epoch,
                leader_endpoints: vec![],
            },
            vote_granted: true,
        })
    };
    let out = c.handle(
        Input::Response {
            from: pre[0].0,
            correlation_id: pre[0].1,
            response: granted(0),
        },
        2_001,
    );
    assert_eq!(c.state_name(), "Candidate");
    assert_eq!(c.epoch(), 1);
    let votes = sends(&out);
    assert!(votes
        .iter()
        .all(|(_, _, r)| matches!(r, Request::Vote(v) if !v.pre_vote && v.candidate_epoch == 1)));
    c.handle(
        Input::Response {
            from: votes[0].0,
            correlation_id: votes[0].1,
            response: granted(1),
        },
        2_002,
    );
    assert!(c.is_leader());
    c.handle(Input::Flushed { end_offset: 1 }, 2_003);
    c
}

#[test]
fn single_voter_elects_itself_and_writes_leader_change() {
    let (mut c, out) = started(1, &[1], None, LogState::default());
    assert!(c.is_leader());
    assert_eq!(c.epoch(), 1);
    // Unattached at epoch 0 (persisted), then the candidate's self-vote, then leadership.
    let p = persisted(&out);
    assert_eq!(p.len(), 3);
    assert_eq!(
        p[1].voted_key,
        Some(ReplicaKey::of(1, Some(kactor_protocol::Uuid::ZERO)))
    );
    assert_eq!(
        (p[2].epoch, p[2].leader_id, p[2].voted_key),
        (1, Some(1), None)
    );
    assert!(out.contains(&Output::AppendLeader {
        base_offset: 0,
        epoch: 1,
        content: BatchContent::Control(vec![ControlRecord::LeaderChange {
            leader_id: 1,
            voters: vec![1],
            granting_voters: vec![1],
        }]),
    }));
    assert!(out.contains(&Output::LeaderChanged {
        leader_id: Some(1),
        epoch: 1,
        epoch_start_offset: Some(0),
        first_data_offset: Some(1),
    }));
    // Nothing commits until the LeaderChangeMessage is durable.
    assert_eq!(c.high_watermark(), 0);
    let out = c.handle(Input::Flushed { end_offset: 1 }, 1);
    assert!(out.contains(&Output::HighWatermark(1)));
}

#[test]
fn single_voter_commits_appends_once_flushed() {
    let (mut c, _) = started(1, &[1], None, LogState::default());
    c.handle(Input::Flushed { end_offset: 1 }, 0);
    let recs = vec![Bytes::from_static(b"a"), Bytes::from_static(b"b")];
    let out = c.handle(
        Input::Append {
            records: recs.clone(),
            epoch: c.epoch(),
        },
        1,
    );
    assert_eq!(
        out,
        vec![
            Output::AppendLeader {
                base_offset: 1,
                epoch: 1,
                content: BatchContent::Data(recs)
            },
            Output::Flush { end_offset: 3 },
            Output::Appended {
                base_offset: 1,
                last_offset: 2,
                epoch: 1
            }
        ]
    );
    assert_eq!(c.high_watermark(), 1);
    let out = c.handle(Input::Flushed { end_offset: 3 }, 2);
    assert_eq!(out, vec![Output::HighWatermark(3)]);
}

#[test]
fn restarted_single_voter_leads_a_new_epoch() {
    // The file says we led epoch 4; the log's last batch is epoch 6: the log wins.
    let persisted_state = ElectionState {
        epoch: 4,
        leader_id: Some(1),
        voted_key: None,
        voters: vec![1],
    };
    let (c, out) = started(
        1,
        &[1],
        Some(persisted_state.clone()),
        log_with(10, &[(6, 5)]),
    );
    assert_eq!(c.epoch(), 7);
    assert!(out.iter().any(|o| matches!(
        o,
        Output::AppendLeader {
            base_offset: 10,
            epoch: 7,
            content: BatchContent::Control(_)
        }
    )));
    // A leader restarting in its own epoch resigns it and leads the next one.
    let (c, _) = started(1, &[1], Some(persisted_state), log_with(10, &[(4, 5)]));
    assert_eq!(c.epoch(), 5);
    assert!(c.is_leader());
}

#[test]
fn a_lone_voter_upgrades_kraft_version_with_one_control_batch() {
    let dir: kactor_protocol::Uuid = "nhSm0cU3RgubQ5xy6jjn7g".parse().unwrap();
    let set = VoterSet::from_static([(1, ep(1))]);
    let mut config = RaftConfig::with_static_voters(1, set);
    config.directory_id = dir;
    let mut c = RaftCore::new(config, 7);
    c.handle(
        Input::Start {
            election: None,
            log: LogState::default(),
        },
        0,
    );
    c.handle(Input::Flushed { end_offset: 1 }, 0);
    let upgrade = |version, validate_only| Input::UpgradeKRaftVersion {
        version,
        validate_only,
        epoch: 1,
    };
    // Already at 0, or only validating: nothing appended.
    assert_eq!(
        c.handle(upgrade(0, false), 1),
        vec![Output::KRaftVersionUnchanged]
    );
    assert_eq!(
        c.handle(upgrade(1, true), 1),
        vec![Output::KRaftVersionUnchanged]
    );
    let me = VoterSet::new([VoterNode {
        key: ReplicaKey::of(1, Some(dir)),
        listeners: ep(1),
        supported_kraft_version: KRaftVersionRange::UP_TO_1,
    }]);
    let out = c.handle(upgrade(1, false), 2);
    assert_eq!(
        out,
        vec![
            Output::AppendLeader {
                base_offset: 1,
                epoch: 1,
                content: BatchContent::Control(vec![
                    ControlRecord::KRaftVersion(1),
                    ControlRecord::Voters(me.clone()),
                ]),
            },
            Output::Flush { end_offset: 3 },
            Output::Appended {
                base_offset: 1,
                last_offset: 2,
                epoch: 1
            }
        ]
    );
    // From now on the quorum-state file is data version 1 and the voter has its directory.
    assert_eq!(
        c.handle(upgrade(1, false), 3),
        vec![Output::KRaftVersionUnchanged]
    );
    assert_eq!(
        c.handle(upgrade(0, false), 3),
        vec![Output::KRaftUpgradeRefused {
            message: "Invalid upgrade of kraft.version from version KRAFT_VERSION_1 to \
                      KRAFT_VERSION_0 because the new version is a downgrade"
                .into()
        }]
    );
    c.handle(Input::Flushed { end_offset: 3 }, 3);
    let d = c.describe_quorum(3);
    assert_eq!(
        d.current_voters.iter().map(|v| v.key).collect::<Vec<_>>(),
        vec![ReplicaKey::of(1, Some(dir))]
    );
}

#[test]
fn kraft_version_upgrade_needs_every_voter_to_support_it() {
    // Static voters 2 and 3 never reported their supported range (no UpdateRaftVoter).
    let mut c = leader_of_three();
    assert_eq!(
        c.handle(
            Input::UpgradeKRaftVersion {
                version: 1,
                validate_only: false,
                epoch: c.epoch(),
            },
            2_004
        ),
        vec![Output::KRaftUpgradeRefused {
            message: "Invalid upgrade of kraft.version to KRAFT_VERSION_1 because not all of \
                      the voters support it"
                .into()
        }]
    );
    // A follower does not upgrade.
    let (mut f, _) = started(2, &[1, 2, 3], None, LogState::default());
    assert!(matches!(
        f.handle(
            Input::UpgradeKRaftVersion {
                version: 1,
                validate_only: false,
                epoch: f.epoch(),
            },
            0
        )[..],
        [Output::AppendRejected { .. }]
    ));
}

#[test]
fn appends_are_rejected_when_not_leader() {
    let (mut c, _) = started(1, &[1, 2, 3], None, LogState::default());
    let out = c.handle(
        Input::Append {
            records: vec![Bytes::new()],
            epoch: c.epoch(),
        },
        0,
    );
    assert_eq!(
        out,
        vec![Output::AppendRejected {
            leader_id: None,
            epoch: 0
        }]
    );
}

/// Records built under an older leadership are refused even by the same node leading again
/// (Kafka's `scheduleAtomicAppend(epoch, ...)`), and nothing reaches the log.
#[test]
fn appends_for_another_epoch_are_rejected() {
    let mut c = leader_of_three();
    let epoch = c.epoch();
    let end = c.log_end_offset();
    for stale in [epoch - 1, epoch + 1] {
        let out = c.handle(
            Input::Append {
                records: vec![Bytes::from_static(b"x")],
                epoch: stale,
            },
            3_000,
        );
        assert_eq!(
            out,
            vec![Output::AppendRejected {
                leader_id: None,
                epoch
            }]
        );
        assert_eq!(c.log_end_offset(), end);
    }
}

#[test]
fn vote_with_stale_epoch_is_fenced() {
    let (mut c, _) = started(
        2,
        &[1, 2, 3],
        Some(ElectionState::unknown_leader(5, vec![])),
        log_with(10, &[(3, 0)]),
    );
    let (r, _) = vote(&mut c, vote_req(1, 4, 3, 10, false), 0);
    assert_eq!(r.common.partition_error, FENCED_LEADER_EPOCH);
    assert_eq!(r.common.leader_epoch, 5);
    assert!(!r.vote_granted);
}

#[test]
fn vote_with_illegal_last_epoch_is_invalid_request() {
    let (mut c, _) = started(2, &[1, 2, 3], None, LogState::default());
    // A candidate's last epoch must be below its epoch; a prospective's at most equal.
    let (r, _) = vote(&mut c, vote_req(1, 3, 3, 10, false), 0);
    assert_eq!(r.common.partition_error, INVALID_REQUEST);
    let (r, _) = vote(&mut c, vote_req(1, 3, 3, 10, true), 0);
    assert_eq!(r.common.partition_error, NONE);
    let (r, _) = vote(&mut c, vote_req(1, 3, 2, -1, false), 0);
    assert_eq!(r.common.partition_error, INVALID_REQUEST);
}

#[test]
fn vote_from_another_cluster_is_inconsistent_cluster_id() {
    let (mut c, _) = started(2, &[1, 2, 3], None, LogState::default());
    let mut req = vote_req(1, 1, 0, 0, false);
    if let Request::Vote(v) = &mut req {
        v.cluster_id = Some("other".into());
    }
    let (r, _) = vote(&mut c, req, 0);
    assert_eq!(r.common.error, INCONSISTENT_CLUSTER_ID);
}

#[test]
fn vote_for_another_replica_key_is_invalid_voter_key() {
    let (mut c, _) = started(2, &[1, 2, 3], None, LogState::default());
    let mut req = vote_req(1, 1, 0, 0, false);
    if let Request::Vote(v) = &mut req {
        v.voter_key = Some(ReplicaKey::without_dir(3));
    }
    let (r, _) = vote(&mut c, req, 0);
    assert_eq!(r.common.partition_error, INVALID_VOTER_KEY);
    assert!(!r.vote_granted);
}

#[test]
fn votes_follow_log_rules_and_are_persisted_before_granted() {
    let (mut c, _) = started(2, &[1, 2, 3], None, log_with(10, &[(3, 0)]));
    // Shorter log in the same last epoch: rejected (but the epoch is learned).
    let (r, _) = vote(&mut c, vote_req(1, 4, 3, 9, false), 0);
    assert!(!r.vote_granted);
    assert_eq!(c.epoch(), 4);
    // Up to date: granted, and the vote is persisted before the reply.
    let (r, out) = vote(&mut c, vote_req(3, 4, 3, 10, false), 0);
    assert!(r.vote_granted);
    let persist_at = out.iter().position(|o| matches!(o, Output::PersistElection { state, .. } if state.voted_key == Some(ReplicaKey::without_dir(3)))).unwrap();
    let reply_at = out
        .iter()
        .position(|o| matches!(o, Output::Reply { .. }))
        .unwrap();
    assert!(persist_at < reply_at);
    // One vote per epoch; the same candidate may ask again.
    let (r, _) = vote(&mut c, vote_req(1, 4, 5, 100, false), 0);
    assert!(!r.vote_granted);
    let (r, _) = vote(&mut c, vote_req(3, 4, 3, 10, false), 0);
    assert!(r.vote_granted);
}

#[test]
fn pre_vote_grants_without_recording_a_vote() {
    let (mut c, _) = started(2, &[1, 2, 3], None, log_with(10, &[(3, 0)]));
    let (r, out) = vote(&mut c, vote_req(1, 3, 3, 10, true), 0);
    assert!(r.vote_granted);
    assert!(persisted(&out).is_empty());
    assert_eq!(c.epoch(), 3);
    // A real vote for another candidate in the same epoch is still possible.
    let (r, _) = vote(&mut c, vote_req(3, 4, 3, 10, false), 0);
    assert!(r.vote_granted);
    // A higher-epoch pre-vote moves us to that epoch (Kafka 4.4) but records no vote.
    let (r, out) = vote(&mut c, vote_req(1, 6, 3, 10, true), 0);
    assert!(r.vote_granted);
    assert_eq!(c.epoch(), 6);
    assert!(persisted(&out).iter().all(|p| p.voted_key.is_none()));
}

#[test]
fn follower_that_has_fetched_rejects_pre_votes() {
    let (mut c, _) = started(2, &[1, 2, 3], None, LogState::default());
    let out = c.handle(
        Input::Request {
            id: 1,
            request: Request::BeginQuorumEpoch(BeginQuorumEpochRequest {
                cluster_id: Some("cluster".into()),
                voter_key: None,
                leader_id: 1,
                leader_epoch: 1,
                leader_endpoints: vec![],
            }),
        },
        0,
    );
    assert_eq!(c.state_name(), "Follower");
    assert_eq!(c.leader_id(), Some(1));
    assert!(
        matches!(replies(&out)[0], Response::BeginQuorumEpoch(ref r) if r.partition_error == NONE && r.leader_id == 1)
    );
    // Not fetched yet: a pre-vote may be granted.
    let (r, _) = vote(&mut c, vote_req(3, 1, 0, 0, true), 1);
    assert!(r.vote_granted);
    let fetch = sends(&out)
        .into_iter()
        .find(|(_, _, r)| matches!(r, Request::Fetch(_)))
        .unwrap();
    c.handle(
        Input::Response {
            from: 1,
            correlation_id: fetch.1,
            response: Response::Fetch(FetchResponse {
                error: NONE,
                partition_error: NONE,
                high_watermark: -1,
                log_start_offset: 0,
                leader_id: 1,
                leader_epoch: 1,
                diverging_epoch: None,
                snapshot_id: None,
                records: Records::None,
                leader_endpoints: vec![],
            }),
        },
        2,
    );
    let (r, _) = vote(&mut c, vote_req(3, 1, 0, 0, true), 3);
    assert!(!r.vote_granted);
    // And a binding vote in the leader's epoch is never granted.
    let (r, _) = vote(&mut c, vote_req(3, 1, 0, 0, false), 3);
    assert!(!r.vote_granted);
}

#[test]
fn begin_quorum_epoch_with_stale_epoch_is_fenced() {
    let (mut c, _) = started(
        2,
        &[1, 2, 3],
        Some(ElectionState::unknown_leader(3, vec![])),
        LogState::default(),
    );
    let out = c.handle(
        Input::Request {
            id: 1,
            request: Request::BeginQuorumEpoch(BeginQuorumEpochRequest {
                cluster_id: None,
                voter_key: None,
                leader_id: 1,
                leader_epoch: 2,
                leader_endpoints: vec![],
            }),
        },
        0,
    );
    assert!(
        matches!(&replies(&out)[0], Response::BeginQuorumEpoch(r) if r.partition_error == FENCED_LEADER_EPOCH && r.leader_epoch == 3)
    );
}

#[test]
fn leader_fetch_errors_match_kafka() {
    let mut c = leader_of_three();
    // Stale epoch: FENCED_LEADER_EPOCH; newer epoch: UNKNOWN_LEADER_EPOCH.
    assert_eq!(
        fetch(&mut c, fetch_req(2, 0, 0, 0), 3_000).partition_error,
        FENCED_LEADER_EPOCH
    );
    assert_eq!(
        fetch(&mut c, fetch_req(2, 2, 0, 0), 3_000).partition_error,
        UNKNOWN_LEADER_EPOCH
    );
    // Last fetched epoch above the current leader epoch, or a negative offset: INVALID_REQUEST.
    assert_eq!(
        fetch(&mut c, fetch_req(2, 1, 0, 2), 3_000).partition_error,
        INVALID_REQUEST
    );
    assert_eq!(
        fetch(&mut c, fetch_req(2, 1, -1, 0), 3_000).partition_error,
        INVALID_REQUEST
    );
    // A valid fetch reads from its offset and names the leader.
    let r = fetch(&mut c, fetch_req(2, 1, 0, 0), 3_000);
    assert_eq!(r.partition_error, NONE);
    assert_eq!((r.leader_id, r.leader_epoch), (1, 1));
    assert_eq!(
        r.records,
        Records::Read {
            from_offset: 0,
            max_bytes: 1 << 20
        }
    );
    // Beyond the log end in the current epoch: diverging at the log end, not an error.
    let r = fetch(&mut c, fetch_req(2, 1, 5, 1), 3_000);
    assert_eq!(r.partition_error, NONE);
    assert_eq!(r.diverging_epoch, Some(OffsetAndEpoch::new(1, 1)));
    // A follower of an old epoch the leader never had: diverging to where epoch 1 begins.
    let r = fetch(&mut c, fetch_req(3, 1, 7, 0), 3_000);
    assert_eq!(r.diverging_epoch, Some(OffsetAndEpoch::new(0, 0)));
}

#[test]
fn high_watermark_needs_a_majority_and_the_epoch_start() {
    let mut c = leader_of_three();
    assert_eq!(c.high_watermark(), 0);
    c.handle(
        Input::Append {
            records: vec![Bytes::from_static(b"x"); 3],
            epoch: c.epoch(),
        },
        3_000,
    );
    c.handle(Input::Flushed { end_offset: 4 }, 3_000);
    // Voter 2 holds the LeaderChangeMessage: committed up to 1.
    let r = fetch(&mut c, fetch_req(2, 1, 1, 1), 3_001);
    assert_eq!(r.high_watermark, 1);
    assert_eq!(c.high_watermark(), 1);
    // An observer does not count.
    fetch(&mut c, fetch_req(9, 1, 4, 1), 3_002);
    assert_eq!(c.high_watermark(), 1);
    let r = fetch(&mut c, fetch_req(3, 1, 4, 1), 3_003);
    assert_eq!(r.high_watermark, 4);
    // DescribeQuorum shows both voters and the observer.
    let d = c.describe_quorum(3_004);
    assert_eq!(d.high_watermark, 4);
    assert_eq!(d.current_voters.len(), 3);
    assert_eq!(d.observers.len(), 1);
    assert_eq!(d.observers[0].log_end_offset, 4);
    let v2 = d.current_voters.iter().find(|v| v.key.id == 2).unwrap();
    assert_eq!((v2.log_end_offset, v2.last_fetch_timestamp), (1, 3_001));
}

#[test]
fn describe_quorum_on_a_non_leader_is_not_leader_or_follower() {
    let (mut c, _) = started(2, &[1, 2, 3], None, LogState::default());
    let d = c.describe_quorum(0);
    assert_eq!(d.partition_error, NOT_LEADER_OR_FOLLOWER);
}

#[test]
fn leader_without_majority_fetches_resigns_after_check_quorum() {
    let mut c = leader_of_three();
    // 1.5 × fetch timeout (2 s) with no fetches: resign and tell the voters.
    let out = c.handle(Input::Tick, 2_003 + 3_000);
    assert_eq!(c.state_name(), "Resigned");
    let ends = sends(&out);
    assert_eq!(ends.len(), 2);
    assert!(ends
        .iter()
        .all(|(_, _, r)| matches!(r, Request::EndQuorumEpoch(e) if e.leader_epoch == 1)));
}

#[test]
fn parked_fetch_completes_on_append_or_timeout() {
    let mut c = leader_of_three();
    let mut r = fetch_req(2, 1, 1, 1);
    r.max_wait_ms = 500;
    r.high_watermark = 0;
    // Voter 2 at the end: its fetch moves the high watermark, so it is answered at once.
    let out = c.handle(
        Input::Request {
            id: 5,
            request: Request::Fetch(r.clone()),
        },
        3_000,
    );
    assert!(matches!(&replies(&out)[0], Response::Fetch(f) if f.high_watermark == 1));
    // Again with the same high watermark: parked.
    r.high_watermark = 1;
    let out = c.handle(
        Input::Request {
            id: 6,
            request: Request::Fetch(r.clone()),
        },
        3_001,
    );
    assert!(replies(&out).is_empty());
    let out = c.handle(
        Input::Append {
            records: vec![Bytes::from_static(b"y")],
            epoch: c.epoch(),
        },
        3_002,
    );
    assert!(out.iter().any(|o| matches!(o, Output::Reply { id: 6, response: Response::Fetch(f) } if f.records == Records::Read { from_offset: 1, max_bytes: 1 << 20 })));
    // Nothing new: it times out after max_wait_ms with the original (empty) answer.
    let mut r2 = fetch_req(3, 1, 2, 1);
    r2.max_wait_ms = 500;
    r2.high_watermark = 1;
    c.handle(Input::Flushed { end_offset: 2 }, 3_003);
    let out = c.handle(
        Input::Request {
            id: 7,
            request: Request::Fetch(r2),
        },
        3_004,
    );
    // Voter 3 at offset 2 makes a majority at 2: the HW moves and the fetch is answered.
    assert!(matches!(&replies(&out)[0], Response::Fetch(f) if f.high_watermark == 2));
    let mut r3 = fetch_req(3, 1, 2, 1);
    r3.max_wait_ms = 500;
    r3.high_watermark = 2;
    let out = c.handle(
        Input::Request {
            id: 8,
            request: Request::Fetch(r3),
        },
        3_005,
    );
    assert!(replies(&out).is_empty());
    let out = c.handle(Input::Tick, 3_505);
    assert!(out.iter().any(|o| matches!(o, Output::Reply { id: 8, response: Response::Fetch(f) } if f.records == Records::None && f.partition_error == NONE)));
}

#[test]
fn fetch_below_the_log_start_gets_the_snapshot_id() {
    let log = LogState {
        start_offset: 100,
        end_offset: 120,
        epochs: vec![EpochEntry {
            epoch: 3,
            start_offset: 100,
        }],
        snapshots: vec![SnapshotInfo {
            id: OffsetAndEpoch::new(100, 3),
            size: 5000,
        }],
        ..LogState::default()
    };
    let (mut c, _) = started(1, &[1], None, log);
    assert!(c.is_leader());
    c.handle(Input::Flushed { end_offset: 121 }, 0);
    let epoch = c.epoch();
    let r = fetch(&mut c, fetch_req(5, epoch, 0, 0), 1);
    assert_eq!(r.snapshot_id, Some(OffsetAndEpoch::new(100, 3)));
    let r = fetch(&mut c, fetch_req(5, epoch, 50, 2), 1);
    assert_eq!(r.snapshot_id, Some(OffsetAndEpoch::new(100, 3)));
    assert_eq!(r.log_start_offset, 100);
    // At the snapshot's end with its epoch: valid.
    let r = fetch(&mut c, fetch_req(5, epoch, 100, 3), 1);
    assert_eq!((r.snapshot_id, r.diverging_epoch), (None, None));
}

#[test]
fn fetch_snapshot_errors_match_kafka() {
    let log = LogState {
        start_offset: 100,
        end_offset: 100,
        snapshots: vec![SnapshotInfo {
            id: OffsetAndEpoch::new(100, 3),
            size: 5000,
        }],
        ..LogState::default()
    };
    let (mut c, _) = started(1, &[1], None, log);
    let epoch = c.epoch();
    let ask = |c: &mut RaftCore, epoch: i32, id: OffsetAndEpoch, position: i64| {
        let out = c.handle(
            Input::Request {
                id: 3,
                request: Request::FetchSnapshot(FetchSnapshotRequest {
                    cluster_id: None,
                    replica: ReplicaKey::without_dir(5),
                    max_bytes: 4096,
                    current_leader_epoch: epoch,
                    snapshot_id: id,
                    position,
                }),
            },
            1,
        );
        match replies(&out).pop() {
            Some(Response::FetchSnapshot(r)) => r,
            other => panic!("{other:?}"),
        }
    };
    let id = OffsetAndEpoch::new(100, 3);
    assert_eq!(
        ask(&mut c, epoch - 1, id, 0).partition_error,
        FENCED_LEADER_EPOCH
    );
    assert_eq!(
        ask(&mut c, epoch, OffsetAndEpoch::new(90, 3), 0).partition_error,
        SNAPSHOT_NOT_FOUND
    );
    assert_eq!(
        ask(&mut c, epoch, id, 5000).partition_error,
        POSITION_OUT_OF_RANGE
    );
    assert_eq!(
        ask(&mut c, epoch, id, -1).partition_error,
        POSITION_OUT_OF_RANGE
    );
    let r = ask(&mut c, epoch, id, 4096);
    assert_eq!(r.partition_error, NONE);
    assert_eq!((r.size, r.position), (5000, 4096));
    assert_eq!(
        r.bytes,
        SnapshotBytes::Read {
            id,
            position: 4096,
            len: 904
        }
    );
}

#[test]
fn follower_rejects_a_snapshot_chunk_that_does_not_match() {
    let (mut c, out) = started(
        2,
        &[1, 2, 3],
        Some(ElectionState {
            epoch: 1,
            leader_id: Some(1),
            voted_key: None,
            voters: vec![],
        }),
        LogState::default(),
    );
    assert_eq!(c.state_name(), "Follower");
    let f = sends(&out)
        .into_iter()
        .find(|(_, _, r)| matches!(r, Request::Fetch(_)))
        .unwrap();
    let id = OffsetAndEpoch::new(50, 1);
    let out = c.handle(
        Input::Response {
            from: 1,
            correlation_id: f.1,
            response: Response::Fetch(FetchResponse {
                error: NONE,
                partition_error: NONE,
                high_watermark: 50,
                log_start_offset: 50,
                leader_id: 1,
                leader_epoch: 1,
                diverging_epoch: None,
                snapshot_id: Some(id),
                records: Records::None,
                leader_endpoints: vec![],
            }),
        },
        1,
    );
    assert!(out.contains(&Output::BeginSnapshot { id }));
    let fs = sends(&out)
        .into_iter()
        .find(|(_, _, r)| matches!(r, Request::FetchSnapshot(_)))
        .unwrap();
    // A chunk for another position: Kafka throws ("invalid position"); the core stops.
    let out = c.handle(
        Input::Response {
            from: 1,
            correlation_id: fs.1,
            response: Response::FetchSnapshot(FetchSnapshotResponse {
                error: NONE,
                partition_error: NONE,
                leader_id: 1,
                leader_epoch: 1,
                snapshot_id: id,
                size: 10,
                position: 4,
                bytes: SnapshotBytes::Bytes(Bytes::from_static(b"abcdef")),
                leader_endpoints: vec![],
            }),
        },
        2,
    );
    assert!(out
        .iter()
        .any(|o| matches!(o, Output::Fatal(m) if m.contains("invalid position"))));
}

#[test]
fn end_quorum_epoch_backs_off_by_successor_position() {
    let mut c = RaftCore::new(cfg(3, &[1, 2, 3, 4]), 1);
    c.handle(
        Input::Start {
            election: Some(ElectionState {
                epoch: 2,
                leader_id: Some(1),
                voted_key: None,
                voters: vec![],
            }),
            log: LogState::default(),
        },
        0,
    );
    let keys = |ids: &[i32]| {
        ids.iter()
            .map(|i| ReplicaKey::without_dir(*i))
            .collect::<Vec<_>>()
    };
    let end = |c: &mut RaftCore, preferred: Vec<ReplicaKey>| {
        c.handle(
            Input::Request {
                id: 1,
                request: Request::EndQuorumEpoch(EndQuorumEpochRequest {
                    cluster_id: None,
                    leader_id: 1,
                    leader_epoch: 2,
                    preferred_candidates: preferred,
                    leader_endpoints: vec![],
                }),
            },
            100,
        )
    };
    // Third of three successors: max >> 2 << 1 = 500 ms.
    end(&mut c, keys(&[2, 4, 3]));
    match c.state() {
        EpochState::Follower { fetch_deadline, .. } => assert_eq!(*fetch_deadline, 600),
        s => panic!("{s:?}"),
    }
    // First successor: at once.
    end(&mut c, keys(&[3, 2, 4]));
    c.handle(Input::Tick, 100);
    assert_eq!(c.state_name(), "Prospective");
}

fn dir(n: u8) -> kactor_protocol::Uuid {
    kactor_protocol::Uuid([n; 16])
}

/// A lone voter 1 of a KIP-853 quorum (kraft.version 1, voters from the log), leading with
/// its epoch start committed.
fn dynamic_leader() -> RaftCore {
    let node = |id: i32| VoterNode {
        key: ReplicaKey::of(id, Some(dir(id as u8))),
        listeners: ep(id),
        supported_kraft_version: KRaftVersionRange::UP_TO_1,
    };
    let mut c = RaftConfig::with_static_voters(1, VoterSet::new([node(1)]));
    c.static_voters = None;
    c.directory_id = dir(1);
    c.cluster_id = "cluster".into();
    let mut core = RaftCore::new(c, 3);
    // kafka-storage format's bootstrap: KRaftVersionRecord and VotersRecord at 0 and 1.
    let log = LogState {
        end_offset: 2,
        epochs: vec![EpochEntry {
            epoch: 0,
            start_offset: 0,
        }],
        kraft_version_records: vec![(0, 1)],
        voters_records: vec![(1, VoterSet::new([node(1)]))],
        ..LogState::default()
    };
    let out = core.handle(
        Input::Start {
            election: None,
            log,
        },
        0,
    );
    assert!(core.is_leader());
    // kraft.version 1 writes data_version 1 files.
    assert!(out.iter().any(|o| matches!(
        o,
        Output::PersistElection {
            data_version: 1,
            ..
        }
    )));
    core.handle(Input::Flushed { end_offset: 3 }, 0);
    assert_eq!(core.high_watermark(), 3);
    core
}

fn add_voter(c: &mut RaftCore, id: i32, now: i64) -> Vec<Output> {
    add_voter_acked(c, id, now, true)
}

fn add_voter_acked(c: &mut RaftCore, id: i32, now: i64, when_committed: bool) -> Vec<Output> {
    c.handle(
        Input::Request {
            id: 40 + id as u64,
            request: Request::AddRaftVoter(AddRaftVoterRequest {
                cluster_id: None,
                timeout_ms: 30_000,
                voter: ReplicaKey::of(id, Some(dir(id as u8))),
                listeners: ep(id),
                ack_when_committed: when_committed,
            }),
        },
        now,
    )
}

/// Kafka's check before any other voter-change rule: a voter without an endpoint on the
/// quorum's listener could never be reached.
#[test]
fn a_voter_without_the_default_listener_is_refused() {
    let mut c = dynamic_leader();
    // Voter 4 asks to join with one listener (name, port).
    let ask = |c: &mut RaftCore, id, listener: &str, port, now| {
        c.handle(
            Input::Request {
                id,
                request: Request::AddRaftVoter(AddRaftVoterRequest {
                    cluster_id: None,
                    timeout_ms: 30_000,
                    voter: ReplicaKey::of(4, Some(dir(4))),
                    listeners: vec![Endpoint {
                        listener: listener.into(),
                        host: "node4".into(),
                        port,
                    }],
                    ack_when_committed: true,
                }),
            },
            now,
        )
    };
    let out = ask(&mut c, 77, "other", 9095, 5_000);
    let reply = voter_change_reply(&out).expect("an answer");
    assert_eq!(reply.error, INVALID_REQUEST);
    assert_eq!(
        reply.error_message.as_deref(),
        Some(
            "Add voter request didn't include the endpoint (Endpoints(endpoints=\
             {ListenerName(OTHER)=node4/<unresolved>:9095})) for the default listener \
             ListenerName(CONTROLLER)"
        )
    );
    assert!(
        sends(&out).is_empty(),
        "no ApiVersions to an unreachable voter"
    );
    // Listener names compare as Kafka normalises them (upper case): accepted.
    let out = ask(&mut c, 78, "controller", 9093, 5_001);
    assert!(voter_change_reply(&out).is_none(), "{out:?}");
    assert!(matches!(
        sends(&out)[..],
        [(4, _, Request::ApiVersions { .. })]
    ));
}

/// An observer controller (node 4) of a KIP-853 quorum led by voter 1, with
/// `controller.quorum.auto.join.enable`; `voters` are the log's voter set.
fn auto_joining_observer(voters: VoterSet, auto_join: bool) -> RaftCore {
    let mut c = RaftConfig::with_static_voters(4, voters.clone());
    c.static_voters = None;
    c.directory_id = dir(4);
    c.cluster_id = "cluster".into();
    c.local_listeners = ep(4);
    c.auto_join = auto_join;
    let mut core = RaftCore::new(c, 3);
    let log = LogState {
        end_offset: 2,
        epochs: vec![EpochEntry {
            epoch: 0,
            start_offset: 0,
        }],
        kraft_version_records: vec![(0, 1)],
        voters_records: vec![(1, voters)],
        ..LogState::default()
    };
    core.handle(
        Input::Start {
            election: Some(ElectionState {
                epoch: 1,
                leader_id: Some(1),
                voted_key: None,
                voters: vec![],
            }),
            log,
        },
        0,
    );
    core.handle(Input::Flushed { end_offset: 2 }, 0);
    assert_eq!(core.state_name(), "Follower");
    core
}

/// Answers every Fetch the observer sends with an empty one from leader 1, 500 ms apart, until
/// it sends something else to the leader; returns that request and when it went out.
fn first_non_fetch(c: &mut RaftCore, mut out: Vec<Output>) -> (Request, i64) {
    let mut now = 0;
    while now < 20_000 {
        for (to, corr, req) in sends(&out) {
            if !matches!(req, Request::Fetch(_)) {
                assert_eq!(to, 1, "sent to the leader");
                return (req, now);
            }
            now += 500;
            out = c.handle(
                Input::Response {
                    from: 1,
                    correlation_id: corr,
                    response: Response::Fetch(FetchResponse {
                        error: NONE,
                        partition_error: NONE,
                        high_watermark: 2,
                        log_start_offset: 0,
                        leader_id: 1,
                        leader_epoch: 1,
                        diverging_epoch: None,
                        snapshot_id: None,
                        records: Records::None,
                        leader_endpoints: vec![],
                    }),
                },
                now,
            );
        }
        if sends(&out).is_empty() {
            now += 500;
            out = c.handle(Input::Tick, now);
        }
    }
    panic!("only fetches for 20 s");
}

fn dynamic_voter(id: i32, directory: u8) -> VoterNode {
    VoterNode {
        key: ReplicaKey::of(id, Some(dir(directory))),
        listeners: ep(id),
        supported_kraft_version: KRaftVersionRange::UP_TO_1,
    }
}

/// KIP-853 auto-join: after a fetch timeout (2 s) as the leader's follower, the observer asks
/// to be added, answered at the append (AckWhenCommitted=false), and asks again a fetch
/// timeout later if nothing changed.
#[test]
fn an_auto_joining_observer_asks_to_be_added() {
    let mut c = auto_joining_observer(VoterSet::new([dynamic_voter(1, 1)]), true);
    let out = c.handle(Input::Tick, 0);
    let (req, at) = first_non_fetch(&mut c, out);
    assert!(at >= 2_000, "not before the fetch timeout ({at})");
    assert_eq!(
        req,
        Request::AddRaftVoter(AddRaftVoterRequest {
            cluster_id: Some("cluster".into()),
            timeout_ms: 2_000,
            voter: ReplicaKey::of(4, Some(dir(4))),
            listeners: ep(4),
            ack_when_committed: false,
        })
    );
}

/// A node whose id is a voter under another directory (it was formatted again) first asks
/// for that voter's removal.
#[test]
fn an_auto_joining_observer_removes_its_old_incarnation_first() {
    let mut c = auto_joining_observer(
        VoterSet::new([dynamic_voter(1, 1), dynamic_voter(4, 40)]),
        true,
    );
    let out = c.handle(Input::Tick, 0);
    let (req, _) = first_non_fetch(&mut c, out);
    assert_eq!(
        req,
        Request::RemoveRaftVoter(RemoveRaftVoterRequest {
            cluster_id: Some("cluster".into()),
            voter: ReplicaKey::of(4, Some(dir(40))),
        })
    );
}

/// Without the setting an observer only fetches.
#[test]
fn an_observer_without_auto_join_only_fetches() {
    let mut c = auto_joining_observer(VoterSet::new([dynamic_voter(1, 1)]), false);
    let out = c.handle(Input::Tick, 0);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        first_non_fetch(&mut c, out)
    }));
    assert!(result.is_err(), "sent something other than a fetch");
}

fn voter_change_reply(out: &[Output]) -> Option<VoterChangeResponse> {
    replies(out).into_iter().find_map(|r| match r {
        Response::AddRaftVoter(v) | Response::RemoveRaftVoter(v) => Some(v),
        _ => None,
    })
}

fn answer_api_versions(c: &mut RaftCore, out: &[Output], now: i64) -> Vec<Output> {
    let (to, corr, req) = sends(out).pop().expect("an ApiVersions request");
    assert!(matches!(req, Request::ApiVersions { .. }));
    c.handle(
        Input::Response {
            from: to,
            correlation_id: corr,
            response: Response::ApiVersions {
                error: NONE,
                kraft_version: Some(KRaftVersionRange::UP_TO_1),
            },
        },
        now,
    )
}

#[test]
fn add_voter_needs_a_caught_up_observer_and_commits_the_voters_record() {
    let mut c = dynamic_leader();
    // Not fetched yet: ApiVersions answered, but the new voter is not caught up.
    let out = add_voter(&mut c, 4, 10);
    assert!(voter_change_reply(&out).is_none());
    let out = answer_api_versions(&mut c, &out, 11);
    let r = voter_change_reply(&out).unwrap();
    assert_eq!(r.error, REQUEST_TIMED_OUT);
    // Node 4 fetches up to the leader's end as an observer, then asks again.
    let mut f = fetch_req(4, c.epoch(), 3, c.epoch());
    f.replica = ReplicaKey::of(4, Some(dir(4)));
    fetch(&mut c, f.clone(), 20);
    let out = add_voter(&mut c, 4, 21);
    let out = answer_api_versions(&mut c, &out, 22);
    assert!(voter_change_reply(&out).is_none(), "waits for the commit");
    let record_at = out
        .iter()
        .find_map(|o| match o {
            Output::AppendLeader {
                base_offset,
                content: BatchContent::Control(records),
                ..
            } => match &records[..] {
                [ControlRecord::Voters(v)] => Some((*base_offset, v.ids().collect::<Vec<_>>())),
                _ => None,
            },
            _ => None,
        })
        .unwrap();
    assert_eq!(record_at, (3, vec![1, 4]));
    assert_eq!(c.voters().ids().collect::<Vec<_>>(), vec![1, 4]);
    // Another change while this one is pending: REQUEST_TIMED_OUT.
    let out = add_voter(&mut c, 5, 23);
    assert_eq!(voter_change_reply(&out).unwrap().error, REQUEST_TIMED_OUT);
    // The new voter set (1 and 4) must hold the record: the leader's flush is not enough.
    let out = c.handle(Input::Flushed { end_offset: 4 }, 24);
    assert!(voter_change_reply(&out).is_none());
    f.fetch_offset = 4;
    let out = c.handle(
        Input::Request {
            id: 99,
            request: Request::Fetch(f),
        },
        25,
    );
    assert_eq!(voter_change_reply(&out).unwrap().error, NONE);
    assert_eq!(c.high_watermark(), 4);
    // A voter id already in the set.
    let out = add_voter(&mut c, 4, 26);
    assert_eq!(voter_change_reply(&out).unwrap().error, DUPLICATE_VOTER);
}

#[test]
fn remove_voter_errors_and_commit() {
    let mut c = dynamic_leader();
    let remove = |c: &mut RaftCore, id: i32| {
        c.handle(
            Input::Request {
                id: 7,
                request: Request::RemoveRaftVoter(RemoveRaftVoterRequest {
                    cluster_id: None,
                    voter: ReplicaKey::of(id, Some(dir(id as u8))),
                }),
            },
            30,
        )
    };
    assert_eq!(
        voter_change_reply(&remove(&mut c, 9)).unwrap().error,
        VOTER_NOT_FOUND
    );
    // The last voter cannot go.
    assert_eq!(
        voter_change_reply(&remove(&mut c, 1)).unwrap().error,
        VOTER_NOT_FOUND
    );
}

#[test]
fn voter_changes_need_kraft_version_1() {
    let (mut c, _) = started(1, &[1], None, LogState::default());
    c.handle(Input::Flushed { end_offset: 1 }, 0);
    let out = add_voter(&mut c, 4, 10);
    assert_eq!(voter_change_reply(&out).unwrap().error, UNSUPPORTED_VERSION);
    // A follower answers NOT_LEADER_OR_FOLLOWER.
    let (mut f, _) = started(2, &[1, 2, 3], None, LogState::default());
    let out = add_voter(&mut f, 4, 10);
    assert_eq!(
        voter_change_reply(&out).unwrap().error,
        NOT_LEADER_OR_FOLLOWER
    );
}

#[test]
fn update_voter_on_a_static_quorum_only_checks_the_id() {
    let (mut c, _) = started(1, &[1], None, LogState::default());
    c.handle(Input::Flushed { end_offset: 1 }, 0);
    let update = |c: &mut RaftCore, id: i32, epoch: i32| {
        let out = c.handle(
            Input::Request {
                id: 5,
                request: Request::UpdateRaftVoter(UpdateRaftVoterRequest {
                    cluster_id: None,
                    current_leader_epoch: epoch,
                    voter: ReplicaKey::of(id, Some(dir(id as u8))),
                    listeners: ep(id),
                    kraft_version: KRaftVersionRange::UP_TO_1,
                }),
            },
            1,
        );
        match replies(&out).pop() {
            Some(Response::UpdateRaftVoter(r)) => r,
            other => panic!("{other:?}"),
        }
    };
    let epoch = c.epoch();
    assert_eq!(update(&mut c, 1, epoch).error, NONE);
    assert_eq!(update(&mut c, 7, epoch).error, VOTER_NOT_FOUND);
    let r = update(&mut c, 1, epoch + 1);
    assert_eq!((r.error, r.leader_id), (UNKNOWN_LEADER_EPOCH, 1));
}

#[test]
fn kraft_version_upgrade_writes_the_voters_as_they_reported() {
    let upgrade = |c: &mut RaftCore, now| {
        c.handle(
            Input::UpgradeKRaftVersion {
                version: 1,
                validate_only: false,
                epoch: c.epoch(),
            },
            now,
        )
    };
    let report = |c: &mut RaftCore| {
        // Followers fetch, so the high watermark is known, then report themselves.
        for id in [2, 3] {
            fetch(c, fetch_req(id, 1, 1, 1), 2_010);
        }
        for id in [2, 3] {
            let out = c.handle(
                Input::Request {
                    id: 9,
                    request: Request::UpdateRaftVoter(UpdateRaftVoterRequest {
                        cluster_id: None,
                        current_leader_epoch: 1,
                        voter: ReplicaKey::of(id, Some(dir(id as u8))),
                        listeners: ep(id),
                        kraft_version: KRaftVersionRange::UP_TO_1,
                    }),
                },
                2_020,
            );
            assert!(
                matches!(replies(&out)[..], [Response::UpdateRaftVoter(ref r)] if r.error == NONE)
            );
        }
    };
    // This node's own directory id unknown: refused (Kafka throws the same).
    let mut c = leader_of_three();
    report(&mut c);
    assert!(
        matches!(&upgrade(&mut c, 2_030)[..], [Output::KRaftUpgradeRefused { message }]
        if message.starts_with("Directory id must be known for all of the voters"))
    );
    // With it, the VotersRecord names all three as they reported.
    let mut config = cfg(1, &[1, 2, 3]);
    config.directory_id = dir(1);
    let mut c = leader_of_three_with(config);
    report(&mut c);
    let voters = upgrade(&mut c, 2_030)
        .iter()
        .find_map(|o| match o {
            Output::AppendLeader {
                content: BatchContent::Control(records),
                ..
            } => match &records[..] {
                [ControlRecord::KRaftVersion(1), ControlRecord::Voters(v)] => Some(v.clone()),
                _ => None,
            },
            _ => None,
        })
        .expect("a KRaftVersion + Voters batch");
    assert_eq!(
        voters.keys().collect::<Vec<_>>(),
        (1..=3)
            .map(|id| ReplicaKey::of(id, Some(dir(id as u8))))
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_candidate_that_learned_its_epochs_leader_restarts_as_its_follower() {
    // Voted for itself in epoch 10, then followed node 3 in that epoch and took records of
    // epoch 10 from it: the file names both. Resuming the candidacy would send a Vote whose
    // last epoch equals its candidate epoch, which voters refuse as INVALID_REQUEST.
    let persisted_state = ElectionState {
        epoch: 10,
        leader_id: Some(3),
        voted_key: Some(ReplicaKey::of(2, None)),
        voters: vec![1, 2, 3],
    };
    let (c, out) = started(
        2,
        &[1, 2, 3],
        Some(persisted_state),
        log_with(25, &[(10, 20)]),
    );
    assert_eq!(c.state_name(), "Follower");
    assert_eq!(c.leader_id(), Some(3));
    assert!(!sends(&out)
        .iter()
        .any(|(_, _, r)| matches!(r, Request::Vote(_))));
}

/// A lone voter whose voters come from the bootstrap checkpoint (`kactor format --standalone`):
/// its first epoch's start batch carries KRaftVersion and Voters after the LeaderChange, so
/// observers formatted without voters learn them by fetching; the first data batch goes after
/// all three.
#[test]
fn a_leader_from_the_bootstrap_checkpoint_writes_the_voters_into_the_log() {
    let me = VoterNode {
        key: ReplicaKey::of(1, Some(dir(1))),
        listeners: ep(1),
        supported_kraft_version: KRaftVersionRange::UP_TO_1,
    };
    let mut c = RaftConfig::with_static_voters(1, VoterSet::new([me.clone()]));
    c.static_voters = None;
    c.directory_id = dir(1);
    c.local_listeners = ep(1);
    let mut core = RaftCore::new(c, 3);
    let log = LogState {
        snapshot_voters: Some(VoterSet::new([me.clone()])),
        snapshot_kraft_version: Some(1),
        ..LogState::default()
    };
    let out = core.handle(
        Input::Start {
            election: None,
            log,
        },
        0,
    );
    let start = out
        .iter()
        .find_map(|o| match o {
            Output::AppendLeader {
                base_offset: 0,
                content: BatchContent::Control(records),
                ..
            } => Some(records.clone()),
            _ => None,
        })
        .expect("a start-of-epoch batch");
    assert_eq!(start.len(), 3, "{start:?}");
    assert!(matches!(start[0], ControlRecord::LeaderChange { .. }));
    assert_eq!(start[1], ControlRecord::KRaftVersion(1));
    assert_eq!(start[2], ControlRecord::Voters(VoterSet::new([me])));
    assert!(out.contains(&Output::LeaderChanged {
        leader_id: Some(1),
        epoch: 1,
        epoch_start_offset: Some(0),
        first_data_offset: Some(3),
    }));

    // A restart finds the voters in the log: the next epoch starts with a LeaderChange alone.
    let mut again = dynamic_leader();
    let out = again.handle(Input::Tick, 0);
    assert!(!out.iter().any(|o| matches!(
        o,
        Output::AppendLeader {
            content: BatchContent::Control(r),
            ..
        } if r.len() > 1
    )));
}

/// AddRaftVoter v1 with AckWhenCommitted=false (what an auto-joining controller sends) is
/// answered once the VotersRecord is appended, not again at its commit; the change stays
/// pending until then.
#[test]
fn add_voter_without_ack_when_committed_answers_at_the_append() {
    let mut c = dynamic_leader();
    let mut f = fetch_req(2, c.epoch(), 3, c.epoch());
    f.replica = ReplicaKey::of(2, Some(dir(2)));
    // Node 2 observes and catches up.
    fetch(&mut c, f.clone(), 10);
    let out = add_voter_acked(&mut c, 2, 20, false);
    let out = answer_api_versions(&mut c, &out, 30);
    assert_eq!(
        voter_change_reply(&out),
        Some(VoterChangeResponse {
            error: 0,
            error_message: None
        })
    );
    assert!(c.voters().contains_id(2));
    // Another change waits for this one's commit.
    let out = add_voter(&mut c, 3, 40);
    assert_eq!(voter_change_reply(&out).map(|r| r.error), Some(7));
    // The commit (voter 2 fetches past the record) sends no second answer.
    c.handle(Input::Flushed { end_offset: 4 }, 50);
    f.fetch_offset = 4;
    let out = c.handle(
        Input::Request {
            id: 904,
            request: Request::Fetch(f),
        },
        60,
    );
    assert_eq!(voter_change_reply(&out), None);
    assert_eq!(c.high_watermark(), 4);
}
