//! `SharePartitionManagerActor`: the shell around [`ShareManager`] (Kafka's
//! `SharePartitionManager`): one per broker, on the coordinator arbiter. It owns every
//! share-partition this broker keeps and the share sessions; the ShareFetch and ShareAcknowledge
//! handlers read the log themselves and come here only to decide. One timer releases expired
//! acquisition locks and the records of idle sessions.

use std::time::Duration;

use actix::prelude::*;
use actix::SpawnHandle;
use futures_util::future::join_all;

use super::core::{
    AckResults, AcquiredRange, FetchPlan, Limits, PersistView, RequestError, Requester, ShareKey,
    ShareManager, TopicIdPartition, FINAL_EPOCH,
};
use super::messages::*;
use super::metrics::share_metrics;
use super::persister::{is_stale, Loaded, SharePersister};
use crate::runtime::{ActorMetrics, SupervisedActor};

/// How often idle sessions are looked for, and the longest a lock expiry may be late.
const TICK_MS: u64 = 1_000;

pub struct SharePartitionManagerActor {
    core: ShareManager,
    /// Parked ShareFetches by group: woken when one of their partitions has records to
    /// acquire.
    waiters: std::collections::HashMap<String, Vec<WatchShareRecords>>,
    /// Settings for groups the actor has not heard from since a restart.
    defaults: Limits,
    /// A session unused this long is dropped and its records released (Kafka drops it when its
    /// connection closes; kactor's handlers do not see connections close).
    session_idle_ms: i64,
    tick: Option<SpawnHandle>,
    /// Where share-partition state is kept (None: in memory only, e.g. unit tests).
    persister: Option<SharePersister>,
    /// Share-partitions being loaded from their coordinator now.
    loading: std::collections::HashSet<ShareKey>,
    metrics: ActorMetrics,
}

impl SharePartitionManagerActor {
    pub fn new(max_sessions: usize, defaults: Limits, session_idle_ms: i64) -> Self {
        SharePartitionManagerActor {
            core: ShareManager::new(max_sessions),
            waiters: std::collections::HashMap::new(),
            defaults,
            session_idle_ms,
            tick: None,
            persister: None,
            loading: std::collections::HashSet::new(),
            metrics: ActorMetrics::new("SharePartitionManagerActor"),
        }
    }

    /// Keeps share-partition state with the share coordinator.
    pub fn with_persister(mut self, persister: SharePersister) -> Self {
        self.persister = Some(persister);
        self
    }

    /// Writes the state of `keys` (those still here), in the background; a failed write marks
    /// its share-partition to be written again on the next tick.
    fn flush(&mut self, keys: Vec<ShareKey>, ctx: &mut Context<Self>) {
        let Some(persister) = self.persister.clone() else {
            return;
        };
        let writes: Vec<(ShareKey, PersistView)> = keys
            .into_iter()
            .filter_map(|k| self.core.persist_view(&k).map(|v| (k, v)))
            .collect();
        if writes.is_empty() {
            return;
        }
        let f = async move {
            let calls = writes.into_iter().map(|(k, v)| {
                let p = persister.clone();
                async move {
                    let r = p.write(&k, v).await;
                    (k, r)
                }
            });
            join_all(calls).await
        };
        ctx.spawn(f.into_actor(self).map(|results, act, _| {
            let mut groups = std::collections::BTreeSet::new();
            for (k, r) in results {
                act.core.written(&k);
                if let Err((code, message)) = r {
                    if is_stale(code, &message) {
                        tracing::info!(group = %k.group, code, %message,
                            "share-partition state here is stale; dropped");
                        act.core.forget(&k);
                    } else {
                        tracing::debug!(group = %k.group, code, %message,
                            "share state write failed; retrying");
                        act.core.mark_dirty(k.clone());
                    }
                }
                groups.insert(k.group);
            }
            for g in groups {
                act.drop_if_idle(&g);
            }
        }));
    }

