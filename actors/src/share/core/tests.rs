use kactor_protocol::errors::*;
use kactor_protocol::Uuid;

use super::partition::{RecordState, ACK_ACCEPT, ACK_GAP, ACK_REJECT, ACK_RELEASE, ACK_RENEW};
use super::*;

const LIMITS: Limits = Limits {
    lock_duration_ms: 30_000,
    delivery_count_limit: 3,
    max_in_flight: 100,
};

fn who<'a>(group: &'a str, member: &'a str) -> Requester<'a> {
    Requester { group, member }
}

fn tp() -> TopicIdPartition {
    (Uuid([7; 16]), 0)
}

fn ack(first: i64, last: i64, types: &[i8]) -> AckBatch {
    AckBatch {
        first_offset: first,
        last_offset: last,
        types: types.to_vec(),
    }
}

fn batch(base_offset: i64, last_offset: i64) -> LogBatch {
    LogBatch {
        base_offset,
        last_offset,
        deliver: true,
    }
}

fn range(first: i64, last: i64, delivery_count: i16) -> AcquiredRange {
    AcquiredRange {
        first_offset: first,
        last_offset: last,
        delivery_count,
    }
}

#[test]
fn acquires_whole_batches_up_to_max_records_and_never_twice() {
    let mut sp = SharePartition::new(0);
    let got = sp.acquire("a", &[(0, 4), (5, 9), (10, 14)], 6, &LIMITS, 0);
    // Batches are not split: 6 records asked, two batches of 5 acquired.
    assert_eq!(got, vec![range(0, 9, 1)]);
    // The same read by another member acquires only what is left.
    let got = sp.acquire("b", &[(0, 4), (5, 9), (10, 14)], 100, &LIMITS, 0);
    assert_eq!(got, vec![range(10, 14, 1)]);
    assert_eq!(sp.next_fetch_offset(), 15);
    assert_eq!(sp.acquired_count(), 15);
}

#[test]
fn accepted_prefix_moves_the_start_offset() {
    let mut sp = SharePartition::new(0);
    sp.acquire("a", &[(0, 9)], 100, &LIMITS, 0);
    sp.acknowledge("a", &[ack(3, 9, &[ACK_ACCEPT])], &LIMITS, 0)
        .unwrap();
    assert_eq!(sp.start_offset(), 0, "0..2 still acquired");
    sp.acknowledge(
        "a",
        &[ack(0, 2, &[ACK_ACCEPT, ACK_REJECT, ACK_ACCEPT])],
        &LIMITS,
        0,
    )
    .unwrap();
    assert_eq!(sp.start_offset(), 10);
    assert_eq!(sp.lag(10), 0);
}

#[test]
fn released_records_are_redelivered_with_a_higher_count_until_the_limit() {
    let mut sp = SharePartition::new(0);
    for delivery in 1..=3 {
        let got = sp.acquire("a", &[(0, 0)], 10, &LIMITS, 0);
        assert_eq!(got, vec![range(0, 0, delivery)], "delivery {delivery}");
        sp.acknowledge("a", &[ack(0, 0, &[ACK_RELEASE])], &LIMITS, 0)
            .unwrap();
    }
    // Third release at the limit (3) archives the record: nothing more to deliver.
    assert_eq!(sp.acquire("a", &[(0, 0)], 10, &LIMITS, 0), vec![]);
    assert_eq!(sp.start_offset(), 1);
}

#[test]
fn expired_locks_make_records_available_to_others() {
    let mut sp = SharePartition::new(5);
    sp.acquire("dead", &[(5, 7)], 10, &LIMITS, 1_000);
    assert_eq!(sp.next_deadline(), Some(31_000));
    assert_eq!(sp.expire_locks(&LIMITS, 30_999), 0);
    assert_eq!(sp.expire_locks(&LIMITS, 31_000), 3);
    assert_eq!(sp.next_fetch_offset(), 5);
    let got = sp.acquire("alive", &[(5, 7)], 10, &LIMITS, 31_000);
    assert_eq!(got, vec![range(5, 7, 2)]);
    // The dead member's late acknowledgement is refused, and changes nothing.
    let err = sp
        .acknowledge("dead", &[ack(5, 7, &[ACK_ACCEPT])], &LIMITS, 31_001)
        .unwrap_err();
    assert_eq!(err.0, INVALID_RECORD_STATE);
    assert!(
        matches!(sp.state_of(5), Some((RecordState::Acquired { member, .. }, 2)) if member == "alive")
    );
}

