//! One log directory (Kafka's `LogManager`, per `log.dirs` entry): loads every partition log at
//! startup honouring the clean-shutdown marker and the per-dir checkpoints, finishes topic
//! deletions, writes checkpoints, and shuts down cleanly. The LogManagerActor drives it.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use tracing::info;

use super::checkpoint::{
    read_offset_checkpoint, write_atomically, write_offset_checkpoint, MetaProperties,
    TopicPartition, CLEAN_SHUTDOWN_MARKER, LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
};
use super::config::LogConfig;
use super::error::Result;
use super::unified::{Log, DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX};

#[derive(Debug)]
pub struct LogDir {
    path: PathBuf,
    had_clean_shutdown: bool,
}

impl LogDir {
    /// Opens `path` (created if missing) and loads every `<topic>-<partition>` log in it.
    /// Directories renamed for deletion are returned for the caller to remove after
    /// `file.delete.delay.ms` (with [`super::remove_log_dir`]). The clean-shutdown marker is
    /// consumed: a crash from now on must be treated as unclean.
    pub fn load(
        path: &Path,
        config_for: impl Fn(&TopicPartition) -> LogConfig,
        now_ms: i64,
    ) -> Result<(LogDir, Vec<Log>, Vec<PathBuf>)> {
        fs::create_dir_all(path)?;
        let marker = path.join(CLEAN_SHUTDOWN_MARKER);
        let had_clean_shutdown = marker.exists();
        let recovery_points = read_offset_checkpoint(&path.join(RECOVERY_POINT_CHECKPOINT))?;
        let log_start_offsets = read_offset_checkpoint(&path.join(LOG_START_OFFSET_CHECKPOINT))?;
        let mut logs = Vec::new();
        let mut to_delete = Vec::new();
        let mut entries: Vec<_> = fs::read_dir(path)?.filter_map(|e| e.ok()).collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            if !entry.file_type()?.is_dir() {
                continue;
            }
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if name.ends_with(DELETE_DIR_SUFFIX) {
                to_delete.push(entry.path());
                continue;
            }
            if name.ends_with(FUTURE_DIR_SUFFIX) || name.ends_with(STRAY_DIR_SUFFIX) {
                continue;
            }
            let Some(tp) = TopicPartition::from_dir_name(&name) else {
                continue;
            };
            let log = Log::open(
                &entry.path(),
                config_for(&tp),
                log_start_offsets.get(&tp).copied().unwrap_or(0),
                recovery_points.get(&tp).copied().unwrap_or(0),
                had_clean_shutdown,
                now_ms,
            )?;
            logs.push(log);
        }
        if had_clean_shutdown {
            fs::remove_file(&marker)?;
            super::checkpoint::fsync_dir(path)?;
        }
        info!(dir = %path.display(), logs = logs.len(), had_clean_shutdown, "log dir loaded");
        Ok((
            LogDir {
                path: path.to_path_buf(),
                had_clean_shutdown,
            },
            logs,
            to_delete,
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn had_clean_shutdown(&self) -> bool {
        self.had_clean_shutdown
    }

    /// Creates the directory for a new partition log and opens it empty.
    pub fn create_log(&self, tp: &TopicPartition, config: LogConfig, now_ms: i64) -> Result<Log> {
        Log::open(&self.path.join(tp.dir_name()), config, 0, 0, true, now_ms)
    }

    /// Writes `recovery-point-offset-checkpoint` and `log-start-offset-checkpoint` for `logs`
    /// (Kafka's periodic checkpoint tasks).
    pub fn checkpoint<'a>(&self, logs: impl IntoIterator<Item = &'a Log>) -> Result<()> {
        let mut rp = BTreeMap::new();
        let mut lso = BTreeMap::new();
        for log in logs {
            rp.insert(log.topic_partition().clone(), log.recovery_point());
            // Kafka only checkpoints start offsets above the first segment's base.
            let first_base = log.segments().next().map_or(0, |s| s.base_offset());
            if log.log_start_offset() > first_base {
                lso.insert(log.topic_partition().clone(), log.log_start_offset());
            }
        }
        write_offset_checkpoint(&self.path.join(RECOVERY_POINT_CHECKPOINT), &rp)?;
        write_offset_checkpoint(&self.path.join(LOG_START_OFFSET_CHECKPOINT), &lso)?;
        Ok(())
    }

    /// `replication-offset-checkpoint`: the high watermarks, owned by the partitions.
    pub fn write_replication_offsets(
        &self,
        high_watermarks: &BTreeMap<TopicPartition, i64>,
    ) -> Result<()> {
        write_offset_checkpoint(
            &self.path.join(REPLICATION_OFFSET_CHECKPOINT),
            high_watermarks,
        )?;
        Ok(())
    }

    pub fn read_replication_offsets(&self) -> Result<BTreeMap<TopicPartition, i64>> {
        read_offset_checkpoint(&self.path.join(REPLICATION_OFFSET_CHECKPOINT))
    }

    pub fn read_meta_properties(&self) -> Result<Option<MetaProperties>> {
        MetaProperties::read(&self.path)
    }

    pub fn write_meta_properties(&self, meta: &MetaProperties) -> Result<()> {
        meta.write(&self.path)?;
        Ok(())
    }

    /// Clean shutdown (Kafka's `LogManager.shutdown`): flush every log to its end, close it,
    /// checkpoint recovery points and start offsets, then write `.kafka_cleanshutdown` so the
    /// next start skips recovery.
    pub fn shutdown(self, logs: Vec<Log>, broker_epoch: i64, now_ms: i64) -> Result<()> {
        let mut logs = logs;
        for log in logs.iter_mut() {
            let leo = log.log_end_offset();
            log.flush(leo, now_ms)?;
        }
        self.checkpoint(logs.iter())?;
        for log in logs {
            log.close()?;
        }
        let marker = format!("{{\"version\":0,\"brokerEpoch\":{broker_epoch}}}");
        write_atomically(&self.path.join(CLEAN_SHUTDOWN_MARKER), marker.as_bytes())?;
        Ok(())
    }
}
