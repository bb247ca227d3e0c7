//! QuorumControllerActor (Kafka's `QuorumController` event loop): runs the pure
//! [`QuorumControllerCore`] on the controller arbiter, appends the records it produces through
//! the RaftActor, and answers each request once Raft has committed its records. It is a Raft
//! listener: committed batches keep its image in step with the log, and leadership turns it on
//! and off.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use rand::RngCore;
use tokio::sync::{oneshot, watch};
use tracing::{error, info, warn};

use super::core::{ControllerConfig, ControllerResult, QuorumControllerCore};
use super::messages::*;
use crate::metadata::core::MetadataRecord;
use crate::raft::actor::now_ms;
use crate::raft::messages::{
    AppendGate, AppendMetadataRecords, MetadataBatchesCommitted, RaftError, RaftLeaderChanged,
    RegisterRaftListener, UpgradeKRaftVersion,
};
use crate::runtime::{ActorMetrics, MeteredAddr, MeteredRecipient, SupervisedActor};

/// How often broker sessions are checked (Kafka checks on a similar short timer).
const TICK: Duration = Duration::from_millis(250);

type Completion = Box<dyn FnOnce(Result<i64, ControllerError>) + Send>;

struct Pending {
    /// Completes once the committed offset reaches this.
    offset: i64,
    complete: Completion,
}

pub struct QuorumControllerActor {
    cfg: ControllerConfig,
    core: QuorumControllerCore,
    append: MeteredRecipient<AppendMetadataRecords>,
    upgrade_kraft: MeteredRecipient<UpgradeKRaftVersion>,
    register: MeteredRecipient<RegisterRaftListener>,
    committed_offset: i64,
    /// The Raft epoch this controller became active in: its appends are refused in any other.
    active_epoch: i32,
    /// Shared with the RaftActor: see [`AppendGate`]. None in tests without Raft voters.
    gate: Option<Arc<AppendGate>>,
    pending: VecDeque<Pending>,
    /// `true` while this controller is active: a co-located BrokerLifecycleActor registers
    /// the moment it turns true (Kafka's broker learns the active controller from the Raft
    /// leader the same way) instead of polling with NOT_CONTROLLER answers.
    active_tx: watch::Sender<bool>,
    /// (active, applied offset) the controller gauges were last computed at.
    gauges_at: Option<(bool, i64)>,
    metrics: ActorMetrics,
}

impl QuorumControllerActor {
    /// `append` / `upgrade_kraft` / `register` are the RaftActor's. The actor registers itself
    /// as a Raft listener when it starts.
    pub fn new(
        cfg: ControllerConfig,
        append: MeteredRecipient<AppendMetadataRecords>,
        upgrade_kraft: MeteredRecipient<UpgradeKRaftVersion>,
        register: MeteredRecipient<RegisterRaftListener>,
        metrics: ActorMetrics,
    ) -> Self {
        QuorumControllerActor {
            core: QuorumControllerCore::new(cfg.clone(), rand::thread_rng().next_u64()),
            cfg,
            append,
            upgrade_kraft,
            register,
            committed_offset: -1,
            active_epoch: -1,
            gate: None,
            pending: VecDeque::new(),
            active_tx: watch::channel(false).0,
            gauges_at: None,
            metrics,
        }
    }

    /// Coordinates this controller's predicted offsets with Raft's own control batches.
    pub fn with_append_gate(mut self, gate: Arc<AppendGate>) -> Self {
        self.gate = Some(gate);
        self
    }

    /// Whether this controller is active, as a watch (true from the activation on, until
    /// leadership or the core is lost). Take it before starting the actor.
    pub fn active_watch(&self) -> watch::Receiver<bool> {
        self.active_tx.subscribe()
    }

    fn set_active(&self, active: bool) {
        self.active_tx
            .send_if_modified(|a| std::mem::replace(a, active) != active);
    }

