//! `LogCleanerActor` (Kafka's `LogCleaner.CleanerThread`, `log.cleaner.threads` of them): every
//! `log.cleaner.backoff.ms` (at once again after a cleaning) it asks every hosted partition for
//! its cleaner view, picks the dirtiest compacted log no other cleaner is on, runs the pure
//! cleaner (`crate::log::cleaner`) on the blocking pool, and hands the cleaned segments to the
//! log's `PartitionActor` to swap in — the same ownership path as retention, so appends, reads
//! and truncation never race with the swap. The cleaners share one [`CleanerManager`] (Kafka's
//! `LogCleanerManager`): the `cleaner-offset-checkpoint` of each log dir, the logs in progress,
//! the uncleanable ones.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use actix::{
    Actor, ActorFutureExt, AsyncContext, Context, Handler, Message, Supervised, WrapFuture,
};
use prometheus::{Gauge, IntCounter, IntGauge};

use super::actor::PartitionActor;
use super::registry::PartitionTableReader;
use crate::log::cleaner::{
    self, clean_log, discard_cleaned, log_to_clean, CleanOutcome, CleanedSegment, CleanerConfig,
    LogToClean, LogView, OffsetMap,
};
use crate::log::TopicPartition;
use crate::metrics::register;
use crate::runtime::{run_caught, ActorMetrics, MeteredAddr, SupervisedActor};

/// Cleaner metric families (Kafka's `LogCleaner` / `LogCleanerManager` gauges).
pub struct CleanerMetrics {
    /// `kactor_log_cleaner_bytes_read_total`: bytes of segments cleaned (Kafka's cleaner
    /// "read" figure).
    pub bytes_read_total: IntCounter,
    /// `kactor_log_cleaner_bytes_written_total`: bytes of the cleaned segments written.
    pub bytes_written_total: IntCounter,
    /// `kactor_log_cleaner_cleanings_total`: cleanings swapped in.
    pub cleanings_total: IntCounter,
    /// `kactor_log_cleaner_max_dirty_ratio`: the largest dirty ratio of the compacted logs at
    /// the last round (Kafka's `max-dirty-percent`, as a ratio).
    pub max_dirty_ratio: Gauge,
    /// `kactor_log_cleaner_last_run_timestamp_seconds`: when a cleaner last looked for work
    /// (Kafka's `time-since-last-run-ms` = now minus this).
    pub last_run_timestamp_seconds: Gauge,
    /// `kactor_log_cleaner_uncleanable_partitions`: logs a cleaning failed on, left alone
    /// (Kafka's `uncleanable-partitions-count`).
    pub uncleanable_partitions: IntGauge,
    /// `kactor_log_cleaner_buffer_utilization_ratio`: offset map use at the last cleaning
    /// (Kafka's `max-buffer-utilization-percent`, as a ratio).
    pub buffer_utilization_ratio: Gauge,
}

pub fn cleaner_metrics() -> &'static CleanerMetrics {
    static M: OnceLock<CleanerMetrics> = OnceLock::new();
    M.get_or_init(|| {
        let counter = |n: &str, h: &str| register(IntCounter::new(n, h).expect("valid family"));
        let gauge = |n: &str, h: &str| register(Gauge::new(n, h).expect("valid family"));
        CleanerMetrics {
            bytes_read_total: counter(
                "kactor_log_cleaner_bytes_read_total",
                "Bytes of log segments the log cleaner read and rewrote.",
            ),
            bytes_written_total: counter(
                "kactor_log_cleaner_bytes_written_total",
                "Bytes of cleaned segments the log cleaner wrote.",
            ),
            cleanings_total: counter(
                "kactor_log_cleaner_cleanings_total",
                "Cleanings of a log swapped in by the log cleaner.",
            ),
            max_dirty_ratio: gauge(
                "kactor_log_cleaner_max_dirty_ratio",
                "Largest dirty ratio among compacted logs at the cleaner's last round.",
            ),
            last_run_timestamp_seconds: gauge(
                "kactor_log_cleaner_last_run_timestamp_seconds",
                "Unix time of the log cleaner's last look for work.",
            ),
            uncleanable_partitions: register(
                IntGauge::new(
                    "kactor_log_cleaner_uncleanable_partitions",
                    "Compacted logs the cleaner failed on and no longer cleans.",
                )
                .expect("valid family"),
            ),
            buffer_utilization_ratio: gauge(
                "kactor_log_cleaner_buffer_utilization_ratio",
                "Share of the offset map used by the last cleaning.",
            ),
        }
    })
}

