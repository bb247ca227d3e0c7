//! Metadata snapshots on disk, in Kafka's `.checkpoint` format (KIP-630): a file
//! `<end offset, 20 digits>-<epoch, 10 digits>.checkpoint` in the `__cluster_metadata-0`
//! directory, holding record batches numbered from offset 0 with the snapshot's epoch as their
//! leader epoch: first a control batch with the SnapshotHeaderRecord (and, under kraft.version
//! 1, the KRaftVersionRecord and VotersRecord in effect), then data batches with the metadata
//! records, then a control batch with the SnapshotFooterRecord. `kafka-metadata-shell
//! --snapshot` and `kafka-dump-log --cluster-metadata-decoder` read these files.
//!
//! Writes go to `<id>.checkpoint.part`, are fsynced, and renamed (then the directory is
//! fsynced): a crash leaves either no snapshot or a whole one, and a `.part` or `.deleted`
//! file found at start-up is removed, as Kafka's `recoverSnapshots` does.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use kactor_protocol::metadata::{SnapshotFooterRecord, SnapshotHeaderRecord};
use kactor_protocol::records::{BatchBuilder, ControlRecordType, RecordError};
use kactor_protocol::{Decode, Encode, Writer};

use super::batch::{control_records, decode_batches, encode_control_record};
use super::core::rpc::ControlRecord;
use super::core::types::{OffsetAndEpoch, VoterSet};

pub const SUFFIX: &str = ".checkpoint";
pub const PARTIAL_SUFFIX: &str = ".checkpoint.part";
pub const DELETED_SUFFIX: &str = ".checkpoint.deleted";
/// The SnapshotHeader/Footer record version Kafka 4.4 writes.
const HEADER_FOOTER_VERSION: i16 = 0;
/// Data batches are cut at this many bytes of record values (Kafka's snapshot writer cuts at
/// its max batch size the same way; the reader does not care where).
const MAX_BATCH_VALUE_BYTES: usize = 1024 * 1024;

/// Kafka's `Snapshots.filenameFromSnapshotId` plus the suffix.
pub fn file_name(id: OffsetAndEpoch) -> String {
    format!("{:020}-{:010}{SUFFIX}", id.offset, id.epoch)
}

pub fn path(dir: &Path, id: OffsetAndEpoch) -> PathBuf {
    dir.join(file_name(id))
}

/// What a file in the metadata partition directory is, snapshot-wise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotFileKind {
    Complete,
    Partial,
    Deleted,
}

/// Kafka's `Snapshots.parse`: the id and kind of a snapshot file name, None for other files.
pub fn parse_file_name(name: &str) -> Option<(OffsetAndEpoch, SnapshotFileKind)> {
    let (stem, kind) = if let Some(s) = name.strip_suffix(PARTIAL_SUFFIX) {
        (s, SnapshotFileKind::Partial)
    } else if let Some(s) = name.strip_suffix(DELETED_SUFFIX) {
        (s, SnapshotFileKind::Deleted)
    } else {
        (name.strip_suffix(SUFFIX)?, SnapshotFileKind::Complete)
    };
    let offset = stem.get(..20)?.parse().ok()?;
    if stem.get(20..21)? != "-" {
        return None;
    }
    let epoch = stem.get(21..31)?.parse().ok()?;
    Some((OffsetAndEpoch::new(offset, epoch), kind))
}

/// The snapshots kept in `dir`, ascending, with their sizes. Partial and deleted files, and
/// snapshots below `log_start_offset`, are removed (Kafka's `recoverSnapshots`).
pub fn recover(dir: &Path, log_start_offset: i64) -> io::Result<Vec<(OffsetAndEpoch, u64)>> {
    let mut kept = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let Some((id, kind)) = parse_file_name(&name) else {
            continue;
        };
        if kind != SnapshotFileKind::Complete || id.offset < log_start_offset {
            fs::remove_file(entry.path())?;
            tracing::info!(file = %name, "deleted an unneeded metadata snapshot file");
        } else {
            kept.push((id, entry.metadata()?.len()));
        }
    }
    kept.sort_by_key(|(id, _)| (id.offset, id.epoch));
    Ok(kept)
}