    /// Drops `group`'s share-partitions if it has no session here and all is written (only
    /// where a coordinator keeps the state: without one this is the only copy).
    fn drop_if_idle(&mut self, group: &str) {
        if self.persister.is_some() {
            self.core.drop_group_if_idle(group);
        }
    }

    fn on_tick(&mut self, ctx: &mut Context<Self>) {
        // Share-partitions of topic partitions led elsewhere now are stale here.
        if let Some(p) = &self.persister {
            self.core
                .retain_led(|topic_id, partition| p.leads(topic_id, partition));
        }
        let dirty = self.core.take_dirty();
        self.flush(dirty, ctx);
        if self.persister.is_some() {
            // Groups whose sessions were evicted as idle above (the others went at once).
            self.core.drop_idle_groups();
        }
        let now = now_ms();
        let released = self
            .core
            .tick(&self.defaults, now - self.session_idle_ms, now);
        if released > 0 {
            share_metrics().lock_releases.inc_by(released as u64);
            // Which groups gained records is not tracked per release: every waiter looks again.
            let groups: Vec<String> = self.waiters.keys().cloned().collect();
            for g in groups {
                self.wake(&g);
            }
        }
        // Fetches whose client went away leave closed channels behind.
        self.waiters.retain(|_, w| {
            w.retain(|watch| !watch.done.is_closed());
            !w.is_empty()
        });
        self.report();
    }

    /// Wakes the fetches of `group` parked for records that now have something to acquire
    /// (Kafka completes its delayed share fetches on acknowledgement and release the same
    /// way): they read and acquire again. The others stay parked: waking them would only
    /// have them read for nothing.
    fn wake(&mut self, group: &str) {
        let Some(parked) = self.waiters.remove(group) else {
            return;
        };
        let mut still = Vec::new();
        for watch in parked {
            if self
                .core
                .has_acquirable(group, &watch.partitions, &watch.limits)
            {
                let _ = watch.done.send(());
            } else if !watch.done.is_closed() {
                still.push(watch);
            }
        }
        if !still.is_empty() {
            self.waiters.insert(group.to_string(), still);
        }
    }

    fn report(&self) {
        let m = share_metrics();
        m.sessions.set(self.core.session_count() as i64);
        m.partitions.set(self.core.partitions().count() as i64);
        m.in_flight.set(
            self.core
                .partitions()
                .map(|(_, sp)| sp.acquired_count() as i64)
                .sum(),
        );
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Actor for SharePartitionManagerActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.tick =
            Some(ctx.run_interval(Duration::from_millis(TICK_MS), |act, ctx| act.on_tick(ctx)));
    }
}

impl Supervised for SharePartitionManagerActor {
    fn restarting(&mut self, _: &mut Context<Self>) {
        // Share-partitions are loaded again from their coordinators on the next fetches
        // (what was acquired and not yet written is delivered again).
        self.core = ShareManager::new(self.core_max_sessions());
        self.loading.clear();
    }
}

impl SharePartitionManagerActor {
    fn core_max_sessions(&self) -> usize {
        self.core.max_sessions()
    }
}

impl SupervisedActor for SharePartitionManagerActor {
    const MAILBOX_CAPACITY: usize = 4096;
}

crate::supervised_mailbox!(SharePartitionManagerActor);

impl Handler<BeginShareFetch> for SharePartitionManagerActor {
    type Result = Result<FetchPlan, RequestError>;
    fn handle(&mut self, m: BeginShareFetch, _: &mut Context<Self>) -> Self::Result {
        let metrics = self.metrics.clone();
        let _t = metrics.handle();
        let who = Requester {
            group: &m.group,
            member: &m.member,
        };
        let r = self.core.begin_fetch(
            who,
            m.epoch,
            &m.partitions,
            &m.forgotten,
            &m.limits,
            now_ms(),
        );
        // Acknowledgements or a closed session may have freed records for others.
        if m.partitions.iter().any(|(_, acks)| !acks.is_empty()) || m.epoch == FINAL_EPOCH {
            self.wake(&m.group);
        }
        if m.epoch == FINAL_EPOCH {
            self.drop_if_idle(&m.group);
        }
        self.report();
        r
    }
}

