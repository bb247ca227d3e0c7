//! The partition logs under `log.dirs` (the loading and shutdown half of Kafka's `LogManager`):
//! loads every `<topic>-<partition>` log at start-up honouring the clean-shutdown marker and
//! the recovery-point / log-start-offset checkpoints, skips `__cluster_metadata-0` (the
//! RaftActor owns it, as Kafka's `KafkaRaftManager` does), places new logs in the dir with the
//! fewest partitions, writes checkpoints, and on clean shutdown flushes, closes and writes
//! `.kafka_cleanshutdown`.
//!
//! Stray logs (KIP-858 / KAFKA-14616): a log on disk whose topic id is not the one the metadata
//! assigns to that partition — or that has no topic id at all — is left over from a topic
//! deleted (and maybe re-created) while this node was down. Kafka renames it to
//! `<topic>-<partition>.<uuid>-stray`, stops tracking it, keeps the files for the operator and
//! warns about it at every later start; so does kactor, instead of serving the old records
//! under the new topic.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

use kactor_protocol::Uuid;

use super::actor::now_ms;
use super::core::config::{effective_topic_config, PartitionConfig};
use super::core::log::PartitionLog;
use super::core::TopicPartition;
use super::disk::{log_config, DiskLog};
use super::messages::ReplicaInfo;
use super::registry::{LogFactory, LogOpenError};
use crate::log::checkpoint::{
    fsync_dir, read_offset_checkpoint, write_atomically, write_offset_checkpoint,
    CLEAN_SHUTDOWN_MARKER, LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
};
use crate::log::unified::{
    delete_dir_name, DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX,
};
use crate::log::LogConfig;
use crate::log::{self as storage, Log};

/// The KRaft metadata log's directory: never a partition log of ours.
pub const METADATA_LOG_DIR_NAME: &str = "__cluster_metadata-0";

fn storage_tp(tp: &TopicPartition) -> storage::TopicPartition {
    storage::TopicPartition::new(tp.topic.clone(), tp.partition)
}

fn err(path: &Path, e: impl std::fmt::Display) -> String {
    format!("{}: {e}", path.display())
}

/// What one log dir holds at start-up.
pub struct ScannedLogDir {
    /// Whether the previous run shut down cleanly (`.kafka_cleanshutdown` was there; it has
    /// been removed, so a crash from now on is treated as unclean).
    pub clean: bool,
    /// Every `<topic>-<partition>` log, opened (and recovered if the shutdown was unclean).
    pub logs: Vec<Log>,
    /// Directories renamed for deletion by an earlier run, to remove after the delay.
    pub leftover_deletions: Vec<PathBuf>,
    /// `-stray` directories: kept for the operator, never loaded.
    pub strays: Vec<PathBuf>,
    /// `replication-offset-checkpoint`: each partition's high watermark when it was last
    /// checkpointed; None when the dir has no such file (written by a kactor before it kept
    /// one).
    pub high_watermarks: Option<BTreeMap<storage::TopicPartition, i64>>,
}

/// Walks one log dir the way Kafka's `LogManager.loadLogs` does: partition logs are opened with
/// the dir's checkpoints, `__cluster_metadata-0` is left to the RaftActor, `-delete` dirs are
/// collected for removal, `-future` and `-stray` dirs are skipped (strays with a warning, as
/// Kafka logs "Loaded stray log" at every start), anything else is ignored.
pub fn scan_log_dir(path: &Path, defaults: &LogConfig, now: i64) -> Result<ScannedLogDir, String> {
    fs::create_dir_all(path).map_err(|e| err(path, e))?;
    let marker = path.join(CLEAN_SHUTDOWN_MARKER);
    let clean = marker.exists();
    let recovery_points =
        read_offset_checkpoint(&path.join(RECOVERY_POINT_CHECKPOINT)).map_err(|e| err(path, e))?;
    let start_offsets = read_offset_checkpoint(&path.join(LOG_START_OFFSET_CHECKPOINT))
        .map_err(|e| err(path, e))?;
    let hw_file = path.join(REPLICATION_OFFSET_CHECKPOINT);
    let high_watermarks = if hw_file.exists() {
        Some(read_offset_checkpoint(&hw_file).map_err(|e| err(path, e))?)
    } else {
        None
    };
    let mut entries: Vec<_> = fs::read_dir(path)
        .map_err(|e| err(path, e))?
        .filter_map(|e| e.ok())
        .collect();
    entries.sort_by_key(|e| e.file_name());
    let mut out = ScannedLogDir {
        clean,
        logs: Vec::new(),
        leftover_deletions: Vec::new(),
        strays: Vec::new(),
        high_watermarks,
    };
    for entry in entries {
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if name.ends_with(DELETE_DIR_SUFFIX) {
            out.leftover_deletions.push(entry.path());
            continue;
        }
        if name.ends_with(STRAY_DIR_SUFFIX) {
            tracing::warn!(dir = %entry.path().display(), "loaded stray log (not served; remove it when no longer needed)");
            out.strays.push(entry.path());
            continue;
        }
        if name == METADATA_LOG_DIR_NAME || name.ends_with(FUTURE_DIR_SUFFIX) {
            continue;
        }
        let Some(stp) = storage::TopicPartition::from_dir_name(&name) else {
            continue;
        };
        let log = Log::open(
            &entry.path(),
            defaults.clone(),
            start_offsets.get(&stp).copied().unwrap_or(0),
            recovery_points.get(&stp).copied().unwrap_or(0),
            clean,
            now,
        )
        .map_err(|e| err(&entry.path(), e))?;
        out.logs.push(log);
    }
    if clean {
        // From now on a crash must be treated as unclean.
        fs::remove_file(&marker).map_err(|e| err(&marker, e))?;
        fsync_dir(path).map_err(|e| err(path, e))?;
    }
    tracing::info!(dir = %path.display(), clean, logs = out.logs.len(), "log dir loaded");
    Ok(out)
}

