//! `.txnindex` (Kafka's `TransactionIndex`): the aborted transactions whose data lies in a
//! segment, so read_committed fetches can tell consumers what to skip. 34-byte entries:
//! version i16 (0), producer id i64, first offset i64, last offset i64, last stable offset i64.
//! Like Kafka, the file only exists once a segment has an aborted transaction.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

pub const ABORTED_TXN_SIZE: usize = 34;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    fn encode(&self) -> [u8; ABORTED_TXN_SIZE] {
        let mut b = [0u8; ABORTED_TXN_SIZE];
        b[0..2].copy_from_slice(&0i16.to_be_bytes());
        b[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        b[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        b[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        b[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        b
    }
    fn decode(b: &[u8]) -> Option<Self> {
        let i64_at = |at: usize| i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        if i16::from_be_bytes([b[0], b[1]]) != 0 {
            return None;
        }
        Some(AbortedTxn {
            producer_id: i64_at(2),
            first_offset: i64_at(10),
            last_offset: i64_at(18),
            last_stable_offset: i64_at(26),
        })
    }
}

/// The entries are few (one per aborted transaction), so they are kept in memory as well.
#[derive(Debug)]
pub struct TransactionIndex {
    path: PathBuf,
    file: Option<File>,
    entries: Vec<AbortedTxn>,
}

impl TransactionIndex {
    /// Loads the valid prefix of an existing file; a torn or unknown-version tail is dropped.
    pub fn open(path: &Path) -> io::Result<Self> {
        let mut entries = Vec::new();
        let mut file = None;
        if path.exists() {
            let f = OpenOptions::new().read(true).write(true).open(path)?;
            let len = f.metadata()?.len() as usize;
            let mut buf = vec![0u8; len];
            f.read_exact_at(&mut buf, 0)?;
            for chunk in buf.chunks_exact(ABORTED_TXN_SIZE) {
                match AbortedTxn::decode(chunk) {
                    Some(t)
                        if entries
                            .last()
                            .is_none_or(|p: &AbortedTxn| t.last_offset > p.last_offset) =>
                    {
                        entries.push(t)
                    }
                    _ => break,
                }
            }
            if entries.len() * ABORTED_TXN_SIZE != len {
                f.set_len((entries.len() * ABORTED_TXN_SIZE) as u64)?;
            }
            file = Some(f);
        }
        Ok(TransactionIndex {
            path: path.to_path_buf(),
            file,
            entries,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn entries(&self) -> &[AbortedTxn] {
        &self.entries
    }
    pub fn file(&self) -> Option<&File> {
        self.file.as_ref()
    }

    pub fn append(&mut self, txn: AbortedTxn) -> io::Result<()> {
        if let Some(last) = self.entries.last() {
            if txn.last_offset <= last.last_offset {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "aborted txn last offset {} not above {}",
                        txn.last_offset, last.last_offset
                    ),
                ));
            }
        }
        if self.file.is_none() {
            self.file = Some(
                OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(&self.path)?,
            );
        }
        let f = self.file.as_mut().expect("opened above");
        f.write_all_at(
            &txn.encode(),
            (self.entries.len() * ABORTED_TXN_SIZE) as u64,
        )?;
        self.entries.push(txn);
        Ok(())
    }

    /// Aborted transactions overlapping `[fetch_offset, upper_bound_offset)`.
    pub fn collect_aborted(
        &self,
        fetch_offset: i64,
        upper_bound_offset: i64,
        out: &mut Vec<AbortedTxn>,
    ) {
        out.extend(
            self.entries
                .iter()
                .filter(|t| t.last_offset >= fetch_offset && t.first_offset < upper_bound_offset),
        );
    }

    /// Drops entries whose last offset is at or past `offset`.
    pub fn truncate_to(&mut self, offset: i64) -> io::Result<()> {
        let keep = self
            .entries
            .iter()
            .take_while(|t| t.last_offset < offset)
            .count();
        if keep != self.entries.len() {
            self.entries.truncate(keep);
            if let Some(f) = &self.file {
                f.set_len((keep * ABORTED_TXN_SIZE) as u64)?;
            }
        }
        Ok(())
    }

    pub fn reset(&mut self) -> io::Result<()> {
        self.truncate_to(i64::MIN)
    }

    pub fn flush(&mut self) -> io::Result<()> {
        match &mut self.file {
            Some(f) => f.flush().and_then(|_| f.sync_data()),
            None => Ok(()),
        }
    }

    pub fn rename(&mut self, to: &Path) -> io::Result<()> {
        if self.path.exists() {
            std::fs::rename(&self.path, to)?;
        }
        self.path = to.to_path_buf();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_collect_truncate_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.txnindex");
        let mut idx = TransactionIndex::open(&path).unwrap();
        assert!(!path.exists(), "created lazily");
        let t = |pid, f, l| AbortedTxn {
            producer_id: pid,
            first_offset: f,
            last_offset: l,
            last_stable_offset: f,
        };
        idx.append(t(1, 0, 10)).unwrap();
        idx.append(t(2, 5, 20)).unwrap();
        assert!(idx.append(t(3, 6, 15)).is_err());
        let mut out = Vec::new();
        idx.collect_aborted(11, 100, &mut out);
        assert_eq!(out, vec![t(2, 5, 20)]);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 68);
        idx.truncate_to(20).unwrap();
        drop(idx);
        let idx = TransactionIndex::open(&path).unwrap();
        assert_eq!(idx.entries(), &[t(1, 0, 10)]);
    }
}