impl Handler<AcquireRecords> for SharePartitionManagerActor {
    type Result = Vec<(TopicIdPartition, Vec<AcquiredRange>)>;
    fn handle(&mut self, m: AcquireRecords, _: &mut Context<Self>) -> Self::Result {
        let metrics = self.metrics.clone();
        let _t = metrics.handle();
        let r = self.core.acquire(
            &m.group,
            &m.member,
            &m.reads,
            m.max_records,
            &m.limits,
            now_ms(),
        );
        let m = share_metrics();
        for (_, ranges) in &r {
            for a in ranges {
                let n = (a.last_offset - a.first_offset + 1) as u64;
                m.acquired.inc_by(n);
                if a.delivery_count > 1 {
                    m.redelivered.inc_by(n);
                }
            }
        }
        self.report();
        r
    }
}

impl Handler<NextFetchOffsets> for SharePartitionManagerActor {
    type Result = Vec<(TopicIdPartition, Option<i64>)>;
    fn handle(&mut self, m: NextFetchOffsets, _: &mut Context<Self>) -> Self::Result {
        let metrics = self.metrics.clone();
        let _t = metrics.handle();
        self.core.next_fetch_offsets(&m.group, &m.partitions)
    }
}

impl Handler<AcknowledgeRecords> for SharePartitionManagerActor {
    type Result = Result<AckResults, RequestError>;
    fn handle(&mut self, m: AcknowledgeRecords, _: &mut Context<Self>) -> Self::Result {
        let metrics = self.metrics.clone();
        let _t = metrics.handle();
        let who = Requester {
            group: &m.group,
            member: &m.member,
        };
        let r = self
            .core
            .acknowledge(who, m.epoch, &m.partitions, &m.limits, now_ms());
        if m.epoch == FINAL_EPOCH {
            self.drop_if_idle(&m.group);
        }
        self.report();
        r
    }
}

impl Handler<ForgetShareState> for SharePartitionManagerActor {
    type Result = ();
    fn handle(&mut self, m: ForgetShareState, _: &mut Context<Self>) {
        let metrics = self.metrics.clone();
        let _t = metrics.handle();
        for (topic_id, partition) in m.partitions {
            self.core.forget(&ShareKey {
                group: m.group.clone(),
                topic_id,
                partition,
            });
        }
        self.report();
    }
}

impl Handler<WatchShareRecords> for SharePartitionManagerActor {
    type Result = ();
    fn handle(&mut self, m: WatchShareRecords, _: &mut Context<Self>) {
        let metrics = self.metrics.clone();
        let _t = metrics.handle();
        if self.core.has_acquirable(&m.group, &m.partitions, &m.limits) {
            // Freed between the fetch's acquire and this message: no need to wait.
            let _ = m.done.send(());
            return;
        }
        self.waiters.entry(m.group.clone()).or_default().push(m);
    }
}