#[test]
fn acknowledgements_are_all_or_nothing() {
    let mut sp = SharePartition::new(0);
    sp.acquire("a", &[(0, 4)], 10, &LIMITS, 0);
    // 5..6 are b's: nothing of a's request applies.
    sp.acquire("b", &[(5, 6)], 10, &LIMITS, 0);
    let err = sp
        .acknowledge(
            "a",
            &[ack(0, 1, &[ACK_ACCEPT]), ack(5, 6, &[ACK_ACCEPT])],
            &LIMITS,
            0,
        )
        .unwrap_err();
    assert_eq!(
        err,
        (
            INVALID_RECORD_STATE,
            "Member is not the owner of batch record".to_string()
        )
    );
    assert_eq!(sp.start_offset(), 0);
    assert_eq!(sp.acquired_count(), 7);
    // Malformed batches are refused before they reach the share-partition.
    for bad in [
        vec![ack(3, 2, &[ACK_ACCEPT])],
        vec![ack(0, 2, &[1, 1])],
        vec![ack(0, 0, &[9])],
        vec![ack(0, 0, &[])],
        vec![ack(2, 3, &[1]), ack(0, 1, &[1])],
        vec![ack(0, 0, &[ACK_RENEW])],
    ] {
        assert!(
            !partition::valid_ack_batches(&bad, ACK_RENEW, false),
            "{bad:?}"
        );
    }
    assert!(partition::valid_ack_batches(
        &[ack(0, 1, &[1, 2]), ack(2, 2, &[3])],
        ACK_REJECT,
        false
    ));
    // Past what was ever acquired: INVALID_REQUEST.
    assert_eq!(
        sp.acknowledge("a", &[ack(9, 12, &[1])], &LIMITS, 0)
            .unwrap_err()
            .0,
        INVALID_REQUEST
    );
    // Acknowledging twice: the second finds the record no longer acquired. Below the start
    // offset an acknowledgement is simply done with.
    sp.acknowledge(
        "a",
        &[ack(0, 0, &[ACK_ACCEPT]), ack(3, 3, &[ACK_ACCEPT])],
        &LIMITS,
        0,
    )
    .unwrap();
    assert_eq!(sp.start_offset(), 1);
    sp.acknowledge("a", &[ack(0, 0, &[ACK_ACCEPT])], &LIMITS, 0)
        .unwrap();
    assert_eq!(
        sp.acknowledge(
            "a",
            &[ack(1, 1, &[ACK_ACCEPT]), ack(3, 3, &[ACK_ACCEPT])],
            &LIMITS,
            0
        )
        .unwrap_err(),
        (
            INVALID_RECORD_STATE,
            "The batch cannot be acknowledged. The batch is not in the acquired state.".to_string()
        )
    );
}

#[test]
fn renew_extends_the_lock_and_gaps_archive() {
    let mut sp = SharePartition::new(0);
    sp.acquire("a", &[(0, 2)], 10, &LIMITS, 0);
    sp.acknowledge(
        "a",
        &[ack(0, 2, &[ACK_RENEW, ACK_GAP, ACK_RENEW])],
        &LIMITS,
        20_000,
    )
    .unwrap();
    assert_eq!(sp.expire_locks(&LIMITS, 30_000), 0);
    assert_eq!(sp.next_deadline(), Some(50_000));
    assert!(matches!(sp.state_of(1), Some((RecordState::Archived, 1))));
}

