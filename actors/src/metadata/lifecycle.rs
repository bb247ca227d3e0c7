//! BrokerLifecycleActor (Kafka's `BrokerLifecycleManager`): registers this broker with the
//! controller, heartbeats every `broker.heartbeat.interval.ms` with how far its metadata image
//! has caught up, and tracks whether the controller has unfenced it (the broker is "ready"
//! then). Also runs the controlled-shutdown handshake.

use std::time::Duration;

use actix::prelude::*;
use kactor_protocol::errors::{BROKER_ID_NOT_REGISTERED, NOT_CONTROLLER, STALE_BROKER_EPOCH};
use kactor_protocol::metadata::register_broker_record::{BrokerEndpoint, BrokerFeature};
use kactor_protocol::Uuid;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::actor::MetadataImageWatch;
use crate::controller::core::requests::{BrokerHeartbeat, BrokerRegistration};
use crate::controller::core::SUPPORTED_FEATURES;
use crate::controller::messages::{ProcessBrokerHeartbeat, RegisterBroker};
use crate::runtime::{run_caught, ActorMetrics, MeteredRecipient, SupervisedActor};

/// While not yet running, a heartbeat goes out as soon as the image has caught up with what
/// the controller is waiting for, and at the latest this long after the previous one (Kafka
/// also heartbeats eagerly until the broker is unfenced).
const EAGER_HEARTBEAT: Duration = Duration::from_millis(100);
/// Retry of a refused registration when no controller-activity watch says when to retry.
const RETRY_REGISTRATION: Duration = Duration::from_millis(100);

#[derive(Debug, Clone)]
pub struct BrokerLifecycleConfig {
    pub node_id: i32,
    pub cluster_id: String,
    /// A new random id per process start (Kafka's incarnation id).
    pub incarnation_id: Uuid,
    pub listeners: Vec<BrokerEndpoint>,
    pub rack: Option<String>,
    /// `directory.id` of each log dir (from meta.properties).
    pub log_dirs: Vec<Uuid>,
    /// `broker.heartbeat.interval.ms`
    pub heartbeat_interval_ms: u64,
}

/// Kafka's `BrokerState`, as far as the lifecycle goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokerLifecycleState {
    /// Not registered yet.
    Starting,
    /// Registered, fenced until its metadata catches up.
    Recovery,
    /// Unfenced: serving.
    Running,
    /// Asked to shut down, waiting for the controller's go.
    PendingControlledShutdown,
    /// The controller agreed; the process may exit.
    ShuttingDown,
}

/// Sent by the process on SIGTERM: start the controlled shutdown handshake; watch the state
/// channel for `ShuttingDown`. Lost, the broker shuts down uncontrolled (still safe).
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct BeginControlledShutdown;

pub struct BrokerLifecycleActor {
    cfg: BrokerLifecycleConfig,
    register: MeteredRecipient<RegisterBroker>,
    heartbeat: MeteredRecipient<ProcessBrokerHeartbeat>,
    image: MetadataImageWatch,
    /// The co-located controller's `QuorumControllerActor::active_watch`, if any: registration
    /// waits for it instead of polling a controller that is still activating.
    controller_active: Option<watch::Receiver<bool>>,
    state_tx: watch::Sender<BrokerLifecycleState>,
    broker_epoch: Option<i64>,
    want_shut_down: bool,
    heartbeat_in_flight: bool,
    metrics: ActorMetrics,
}

impl BrokerLifecycleActor {
    pub fn new(
        cfg: BrokerLifecycleConfig,
        register: MeteredRecipient<RegisterBroker>,
        heartbeat: MeteredRecipient<ProcessBrokerHeartbeat>,
        image: MetadataImageWatch,
        metrics: ActorMetrics,
    ) -> (Self, watch::Receiver<BrokerLifecycleState>) {
        let (state_tx, rx) = watch::channel(BrokerLifecycleState::Starting);
        (
            BrokerLifecycleActor {
                cfg,
                register,
                heartbeat,
                image,
                controller_active: None,
                state_tx,
                broker_epoch: None,
                want_shut_down: false,
                heartbeat_in_flight: false,
                metrics,
            },
            rx,
        )
    }