impl Handler<LoadSharePartitions> for SharePartitionManagerActor {
    type Result = ResponseActFuture<Self, Vec<(TopicIdPartition, Option<Option<i64>>)>>;
    fn handle(&mut self, m: LoadSharePartitions, _: &mut Context<Self>) -> Self::Result {
        let metrics = self.metrics.clone();
        let _t = metrics.handle();
        let known = self.core.next_fetch_offsets(&m.group, &m.partitions);
        // One load per share-partition at a time: two first fetches racing would both
        // initialize it at the coordinator, the second wiping what the first wrote since.
        let known: Vec<(TopicIdPartition, Option<i64>, bool)> = known
            .into_iter()
            .map(|(tp, at)| {
                let key = ShareKey::new(&m.group, tp);
                let busy = at.is_none() && !self.loading.insert(key);
                (tp, at, busy)
            })
            .collect();
        let Some(persister) = self.persister.clone() else {
            for (tp, _, _) in &known {
                self.loading.remove(&ShareKey::new(&m.group, *tp));
            }
            return Box::pin(fut::ready(
                known
                    .into_iter()
                    .map(|(tp, at, _)| (tp, Some(at)))
                    .collect(),
            ));
        };
        // Share-partitions already here need nothing; the others are asked for.
        let group = m.group;
        let loads = known.into_iter().map(move |(tp, at, busy)| {
            let p = persister.clone();
            let key = ShareKey::new(&group, tp);
            async move {
                let loaded = match (at, busy) {
                    (Some(_), _) => None,
                    // Another fetch is loading it: nothing to read from it this time.
                    (None, true) => Some(Loaded::Unavailable),
                    (None, false) => Some(p.load(&key).await),
                };
                (key, at, busy, loaded)
            }
        });
        Box::pin(join_all(loads).into_actor(self).map(|results, act, _| {
            results
                .into_iter()
                .map(|(key, at, busy, loaded)| {
                    let tp = (key.topic_id, key.partition);
                    if at.is_none() && !busy {
                        act.loading.remove(&key);
                    }
                    let at = match loaded {
                        None => Some(at),
                        Some(Loaded::State {
                            state_epoch,
                            start_offset,
                            batches,
                        }) => Some(Some(act.core.restore(
                            key,
                            state_epoch,
                            start_offset,
                            &batches,
                        ))),
                        // Another fetch may have started it meanwhile.
                        Some(Loaded::Fresh { state_epoch }) => {
                            act.core.fresh_state_epoch(&key, state_epoch);
                            Some(act.core.next_fetch_offsets(&key.group, &[tp])[0].1)
                        }
                        Some(Loaded::Unavailable) => None,
                    };
                    (tp, at)
                })
                .collect()
        }))
    }
}

impl Handler<PersistShareState> for SharePartitionManagerActor {
    type Result = ResponseActFuture<Self, Vec<(TopicIdPartition, Result<(), RequestError>)>>;
    fn handle(&mut self, m: PersistShareState, _: &mut Context<Self>) -> Self::Result {
        let metrics = self.metrics.clone();
        let _t = metrics.handle();
        let Some(persister) = self.persister.clone() else {
            return Box::pin(fut::ready(
                m.partitions.into_iter().map(|tp| (tp, Ok(()))).collect(),
            ));
        };
        let writes: Vec<(ShareKey, Option<PersistView>)> = m
            .partitions
            .iter()
            .map(|tp| {
                let k = ShareKey::new(&m.group, *tp);
                let v = self.core.persist_view(&k);
                (k, v)
            })
            .collect();
        let calls = writes.into_iter().map(move |(k, v)| {
            let p = persister.clone();
            async move {
                let taken = v.is_some();
                // Gone meanwhile (a restart of this actor): nothing was written.
                let r = match v {
                    Some(v) => p.write(&k, v).await,
                    None => Err((
                        kactor_protocol::errors::COORDINATOR_NOT_AVAILABLE,
                        "The coordinator is not available.".to_string(),
                    )),
                };
                (k, r, taken)
            }
        });
        let group = m.group;
        Box::pin(
            join_all(calls)
                .into_actor(self)
                .map(move |results, act, _| {
                    let answers = results
                        .into_iter()
                        .map(|(k, r, taken)| {
                            if taken {
                                act.core.written(&k);
                            }
                            match &r {
                                Err((code, message)) if is_stale(*code, message) => {
                                    act.core.forget(&k)
                                }
                                Err(_) => act.core.mark_dirty(k.clone()),
                                Ok(()) => {}
                            }
                            ((k.topic_id, k.partition), r)
                        })
                        .collect();
                    // A session closed with these acknowledgements: the group may be idle now.
                    act.drop_if_idle(&group);
                    answers
                }),
        )
    }
}
