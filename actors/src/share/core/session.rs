//! Share sessions (Kafka's `ShareSessionCache` with `ShareSession`, KIP-932): what a member's
//! ShareFetch requests cover, built up incrementally. A session is keyed by group and member,
//! opened at epoch 0, continued at each next epoch, closed at -1.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use kactor_protocol::errors::{
    INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_LIMIT_REACHED, SHARE_SESSION_NOT_FOUND,
};
use kactor_protocol::Uuid;

pub const OPEN_EPOCH: i32 = 0;
pub const FINAL_EPOCH: i32 = -1;

pub type SessionKey = (String, String);
pub type TopicIdPartition = (Uuid, i32);

#[derive(Debug, Clone, PartialEq, Eq)]
struct ShareSession {
    /// The epoch the next request must carry.
    next_epoch: i32,
    partitions: BTreeSet<TopicIdPartition>,
    last_used_ms: i64,
}

/// What a request does to its member's session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionUse {
    /// Opened or continued: the partitions the session covers now.
    Active(Vec<TopicIdPartition>),
    /// Closed by this request (epoch -1): the partitions it covered.
    Closed(Vec<TopicIdPartition>),
}

#[derive(Debug, Clone, Default)]
pub struct ShareSessions {
    /// Ordered by (group, member): a group's sessions are found by a range.
    sessions: BTreeMap<SessionKey, ShareSession>,
    max_sessions: usize,
}

impl ShareSessions {
    /// `group.share.max.share.sessions`
    pub fn new(max_sessions: usize) -> Self {
        ShareSessions {
            sessions: BTreeMap::new(),
            max_sessions,
        }
    }

    pub fn max_sessions(&self) -> usize {
        self.max_sessions
    }

    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Whether `group` has a session here.
    pub fn has_group(&self, group: &str) -> bool {
        self.sessions
            .range((group.to_string(), String::new())..)
            .next()
            .is_some_and(|((g, _), _)| g == group)
    }

    /// The groups with a session here.
    pub fn groups(&self) -> HashSet<String> {
        self.sessions.keys().map(|(g, _)| g.clone()).collect()
    }

    /// A ShareFetch at `epoch` adding `added` and dropping `forgotten`.
    pub fn fetch(
        &mut self,
        key: &SessionKey,
        epoch: i32,
        added: &[TopicIdPartition],
        forgotten: &[TopicIdPartition],
        now_ms: i64,
    ) -> Result<SessionUse, (i16, String)> {
        match epoch {
            OPEN_EPOCH => {
                // A member opening again (a restarted consumer keeps its member id only for its
                // lifetime, so this is a reconnect): the old session is replaced.
                if !self.sessions.contains_key(key) && self.sessions.len() >= self.max_sessions {
                    return Err((
                        SHARE_SESSION_LIMIT_REACHED,
                        "The limit of share sessions has been reached.".to_string(),
                    ));
                }
                let partitions: BTreeSet<_> = added.iter().copied().collect();
                let covered = partitions.iter().copied().collect();
                self.sessions.insert(
                    key.clone(),
                    ShareSession {
                        next_epoch: 1,
                        partitions,
                        last_used_ms: now_ms,
                    },
                );
                Ok(SessionUse::Active(covered))
            }
            FINAL_EPOCH => self.close(key),
            _ => {
                let s = self.continue_session(key, epoch, now_ms)?;
                s.partitions.extend(added.iter().copied());
                for tp in forgotten {
                    s.partitions.remove(tp);
                }
                Ok(SessionUse::Active(s.partitions.iter().copied().collect()))
            }
        }
    }

    /// A ShareAcknowledge at `epoch`: it must continue or close a session.
    pub fn acknowledge(
        &mut self,
        key: &SessionKey,
        epoch: i32,
        now_ms: i64,
    ) -> Result<SessionUse, (i16, String)> {
        match epoch {
            OPEN_EPOCH => Err((
                INVALID_SHARE_SESSION_EPOCH,
                "The share session epoch is invalid.".to_string(),
            )),
            FINAL_EPOCH => self.close(key),
            _ => {
                let s = self.continue_session(key, epoch, now_ms)?;
                Ok(SessionUse::Active(s.partitions.iter().copied().collect()))
            }
        }
    }

    fn continue_session(
        &mut self,
        key: &SessionKey,
        epoch: i32,
        now_ms: i64,
    ) -> Result<&mut ShareSession, (i16, String)> {
        let Some(s) = self.sessions.get_mut(key) else {
            return Err((
                SHARE_SESSION_NOT_FOUND,
                "The share session was not found.".to_string(),
            ));
        };
        if s.next_epoch != epoch {
            return Err((
                INVALID_SHARE_SESSION_EPOCH,
                "The share session epoch is invalid.".to_string(),
            ));
        }
        s.next_epoch = if s.next_epoch == i32::MAX {
            1
        } else {
            s.next_epoch + 1
        };
        s.last_used_ms = now_ms;
        Ok(s)
    }

    fn close(&mut self, key: &SessionKey) -> Result<SessionUse, (i16, String)> {
        match self.sessions.remove(key) {
            Some(s) => Ok(SessionUse::Closed(s.partitions.into_iter().collect())),
            None => Err((
                SHARE_SESSION_NOT_FOUND,
                "The share session was not found.".to_string(),
            )),
        }
    }

    /// Drops sessions unused since before `idle_before_ms`; returns their keys (their members'
    /// records are then released).
    pub fn evict_idle(&mut self, idle_before_ms: i64) -> Vec<SessionKey> {
        let idle: Vec<SessionKey> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.last_used_ms < idle_before_ms)
            .map(|(k, _)| k.clone())
            .collect();
        for k in &idle {
            self.sessions.remove(k);
        }
        idle
    }
}
