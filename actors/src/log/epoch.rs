//! The leader epoch cache (Kafka's `LeaderEpochFileCache` over `leader-epoch-checkpoint`):
//! for each leader epoch, the first offset written in it. Serves OffsetForLeaderEpoch and
//! follower truncation. Every change is written through to the checkpoint file.

use std::io;
use std::path::{Path, PathBuf};

use super::checkpoint::{
    read_leader_epoch_checkpoint, write_leader_epoch_checkpoint, LEADER_EPOCH_CHECKPOINT,
};
use super::error::Result;

/// Kafka's `UNDEFINED_EPOCH` / `UNDEFINED_EPOCH_OFFSET`.
pub const UNDEFINED_EPOCH: i32 = -1;
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

#[derive(Debug)]
pub struct LeaderEpochFileCache {
    path: PathBuf,
    entries: Vec<EpochEntry>,
}

impl LeaderEpochFileCache {
    pub fn open(dir: &Path) -> Result<Self> {
        let path = dir.join(LEADER_EPOCH_CHECKPOINT);
        let entries = read_leader_epoch_checkpoint(&path)?
            .into_iter()
            .map(|(epoch, start_offset)| EpochEntry {
                epoch,
                start_offset,
            })
            .collect();
        Ok(LeaderEpochFileCache { path, entries })
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    pub fn latest_entry(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    fn write(&self) -> io::Result<()> {
        let v: Vec<(i32, i64)> = self
            .entries
            .iter()
            .map(|e| (e.epoch, e.start_offset))
            .collect();
        write_leader_epoch_checkpoint(&self.path, &v)
    }

    /// Records that `epoch` starts at `start_offset`. Entries it contradicts (an epoch at or
    /// above it, or a start offset at or above it) are dropped, as in Kafka.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> io::Result<()> {
        if epoch < 0 || start_offset < 0 {
            return Ok(());
        }
        let needed = match self.entries.last() {
            Some(last) => epoch != last.epoch || start_offset < last.start_offset,
            None => true,
        };
        if !needed {
            return Ok(());
        }
        self.entries
            .retain(|e| e.epoch < epoch && e.start_offset < start_offset);
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        self.write()
    }

    /// OffsetForLeaderEpoch: `(epoch, end offset)` for the requested epoch, Kafka's `endOffsetFor`.
    pub fn end_offset_for(&self, requested_epoch: i32, log_end_offset: i64) -> (i32, i64) {
        if requested_epoch == UNDEFINED_EPOCH {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        }
        if self.latest_epoch() == Some(requested_epoch) {
            return (requested_epoch, log_end_offset);
        }
        let Some(higher) = self.entries.iter().find(|e| e.epoch > requested_epoch) else {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        };
        match self
            .entries
            .iter()
            .rev()
            .find(|e| e.epoch <= requested_epoch)
        {
            Some(floor) => (floor.epoch, higher.start_offset),
            None => (requested_epoch, higher.start_offset),
        }
    }

    /// The epoch of the batch holding `offset`, as far as the cache knows.
    pub fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        self.entries
            .iter()
            .rev()
            .find(|e| e.start_offset <= offset)
            .map(|e| e.epoch)
    }

    /// After truncating the log to `end_offset`: drops epochs starting at or after it.
    pub fn truncate_from_end(&mut self, end_offset: i64) -> io::Result<()> {
        if end_offset >= 0
            && self
                .entries
                .last()
                .is_some_and(|e| e.start_offset >= end_offset)
        {
            self.entries.retain(|e| e.start_offset < end_offset);
            self.write()?;
        }
        Ok(())
    }

    /// After the log start offset moves to `start_offset`: the epoch covering it now starts there.
    pub fn truncate_from_start(&mut self, start_offset: i64) -> io::Result<()> {
        let removed = self
            .entries
            .iter()
            .take_while(|e| e.start_offset <= start_offset)
            .count();
        if removed == 0 {
            return Ok(());
        }
        let last_removed = self.entries[removed - 1];
        if removed == 1 && last_removed.start_offset == start_offset {
            return Ok(());
        }
        self.entries.drain(..removed);
        self.entries.insert(
            0,
            EpochEntry {
                epoch: last_removed.epoch,
                start_offset,
            },
        );
        self.write()
    }

    pub fn clear(&mut self) -> io::Result<()> {
        if !self.entries.is_empty() || !self.path.exists() {
            self.entries.clear();
            self.write()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assign_lookup_truncate_persist() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = LeaderEpochFileCache::open(dir.path()).unwrap();
        assert_eq!(
            c.end_offset_for(0, 10),
            (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        );
        c.assign(1, 0).unwrap();
        c.assign(1, 5).unwrap(); // same epoch, later offset: ignored
        c.assign(3, 10).unwrap();
        c.assign(5, 20).unwrap();
        assert_eq!(c.latest_epoch(), Some(5));
        assert_eq!(c.end_offset_for(5, 30), (5, 30));
        assert_eq!(c.end_offset_for(3, 30), (3, 20));
        assert_eq!(
            c.end_offset_for(4, 30),
            (3, 20),
            "unknown epoch: floor epoch, next start"
        );
        assert_eq!(c.end_offset_for(0, 30), (0, 0), "below the first epoch");
        assert_eq!(
            c.end_offset_for(6, 30),
            (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        );
        assert_eq!(
            c.end_offset_for(-1, 30),
            (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        );
        assert_eq!(c.epoch_for_offset(15), Some(3));

        let reopened = LeaderEpochFileCache::open(dir.path()).unwrap();
        assert_eq!(reopened.entries(), c.entries());

        c.truncate_from_end(20).unwrap();
        assert_eq!(c.latest_epoch(), Some(3));
        c.truncate_from_start(12).unwrap();
        assert_eq!(
            c.entries(),
            &[EpochEntry {
                epoch: 3,
                start_offset: 12
            }]
        );
        // A new epoch at a lower start offset than an existing one replaces the conflicting one.
        c.assign(4, 11).unwrap();
        assert_eq!(
            c.entries(),
            &[EpochEntry {
                epoch: 4,
                start_offset: 11
            }]
        );
        let reopened = LeaderEpochFileCache::open(dir.path()).unwrap();
        assert_eq!(reopened.entries(), c.entries());
    }
}