/// Kafka's `logStrayDirName`: `<topic>-<partition>.<uuid hex>-stray` (the delete name's shape
/// with the other suffix, so it fits in 255 bytes too).
pub fn stray_dir_name(tp: &storage::TopicPartition) -> String {
    let name = delete_dir_name(tp);
    let base = name.strip_suffix(DELETE_DIR_SUFFIX).unwrap_or(&name);
    format!("{base}{STRAY_DIR_SUFFIX}")
}

/// Closes `log` and renames its directory to the stray name; returns the new path.
pub fn rename_stray(log: Log) -> Result<PathBuf, String> {
    let dir = log.dir().to_path_buf();
    let parent = dir.parent().map(Path::to_path_buf).unwrap_or_default();
    let to = parent.join(stray_dir_name(log.topic_partition()));
    log.close().map_err(|e| err(&dir, e))?;
    fs::rename(&dir, &to).map_err(|e| err(&dir, e))?;
    fsync_dir(&parent).map_err(|e| err(&parent, e))?;
    tracing::warn!(from = %dir.display(), to = %to.display(), "renamed stray log");
    Ok(to)
}

/// Kafka's `isStrayReplica` for a log the metadata does assign here: a missing or different
/// topic id means the files belong to an earlier topic of the same name.
fn is_stray_for(log: &Log, topic_id: Uuid) -> bool {
    log.topic_id() != Some(topic_id)
}

