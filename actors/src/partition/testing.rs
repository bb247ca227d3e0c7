//! Test helpers: hand-built record batches v2 (uncompressed) for the partition's tests and the
//! integration tests under `actors/tests/`. Not used on any serving path.

use bytes::{BufMut, Bytes, BytesMut};

fn put_varint(buf: &mut BytesMut, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        buf.put_u8((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
    buf.put_u8(z as u8);
}

/// An uncompressed v2 batch of `values` (null keys), timestamps `base_timestamp + i`, base
/// offset 0, valid CRC.
pub fn batch(values: &[&[u8]], base_timestamp: i64) -> Bytes {
    batch_with(values, base_timestamp, 0)
}

/// Like [`batch`], with raw attributes (e.g. a compression codec id, 0x20 for control).
pub fn batch_with(values: &[&[u8]], base_timestamp: i64, attributes: i16) -> Bytes {
    let mut records = BytesMut::new();
    for (i, v) in values.iter().enumerate() {
        let mut body = BytesMut::new();
        body.put_i8(0);
        put_varint(&mut body, i as i64); // timestamp delta
        put_varint(&mut body, i as i64); // offset delta
        put_varint(&mut body, -1); // null key
        put_varint(&mut body, v.len() as i64);
        body.put_slice(v);
        put_varint(&mut body, 0); // no headers
        put_varint(&mut records, body.len() as i64);
        records.put_slice(&body);
    }
    let n = values.len() as i32;
    let mut b = BytesMut::new();
    b.put_i64(0);
    b.put_i32((49 + records.len()) as i32);
    b.put_i32(-1);
    b.put_i8(2);
    b.put_u32(0);
    b.put_i16(attributes);
    b.put_i32(n - 1);
    b.put_i64(base_timestamp);
    b.put_i64(base_timestamp + (n as i64 - 1).max(0));
    b.put_i64(-1);
    b.put_i16(-1);
    b.put_i32(-1);
    b.put_i32(n);
    b.put_slice(&records);
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b.freeze()
}

/// A BecomeLeader change for node 1, the only replica and ISR member, without overrides.
pub fn leader_change(
    topic: &str,
    topic_id: kactor_protocol::Uuid,
    partition: i32,
    leader_epoch: i32,
) -> super::messages::PartitionChange {
    super::messages::PartitionChange {
        kind: super::messages::PartitionChangeKind::BecomeLeader,
        topic: topic.into(),
        topic_id,
        partition,
        leader: 1,
        leader_epoch,
        partition_epoch: 0,
        replicas: vec![1],
        isr: vec![1],
        config_overrides: std::collections::BTreeMap::new(),
    }
}

/// Node 1's ReplicaManagerActor over disk logs in `dirs` (what the broker runs), started.
pub fn disk_registry(dirs: &[std::path::PathBuf]) -> actix::Addr<super::ReplicaManagerActor> {
    use actix::Actor;
    let empty = std::collections::BTreeMap::new();
    let factory = super::DiskLogFactory::load(dirs, &empty).expect("log dirs load");
    super::ReplicaManagerActor::new(1, empty, Box::new(factory), None, None).start()
}

/// Node 1's ReplicaManagerActor over in-memory logs, started; `purgatory` gets its partitions'
/// high-watermark and leadership notices.
pub fn memory_registry(
    purgatory: Option<super::PurgatoryLink>,
) -> actix::Addr<super::ReplicaManagerActor> {
    use actix::Actor;
    let factory = super::MemoryLogFactory::default();
    super::ReplicaManagerActor::new(1, Default::default(), Box::new(factory), None, purgatory)
        .start()
}

/// Wall-clock milliseconds since the epoch (batch timestamps that don't trigger time rolls).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as i64
}