    /// Registers as soon as `active` (the co-located controller's activity watch) turns true.
    pub fn with_controller_active(mut self, active: watch::Receiver<bool>) -> Self {
        self.controller_active = Some(active);
        self
    }

    fn state(&self) -> BrokerLifecycleState {
        *self.state_tx.borrow()
    }

    fn set_state(&self, s: BrokerLifecycleState) {
        if self.state() != s {
            info!(node_id = self.cfg.node_id, state = ?s, "broker lifecycle");
            self.state_tx.send_replace(s);
        }
    }

    fn features() -> Vec<BrokerFeature> {
        SUPPORTED_FEATURES
            .iter()
            .map(|(name, min, max, _)| BrokerFeature {
                name: name.to_string(),
                min_supported_version: *min,
                max_supported_version: *max,
                ..Default::default()
            })
            .collect()
    }

    /// Registers now if the controller is known to be active (or nothing tells), else once it
    /// is: with controller and broker started together, the first registration would otherwise
    /// race the controller's activation and wait out a retry.
    fn try_register(&mut self, ctx: &mut Context<Self>) {
        match &self.controller_active {
            Some(active) if !*active.borrow() => {
                let mut active = active.clone();
                ctx.spawn(
                    async move { active.wait_for(|a| *a).await.is_ok() }
                        .into_actor(self)
                        .map(|ok, act, ctx| {
                            if ok {
                                act.send_registration(ctx);
                            } else {
                                // The controller is gone; poll as a remote broker would.
                                act.controller_active = None;
                                ctx.run_later(RETRY_REGISTRATION, |act, ctx| act.try_register(ctx));
                            }
                        }),
                );
            }
            _ => self.send_registration(ctx),
        }
    }

    fn send_registration(&mut self, ctx: &mut Context<Self>) {
        let msg = RegisterBroker {
            registration: BrokerRegistration {
                broker_id: self.cfg.node_id,
                cluster_id: self.cfg.cluster_id.clone(),
                incarnation_id: self.cfg.incarnation_id,
                listeners: self.cfg.listeners.clone(),
                features: Self::features(),
                rack: self.cfg.rack.clone(),
                log_dirs: self.cfg.log_dirs.clone(),
                previous_broker_epoch: self.broker_epoch.unwrap_or(-1),
            },
        };
        self.register
            .send(msg)
            .into_actor(self)
            .map(|res, act, ctx| match res {
                Ok(Ok(c)) if c.response.error.is_ok() => {
                    let epoch = c.response.broker_epoch;
                    act.broker_epoch = Some(epoch);
                    act.set_state(BrokerLifecycleState::Recovery);
                    // The broker epoch is the offset of its registration record: the controller
                    // unfences on the first heartbeat whose metadata offset reaches it.
                    act.heartbeat_when_caught_up(ctx, epoch);
                }
                other => {
                    // Typically NOT_CONTROLLER while the controller is still activating.
                    if let Ok(Ok(c)) = &other {
                        // NOT_CONTROLLER is expected while the controller is still activating.
                        if c.response.error.code == NOT_CONTROLLER {
                            debug!("controller not active yet; retrying registration");
                        } else {
                            warn!(error = ?c.response.error, "broker registration refused; retrying");
                        }
                    }
                    match &act.controller_active {
                        // Still activating: register the moment it is active.
                        Some(active) if !*active.borrow() => act.try_register(ctx),
                        // No watch, or refused by a controller that says it is active (it may
                        // just have lost leadership): ask again after a pause.
                        _ => {
                            ctx.run_later(RETRY_REGISTRATION, |act, ctx| act.try_register(ctx));
                        }
                    }
                }
            })
            .spawn(ctx);
    }