/// State shared by the cleaners (Kafka's `LogCleanerManager`).
#[derive(Debug, Default)]
pub struct CleanerManager {
    state: Mutex<ManagerState>,
}

#[derive(Debug, Default)]
struct ManagerState {
    /// `cleaner-offset-checkpoint` of each log dir, read on first use.
    checkpoints: HashMap<PathBuf, BTreeMap<TopicPartition, i64>>,
    in_progress: HashSet<TopicPartition>,
    uncleanable: HashSet<TopicPartition>,
}

impl ManagerState {
    fn checkpoints_of(&mut self, log_dir: &Path) -> &mut BTreeMap<TopicPartition, i64> {
        self.checkpoints
            .entry(log_dir.to_path_buf())
            .or_insert_with(|| {
                cleaner::read_cleaner_checkpoint(log_dir).unwrap_or_else(|e| {
                    tracing::warn!(dir = %log_dir.display(), error = %e, "unreadable cleaner-offset-checkpoint, cleaning from the log starts");
                    BTreeMap::new()
                })
            })
    }

    fn set_checkpoint(&mut self, log_dir: &Path, tp: &TopicPartition, offset: i64) {
        let offsets = self.checkpoints_of(log_dir);
        offsets.insert(tp.clone(), offset);
        if let Err(e) = cleaner::write_cleaner_checkpoint(log_dir, offsets) {
            tracing::warn!(dir = %log_dir.display(), error = %e, "writing cleaner-offset-checkpoint failed");
        }
    }
}

fn log_dir_of(view: &LogView) -> PathBuf {
    view.dir.parent().map(Path::to_path_buf).unwrap_or_default()
}

/// The choice of a round (Kafka's `grabFilthiestCompactedLog`): the dirtiest due log not in
/// progress nor uncleanable, marked in progress. Also refreshes the round's gauges.
fn grab_filthiest(
    manager: &CleanerManager,
    views: Vec<(MeteredAddr<PartitionActor>, LogView)>,
    now_ms: i64,
) -> Option<(MeteredAddr<PartitionActor>, LogView, LogToClean)> {
    let mut st = manager.state.lock().expect("cleaner state");
    let hosted: HashSet<TopicPartition> = views
        .iter()
        .map(|(_, v)| v.topic_partition.clone())
        .collect();
    // A log that left this broker is forgotten; if it comes back it is tried again.
    st.uncleanable.retain(|tp| hosted.contains(tp));
    let mut candidates = Vec::new();
    let mut max_ratio = 0.0f64;
    for (addr, view) in views {
        let dir = log_dir_of(&view);
        let tp = view.topic_partition.clone();
        let stored = st.checkpoints_of(&dir).get(&tp).copied();
        let checkpoint = cleaner::checkpoint_after_truncation(stored, view.truncated_to);
        if checkpoint != stored {
            if let Some(c) = checkpoint {
                st.set_checkpoint(&dir, &tp, c);
            }
        }
        let c = log_to_clean(&view, checkpoint, now_ms);
        if c.force_update_checkpoint {
            st.set_checkpoint(&dir, &tp, c.first_dirty_offset);
        }
        if c.total_bytes == 0 {
            continue;
        }
        max_ratio = max_ratio.max(c.cleanable_ratio);
        if st.in_progress.contains(&tp) || st.uncleanable.contains(&tp) {
            continue;
        }
        candidates.push((addr, view, c));
    }
    let m = cleaner_metrics();
    m.max_dirty_ratio.set(max_ratio);
    m.last_run_timestamp_seconds.set(now_ms as f64 / 1000.0);
    m.uncleanable_partitions.set(st.uncleanable.len() as i64);
    let ratios: Vec<(LogToClean, f64)> = candidates
        .iter()
        .map(|(_, v, c)| (*c, v.config.min_cleanable_dirty_ratio))
        .collect();
    let i = cleaner::filthiest(&ratios)?;
    let chosen = candidates.swap_remove(i);
    st.in_progress.insert(chosen.1.topic_partition.clone());
    Some(chosen)
}

/// A log being cleaned; dropping it ends that.
struct InProgress {
    manager: Arc<CleanerManager>,
    tp: TopicPartition,
}

impl Drop for InProgress {
    fn drop(&mut self) {
        if let Ok(mut st) = self.manager.state.lock() {
            st.in_progress.remove(&self.tp);
        }
    }
}

/// Cleaner → partition: the log's cleaner view (`None` unless compacted and on disk).
#[derive(Message)]
#[rtype(result = "Option<LogView>")]
pub struct GetCleanerView;

