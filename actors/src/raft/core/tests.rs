use super::*;

fn cfg(node: i32, voters: &[i32]) -> RaftConfig {
    RaftConfig {
        node_id: node,
        voters: voters.iter().copied().collect(),
        election_timeout_ms: 1000,
    }
}

fn start(
    core: &mut RaftCore,
    election: Option<ElectionState>,
    leo: i64,
    last_epoch: i32,
) -> Vec<RaftOutput> {
    core.handle(
        RaftInput::Start {
            election,
            log_end_offset: leo,
            last_epoch,
        },
        0,
    )
}

#[test]
fn single_voter_elects_itself_and_writes_leader_change() {
    let mut c = RaftCore::new(cfg(1, &[1]));
    let out = start(&mut c, None, 0, 0);
    assert!(c.is_leader());
    assert_eq!(c.epoch(), 1);
    // Candidate state persisted first, then leader, then the control record, then the news.
    assert!(
        matches!(&out[0], RaftOutput::PersistElectionState(e) if e.voted_id == Some(1) && e.leader_id.is_none())
    );
    assert!(
        matches!(&out[1], RaftOutput::PersistElectionState(e) if e.leader_id == Some(1) && e.epoch == 1)
    );
    assert_eq!(
        out[2],
        RaftOutput::AppendControl {
            base_offset: 0,
            epoch: 1,
            record: ControlRecord::LeaderChange {
                leader_id: 1,
                voters: vec![1],
                granting_voters: vec![1]
            }
        }
    );
    assert_eq!(
        out[3],
        RaftOutput::LeaderChanged {
            leader_id: Some(1),
            epoch: 1,
            next_offset: Some(1)
        }
    );
    // Nothing is committed until the control record is flushed.
    assert_eq!(c.high_watermark(), 0);
    let out = c.handle(RaftInput::Flushed { end_offset: 1 }, 0);
    assert_eq!(
        out,
        vec![RaftOutput::HighWatermarkAdvanced { high_watermark: 1 }]
    );
}

#[test]
fn single_voter_commits_appends_once_flushed() {
    let mut c = RaftCore::new(cfg(1, &[1]));
    start(&mut c, None, 0, 0);
    c.handle(RaftInput::Flushed { end_offset: 1 }, 0);
    let recs = vec![Bytes::from_static(b"a"), Bytes::from_static(b"b")];
    let out = c.handle(
        RaftInput::Append {
            records: recs.clone(),
        },
        0,
    );
    assert_eq!(
        out,
        vec![
            RaftOutput::AppendData {
                base_offset: 1,
                epoch: 1,
                records: recs
            },
            RaftOutput::Appended {
                base_offset: 1,
                last_offset: 2,
                epoch: 1
            }
        ]
    );
    assert_eq!(c.high_watermark(), 1);
    let out = c.handle(RaftInput::Flushed { end_offset: 3 }, 0);
    assert_eq!(
        out,
        vec![RaftOutput::HighWatermarkAdvanced { high_watermark: 3 }]
    );
}

#[test]
fn restart_bumps_the_epoch_past_file_and_log() {
    let mut c = RaftCore::new(cfg(1, &[1]));
    let persisted = ElectionState {
        epoch: 4,
        leader_id: Some(1),
        voted_id: None,
        voters: vec![1],
    };
    let out = start(&mut c, Some(persisted), 10, 6);
    // The log says epoch 6 was used even if the file says 4.
    assert_eq!(c.epoch(), 7);
    assert!(out.contains(&RaftOutput::AppendControl {
        base_offset: 10,
        epoch: 7,
        record: ControlRecord::LeaderChange {
            leader_id: 1,
            voters: vec![1],
            granting_voters: vec![1]
        }
    }));
    // Old entries commit together with the new epoch's first record.
    let out = c.handle(RaftInput::Flushed { end_offset: 11 }, 0);
    assert_eq!(
        out,
        vec![RaftOutput::HighWatermarkAdvanced { high_watermark: 11 }]
    );
}