    /// Sends the next heartbeat once the published image has reached `offset`, or after
    /// [`EAGER_HEARTBEAT`] at the latest.
    fn heartbeat_when_caught_up(&mut self, ctx: &mut Context<Self>, offset: i64) {
        let mut image = self.image.clone();
        ctx.spawn(
            async move {
                let _ = tokio::time::timeout(
                    EAGER_HEARTBEAT,
                    image.wait_for(|i| i.provenance.last_offset >= offset),
                )
                .await;
            }
            .into_actor(self)
            .map(|_, act, ctx| act.send_heartbeat(ctx)),
        );
    }

    fn schedule_heartbeat(&mut self, ctx: &mut Context<Self>, after: Duration) {
        ctx.run_later(after, |act, ctx| {
            let metrics = act.metrics.clone();
            run_caught(act, ctx, &metrics, "the heartbeat timer", |act, ctx| {
                act.send_heartbeat(ctx)
            });
        });
    }

    fn send_heartbeat(&mut self, ctx: &mut Context<Self>) {
        let Some(epoch) = self.broker_epoch else {
            return;
        };
        if self.heartbeat_in_flight {
            return;
        }
        self.heartbeat_in_flight = true;
        let sent_offset = self.image.borrow().provenance.last_offset;
        let msg = ProcessBrokerHeartbeat {
            heartbeat: BrokerHeartbeat {
                broker_id: self.cfg.node_id,
                broker_epoch: epoch,
                current_metadata_offset: sent_offset,
                want_fence: false,
                want_shut_down: self.want_shut_down,
            },
        };
        self.heartbeat
            .send(msg)
            .into_actor(self)
            .map(move |res, act, ctx| {
                act.heartbeat_in_flight = false;
                match res {
                    Ok(Ok(c)) if c.response.error.is_ok() => {
                        let r = c.response;
                        if r.should_shut_down {
                            act.set_state(BrokerLifecycleState::ShuttingDown);
                            return;
                        }
                        if act.want_shut_down {
                            act.set_state(BrokerLifecycleState::PendingControlledShutdown);
                        } else if !r.is_fenced {
                            act.set_state(BrokerLifecycleState::Running);
                        } else {
                            act.set_state(BrokerLifecycleState::Recovery);
                            // Still fenced: typically the image had not caught up. Ask again
                            // as soon as it has moved on.
                            act.heartbeat_when_caught_up(ctx, sent_offset + 1);
                            return;
                        }
                    }
                    Ok(Ok(c))
                        if c.response.error.code == STALE_BROKER_EPOCH
                            || c.response.error.code == BROKER_ID_NOT_REGISTERED =>
                    {
                        warn!(error = ?c.response.error, "registration lost; registering again");
                        act.broker_epoch = None;
                        act.set_state(BrokerLifecycleState::Starting);
                        act.try_register(ctx);
                        return;
                    }
                    other => {
                        if let Ok(Ok(c)) = &other {
                            warn!(error = ?c.response.error, "heartbeat failed");
                        }
                    }
                }
                let next = if act.state() == BrokerLifecycleState::Running {
                    Duration::from_millis(act.cfg.heartbeat_interval_ms)
                } else {
                    EAGER_HEARTBEAT
                };
                act.schedule_heartbeat(ctx, next);
            })
            .spawn(ctx);
    }
}

impl Actor for BrokerLifecycleActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.try_register(ctx);
    }
}

impl Supervised for BrokerLifecycleActor {
    fn restarting(&mut self, ctx: &mut Context<Self>) {
        self.heartbeat_in_flight = false;
        if self.broker_epoch.is_some() {
            self.schedule_heartbeat(ctx, Duration::ZERO);
        } else {
            self.try_register(ctx);
        }
    }
}

impl SupervisedActor for BrokerLifecycleActor {
    const MAILBOX_CAPACITY: usize = 64;
}

crate::supervised_mailbox!(BrokerLifecycleActor);

impl Handler<BeginControlledShutdown> for BrokerLifecycleActor {
    type Result = ();

    fn handle(&mut self, _: BeginControlledShutdown, ctx: &mut Context<Self>) {
        let _m = self.metrics.handle();
        self.want_shut_down = true;
        self.set_state(BrokerLifecycleState::PendingControlledShutdown);
        self.send_heartbeat(ctx);
    }
}