impl Handler<GetCleanerView> for PartitionActor {
    type Result = Option<LogView>;
    fn handle(&mut self, _: GetCleanerView, _: &mut Context<Self>) -> Option<LogView> {
        match self.core().map(|c| c.cleaner_view()) {
            Ok(Ok(view)) => view,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "cleaner view failed");
                None
            }
            Err(_) => None,
        }
    }
}

/// Cleaner → partition: swap these cleaned segments in. Answers how many were.
#[derive(Message)]
#[rtype(result = "Result<usize, String>")]
pub struct SwapCleaned {
    pub cleaned: Vec<CleanedSegment>,
    pub generation: u64,
}

impl Handler<SwapCleaned> for PartitionActor {
    type Result = Result<usize, String>;
    fn handle(&mut self, msg: SwapCleaned, _: &mut Context<Self>) -> Result<usize, String> {
        match self.core() {
            Ok(c) => c
                .replace_with_cleaned(&msg.cleaned, msg.generation)
                .map_err(|e| e.to_string()),
            Err(e) => {
                for c in &msg.cleaned {
                    discard_cleaned(c);
                }
                Err(e.to_string())
            }
        }
    }
}

pub struct LogCleanerActor {
    id: usize,
    config: CleanerConfig,
    partitions: PartitionTableReader,
    manager: Arc<CleanerManager>,
    /// The offset map, kept between cleanings (allocated at the first one); taken by the
    /// blocking task while it runs.
    map: Option<OffsetMap>,
    busy: bool,
    metrics: ActorMetrics,
}

impl LogCleanerActor {
    pub fn new(
        id: usize,
        config: CleanerConfig,
        partitions: PartitionTableReader,
        manager: Arc<CleanerManager>,
    ) -> Self {
        LogCleanerActor {
            id,
            config,
            partitions,
            manager,
            map: None,
            busy: false,
            metrics: ActorMetrics::new("LogCleanerActor"),
        }
    }

    /// One round: gather views, pick, clean on the blocking pool, swap through the owner.
    fn round(&mut self, ctx: &mut Context<Self>) {
        if self.busy || !self.config.enable {
            return;
        }
        self.busy = true;
        let table = self.partitions.borrow().clone();
        let manager = self.manager.clone();
        let memory = self.config.map_memory_per_thread();
        let load_factor = self.config;
        let map = self.map.take();
        let id = self.id;
        let fut = async move {
            let asks = table.partitions.values().map(|r| {
                let addr = r.addr.clone();
                async move { (addr.clone(), addr.send(GetCleanerView).await) }
            });
            let views: Vec<_> = futures_util::future::join_all(asks)
                .await
                .into_iter()
                .filter_map(|(addr, v)| Some((addr, v.ok()??)))
                .collect();
            let now = super::actor::now_ms();
            let Some((addr, view, to_clean)) = grab_filthiest(&manager, views, now) else {
                return (map, false);
            };
            let first_dirty = to_clean.first_dirty_offset;
            let tp = view.topic_partition.clone();
            let dir = log_dir_of(&view);
            // Clears the in-progress mark however this future ends (a restart drops it).
            let _guard = InProgress {
                manager: manager.clone(),
                tp: tp.clone(),
            };
            let rate = load_factor.max_io_bytes_per_second / load_factor.threads.max(1) as f64;
            let joined = tokio::task::spawn_blocking(move || {
                let mut map = map.unwrap_or_else(|| OffsetMap::new(memory));
                let max = load_factor.max_desired_entries(map.slots());
                // log.cleaner.io.max.bytes.per.second, split over the cleaners; this thread is
                // the blocking pool's, so sleeping here holds no actor.
                let mut throttler = cleaner::Throttler::new(rate, super::actor::now_ms());
                let mut throttle = |bytes: u64| {
                    let sleep = throttler.observe(bytes, super::actor::now_ms());
                    if sleep > 0 {
                        std::thread::sleep(Duration::from_millis(sleep));
                    }
                };
                let r = clean_log(&view, &to_clean, &mut map, max, now, &mut throttle);
                (map, r)
            })
            .await;
            let (map, outcome) = match joined {
                Ok((map, r)) => (Some(map), r),
                Err(e) => (
                    None,
                    Err(std::io::Error::other(format!("cleaner task failed: {e}"))),
                ),
            };
            let swapped = match outcome {
                Ok(outcome) => swap(&addr, outcome).await,
                // A log truncated (a follower's) or deleted while it was read ends the read
                // short or loses its files: Kafka aborts such a cleaning and tries again later
                // (LogCleaningAbortedException); only other failures make a log uncleanable.
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::NotFound
                    ) =>
                {
                    tracing::warn!(cleaner = id, partition = %tp, error = %e, "cleaning aborted: the log changed while it was read");
                    Ok(None)
                }
                Err(e) => Err(e.to_string()),
            };
            let mut st = manager.state.lock().expect("cleaner state");
            let m = cleaner_metrics();
            // Straight on to the next log only when this one moved forward: a refused swap or
            // a round that could not advance waits for the backoff, never spins.
            let mut progressed = false;
            match swapped {
                Ok(Some((end_offset, stats))) => {
                    progressed = end_offset > first_dirty;
                    st.set_checkpoint(&dir, &tp, end_offset);
                    m.cleanings_total.inc();
                    m.bytes_read_total.inc_by(stats.bytes_read);
                    m.bytes_written_total.inc_by(stats.bytes_written);
                    m.buffer_utilization_ratio.set(stats.buffer_utilization);
                    tracing::info!(cleaner = id, partition = %tp, end_offset, read = stats.bytes_read, written = stats.bytes_written, "log cleaned");
                }
                // The log changed meanwhile: the next round measures it again.
                Ok(None) => {}
                Err(e) => {
                    tracing::error!(cleaner = id, partition = %tp, error = %e, "cleaning failed, the log is marked uncleanable");
                    st.uncleanable.insert(tp);
                    m.uncleanable_partitions.set(st.uncleanable.len() as i64);
                }
            }
            drop(st);
            (map, progressed)
        };
        ctx.spawn(fut.into_actor(self).map(|(map, cleaned), act, ctx| {
            act.busy = false;
            if map.is_some() {
                act.map = map;
            }
            // Kafka's cleaner thread goes straight on after a cleaning, and backs off when
            // there was nothing to do.
            if cleaned {
                ctx.run_later(Duration::ZERO, |act, ctx| act.tick(ctx));
            }
        }));
    }

    fn tick(&mut self, ctx: &mut Context<Self>) {
        let metrics = self.metrics.clone();
        let _m = metrics.handle();
        run_caught(self, ctx, &metrics, "the log cleaner round", |act, ctx| {
            act.round(ctx)
        });
    }
}

