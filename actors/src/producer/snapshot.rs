//! Producer-state snapshot files (Kafka's `ProducerStateManager.writeSnapshot` /
//! `readSnapshot` and the `ProducerSnapshot` schema, version 1): `<offset, 20 digits>.snapshot`
//! in the partition directory, named by the offset the table covers up to (exclusive).
//!
//! Layout (big-endian): version i16 = 1, crc u32 (CRC-32C of everything after it), entry count
//! i32, then per producer: producer id i64, epoch i16, last sequence i32, last offset i64,
//! offset delta i32, timestamp i64, coordinator epoch i32, current txn first offset i64 (-1: none).
//! Only the last batch of each producer is kept, as in Kafka.

use std::collections::VecDeque;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use thiserror::Error;

use super::state::{BatchMetadata, ProducerStateEntry};

pub const SNAPSHOT_SUFFIX: &str = ".snapshot";
pub const PRODUCER_SNAPSHOT_VERSION: i16 = 1;
const CRC_OFFSET: usize = 2;
const ENTRIES_OFFSET: usize = CRC_OFFSET + 4;
const ENTRY_SIZE: usize = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8;

#[derive(Debug, Error)]
pub enum SnapshotError {
    #[error("snapshot i/o: {0}")]
    Io(#[from] io::Error),
    #[error("corrupt producer snapshot {path}: {reason}")]
    Corrupt { path: PathBuf, reason: String },
}

/// `dir/<offset:020>.snapshot`.
pub fn snapshot_file(dir: &Path, offset: i64) -> PathBuf {
    dir.join(format!("{offset:020}{SNAPSHOT_SUFFIX}"))
}

/// Encodes entries in Kafka's snapshot format.
pub fn encode(entries: &[ProducerStateEntry]) -> Vec<u8> {
    let mut b = Vec::with_capacity(ENTRIES_OFFSET + 4 + entries.len() * ENTRY_SIZE);
    b.extend_from_slice(&PRODUCER_SNAPSHOT_VERSION.to_be_bytes());
    b.extend_from_slice(&[0u8; 4]);
    b.extend_from_slice(&(entries.len() as i32).to_be_bytes());
    for e in entries {
        b.extend_from_slice(&e.producer_id.to_be_bytes());
        b.extend_from_slice(&e.producer_epoch.to_be_bytes());
        b.extend_from_slice(&e.last_seq().to_be_bytes());
        b.extend_from_slice(&e.last_data_offset().to_be_bytes());
        b.extend_from_slice(&e.last_offset_delta().to_be_bytes());
        b.extend_from_slice(&e.last_timestamp.to_be_bytes());
        b.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
        b.extend_from_slice(&e.current_txn_first_offset.unwrap_or(-1).to_be_bytes());
    }
    let crc = crc32c::crc32c(&b[ENTRIES_OFFSET..]);
    b[CRC_OFFSET..ENTRIES_OFFSET].copy_from_slice(&crc.to_be_bytes());
    b
}

/// Decodes a snapshot; `path` only labels errors.
pub fn decode(path: &Path, b: &[u8]) -> Result<Vec<ProducerStateEntry>, SnapshotError> {
    let corrupt = |reason: String| SnapshotError::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    if b.len() < ENTRIES_OFFSET + 4 {
        return Err(corrupt(format!("{} bytes is too short", b.len())));
    }
    let version = i16::from_be_bytes([b[0], b[1]]);
    if version != PRODUCER_SNAPSHOT_VERSION {
        return Err(corrupt(format!("unknown version {version}")));
    }
    let stored = u32::from_be_bytes(b[CRC_OFFSET..ENTRIES_OFFSET].try_into().expect("4"));
    let computed = crc32c::crc32c(&b[ENTRIES_OFFSET..]);
    if stored != computed {
        return Err(corrupt(format!(
            "crc {stored:#x} does not match computed {computed:#x}"
        )));
    }
    let count = i32::from_be_bytes(b[ENTRIES_OFFSET..ENTRIES_OFFSET + 4].try_into().expect("4"));
    let body = &b[ENTRIES_OFFSET + 4..];
    if count < 0 || body.len() != count as usize * ENTRY_SIZE {
        return Err(corrupt(format!(
            "{count} entries do not fit {} bytes",
            body.len()
        )));
    }
    let mut out = Vec::with_capacity(count as usize);
    for e in body.chunks_exact(ENTRY_SIZE) {
        let i64_at = |at: usize| i64::from_be_bytes(e[at..at + 8].try_into().expect("8"));
        let i32_at = |at: usize| i32::from_be_bytes(e[at..at + 4].try_into().expect("4"));
        let last_seq = i32_at(10);
        let last_offset = i64_at(14);
        let offset_delta = i32_at(22);
        let timestamp = i64_at(26);
        let txn_first = i64_at(38);
        let mut batches = VecDeque::new();
        if last_seq >= 0 {
            batches.push_back(BatchMetadata {
                last_seq,
                last_offset,
                offset_delta,
                timestamp,
            });
        }
        out.push(ProducerStateEntry {
            producer_id: i64_at(0),
            producer_epoch: i16::from_be_bytes([e[8], e[9]]),
            batches,
            coordinator_epoch: i32_at(34),
            last_timestamp: timestamp,
            current_txn_first_offset: (txn_first >= 0).then_some(txn_first),
        });
    }
    Ok(out)
}

/// Writes `dir/<offset>.snapshot` atomically (temp file, fsync, rename), as Kafka fsyncs it.
pub fn write_snapshot(
    dir: &Path,
    offset: i64,
    entries: &[ProducerStateEntry],
) -> Result<PathBuf, SnapshotError> {
    write(dir, offset, entries, true)
}

/// [`write_snapshot`] without the fsync, for the snapshot a segment roll takes on the append
/// path (Kafka's `takeSnapshot(false)`): the caller fsyncs it with [`sync_snapshot`] off that
/// path, before the rolled segment's flush moves the recovery point. Until then a crash can
/// leave it torn; its CRC then fails and recovery deletes it and uses an older one.
pub fn write_snapshot_unsynced(
    dir: &Path,
    offset: i64,
    entries: &[ProducerStateEntry],
) -> Result<PathBuf, SnapshotError> {
    write(dir, offset, entries, false)
}

/// fsyncs a snapshot written by [`write_snapshot_unsynced`]; one deleted meanwhile (a newer
/// roll's retention) needs nothing.
pub fn sync_snapshot(path: &Path) -> io::Result<()> {
    match fs::File::open(path) {
        Ok(f) => f.sync_all(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

fn write(
    dir: &Path,
    offset: i64,
    entries: &[ProducerStateEntry],
    sync: bool,
) -> Result<PathBuf, SnapshotError> {
    let path = snapshot_file(dir, offset);
    let tmp = path.with_extension("snapshot.tmp");
    {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(&encode(entries))?;
        if sync {
            f.sync_all()?;
        }
    }
    fs::rename(&tmp, &path)?;
    Ok(path)
}

pub fn read_snapshot(path: &Path) -> Result<Vec<ProducerStateEntry>, SnapshotError> {
    decode(path, &fs::read(path)?)
}

/// Offsets of the `.snapshot` files in `dir`, ascending.
pub fn list_snapshots(dir: &Path) -> io::Result<Vec<i64>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(stem) = name.strip_suffix(SNAPSHOT_SUFFIX) {
            if stem.len() == 20 {
                if let Ok(o) = stem.parse::<i64>() {
                    out.push(o);
                }
            }
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// The newest readable snapshot at or below `max_offset` (Kafka's `latestSnapshotOffset` +
/// `loadFromSnapshot`, which deletes a corrupt one and falls back to the previous).
pub fn latest_snapshot(
    dir: &Path,
    max_offset: i64,
) -> io::Result<Option<(i64, Vec<ProducerStateEntry>)>> {
    for offset in list_snapshots(dir)?.into_iter().rev() {
        if offset > max_offset {
            continue;
        }
        match read_snapshot(&snapshot_file(dir, offset)) {
            Ok(entries) => return Ok(Some((offset, entries))),
            Err(e) => {
                tracing::warn!(error = %e, "deleting unreadable producer snapshot");
                let _ = fs::remove_file(snapshot_file(dir, offset));
            }
        }
    }
    Ok(None)
}

/// Removes snapshots above `offset` (after a truncation) — they describe data no longer there.
pub fn delete_snapshots_after(dir: &Path, offset: i64) -> io::Result<()> {
    for o in list_snapshots(dir)? {
        if o > offset {
            fs::remove_file(snapshot_file(dir, o))?;
        }
    }
    Ok(())
}

/// Keeps the newest `keep` snapshots (Kafka keeps those of live segments; retention deletes the
/// rest with their segments).
pub fn retain_newest(dir: &Path, keep: usize) -> io::Result<()> {
    let all = list_snapshots(dir)?;
    let n = all.len().saturating_sub(keep);
    for o in &all[..n] {
        fs::remove_file(snapshot_file(dir, *o))?;
    }
    Ok(())
}