    /// Refreshes the controller gauges when the image or the role moved since the last time.
    fn refresh_gauges(&mut self) {
        let now = (self.core.is_active(), self.core.applied_offset());
        if self.gauges_at != Some(now) {
            self.gauges_at = Some(now);
            let counts = super::metrics::ControllerCounts::of(self.core.image());
            super::metrics::publish(now.0, &counts);
        }
    }

    /// A periodic election pass (preferred leaders back, or unclean elections); a pass that
    /// stopped at its cap runs again shortly, as Kafka reschedules it at once.
    fn periodic_elections(
        &mut self,
        ctx: &mut Context<Self>,
        pass: fn(&mut QuorumControllerCore) -> (Vec<MetadataRecord>, bool),
    ) {
        if !self.enter_gate(ctx) {
            return;
        }
        let (records, more) = pass(&mut self.core);
        if !records.is_empty() {
            info!(count = records.len(), "periodic leader elections");
        }
        self.write(records, ctx);
        if more {
            ctx.run_later(Duration::from_millis(10), move |act, ctx| {
                act.periodic_elections(ctx, pass)
            });
        }
    }

    /// Sends records to Raft; a failure means leadership is gone (or the log broke), so every
    /// waiting request is answered NOT_CONTROLLER and the core rebuilt from the log.
    fn write(&mut self, records: Vec<MetadataRecord>, ctx: &mut Context<Self>) {
        if records.is_empty() {
            self.leave_gate();
            return;
        }
        let mut values = Vec::with_capacity(records.len());
        for r in &records {
            match r.encode() {
                Ok(v) => values.push(v),
                Err(e) => {
                    error!(error = %e, "cannot encode a metadata record");
                    self.leave_gate();
                    self.fail_all(ControllerError::WriteFailed(e.to_string()));
                    self.resign(ctx);
                    return;
                }
            }
        }
        let expected_base = self.core.applied_offset() + 1 - records.len() as i64;
        self.append
            .send(AppendMetadataRecords {
                records: values,
                epoch: self.active_epoch,
            })
            .into_actor(self)
            .map(move |res, act, ctx| match res {
                Ok(Ok(appended)) => {
                    act.leave_gate();
                    if appended.base_offset != expected_base {
                        // Every waiting request completes at a predicted offset, and broker
                        // epochs are predicted offsets: with the prediction off, answers would
                        // come before their records commit (or wait for offsets that never
                        // come). Start over from the log, and let clients retry.
                        error!(
                            expected_base,
                            actual = appended.base_offset,
                            "metadata batch landed at an unexpected offset; resigning"
                        );
                        act.fail_all(ControllerError::NotController);
                        act.resign(ctx);
                    }
                }
                Ok(Err(e)) => {
                    act.leave_gate();
                    warn!(error = %e, "metadata append refused; resigning");
                    act.fail_all(ControllerError::NotController);
                    act.resign(ctx);
                }
                Err(e) => {
                    act.leave_gate();
                    error!(error = %e, "RaftActor unreachable; resigning");
                    act.fail_all(ControllerError::WriteFailed(e.to_string()));
                    act.resign(ctx);
                }
            })
            .wait(ctx);
    }

    /// Called before the core places new records: steps over the control batches Raft has
    /// appended since the last prediction, and keeps Raft from appending more until
    /// [`Self::leave_gate`]. False (after resigning) when they are not where expected.
    fn enter_gate(&mut self, ctx: &mut Context<Self>) -> bool {
        let Some(gate) = self.gate.clone() else {
            return true;
        };
        for (base, last) in gate.enter() {
            if !self.core.raft_control_appended(base, last) {
                error!(
                    base,
                    last,
                    next = self.core.applied_offset() + 1,
                    "a Raft control batch landed where this controller's records were expected; \
                     resigning"
                );
                gate.leave();
                self.fail_all(ControllerError::NotController);
                self.resign(ctx);
                return false;
            }
        }
        true
    }