/// The size of the file system holding `dir` and the bytes an unprivileged writer can still
/// use (Kafka's `FileStore.getTotalSpace` / `getUsableSpace`, DescribeLogDirs v4's
/// `total_bytes` / `usable_bytes`); `None` if the dir cannot be examined.
pub fn volume_bytes(dir: &Path) -> Option<(i64, i64)> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `path` is a NUL-terminated string that outlives the call and `st` is a writable
    // statvfs; the struct is only read after statvfs reported success (libc has no safe
    // wrapper and std exposes no file system sizes).
    let rc = unsafe { libc::statvfs(path.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: statvfs succeeded, so it filled the struct.
    let st = unsafe { st.assume_init() };
    let frsize = st.f_frsize as u128;
    let clamp = |v: u128| v.min(i64::MAX as u128) as i64;
    Some((
        clamp(st.f_blocks as u128 * frsize),
        clamp(st.f_bavail as u128 * frsize),
    ))
}

/// Partition logs across `log.dirs`.
pub struct LogDirsFactory {
    dirs: Vec<PathBuf>,
    /// Logs found at start-up that no assignment has claimed yet.
    unclaimed: HashMap<TopicPartition, (usize, Log)>,
    placement: HashMap<TopicPartition, usize>,
    /// Directories renamed for deletion before the last shutdown.
    leftover_deletions: Vec<PathBuf>,
    /// For each log found at load and not opened yet, its high watermark from
    /// `replication-offset-checkpoint` (0 without an entry; None when its dir had no such
    /// file). A replica takes its value when it starts.
    loaded_high_watermarks: HashMap<TopicPartition, Option<i64>>,
    broker_epoch: i64,
    closed: bool,
    /// Indexes of dirs taken offline after an I/O error (until the process restarts).
    offline: std::collections::BTreeSet<usize>,
}

impl LogDirsFactory {
    /// Loads (and after an unclean shutdown, recovers) every partition log under `log_dirs`.
    pub fn load(
        log_dirs: &[PathBuf],
        broker_config: &BTreeMap<String, String>,
    ) -> Result<Self, String> {
        let defaults = log_config(&effective_topic_config(broker_config, &BTreeMap::new()));
        let now = now_ms();
        let mut unclaimed = HashMap::new();
        let mut placement = HashMap::new();
        let mut leftover_deletions = Vec::new();
        let mut loaded_high_watermarks = HashMap::new();
        for (i, path) in log_dirs.iter().enumerate() {
            let scanned = scan_log_dir(path, &defaults, now)?;
            for log in scanned.logs {
                let st = log.topic_partition();
                let tp = TopicPartition::new(st.topic.clone(), st.partition);
                // Kafka starts a log without an entry at 0 (clamped up to its log start); a
                // dir without the file at all (from a kactor that did not write it) keeps
                // the recovery point it used to start from.
                let hw =
                    (scanned.high_watermarks.as_ref()).map(|h| h.get(st).copied().unwrap_or(0));
                loaded_high_watermarks.insert(tp.clone(), hw);
                placement.insert(tp.clone(), i);
                unclaimed.insert(tp, (i, log));
            }
            leftover_deletions.extend(scanned.leftover_deletions);
        }
        Ok(LogDirsFactory {
            dirs: log_dirs.to_vec(),
            unclaimed,
            placement,
            leftover_deletions,
            loaded_high_watermarks,
            broker_epoch: -1,
            closed: false,
            offline: Default::default(),
        })
    }

    /// Partitions found on disk that no assignment has claimed yet.
    pub fn unclaimed(&self) -> Vec<TopicPartition> {
        self.unclaimed.keys().cloned().collect()
    }

    /// Renames every unclaimed log `is_stray` picks (Kafka's `findStrayReplicas` over the first
    /// metadata image after start-up: the partition is not assigned to this node, or under
    /// another topic id) to its `-stray` name and stops tracking it. Returns the new paths.
    /// Call it only with an image that is caught up with the metadata log, or live partitions
    /// would be taken for strays.
    pub fn mark_strays(
        &mut self,
        is_stray: impl Fn(&TopicPartition, Option<Uuid>) -> bool,
    ) -> Result<Vec<PathBuf>, String> {
        let picked: Vec<TopicPartition> = self
            .unclaimed
            .iter()
            .filter(|(tp, (_, log))| is_stray(tp, log.topic_id()))
            .map(|(tp, _)| tp.clone())
            .collect();
        let mut renamed = Vec::new();
        for tp in picked {
            let (_, log) = self.unclaimed.remove(&tp).expect("picked from unclaimed");
            self.placement.remove(&tp);
            renamed.push(rename_stray(log)?);
        }
        Ok(renamed)
    }

    /// The broker epoch written into `.kafka_cleanshutdown`.
    pub fn set_broker_epoch(&mut self, epoch: i64) {
        self.broker_epoch = epoch;
    }

    /// The online dir with the fewest partitions (Kafka's default placement in a broker).
    fn least_loaded_dir(&self) -> Option<usize> {
        let mut counts = vec![0usize; self.dirs.len()];
        for i in self.placement.values() {
            counts[*i] += 1;
        }
        counts
            .iter()
            .enumerate()
            .filter(|(i, _)| !self.offline.contains(i))
            .min_by_key(|(_, c)| **c)
            .map(|(i, _)| i)
    }

    fn dir_name(&self, i: usize) -> String {
        self.dirs
            .get(i)
            .map(|d| d.display().to_string())
            .unwrap_or_default()
    }

    fn write_checkpoints(
        &self,
        dir: usize,
        entries: &[(TopicPartition, i64, i64, i64)],
    ) -> Result<(), String> {
        let path = &self.dirs[dir];
        let mut recovery_points = BTreeMap::new();
        let mut start_offsets = BTreeMap::new();
        for (tp, recovery_point, log_start_offset, first_segment_base) in entries {
            recovery_points.insert(storage_tp(tp), *recovery_point);
            // Kafka checkpoints a start offset only when it is above the first segment's base.
            if log_start_offset > first_segment_base {
                start_offsets.insert(storage_tp(tp), *log_start_offset);
            }
        }
        write_offset_checkpoint(&path.join(RECOVERY_POINT_CHECKPOINT), &recovery_points)
            .map_err(|e| err(path, e))?;
        write_offset_checkpoint(&path.join(LOG_START_OFFSET_CHECKPOINT), &start_offsets)
            .map_err(|e| err(path, e))
    }

    /// Writes `replication-offset-checkpoint` in every online dir: the given high watermarks
    /// of the replicas placed there (negative ones, of replicas without a log, are left out)
    /// and, for logs on disk no replica has opened yet, the value read at load, so an entry
    /// survives until its replica starts.
    /// A dir whose file cannot be written is reported and the others are still written (as
    /// Kafka handles each dir on its own); the error names every failed dir.
    fn write_high_watermarks(
        &self,
        high_watermarks: &[(TopicPartition, i64)],
    ) -> Result<(), String> {
        let mut failed = Vec::new();
        for (i, path) in self.dirs.iter().enumerate() {
            if self.offline.contains(&i) {
                continue;
            }
            let mut entries: BTreeMap<storage::TopicPartition, i64> = high_watermarks
                .iter()
                .filter(|(tp, hw)| *hw >= 0 && self.placement.get(tp) == Some(&i))
                .map(|(tp, hw)| (storage_tp(tp), *hw))
                .collect();
            for (tp, (j, _)) in &self.unclaimed {
                if let (true, Some(Some(hw))) = (*j == i, self.loaded_high_watermarks.get(tp)) {
                    entries.insert(storage_tp(tp), *hw);
                }
            }
            if let Err(e) =
                write_offset_checkpoint(&path.join(REPLICATION_OFFSET_CHECKPOINT), &entries)
            {
                failed.push(err(path, e));
            }
        }
        if failed.is_empty() {
            Ok(())
        } else {
            Err(failed.join("; "))
        }
    }
}

fn first_segment_base(log: &Log) -> i64 {
    log.segments().next().map_or(0, |s| s.base_offset())
}

impl LogFactory for LogDirsFactory {
    fn open_or_create(
        &mut self,
        tp: &TopicPartition,
        topic_id: Uuid,
        config: &PartitionConfig,
        _topic_overrides: &BTreeMap<String, String>,
    ) -> Result<Box<dyn PartitionLog>, LogOpenError> {
        let log_config = log_config(&config.effective);
        let names: Vec<String> = self.dirs.iter().map(|d| d.display().to_string()).collect();
        let failed = |i: usize, message: String| LogOpenError {
            log_dir: names[i].clone(),
            message,
        };
        let found = match self.unclaimed.remove(tp) {
            Some((i, log)) if is_stray_for(&log, topic_id) => {
                tracing::warn!(%tp, topic_id = %topic_id, found = ?log.topic_id(), "log on disk belongs to another incarnation of the topic");
                self.placement.remove(tp);
                rename_stray(log).map_err(|e| failed(i, e))?;
                None
            }
            other => other,
        };
        let (i, mut log) = match found {
            Some((i, mut log)) => {
                log.update_config(log_config);
                (i, log)
            }
            None => {
                let Some(i) = self.least_loaded_dir() else {
                    return Err(LogOpenError {
                        log_dir: String::new(),
                        message: "no online log dir".into(),
                    });
                };
                let dir = self.dirs[i].join(storage_tp(tp).dir_name());
                let log = Log::open(&dir, log_config, 0, 0, true, now_ms())
                    .map_err(|e| failed(i, err(&dir, e)))?;
                self.placement.insert(tp.clone(), i);
                (i, log)
            }
        };
        if log.topic_id() != Some(topic_id) {
            log.assign_topic_id(topic_id)
                .map_err(|e| failed(i, err(log.dir(), e)))?;
        }
        Ok(Box::new(DiskLog::new(log)))
    }

    fn take_checkpointed_high_watermark(&mut self, tp: &TopicPartition) -> Option<i64> {
        // A new log is empty: its high watermark is 0 either way.
        self.loaded_high_watermarks.remove(tp).unwrap_or(Some(0))
    }

    fn checkpoint_high_watermarks(
        &mut self,
        high_watermarks: &[(TopicPartition, i64)],
    ) -> Result<(), String> {
        if self.closed {
            return Ok(());
        }
        self.write_high_watermarks(high_watermarks)
    }

    fn take_offline(&mut self, log_dir: &str) -> usize {
        if let Some(i) = self
            .dirs
            .iter()
            .position(|d| d.display().to_string() == log_dir)
        {
            self.offline.insert(i);
            // Logs found at start-up in the failed dir will never be served by this process.
            self.unclaimed.retain(|_, (j, _)| *j != i);
        }
        self.dirs.len() - self.offline.len()
    }

    fn offline_log_dirs(&self) -> Vec<String> {
        self.offline.iter().map(|i| self.dir_name(*i)).collect()
    }

    fn delete_unopened(&mut self, tp: &TopicPartition) -> Result<(), String> {
        self.placement.remove(tp);
        if let Some((_, log)) = self.unclaimed.remove(tp) {
            let dir = log.rename_for_deletion().map_err(|e| e.to_string())?;
            storage::remove_log_dir(&dir).map_err(|e| err(&dir, e))?;
        }
        Ok(())
    }

    fn log_dir_of(&self, tp: &TopicPartition) -> String {
        self.dir_name(self.placement.get(tp).copied().unwrap_or(0))
    }

    fn log_dirs(&self) -> Vec<String> {
        self.dirs.iter().map(|d| d.display().to_string()).collect()
    }

    fn checkpoint(&mut self, replicas: &[(TopicPartition, ReplicaInfo)]) -> Result<(), String> {
        if self.closed {
            return Ok(());
        }
        for i in (0..self.dirs.len()).filter(|i| !self.offline.contains(i)) {
            let mut entries: Vec<(TopicPartition, i64, i64, i64)> = replicas
                .iter()
                .filter(|(tp, info)| self.placement.get(tp) == Some(&i) && info.log_end_offset >= 0)
                // A replica's first segment base is not reported; 0 keeps every advanced start.
                .map(|(tp, info)| (tp.clone(), info.recovery_point, info.log_start_offset, 0))
                .collect();
            for (tp, (j, log)) in &self.unclaimed {
                if *j == i {
                    entries.push((
                        tp.clone(),
                        log.recovery_point(),
                        log.log_start_offset(),
                        first_segment_base(log),
                    ));
                }
            }
            self.write_checkpoints(i, &entries)?;
        }
        Ok(())
    }

    fn shutdown(
        &mut self,
        logs: Vec<Box<dyn PartitionLog>>,
        high_watermarks: &[(TopicPartition, i64)],
    ) -> Result<(), String> {
        if self.closed {
            return Ok(());
        }
        // Before the unclaimed logs are drained below: their entries are kept too. A failure
        // here costs the next start only older high watermarks; the logs still close cleanly.
        if let Err(e) = self.write_high_watermarks(high_watermarks) {
            tracing::error!(error = %e, "writing replication-offset-checkpoint at shutdown failed");
        }
        let now = now_ms();
        let mut per_dir: Vec<Vec<Log>> = self.dirs.iter().map(|_| Vec::new()).collect();
        for log in logs {
            let Ok(disk) = log.into_any().downcast::<DiskLog>() else {
                continue;
            };
            let Some(log) = disk.into_log() else { continue };
            let st = log.topic_partition();
            let tp = TopicPartition::new(st.topic.clone(), st.partition);
            per_dir[self.placement.get(&tp).copied().unwrap_or(0)].push(log);
        }
        for (_, (i, log)) in self.unclaimed.drain() {
            per_dir[i].push(log);
        }
        for (i, mut logs) in per_dir.into_iter().enumerate() {
            if self.offline.contains(&i) {
                // A failed dir gets no flush and no clean-shutdown marker: its next start
                // recovers it.
                continue;
            }
            for log in logs.iter_mut() {
                let leo = log.log_end_offset();
                log.flush(leo, now).map_err(|e| err(log.dir(), e))?;
            }
            let entries: Vec<_> = logs
                .iter()
                .map(|log| {
                    let st = log.topic_partition();
                    (
                        TopicPartition::new(st.topic.clone(), st.partition),
                        log.recovery_point(),
                        log.log_start_offset(),
                        first_segment_base(log),
                    )
                })
                .collect();
            self.write_checkpoints(i, &entries)?;
            for log in logs {
                log.close().map_err(|e| e.to_string())?;
            }
            let marker = format!("{{\"version\":0,\"brokerEpoch\":{}}}", self.broker_epoch);
            let path = &self.dirs[i];
            write_atomically(&path.join(CLEAN_SHUTDOWN_MARKER), marker.as_bytes())
                .map_err(|e| err(path, e))?;
        }
        self.closed = true;
        Ok(())
    }

    fn purge_deleted(&mut self) {
        for dir in self.leftover_deletions.drain(..) {
            if let Err(e) = storage::remove_log_dir(&dir) {
                tracing::warn!(dir = %dir.display(), error = %e, "removing deleted log failed");
            }
        }
    }
    fn mark_strays(
        &mut self,
        is_stray: &dyn Fn(&TopicPartition, Option<Uuid>) -> bool,
    ) -> Result<Vec<PathBuf>, String> {
        LogDirsFactory::mark_strays(self, is_stray)
    }
}