/// The snapshot's bytes: header batch, data batches, footer batch.
pub fn encode(
    id: OffsetAndEpoch,
    last_contained_timestamp_ms: i64,
    now_ms: i64,
    raft_records: &[ControlRecord],
    values: &[Bytes],
) -> Result<Vec<u8>, RecordError> {
    let mut out = Vec::new();
    let mut next = 0i64;
    let control = |base: i64, records: &[(ControlRecordType, Bytes)]| {
        let mut b = BatchBuilder::new(base)
            .partition_leader_epoch(id.epoch)
            .control(true);
        for (kind, value) in records {
            b.append(now_ms, Some(&kind.encode_key()), Some(value), &[])?;
        }
        b.build()
    };
    let mut header = vec![(
        ControlRecordType::SnapshotHeader,
        message(&SnapshotHeaderRecord {
            version: HEADER_FOOTER_VERSION,
            last_contained_log_timestamp: last_contained_timestamp_ms,
            ..Default::default()
        })?,
    )];
    for r in raft_records {
        header.push(encode_control_record(r)?);
    }
    out.extend_from_slice(&control(next, &header)?);
    next += header.len() as i64;
    let mut rest = values;
    while !rest.is_empty() {
        let mut size = 0;
        let n = rest
            .iter()
            .take_while(|v| {
                size += v.len();
                size <= MAX_BATCH_VALUE_BYTES
            })
            .count()
            .max(1);
        let mut b = BatchBuilder::new(next).partition_leader_epoch(id.epoch);
        for v in &rest[..n] {
            b.append(now_ms, None, Some(v), &[])?;
        }
        out.extend_from_slice(&b.build()?);
        next += n as i64;
        rest = &rest[n..];
    }
    let footer = message(&SnapshotFooterRecord {
        version: HEADER_FOOTER_VERSION,
        ..Default::default()
    })?;
    out.extend_from_slice(&control(
        next,
        &[(ControlRecordType::SnapshotFooter, footer)],
    )?);
    Ok(out)
}

fn message<M: Encode>(m: &M) -> Result<Bytes, RecordError> {
    let mut w = Writer::new();
    m.encode(&mut w, HEADER_FOOTER_VERSION)
        .map_err(|e| RecordError::InvalidRecord(e.to_string()))?;
    Ok(w.into_bytes())
}

/// A snapshot read back.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotContents {
    pub last_contained_timestamp_ms: i64,
    /// The metadata record values, in order.
    pub values: Vec<Bytes>,
    pub voters: Option<VoterSet>,
    pub kraft_version: Option<i16>,
}

/// Parses and checks a whole snapshot: every batch's CRC, a SnapshotHeader as the first
/// record and a SnapshotFooter as the last (Kafka's `RecordsSnapshotReader` checks the same).
pub fn decode(bytes: Bytes) -> Result<SnapshotContents, RecordError> {
    let total = bytes.len();
    let batches = decode_batches(bytes)?;
    let used: u64 = batches.iter().map(|b| b.size_in_bytes as u64).sum();
    if used != total as u64 {
        return Err(RecordError::InvalidRecord(format!(
            "snapshot has {} trailing bytes that are not a whole batch",
            total as u64 - used
        )));
    }
    let first = batches
        .first()
        .filter(|b| b.control_types.first() == Some(&ControlRecordType::SnapshotHeader))
        .ok_or_else(|| {
            RecordError::InvalidRecord("snapshot does not start with a header".into())
        })?;
    let header = SnapshotHeaderRecord::decode(&mut first.records[0].clone(), HEADER_FOOTER_VERSION)
        .map_err(|e| RecordError::InvalidRecord(e.to_string()))?;
    let last = batches.last().expect("has a first batch");
    if last.control_types.last() != Some(&ControlRecordType::SnapshotFooter) {
        return Err(RecordError::InvalidRecord(
            "snapshot does not end with a footer".into(),
        ));
    }
    let mut contents = SnapshotContents {
        last_contained_timestamp_ms: header.last_contained_log_timestamp,
        values: Vec::new(),
        voters: None,
        kraft_version: None,
    };
    for b in &batches {
        if b.is_control {
            for r in control_records(b)? {
                match r {
                    ControlRecord::Voters(v) => contents.voters = Some(v),
                    ControlRecord::KRaftVersion(k) => contents.kraft_version = Some(k),
                    ControlRecord::LeaderChange { .. } => {}
                }
            }
        } else {
            contents.values.extend(b.records.iter().cloned());
        }
    }
    Ok(contents)
}