/// Hands a cleaning to the log's owner; `Ok(Some)` when every segment was swapped in.
async fn swap(
    addr: &MeteredAddr<PartitionActor>,
    outcome: CleanOutcome,
) -> Result<Option<(i64, cleaner::CleanerStats)>, String> {
    let n = outcome.cleaned.len();
    let cleaned = outcome.cleaned.clone();
    match addr
        .send(SwapCleaned {
            cleaned: outcome.cleaned,
            generation: outcome.generation,
        })
        .await
    {
        Ok(Ok(swapped)) if swapped == n => Ok(Some((outcome.end_offset, outcome.stats))),
        Ok(Ok(_)) => Ok(None),
        Ok(Err(e)) => Err(e),
        Err(e) => {
            // The partition is gone (stopped, restarted): nothing was swapped.
            for c in &cleaned {
                discard_cleaned(c);
            }
            tracing::debug!(error = %e, "partition went away during cleaning");
            Ok(None)
        }
    }
}

impl Actor for LogCleanerActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        cleaner_metrics();
        if !self.config.enable {
            return;
        }
        let every = Duration::from_millis(self.config.backoff_ms.clamp(1, 1_000_000_000) as u64);
        ctx.run_interval(every, |act, ctx| act.tick(ctx));
    }
}

impl Supervised for LogCleanerActor {
    /// A restart forgets the map (it is rebuilt at the next cleaning); `started` re-arms the
    /// timer. A cleaning in flight when the panic hit still clears its in-progress mark.
    fn restarting(&mut self, _: &mut Context<Self>) {
        self.busy = false;
    }
}

impl SupervisedActor for LogCleanerActor {
    const MAILBOX_CAPACITY: usize = 16;
}

crate::supervised_mailbox!(LogCleanerActor);

/// Tests / operators → cleaner: run a round now.
#[derive(Message)]
#[rtype(result = "()")]
pub struct RunCleanerNow;

impl Handler<RunCleanerNow> for LogCleanerActor {
    type Result = ();
    fn handle(&mut self, _: RunCleanerNow, ctx: &mut Context<Self>) {
        self.round(ctx);
    }
}