    fn leave_gate(&self) {
        if let Some(gate) = &self.gate {
            gate.leave();
        }
    }

    /// Drops uncommitted state: a fresh core replays the committed log from Raft.
    fn resign(&mut self, ctx: &mut Context<Self>) {
        self.set_active(false);
        self.core = QuorumControllerCore::new(self.cfg.clone(), rand::thread_rng().next_u64());
        self.committed_offset = -1;
        self.register_with_raft(ctx);
    }

    fn register_with_raft(&self, ctx: &mut Context<Self>) {
        let me = MeteredAddr::new(ctx.address(), self.metrics.clone());
        self.register.do_send(RegisterRaftListener {
            name: "QuorumControllerActor",
            committed: me.clone().recipient(),
            leader_changes: Some(me.recipient()),
        });
    }

    fn fail_all(&mut self, e: ControllerError) {
        for p in self.pending.drain(..) {
            (p.complete)(Err(e.clone()));
        }
    }

    /// Writes the result's records and answers once they (and every earlier write) commit.
    fn submit<R: Send + 'static>(
        &mut self,
        result: ControllerResult<R>,
        ctx: &mut Context<Self>,
    ) -> ResponseFuture<ControllerReply<R>> {
        let (tx, rx) = oneshot::channel();
        let response = result.response;
        let complete: Completion = Box::new(move |r: Result<i64, ControllerError>| {
            let _ = tx.send(r.map(|offset| Committed { response, offset }));
        });
        self.write(result.records, ctx);
        let offset = self.core.applied_offset();
        if offset <= self.committed_offset || !self.core.is_active() {
            complete(Ok(offset));
        } else {
            self.pending.push_back(Pending { offset, complete });
        }
        Box::pin(async move { rx.await.unwrap_or(Err(ControllerError::NotController)) })
    }

    fn complete_committed(&mut self) {
        while self
            .pending
            .front()
            .is_some_and(|p| p.offset <= self.committed_offset)
        {
            let p = self.pending.pop_front().expect("checked");
            (p.complete)(Ok(p.offset));
        }
    }
}

impl Actor for QuorumControllerActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.register_with_raft(ctx);
        ctx.run_interval(TICK, |act, ctx| {
            act.refresh_gauges();
            // No write is in flight here (a write holds the context until Raft answers), so a
            // path that entered the gate without writing cannot keep voter changes waiting.
            act.leave_gate();
            if !act.enter_gate(ctx) {
                return;
            }
            let records = act.core.tick(now_ms());
            if !records.is_empty() {
                info!(
                    count = records.len(),
                    "fencing brokers whose session expired"
                );
            }
            act.write(records, ctx);
        });
        if let Some(ms) = self
            .cfg
            .leader_imbalance_check_interval_ms
            .filter(|ms| *ms > 0)
        {
            ctx.run_interval(Duration::from_millis(ms as u64), |act, ctx| {
                act.periodic_elections(ctx, QuorumControllerCore::balance_partition_leaders);
            });
        }
        let every =
            Duration::from_millis(self.cfg.unclean_leader_election_interval_ms.max(1) as u64);
        ctx.run_interval(every, |act, ctx| {
            act.periodic_elections(ctx, QuorumControllerCore::elect_unclean_leaders);
        });
        if self.cfg.max_idle_interval_ms > 0 {
            let every = Duration::from_millis(self.cfg.max_idle_interval_ms as u64);
            ctx.run_interval(every, |act, ctx| {
                if act.enter_gate(ctx) {
                    let records = act.core.no_op();
                    act.write(records, ctx);
                }
            });
        }
    }

    fn stopping(&mut self, _: &mut Context<Self>) -> Running {
        self.set_active(false);
        self.fail_all(ControllerError::NotController);
        Running::Stop
    }
}

impl Supervised for QuorumControllerActor {
    fn restarting(&mut self, ctx: &mut Context<Self>) {
        // Rebuild from the committed log, as after a leadership change (after a caught panic,
        // or the stop below when its view of the log went wrong).
        self.resign(ctx);
    }
}