#[test]
fn appends_are_rejected_when_not_leader() {
    let mut c = RaftCore::new(cfg(1, &[1, 2, 3]));
    start(&mut c, None, 0, 0);
    let out = c.handle(
        RaftInput::Append {
            records: vec![Bytes::new()],
        },
        0,
    );
    assert_eq!(
        out,
        vec![RaftOutput::AppendRejected {
            leader_id: None,
            epoch: 0
        }]
    );
}

#[test]
fn three_voters_elect_and_commit_by_majority() {
    let mut c = RaftCore::new(cfg(1, &[1, 2, 3]));
    start(&mut c, None, 0, 0);
    // Election timeout fires.
    let out = c.handle(RaftInput::Tick, 5_000);
    assert_eq!(c.epoch(), 1);
    let requests: Vec<_> = out
        .iter()
        .filter(|o| matches!(o, RaftOutput::SendVoteRequest { .. }))
        .collect();
    assert_eq!(requests.len(), 2);
    let out = c.handle(
        RaftInput::VoteAnswered {
            voter_id: 2,
            epoch: 1,
            granted: true,
        },
        5_001,
    );
    assert!(c.is_leader());
    assert!(out
        .iter()
        .any(|o| matches!(o, RaftOutput::AppendControl { base_offset: 0, .. })));
    c.handle(
        RaftInput::Append {
            records: vec![Bytes::new(); 4],
        },
        5_002,
    );
    // Our own flush is not a majority.
    assert!(c
        .handle(RaftInput::Flushed { end_offset: 5 }, 5_003)
        .is_empty());
    let out = c.handle(
        RaftInput::FollowerFetched {
            replica_id: 3,
            fetch_offset: 3,
        },
        5_004,
    );
    assert_eq!(
        out,
        vec![RaftOutput::HighWatermarkAdvanced { high_watermark: 3 }]
    );
    // Non-voters do not count.
    assert!(c
        .handle(
            RaftInput::FollowerFetched {
                replica_id: 9,
                fetch_offset: 5
            },
            5_005
        )
        .is_empty());
}

#[test]
fn votes_follow_epoch_and_log_rules() {
    let mut c = RaftCore::new(cfg(2, &[1, 2, 3]));
    start(&mut c, None, 10, 3);
    let ask = |c: &mut RaftCore, cand, epoch, last_epoch, last_offset| {
        c.handle(
            RaftInput::VoteRequested {
                candidate_id: cand,
                candidate_epoch: epoch,
                last_epoch,
                last_offset,
            },
            0,
        )
    };
    let granted = |out: &[RaftOutput]| {
        out.iter()
            .any(|o| matches!(o, RaftOutput::SendVoteResponse { granted: true, .. }))
    };
    // Stale epoch.
    assert!(!granted(&ask(&mut c, 1, 2, 3, 10)));
    // Shorter log.
    assert!(!granted(&ask(&mut c, 1, 4, 3, 9)));
    // Up to date: granted and persisted.
    let out = ask(&mut c, 3, 4, 3, 10);
    assert!(granted(&out));
    assert!(out
        .iter()
        .any(|o| matches!(o, RaftOutput::PersistElectionState(e) if e.voted_id == Some(3))));
    // One vote per epoch.
    assert!(!granted(&ask(&mut c, 1, 4, 5, 100)));
    assert!(granted(&ask(&mut c, 3, 4, 3, 10)));
}

#[test]
fn leader_steps_down_on_higher_epoch() {
    let mut c = RaftCore::new(cfg(1, &[1, 2, 3]));
    start(&mut c, None, 0, 0);
    c.handle(RaftInput::Tick, 5_000);
    c.handle(
        RaftInput::VoteAnswered {
            voter_id: 2,
            epoch: 1,
            granted: true,
        },
        5_000,
    );
    assert!(c.is_leader());
    let out = c.handle(
        RaftInput::VoteAnswered {
            voter_id: 3,
            epoch: 5,
            granted: false,
        },
        5_001,
    );
    assert!(!c.is_leader());
    assert!(out.contains(&RaftOutput::LeaderChanged {
        leader_id: None,
        epoch: 5,
        next_offset: None
    }));
    c.handle(
        RaftInput::LeaderDiscovered {
            leader_id: 3,
            epoch: 5,
        },
        5_002,
    );
    assert_eq!(c.leader_id(), Some(3));
}