/// The header's last contained log timestamp, reading only the first batch (retention by
/// age needs it for every snapshot; only the latest is read whole).
pub fn last_contained_timestamp(dir: &Path, id: OffsetAndEpoch) -> io::Result<i64> {
    let head = read_chunk(dir, id, 0, 64 * 1024)?;
    let invalid = |m: String| io::Error::new(io::ErrorKind::InvalidData, m);
    let batches = decode_batches(head).map_err(|e| invalid(e.to_string()))?;
    let first = batches
        .first()
        .filter(|b| b.control_types.first() == Some(&ControlRecordType::SnapshotHeader))
        .ok_or_else(|| invalid("snapshot does not start with a header".into()))?;
    SnapshotHeaderRecord::decode(&mut first.records[0].clone(), HEADER_FOOTER_VERSION)
        .map(|h| h.last_contained_log_timestamp)
        .map_err(|e| invalid(e.to_string()))
}

pub fn read(dir: &Path, id: OffsetAndEpoch) -> io::Result<Bytes> {
    Ok(Bytes::from(fs::read(path(dir, id))?))
}

/// Up to `max_bytes` of the snapshot from `position` (a FetchSnapshot answer's chunk).
pub fn read_chunk(
    dir: &Path,
    id: OffsetAndEpoch,
    position: u64,
    max_bytes: usize,
) -> io::Result<Bytes> {
    let f = File::open(path(dir, id))?;
    let len = f.metadata()?.len();
    let n = len.saturating_sub(position).min(max_bytes as u64) as usize;
    let mut buf = vec![0u8; n];
    f.read_exact_at(&mut buf, position)?;
    Ok(Bytes::from(buf))
}

/// Writes a whole snapshot durably (part file, fsync, rename, directory fsync). Returns its
/// size.
pub fn write(dir: &Path, id: OffsetAndEpoch, bytes: &[u8]) -> io::Result<u64> {
    let part = dir.join(format!(
        "{:020}-{:010}{PARTIAL_SUFFIX}",
        id.offset, id.epoch
    ));
    let mut f = File::create(&part)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    freeze(dir, id)?;
    Ok(bytes.len() as u64)
}

/// The bootstrap checkpoint `kafka-storage format --standalone` / `--initial-controllers`
/// writes (KIP-853): snapshot 0-0 in the metadata partition dir, holding kraft.version 1 and
/// the initial voter set (Kafka's also holds the bootstrap feature levels; kactor's active
/// controller writes those itself when the log is new). A node started without `controller.quorum.voters` reads its
/// voters from it until the log has a VotersRecord.
pub fn write_bootstrap(
    partition_dir: &Path,
    voters: Option<&VoterSet>,
    now_ms: i64,
) -> io::Result<()> {
    let id = OffsetAndEpoch::new(0, 0);
    // `--no-initial-controllers` writes kraft.version 1 without voters: they come from the log.
    let mut records = vec![ControlRecord::KRaftVersion(1)];
    records.extend(voters.map(|v| ControlRecord::Voters(v.clone())));
    let bytes = encode(id, now_ms, now_ms, &records, &[]).map_err(io::Error::other)?;
    std::fs::create_dir_all(partition_dir)?;
    write(partition_dir, id, &bytes).map(|_| ())
}

