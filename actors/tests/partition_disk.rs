//! The partition actors over the real storage engine in a temp dir: appends land in Kafka-format
//! segments, reads return file slices, a clean shutdown writes the marker, and a restart serves
//! the same records.

use std::collections::BTreeMap;

use actix::Actor;
use kactor_actors::partition::core::{
    IsolationLevel, LogSlice, ReadParams, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP,
};
use kactor_actors::partition::messages::*;
use kactor_actors::partition::registry::CheckpointLogDirs;
use kactor_actors::partition::testing::batch;
use kactor_actors::partition::{DiskLogFactory, ReplicaManagerActor};
use kactor_protocol::errors;
use kactor_protocol::records::BatchHeader;
use kactor_protocol::Uuid;

fn leader(topic: &str, partition: i32, epoch: i32) -> PartitionChange {
    PartitionChange {
        kind: PartitionChangeKind::BecomeLeader,
        topic: topic.into(),
        topic_id: Uuid([9; 16]),
        partition,
        leader: 1,
        leader_epoch: epoch,
        partition_epoch: 0,
        replicas: vec![1],
        isr: vec![1],
        config_overrides: BTreeMap::new(),
    }
}

fn read_all() -> ReadRecords {
    ReadRecords {
        scope: Default::default(),
        params: ReadParams {
            fetch_offset: 0,
            max_bytes: 1 << 20,
            min_one_batch: true,
            isolation: IsolationLevel::ReadUncommitted,
            current_leader_epoch: -1,
            last_fetched_epoch: -1,
            replica_id: -1,
        },
        isr_eligible: false,
        replica_epoch: -1,
    }
}

fn offsets(slice: &LogSlice) -> Vec<i64> {
    let bytes = slice.to_bytes().unwrap();
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let h = BatchHeader::parse(&bytes[pos..]).unwrap();
        out.push(h.base_offset);
        pos += h.total_size();
    }
    out
}