impl SupervisedActor for QuorumControllerActor {
    const MAILBOX_CAPACITY: usize = 1024;
}

crate::supervised_mailbox!(QuorumControllerActor);

impl Handler<MetadataBatchesCommitted> for QuorumControllerActor {
    type Result = ();

    fn handle(&mut self, msg: MetadataBatchesCommitted, ctx: &mut Context<Self>) {
        let _m = self.metrics.handle();
        if let Some(s) = &msg.snapshot {
            // Only an inactive core loads one: Raft sends snapshots to listeners that start
            // from the beginning or fell behind the log start, never to the active leader's.
            if s.id.offset - 1 > self.committed_offset && !self.core.is_active() {
                let provenance = crate::metadata::core::Provenance {
                    last_offset: s.id.offset - 1,
                    last_epoch: s.id.epoch,
                };
                match crate::metadata::core::snapshot::image_from_values(
                    &s.values,
                    s.kraft_version,
                    provenance,
                ) {
                    Ok(image) => {
                        self.core.load_snapshot(image);
                        self.committed_offset = s.id.offset - 1;
                    }
                    Err(e) => {
                        error!(snapshot = ?s.id, error = %e, "cannot load a metadata snapshot");
                        ctx.stop();
                        return;
                    }
                }
            }
        }
        for batch in msg.batches.iter() {
            // After a resign the old registration's deliveries may still be queued; they skip
            // ahead of the fresh core, which gets them again, in order, from the new one.
            if batch.base_offset > self.committed_offset + 1 {
                continue;
            }
            if batch.is_control {
                match batch.kraft_version() {
                    Ok(Some(level)) => self.core.replay_kraft_version(batch.last_offset, level),
                    Ok(None) => {}
                    Err(e) => {
                        error!(offset = batch.base_offset, error = %e, "undecodable KRaftVersionRecord");
                        ctx.stop();
                        return;
                    }
                }
            } else if batch.last_offset > self.core.applied_offset() {
                let mut records = Vec::with_capacity(batch.records.len());
                for v in &batch.records {
                    match MetadataRecord::decode(v.clone()) {
                        Ok(r) => records.push(r),
                        Err(e) => {
                            // A record we cannot read means our image would be wrong: stop
                            // serving rather than act on it.
                            error!(offset = batch.base_offset, error = %e, "undecodable metadata record");
                            ctx.stop();
                            return;
                        }
                    }
                }
                if let Err(e) = self.core.replay_committed(batch.base_offset, &records) {
                    error!(offset = batch.base_offset, error = %e, "metadata replay failed");
                    ctx.stop();
                    return;
                }
            }
            self.committed_offset = self.committed_offset.max(batch.last_offset);
        }
        self.complete_committed();
    }
}

impl Handler<RaftLeaderChanged> for QuorumControllerActor {
    type Result = ();