#[test]
fn the_window_bounds_what_is_acquired() {
    let limits = Limits {
        max_in_flight: 4,
        ..LIMITS
    };
    let mut sp = SharePartition::new(0);
    let got = sp.acquire("a", &[(0, 9)], 100, &limits, 0);
    assert_eq!(got, vec![range(0, 3, 1)]);
    assert!(!sp.has_acquirable(10, &limits));
    sp.acknowledge("a", &[ack(0, 1, &[ACK_ACCEPT])], &limits, 0)
        .unwrap();
    assert!(sp.has_acquirable(10, &limits));
    assert_eq!(
        sp.acquire("b", &[(4, 9)], 100, &limits, 0),
        vec![range(4, 5, 1)]
    );
}

#[test]
fn holes_between_batches_and_a_moved_log_start_are_skipped() {
    let mut sp = SharePartition::new(0);
    // Compaction removed 3..5.
    assert_eq!(
        sp.acquire("a", &[(0, 2), (6, 7)], 100, &LIMITS, 0),
        vec![range(0, 2, 1), range(6, 7, 1)]
    );
    sp.acknowledge("a", &[ack(0, 2, &[ACK_ACCEPT])], &LIMITS, 0)
        .unwrap();
    assert_eq!(sp.start_offset(), 6, "the hole counts as archived");
    let mut sp = SharePartition::new(0);
    sp.on_log_start(50);
    assert_eq!((sp.start_offset(), sp.next_fetch_offset()), (50, 50));
}

#[test]
fn sessions_open_continue_and_close() {
    let mut m = ShareManager::new(2);
    let parts = vec![(tp(), vec![])];
    let plan = m
        .begin_fetch(who("g", "m1"), 0, &parts, &[], &LIMITS, 0)
        .unwrap();
    assert_eq!(plan.reads, vec![(tp(), None)], "no state yet");
    let read = ReadBatches {
        tp: tp(),
        initial_offset: Some(0),
        log_start_offset: 0,
        batches: vec![batch(0, 4)],
    };
    let got = m.acquire("g", "m1", &[read], 500, &LIMITS, 0);
    assert_eq!(got, vec![(tp(), vec![range(0, 4, 1)])]);
    // Epoch 1 continues with the session's partitions and piggybacked acknowledgements.
    let acks = vec![(tp(), vec![ack(0, 4, &[ACK_ACCEPT])])];
    let plan = m
        .begin_fetch(who("g", "m1"), 1, &acks, &[], &LIMITS, 1)
        .unwrap();
    assert_eq!(plan.acks, vec![(tp(), Ok(()))]);
    assert_eq!(plan.reads, vec![(tp(), Some(5))]);
    // Wrong epochs and unknown sessions.
    let e = m
        .begin_fetch(who("g", "m1"), 5, &[], &[], &LIMITS, 2)
        .unwrap_err();
    assert_eq!(e.0, INVALID_SHARE_SESSION_EPOCH);
    let e = m
        .begin_fetch(who("g", "m9"), 1, &[], &[], &LIMITS, 2)
        .unwrap_err();
    assert_eq!(e.0, SHARE_SESSION_NOT_FOUND);
    let e = m
        .acknowledge(who("g", "m1"), 0, &[], &LIMITS, 2)
        .unwrap_err();
    assert_eq!(e.0, INVALID_SHARE_SESSION_EPOCH);
    // Acknowledgements on the opening epoch are refused.
    let e = m
        .begin_fetch(who("g", "m2"), 0, &acks, &[], &LIMITS, 2)
        .unwrap_err();
    assert_eq!(e.0, INVALID_REQUEST);
    // The limit of sessions.
    m.begin_fetch(who("g", "m2"), 0, &parts, &[], &LIMITS, 2)
        .unwrap();
    let e = m
        .begin_fetch(who("g", "m3"), 0, &parts, &[], &LIMITS, 2)
        .unwrap_err();
    assert_eq!(e.0, SHARE_SESSION_LIMIT_REACHED);
}