#[actix_rt::test]
async fn appends_survive_a_clean_restart() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = vec![dir.path().to_path_buf()];
    {
        let factory = DiskLogFactory::load(&dirs, &BTreeMap::new()).unwrap();
        let registry =
            ReplicaManagerActor::new(1, BTreeMap::new(), Box::new(factory), None, None).start();
        registry
            .send(ApplyPartitionChanges {
                changes: vec![leader("events", 0, 1)],
            })
            .await
            .unwrap();
        let reader = registry.send(SubscribePartitionTable).await.unwrap();
        let p = reader.borrow().get("events", 0).unwrap().clone();
        assert_eq!(p.log_dir, dir.path().display().to_string());
        for i in 0..3 {
            let out = p
                .addr
                .send(AppendRecords {
                    records: batch(&[b"v1", b"v2"], 1000 + i),
                    required_acks: 1,
                })
                .await
                .unwrap()
                .unwrap();
            assert_eq!(out.base_offset, 2 * i);
        }
        let r = p.addr.send(read_all()).await.unwrap().unwrap();
        assert!(
            matches!(r.records, LogSlice::File { .. }),
            "reads are zero-copy file slices"
        );
        assert_eq!(offsets(&r.records), vec![0, 2, 4]);
        let e = p
            .addr
            .send(GetOffsetForTimestamp {
                timestamp: 1001,
                isolation: Some(IsolationLevel::ReadUncommitted),
                current_leader_epoch: -1,
            })
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(e.offset, 1, "record-level timestamp lookup");
        registry.send(CheckpointLogDirs).await.unwrap();
        assert!(dir.path().join("recovery-point-offset-checkpoint").exists());
        assert!(dir
            .path()
            .join("events-0")
            .join("00000000000000000000.log")
            .exists());
        assert!(dir
            .path()
            .join("events-0")
            .join("partition.metadata")
            .exists());
        registry.send(ShutdownReplicas).await.unwrap().unwrap();
        assert!(dir.path().join(".kafka_cleanshutdown").exists());
    }
    let factory = DiskLogFactory::load(&dirs, &BTreeMap::new()).unwrap();
    assert_eq!(factory.unclaimed().len(), 1);
    let registry =
        ReplicaManagerActor::new(1, BTreeMap::new(), Box::new(factory), None, None).start();
    registry
        .send(ApplyPartitionChanges {
            changes: vec![leader("events", 0, 2)],
        })
        .await
        .unwrap();
    let reader = registry.send(SubscribePartitionTable).await.unwrap();
    let p = reader.borrow().get("events", 0).unwrap().clone();
    let r = p.addr.send(read_all()).await.unwrap().unwrap();
    assert_eq!(offsets(&r.records), vec![0, 2, 4]);
    assert_eq!(r.high_watermark, 6);
    let latest = p
        .addr
        .send(GetOffsetForTimestamp {
            timestamp: LATEST_TIMESTAMP,
            isolation: Some(IsolationLevel::ReadUncommitted),
            current_leader_epoch: 2,
        })
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(latest.offset, 6);
    let out = p
        .addr
        .send(AppendRecords {
            records: batch(&[b"v3"], 2000),
            required_acks: -1,
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out.base_offset, 6);
    // DeleteRecords moves the log start offset; earliest follows.
    assert_eq!(
        p.addr
            .send(DeleteRecordsBefore { offset: 4 })
            .await
            .unwrap()
            .unwrap(),
        4
    );
    let earliest = p
        .addr
        .send(GetOffsetForTimestamp {
            timestamp: EARLIEST_TIMESTAMP,
            isolation: None,
            current_leader_epoch: -1,
        })
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(earliest.offset, 4);
    let e = p.addr.send(read_all()).await.unwrap().unwrap_err();
    assert_eq!(e.code(), errors::OFFSET_OUT_OF_RANGE);
    let end = p
        .addr
        .send(GetEndOffsetForEpoch {
            current_leader_epoch: -1,
            leader_epoch: 1,
            fetch_only_from_leader: true,
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!((end.epoch, end.end_offset), (1, 6));

    // Deleting the topic renames its directory away.
    let mut del = leader("events", 0, 2);
    del.kind = PartitionChangeKind::Delete;
    registry
        .send(ApplyPartitionChanges { changes: vec![del] })
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(!dir.path().join("events-0").exists());
}

#[actix_rt::test]
async fn log_manager_applies_retention_and_shuts_down_cleanly() {
    use kactor_actors::partition::log_manager::RunRetentionNow;
    use kactor_actors::partition::startup::{start_partitions, PartitionLayerConfig};
    let dir = tempfile::tempdir().unwrap();
    let cfg = PartitionLayerConfig::new(1, vec![dir.path().to_path_buf()], BTreeMap::new());
    let layer = start_partitions(cfg, None).unwrap();
    let mut change = leader("old", 0, 0);
    change.config_overrides = [("retention.ms".to_string(), "60000".to_string())].into();
    layer
        .registry
        .send(ApplyPartitionChanges {
            changes: vec![change],
        })
        .await
        .unwrap();
    let p = layer
        .apis
        .partitions
        .borrow()
        .get("old", 0)
        .unwrap()
        .clone();
    // Records stamped in 1970: far past retention.ms.
    p.addr
        .send(AppendRecords {
            records: batch(&[b"a", b"b"], 1_000),
            required_acks: 1,
        })
        .await
        .unwrap()
        .unwrap();
    layer.log_manager.send(RunRetentionNow).await.unwrap();
    // Retention runs in the partition actor; DescribeReplica queues behind it.
    let info = p.addr.send(DescribeReplica).await.unwrap();
    assert_eq!((info.log_start_offset, info.log_end_offset), (2, 2));
    layer.shutdown().await.unwrap();
    assert!(dir.path().join(".kafka_cleanshutdown").exists());
}

#[actix_rt::test]
async fn flush_messages_fsyncs_off_the_actor_and_advances_the_recovery_point() {
    let dir = tempfile::tempdir().unwrap();
    let factory = DiskLogFactory::load(&[dir.path().to_path_buf()], &BTreeMap::new()).unwrap();
    let registry =
        ReplicaManagerActor::new(1, BTreeMap::new(), Box::new(factory), None, None).start();
    let mut change = leader("durable", 0, 0);
    change.config_overrides = [("flush.messages".to_string(), "1".to_string())].into();
    registry
        .send(ApplyPartitionChanges {
            changes: vec![change],
        })
        .await
        .unwrap();
    let reader = registry.send(SubscribePartitionTable).await.unwrap();
    let p = reader.borrow().get("durable", 0).unwrap().clone();
    p.addr
        .send(AppendRecords {
            records: batch(&[b"x", b"y"], 1),
            required_acks: 1,
        })
        .await
        .unwrap()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let info = p.addr.send(DescribeReplica).await.unwrap();
        if info.recovery_point == 2 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "recovery point stuck at {}",
            info.recovery_point
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    // Without flush.messages nothing is fsynced on append (Kafka's default leaves it to the OS).
    registry
        .send(ApplyPartitionChanges {
            changes: vec![leader("lazy", 0, 0)],
        })
        .await
        .unwrap();
    let q = reader.borrow().get("lazy", 0).unwrap().clone();
    q.addr
        .send(AppendRecords {
            records: batch(&[b"x"], 1),
            required_acks: 1,
        })
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert_eq!(
        q.addr.send(DescribeReplica).await.unwrap().recovery_point,
        0
    );
    // A forced flush (shutdown path) does it.
    q.addr.send(FlushTick { force: true }).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert_eq!(
        q.addr.send(DescribeReplica).await.unwrap().recovery_point,
        1
    );
}

/// Two partitions' batches in one buffer, as a multi-partition produce request decodes: each
/// partition's slice shares the buffer with the other, so the leader writes a rewritten copy
/// of the 61-byte header and the request's own bytes after it (one vectored write). On disk
/// each batch must be exactly the producer's batch with the assigned base offset and leader
/// epoch, CRC still valid, and the request buffer itself left untouched.
#[actix_rt::test]
async fn batches_sharing_one_request_buffer_are_written_with_assigned_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = vec![dir.path().to_path_buf()];
    let factory = DiskLogFactory::load(&dirs, &BTreeMap::new()).unwrap();
    let registry =
        ReplicaManagerActor::new(1, BTreeMap::new(), Box::new(factory), None, None).start();
    registry
        .send(ApplyPartitionChanges {
            changes: vec![leader("multi", 0, 4), leader("multi", 1, 4)],
        })
        .await
        .unwrap();
    let reader = registry.send(SubscribePartitionTable).await.unwrap();
    let p0 = reader.borrow().get("multi", 0).unwrap().clone();
    let p1 = reader.borrow().get("multi", 1).unwrap().clone();
    // Partition 0 already holds 3 records, so its next batch starts at offset 3.
    p0.addr
        .send(AppendRecords {
            records: batch(&[b"x", b"y", b"z"], 10),
            required_acks: 1,
        })
        .await
        .unwrap()
        .unwrap();

    let a = batch(&[b"first", b"second"], 1000);
    let b = batch(&[&[5u8; 2000][..]], 2000);
    let mut frame = a.to_vec();
    frame.extend_from_slice(&b);
    let frame = bytes::Bytes::from(frame);
    let (sa, sb) = (frame.slice(..a.len()), frame.slice(a.len()..));
    let (r0, r1) = futures_util::future::join(
        p0.addr.send(AppendRecords {
            records: sa,
            required_acks: -1,
        }),
        p1.addr.send(AppendRecords {
            records: sb,
            required_acks: -1,
        }),
    )
    .await;
    assert_eq!(r0.unwrap().unwrap().base_offset, 3);
    assert_eq!(r1.unwrap().unwrap().base_offset, 0);
    assert_eq!(
        &frame[..a.len()],
        &a[..],
        "the request buffer is not written to"
    );
    assert_eq!(&frame[a.len()..], &b[..]);

    let expect = |original: &bytes::Bytes, base_offset: i64| {
        let mut e = original.to_vec();
        e[0..8].copy_from_slice(&base_offset.to_be_bytes());
        e[12..16].copy_from_slice(&4i32.to_be_bytes());
        e
    };
    let on_disk = |p: &kactor_actors::partition::HostedReplica| {
        let p = p.addr.clone();
        async move {
            let r = p.send(read_all()).await.unwrap().unwrap();
            r.records.to_bytes().unwrap()
        }
    };
    let all0 = on_disk(&p0).await;
    let first_len = BatchHeader::parse(&all0).unwrap().total_size();
    assert_eq!(&all0[first_len..], &expect(&a, 3)[..]);
    kactor_protocol::records::verify_crc(&all0[first_len..]).unwrap();
    let all1 = on_disk(&p1).await;
    assert_eq!(&all1[..], &expect(&b, 0)[..]);
    kactor_protocol::records::verify_crc(&all1).unwrap();
    let e = p1
        .addr
        .send(GetEndOffsetForEpoch {
            current_leader_epoch: -1,
            leader_epoch: 4,
            fetch_only_from_leader: true,
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!((e.epoch, e.end_offset), (4, 1));
}