    fn handle(&mut self, msg: RaftLeaderChanged, ctx: &mut Context<Self>) {
        let _m = self.metrics.handle();
        let me = self.cfg.node_id;
        match (msg.leader_id, msg.next_offset) {
            (Some(leader), Some(epoch_start)) if leader == me => {
                if self.core.is_active() && msg.epoch == self.active_epoch {
                    // The same leadership told again (e.g. after this actor re-registered):
                    // re-activating would rewind the offsets the core predicts.
                    return;
                }
                if self.core.is_active() {
                    // Raft lost and won leadership again before this actor heard of the loss:
                    // what the core holds was decided in the old epoch. Start over from the
                    // log; re-registering brings this notice back for the new epoch.
                    info!(
                        old = self.active_epoch,
                        new = msg.epoch,
                        "leading again in a new epoch; rebuilding from the log"
                    );
                    self.fail_all(ControllerError::NotController);
                    self.resign(ctx);
                    return;
                }
                // After a resign while Raft stayed leader, the log has grown past the epoch
                // start: new records go after everything committed so far (Raft delivers all
                // committed batches before the notice).
                let mut next_offset = epoch_start.max(self.committed_offset + 1);
                // A voter change Raft appended after the epoch started (one queued before this
                // notice) takes the offsets the first records would have had.
                if let Some(gate) = &self.gate {
                    for (base, last) in gate.enter() {
                        if base == next_offset {
                            next_offset = last + 1;
                        }
                    }
                }
                info!(
                    epoch = msg.epoch,
                    next_offset, "becoming the active controller"
                );
                self.active_epoch = msg.epoch;
                let bootstrap = self.core.activate(next_offset, now_ms());
                if !bootstrap.is_empty() {
                    info!(records = bootstrap.len(), "writing bootstrap metadata");
                }
                self.write(bootstrap, ctx);
                // Requests sent from now on queue behind the bootstrap write (`write` holds the
                // mailbox until Raft has appended it), so they see an active, bootstrapped core.
                self.set_active(true);
            }
            _ => {
                if self.core.is_active() {
                    info!(leader = ?msg.leader_id, epoch = msg.epoch, "no longer the active controller");
                    self.fail_all(ControllerError::NotController);
                    self.resign(ctx);
                }
            }
        }
    }
}

macro_rules! controller_op {
    ($msg:ty, $resp:ty, |$core:ident, $m:ident| $body:expr) => {
        impl Handler<$msg> for QuorumControllerActor {
            type Result = ResponseFuture<ControllerReply<$resp>>;

            fn handle(&mut self, $m: $msg, ctx: &mut Context<Self>) -> Self::Result {
                let _guard = self.metrics.handle();
                if !self.enter_gate(ctx) {
                    return Box::pin(async { Err(ControllerError::NotController) });
                }
                let $core = &mut self.core;
                let result = $body;
                self.submit(result, ctx)
            }
        }
    };
}

use super::core::requests::*;

controller_op!(CreateTopics, Vec<CreatableTopicResult>, |core, m| core
    .create_topics(&m.topics, m.validate_only));
controller_op!(DeleteTopics, Vec<DeletableTopicResult>, |core, m| core
    .delete_topics(&m.topics));
controller_op!(
    CreatePartitions,
    Vec<CreatePartitionsTopicResult>,
    |core, m| core.create_partitions(&m.topics, m.validate_only)
);
controller_op!(
    IncrementalAlterConfigs,
    Vec<AlterConfigsResourceResult>,
    |core, m| core.incremental_alter_configs(&m.resources, m.validate_only)
);
controller_op!(AlterConfigs, Vec<AlterConfigsResourceResult>, |core, m| {
    core.legacy_alter_configs(&m.resources, m.validate_only)
});
controller_op!(RegisterBroker, BrokerRegistrationReply, |core, m| core
    .register_broker(&m.registration, now_ms()));
controller_op!(
    RegisterController,
    super::core::errors::ApiError,
    |core, m| core.register_controller(m.record)
);
controller_op!(ProcessBrokerHeartbeat, BrokerHeartbeatReply, |core, m| core
    .broker_heartbeat(&m.heartbeat, now_ms()));
controller_op!(ProcessAlterPartition, AlterPartitionReply, |core, m| core
    .alter_partition(&m.request));
controller_op!(
    UnregisterBroker,
    super::core::errors::ApiError,
    |core, m| core.unregister_broker(m.broker_id)
);
/// UpdateFeatures: an upgrade of kraft.version goes to Raft first (Kafka's controller calls
/// `upgradeKRaftVersion` while checking the request); Raft's refusal fails the whole request, and
/// once Raft has appended, the rest is written as any request's records. The mailbox is held
/// until Raft answers, so no other request's records get between.
impl Handler<UpdateFeatures> for QuorumControllerActor {
    type Result = ResponseFuture<ControllerReply<UpdateFeaturesReply>>;