/// A snapshot being received from the leader, chunk by chunk, into its part file.
pub fn begin_download(dir: &Path, id: OffsetAndEpoch) -> io::Result<()> {
    File::create(part_path(dir, id)).map(drop)
}

pub fn write_chunk(dir: &Path, id: OffsetAndEpoch, position: u64, bytes: &[u8]) -> io::Result<()> {
    let f = OpenOptions::new().write(true).open(part_path(dir, id))?;
    f.write_all_at(bytes, position)
}

/// Makes the part file the snapshot: fsync, rename, directory fsync (Kafka's `freeze`).
pub fn freeze(dir: &Path, id: OffsetAndEpoch) -> io::Result<u64> {
    let part = part_path(dir, id);
    let f = File::open(&part)?;
    f.sync_all()?;
    let size = f.metadata()?.len();
    drop(f);
    fs::rename(&part, path(dir, id))?;
    File::open(dir)?.sync_all()?;
    Ok(size)
}

fn part_path(dir: &Path, id: OffsetAndEpoch) -> PathBuf {
    dir.join(format!(
        "{:020}-{:010}{PARTIAL_SUFFIX}",
        id.offset, id.epoch
    ))
}

/// Removes a snapshot no longer needed (below the log start). Kafka renames it `.deleted`
/// and removes it after `file.delete.delay.ms` so open readers finish; here every read is a
/// whole, synchronous one on the Raft actor, so it goes at once.
pub fn delete(dir: &Path, id: OffsetAndEpoch) -> io::Result<()> {
    match fs::remove_file(path(dir, id)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// A snapshot kept on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotMeta {
    pub id: OffsetAndEpoch,
    pub size: u64,
    /// The header's last contained log timestamp (what retention by age reads).
    pub last_contained_timestamp_ms: i64,
}

/// Kafka's `KafkaMetadataLog.maybeClean` choice, as a pure function: given the snapshots
/// (ascending) and the log's size, the snapshot the
/// log start may move up to, if retention is exceeded. Each older snapshot is deleted while
/// the total of log and snapshots is over `retention_bytes`, or while it is older than
/// `retention_ms`; the latest snapshot always stays.
pub fn clean_up_to(
    snapshots: &[SnapshotMeta],
    log_size: u64,
    retention_bytes: i64,
    retention_ms: i64,
    now_ms: i64,
) -> Option<OffsetAndEpoch> {
    let mut total: u64 = log_size + snapshots.iter().map(|s| s.size).sum::<u64>();
    let mut up_to = None;
    for pair in snapshots.windows(2) {
        let oldest = pair[0];
        let over_bytes = retention_bytes >= 0 && total > retention_bytes as u64;
        let too_old =
            retention_ms >= 0 && now_ms - oldest.last_contained_timestamp_ms > retention_ms;
        if !(over_bytes || too_old) {
            break;
        }
        total -= oldest.size;
        up_to = Some(pair[1].id);
    }
    up_to
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(offset: i64, epoch: i32) -> OffsetAndEpoch {
        OffsetAndEpoch::new(offset, epoch)
    }

    #[test]
    fn file_names_are_kafkas() {
        assert_eq!(
            file_name(id(1234, 7)),
            "00000000000000001234-0000000007.checkpoint"
        );
        assert_eq!(
            parse_file_name("00000000000000001234-0000000007.checkpoint"),
            Some((id(1234, 7), SnapshotFileKind::Complete))
        );
        assert_eq!(
            parse_file_name("00000000000000001234-0000000007.checkpoint.part"),
            Some((id(1234, 7), SnapshotFileKind::Partial))
        );
        assert_eq!(
            parse_file_name("00000000000000001234-0000000007.checkpoint.deleted"),
            Some((id(1234, 7), SnapshotFileKind::Deleted))
        );
        assert_eq!(parse_file_name("00000000000000000000.log"), None);
        assert_eq!(parse_file_name("leader-epoch-checkpoint"), None);
        assert_eq!(parse_file_name("quorum-state"), None);
    }

    #[test]
    fn encode_then_decode_keeps_records_and_raft_state() {
        let values: Vec<Bytes> = (0..5000)
            .map(|i| Bytes::from(vec![i as u8; 300 + i % 7]))
            .collect();
        let voters = VoterSet::from_static([(1, Default::default()), (2, Default::default())]);
        let raft = [
            ControlRecord::KRaftVersion(1),
            ControlRecord::Voters(voters.clone()),
        ];
        let bytes = encode(id(900, 4), 1234, 5678, &raft, &values).unwrap();
        let batches = decode_batches(Bytes::from(bytes.clone())).unwrap();
        // Header, more than one data batch (1.5 MB of values), footer; offsets from 0 and
        // contiguous, every batch in the snapshot's epoch.
        assert!(batches.len() >= 4);
        assert_eq!(batches[0].base_offset, 0);
        for w in batches.windows(2) {
            assert_eq!(w[1].base_offset, w[0].last_offset + 1);
        }
        assert!(batches.iter().all(|b| b.epoch == 4));
        let c = decode(Bytes::from(bytes.clone())).unwrap();
        assert_eq!(c.values, values);
        assert_eq!(c.last_contained_timestamp_ms, 1234);
        assert_eq!(c.kraft_version, Some(1));
        assert_eq!(c.voters, Some(voters));
        // A cut file is refused.
        assert!(decode(Bytes::from(bytes[..bytes.len() - 10].to_vec())).is_err());
    }

    #[test]
    fn write_recover_and_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = encode(id(10, 1), 0, 0, &[], &[Bytes::from_static(b"v")]).unwrap();
        assert_eq!(
            write(dir.path(), id(10, 1), &bytes).unwrap(),
            bytes.len() as u64
        );
        write(dir.path(), id(3, 1), &bytes).unwrap();
        fs::write(
            dir.path()
                .join("00000000000000000020-0000000001.checkpoint.part"),
            b"x",
        )
        .unwrap();
        let kept = recover(dir.path(), 5).unwrap();
        assert_eq!(kept, vec![(id(10, 1), bytes.len() as u64)]);
        assert!(!path(dir.path(), id(3, 1)).exists());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
        let mut got = Vec::new();
        while (got.len() as u64) < kept[0].1 {
            got.extend_from_slice(&read_chunk(dir.path(), id(10, 1), got.len() as u64, 7).unwrap());
        }
        assert_eq!(got, bytes);
        begin_download(dir.path(), id(20, 2)).unwrap();
        write_chunk(dir.path(), id(20, 2), 0, &bytes[..5]).unwrap();
        write_chunk(dir.path(), id(20, 2), 5, &bytes[5..]).unwrap();
        assert_eq!(freeze(dir.path(), id(20, 2)).unwrap(), bytes.len() as u64);
        assert_eq!(read(dir.path(), id(20, 2)).unwrap(), Bytes::from(bytes));
    }

    #[test]
    fn cleaning_keeps_the_latest_snapshot_and_stops_within_retention() {
        let meta = |id, ts| SnapshotMeta {
            id,
            size: 100,
            last_contained_timestamp_ms: ts,
        };
        let s = [
            meta(id(10, 1), 1_000),
            meta(id(20, 1), 2_000),
            meta(id(30, 2), 3_000),
        ];
        // Within both limits: nothing.
        assert_eq!(clean_up_to(&s, 50, 1_000, 10_000, 3_500), None);
        // Over the byte limit by one snapshot: the log start moves to the second.
        assert_eq!(clean_up_to(&s, 50, 300, -1, 3_500), Some(id(20, 1)));
        // Far over: up to the latest, never past it.
        assert_eq!(clean_up_to(&s, 50, 0, -1, 3_500), Some(id(30, 2)));
        // By age: the first two are older than 1 s at t=3.5 s.
        assert_eq!(clean_up_to(&s, 50, -1, 1_000, 3_500), Some(id(30, 2)));
        assert_eq!(clean_up_to(&s[..1], 50, 0, 0, 3_500), None);
    }
}