/// A manager where member m1 of group g acquired offsets 0-9 of `tp()`, and what it read.
fn ten_acquired_by_m1() -> (ShareManager, ReadBatches) {
    let mut m = ShareManager::new(10);
    m.begin_fetch(who("g", "m1"), 0, &[(tp(), vec![])], &[], &LIMITS, 0)
        .unwrap();
    let read = ReadBatches {
        tp: tp(),
        initial_offset: Some(0),
        log_start_offset: 0,
        batches: vec![batch(0, 9)],
    };
    m.acquire("g", "m1", std::slice::from_ref(&read), 500, &LIMITS, 0);
    (m, read)
}

#[test]
fn closing_a_session_releases_its_records() {
    let (mut m, read) = ten_acquired_by_m1();
    // Accept half, close: the other half is available to the next member at once.
    let acks = vec![(tp(), vec![ack(0, 4, &[ACK_ACCEPT])])];
    let closed = m
        .acknowledge(who("g", "m1"), -1, &acks, &LIMITS, 1)
        .unwrap();
    assert_eq!(closed, vec![(tp(), Ok(()))]);
    m.begin_fetch(who("g", "m2"), 0, &[(tp(), vec![])], &[], &LIMITS, 2)
        .unwrap();
    let got = m.acquire("g", "m2", &[read], 500, &LIMITS, 2);
    assert_eq!(got, vec![(tp(), vec![range(5, 9, 2)])]);
    // Idle sessions go, with their records.
    assert_eq!(m.tick(&LIMITS, 3, 3), 5);
    assert_eq!(m.session_count(), 0);
}

#[test]
fn a_group_without_sessions_is_dropped_once_all_is_written() {
    let (mut m, _) = ten_acquired_by_m1();
    let key = ShareKey::new("g", tp());
    // A session: kept.
    assert_eq!(m.drop_idle_groups(), 0);
    let acks = vec![(tp(), vec![ack(0, 9, &[ACK_ACCEPT])])];
    m.acknowledge(who("g", "m1"), -1, &acks, &LIMITS, 1)
        .unwrap();
    // No session, but the acknowledgement is not written yet: kept.
    assert_eq!(m.session_count(), 0);
    assert_eq!(m.drop_idle_groups(), 0);
    // Being written: kept until the write ends.
    let view = m.persist_view(&key).expect("view");
    assert_eq!(view.start_offset, 10);
    assert_eq!(m.drop_idle_groups(), 0);
    m.written(&key);
    assert_eq!(m.drop_idle_groups(), 1);
    assert!(m.partition(&key).is_none());
}

#[test]
fn acknowledging_with_nothing_in_flight_is_not_found() {
    // Kafka 4.4 answers a share-partition with an empty cache this way, wherever the offsets.
    let mut sp = SharePartition::new(2);
    assert_eq!(
        sp.acknowledge("a", &[ack(100, 101, &[ACK_ACCEPT])], &LIMITS, 0),
        Err((
            INVALID_RECORD_STATE,
            "Batch record not found. The request batch offsets are not found in the cache."
                .to_string()
        ))
    );
}

#[test]
fn batches_not_for_delivery_are_archived_in_log_order() {
    // read_committed: 0..2 committed, 3..4 aborted, 5 its marker, 6..7 committed.
    let mut sp = SharePartition::new(0);
    let batches = [
        batch(0, 2),
        LogBatch {
            base_offset: 3,
            last_offset: 4,
            deliver: false,
        },
        LogBatch {
            base_offset: 5,
            last_offset: 5,
            deliver: false,
        },
        batch(6, 7),
    ];
    // Two records asked: the first batch is acquired whole; what follows that is not for
    // delivery is archived on the way (it never will be), the next data batch waits.
    let got = sp.acquire_batches("a", &batches, 2, &LIMITS, 0);
    assert_eq!(got, vec![range(0, 2, 1)]);
    assert_eq!(sp.next_fetch_offset(), 6);
    sp.acknowledge("a", &[ack(0, 2, &[ACK_ACCEPT])], &LIMITS, 0)
        .unwrap();
    assert_eq!(
        sp.start_offset(),
        6,
        "the aborted records and the marker are done with"
    );
    let got = sp.acquire_batches("b", &batches[3..], 10, &LIMITS, 0);
    assert_eq!(got, vec![range(6, 7, 1)]);
}