    fn handle(&mut self, m: UpdateFeatures, ctx: &mut Context<Self>) -> Self::Result {
        let _guard = self.metrics.handle();
        if !self.enter_gate(ctx) {
            return Box::pin(async { Err(ControllerError::NotController) });
        }
        let checked = self.core.update_features(&m.updates, true);
        let level = match self.core.kraft_version_upgrade(&m.updates) {
            Some(level) if checked.response.error.is_ok() && self.core.is_active() => level,
            _ => {
                let result = self.core.update_features(&m.updates, m.validate_only);
                return self.submit(result, ctx);
            }
        };
        let (tx, rx) = oneshot::channel();
        self.upgrade_kraft
            .send(UpgradeKRaftVersion {
                kraft_version: level,
                validate_only: m.validate_only,
                epoch: self.active_epoch,
            })
            .into_actor(self)
            .map(move |res, act, ctx| {
                let reply = match res {
                    Ok(Ok(appended)) => {
                        let placed = match appended {
                            None => true,
                            Some(a) => {
                                act.core
                                    .kraft_version_appended(a.base_offset, a.last_offset, level)
                            }
                        };
                        if placed {
                            info!(kraft_version = level, ?appended, "kraft.version upgrade");
                            let result = act.core.update_features(&m.updates, m.validate_only);
                            act.submit(result, ctx)
                        } else {
                            error!(
                                ?appended,
                                "kraft.version upgrade landed at an unexpected offset; resigning"
                            );
                            act.leave_gate();
                            act.fail_all(ControllerError::NotController);
                            act.resign(ctx);
                            Box::pin(async { Err(ControllerError::NotController) })
                        }
                    }
                    Ok(Err(RaftError::InvalidUpdateVersion(message))) => {
                        let result = act.core.kraft_upgrade_refused(message);
                        act.submit(result, ctx)
                    }
                    Ok(Err(RaftError::NotLeader { .. })) => {
                        act.leave_gate();
                        Box::pin(async { Err(ControllerError::NotController) })
                    }
                    Ok(Err(e @ RaftError::Storage(_))) => {
                        act.leave_gate();
                        let e = ControllerError::WriteFailed(e.to_string());
                        Box::pin(async { Err(e) })
                    }
                    Err(e) => {
                        act.leave_gate();
                        let e = ControllerError::WriteFailed(e.to_string());
                        Box::pin(async { Err(e) })
                    }
                };
                let _ = tx.send(reply);
            })
            .wait(ctx);
        Box::pin(async move {
            match rx.await {
                Ok(reply) => reply.await,
                Err(_) => Err(ControllerError::NotController),
            }
        })
    }
}
controller_op!(ElectLeaders, Vec<TopicElectionResult>, |core, m| core
    .elect_leaders(m.election, m.partitions.as_deref()));
controller_op!(
    AlterPartitionReassignments,
    Vec<ReassignableTopicResult>,
    |core, m| core.alter_partition_reassignments(&m.topics, m.allow_replication_factor_change)
);
controller_op!(
    AlterUserScramCredentials,
    Vec<(String, super::core::errors::ApiError)>,
    |core, m| core.alter_user_scram_credentials(&m.deletions, &m.upsertions)
);
controller_op!(
    AlterClientQuotas,
    Vec<(
        super::core::client_quotas::EntityComponents,
        super::core::errors::ApiError
    )>,
    |core, m| core.alter_client_quotas(&m.alterations, m.validate_only, &m.unresolvable)
);
controller_op!(CreateAcls, Vec<super::core::errors::ApiError>, |core, m| {
    core.create_acls(&m.acls)
});
controller_op!(
    DeleteAcls,
    Vec<super::core::acls::DeleteAclsResult>,
    |core, m| core.delete_acls(&m.filters)
);
controller_op!(AllocateProducerIds, AllocateProducerIdsReply, |core, m| {
    core.allocate_producer_ids(m.broker_id, m.broker_epoch)
});