#[test]
fn kept_state_round_trips_and_acquired_records_are_kept_as_available() {
    use crate::share::coordinator::core::StateBatch;
    let sb = |first, last, state, count| StateBatch {
        first_offset: first,
        last_offset: last,
        delivery_state: state,
        delivery_count: count,
    };
    let mut sp = SharePartition::new(0);
    sp.acquire("a", &[(0, 9)], 100, &LIMITS, 0);
    sp.acknowledge(
        "a",
        &[ack(0, 1, &[ACK_ACCEPT]), ack(4, 4, &[ACK_REJECT])],
        &LIMITS,
        0,
    )
    .unwrap();
    sp.acknowledge("a", &[ack(5, 5, &[ACK_RELEASE])], &LIMITS, 0)
        .unwrap();
    // 0-1 accepted moved the start; 2-3 and 6-9 still acquired (kept as available, once
    // delivered), 4 archived, 5 released: 5-9 make one range.
    let kept = sp.state_batches();
    assert_eq!(sp.start_offset(), 2);
    assert_eq!(kept, vec![sb(2, 3, 0, 1), sb(4, 4, 4, 1), sb(5, 9, 0, 1)]);
    let back = SharePartition::from_state(2, &kept);
    assert_eq!(back.start_offset(), 2);
    assert_eq!(back.end_offset(), 10);
    assert_eq!(back.next_fetch_offset(), 2);
    assert_eq!(back.state_of(4), Some((&RecordState::Archived, 1)));
    assert_eq!(back.state_of(7), Some((&RecordState::Available, 1)));
    // A kept window whose prefix is done moves the start past it; a gap inside the ranges
    // is available, never delivered.
    let back = SharePartition::from_state(0, &[sb(0, 2, 2, 1), sb(5, 6, 4, 2)]);
    assert_eq!(back.start_offset(), 3);
    assert_eq!(back.state_of(3), Some((&RecordState::Available, 0)));
    assert_eq!(back.end_offset(), 7);
}

#[test]
fn changes_mark_share_partitions_for_writing() {
    let mut m = ShareManager::new(10);
    let g = who("g", "a");
    m.begin_fetch(g, OPEN_EPOCH, &[(tp(), vec![])], &[], &LIMITS, 0)
        .unwrap();
    let read = ReadBatches {
        tp: tp(),
        initial_offset: Some(0),
        log_start_offset: 0,
        batches: vec![batch(0, 4)],
    };
    m.acquire("g", "a", std::slice::from_ref(&read), 100, &LIMITS, 0);
    // A new share-partition is written (its start offset), acquisition alone is not.
    let key = ShareKey::new("g", tp());
    assert_eq!(m.take_dirty(), vec![key.clone()]);
    m.acquire("g", "a", &[read], 100, &LIMITS, 0);
    assert!(m.take_dirty().is_empty());
    m.acknowledge(g, 1, &[(tp(), vec![ack(0, 1, &[ACK_ACCEPT])])], &LIMITS, 0)
        .unwrap();
    let view = m.persist_view(&key).unwrap();
    assert_eq!((view.start_offset, view.state_epoch), (2, 0));
    assert!(m.take_dirty().is_empty(), "persist_view clears the mark");
    // Expired locks are written too; a restored share-partition keeps its state epoch.
    m.tick(&LIMITS, -1, LIMITS.lock_duration_ms + 1);
    assert_eq!(m.take_dirty(), vec![key]);
    let other = ShareKey::new("h", tp());
    assert_eq!(m.restore(other.clone(), 4, 7, &[]), 7);
    assert_eq!(m.persist_view(&other).unwrap().state_epoch, 4);
}
