//! Authorization (Kafka's `StandardAuthorizer`, `authorizer.class.name`): the ACL vocabulary
//! (Kafka's operation, resource, pattern and permission codes), the ACL store and decision
//! ([`acls`], a pure core over the metadata image), the handle requests are checked through
//! ([`Authz`]), and the per-API checks ([`gate`], a router layer around every handler).
//!
//! Without an authorizer every request is allowed and describe responses report, as Kafka
//! does, every operation the resource type supports (`AuthHelper.authorizedOperations`).

pub mod acls;
pub mod gate;

use std::collections::HashSet;
use std::sync::Arc;

use crate::security::KafkaPrincipal;
use acls::{Decision, Requester};

/// The name of the one CLUSTER resource (Kafka's `CLUSTER_NAME`).
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// The class name that turns authorization on: the KRaft authorizer. Other classes are
/// refused at start-up (kactor loads no Java code).
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

/// Kafka's codes for the ACL enums, as they travel in requests and metadata records.
pub mod codes {
    pub mod resource {
        pub const UNKNOWN: i8 = 0;
        pub const ANY: i8 = 1;
        pub const TOPIC: i8 = 2;
        pub const GROUP: i8 = 3;
        pub const CLUSTER: i8 = 4;
        pub const TRANSACTIONAL_ID: i8 = 5;
        pub const DELEGATION_TOKEN: i8 = 6;
        pub const USER: i8 = 7;
        pub fn name(code: i8) -> &'static str {
            [
                "UNKNOWN",
                "ANY",
                "TOPIC",
                "GROUP",
                "CLUSTER",
                "TRANSACTIONAL_ID",
                "DELEGATION_TOKEN",
                "USER",
            ]
            .get(code as usize)
            .copied()
            .unwrap_or("UNKNOWN")
        }
    }
    pub mod pattern {
        pub const UNKNOWN: i8 = 0;
        pub const ANY: i8 = 1;
        pub const MATCH: i8 = 2;
        pub const LITERAL: i8 = 3;
        pub const PREFIXED: i8 = 4;
        pub fn name(code: i8) -> &'static str {
            ["UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED"]
                .get(code as usize)
                .copied()
                .unwrap_or("UNKNOWN")
        }
    }
    pub mod operation {
        pub const UNKNOWN: i8 = 0;
        pub const ANY: i8 = 1;
        pub const ALL: i8 = 2;
        pub const READ: i8 = 3;
        pub const WRITE: i8 = 4;
        pub const DESCRIBE: i8 = 8;
        pub const ALTER_CONFIGS: i8 = 11;
        pub fn name(code: i8) -> &'static str {
            [
                "UNKNOWN",
                "ANY",
                "ALL",
                "READ",
                "WRITE",
                "CREATE",
                "DELETE",
                "ALTER",
                "DESCRIBE",
                "CLUSTER_ACTION",
                "DESCRIBE_CONFIGS",
                "ALTER_CONFIGS",
                "IDEMPOTENT_WRITE",
                "CREATE_TOKENS",
                "DESCRIBE_TOKENS",
                "TWO_PHASE_COMMIT",
            ]
            .get(code as usize)
            .copied()
            .unwrap_or("UNKNOWN")
        }
    }
    pub mod permission {
        pub const UNKNOWN: i8 = 0;
        pub const ANY: i8 = 1;
        pub const DENY: i8 = 2;
        pub const ALLOW: i8 = 3;
        pub fn name(code: i8) -> &'static str {
            ["UNKNOWN", "ANY", "DENY", "ALLOW"]
                .get(code as usize)
                .copied()
                .unwrap_or("UNKNOWN")
        }
    }
}

/// Kafka's `AclOperation` (its byte codes are the bit positions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum AclOperation {
    Read = 3,
    Write = 4,
    Create = 5,
    Delete = 6,
    Alter = 7,
    Describe = 8,
    ClusterAction = 9,
    DescribeConfigs = 10,
    AlterConfigs = 11,
    IdempotentWrite = 12,
    CreateTokens = 13,
    DescribeTokens = 14,
    TwoPhaseCommit = 15,
}

/// Kafka's concrete `ResourceType`s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceType {
    Topic,
    Group,
    Cluster,
    TransactionalId,
    DelegationToken,
    User,
}

impl ResourceType {
    pub fn code(self) -> i8 {
        use codes::resource::*;
        match self {
            ResourceType::Topic => TOPIC,
            ResourceType::Group => GROUP,
            ResourceType::Cluster => CLUSTER,
            ResourceType::TransactionalId => TRANSACTIONAL_ID,
            ResourceType::DelegationToken => DELEGATION_TOKEN,
            ResourceType::User => USER,
        }
    }

    pub fn from_code(code: i8) -> Option<Self> {
        use codes::resource::*;
        Some(match code {
            TOPIC => ResourceType::Topic,
            GROUP => ResourceType::Group,
            CLUSTER => ResourceType::Cluster,
            TRANSACTIONAL_ID => ResourceType::TransactionalId,
            DELEGATION_TOKEN => ResourceType::DelegationToken,
            USER => ResourceType::User,
            _ => return None,
        })
    }
}

/// The operations an ACL on `resource` can grant (Kafka's `AclEntry.supportedOperations`).
pub fn supported_operations(resource: ResourceType) -> &'static [AclOperation] {
    use AclOperation::*;
    match resource {
        ResourceType::Topic => &[
            Read,
            Write,
            Create,
            Describe,
            Delete,
            Alter,
            DescribeConfigs,
            AlterConfigs,
        ],
        ResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
        ResourceType::Cluster => &[
            Create,
            ClusterAction,
            DescribeConfigs,
            AlterConfigs,
            IdempotentWrite,
            Alter,
            Describe,
        ],
        ResourceType::TransactionalId => &[Describe, Write, TwoPhaseCommit],
        ResourceType::DelegationToken => &[Describe],
        ResourceType::User => &[CreateTokens, DescribeTokens],
    }
}

/// What a describe response's `AuthorizedOperations` holds for a resource of this type when
/// the client asked for it: with no authorizer, every supported operation (Kafka's
/// `Utils.to32BitField` of their codes).
pub fn authorized_operations(resource: ResourceType) -> i32 {
    operation_bits(supported_operations(resource).iter())
}

/// `AuthorizedOperations` when the client did not ask for them (Kafka's `Integer.MIN_VALUE`).
pub const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;

/// Kafka's `Utils.to32BitField` of operation codes.
fn operation_bits<'a>(ops: impl Iterator<Item = &'a AclOperation>) -> i32 {
    ops.fold(0, |bits, op| bits | 1 << *op as u8)
}

/// The authorizer settings: `super.users` and `allow.everyone.if.no.acl.found`.
#[derive(Debug, Clone, Default)]
pub struct AuthorizerConfig {
    /// `Type:name` strings (`super.users`, `;`-separated in the config).
    pub super_users: HashSet<String>,
    pub allow_everyone_if_no_acl_found: bool,
}

/// How requests are checked: cheap to clone, shared by every route. `Authz::off()` allows
/// everything (no `authorizer.class.name`); otherwise it holds the authorizer settings, and
/// each request is decided against the ACLs of the image the broker serves when it arrives
/// (the gate takes that snapshot).
#[derive(Clone, Default)]
pub struct Authz(Option<Arc<AuthorizerConfig>>);

/// One request's requester, worked out once: the principal as `Type:name`, the client's
/// address, and whether it is a super user.
#[derive(Debug, Clone)]
pub struct Subject {
    pub principal: String,
    pub host: String,
    pub super_user: bool,
}

impl Subject {
    fn requester(&self) -> Requester<'_> {
        Requester {
            principal: &self.principal,
            host: &self.host,
        }
    }
}

impl Authz {
    pub fn off() -> Self {
        Authz(None)
    }

    pub fn standard(config: AuthorizerConfig) -> Self {
        Authz(Some(Arc::new(config)))
    }

    pub fn enabled(&self) -> bool {
        self.0.is_some()
    }

    /// Whether `principal` may do anything: no authorizer, or a super user. Compared without
    /// formatting the principal, as every request of every super user asks this.
    pub fn is_super_user(&self, principal: &KafkaPrincipal) -> bool {
        let Some(config) = &self.0 else {
            return true;
        };
        let wanted = (&*principal.principal_type, &*principal.name);
        config
            .super_users
            .iter()
            .any(|u| u.split_once(':') == Some(wanted))
    }

    /// The requester of a request from `principal` at `peer`.
    pub fn subject(&self, principal: &KafkaPrincipal, peer: std::net::IpAddr) -> Subject {
        Subject {
            principal: principal.to_string(),
            host: java_host_address(peer),
            super_user: self.is_super_user(principal),
        }
    }

    /// The decision against one request's ACL snapshot; `log` says whether a denial is an
    /// event worth a log line.
    pub fn decide(
        &self,
        acls: &acls::AclImage,
        who: &Subject,
        op: AclOperation,
        resource: ResourceType,
        name: &str,
        log: bool,
    ) -> bool {
        let Some(config) = &self.0 else {
            return true;
        };
        if who.super_user {
            return true;
        }
        let allowed = acls.authorize(who.requester(), op, resource, name, default(config))
            == Decision::Allowed;
        if !allowed && log {
            // Kafka's `kafka.authorizer.logger` line, at the level it logs denials (INFO).
            tracing::info!(
                target: "kafka.authorizer.logger",
                "Principal = {} is Denied operation = {} from host = {} on resource = {}:LITERAL:{}",
                who.principal,
                codes::operation::name(op as i8),
                who.host,
                codes::resource::name(resource.code()),
                name
            );
        }
        allowed
    }

    /// Whether `who` may do `op` on some resource of the type (Kafka's
    /// `authorizeByResourceType`, used for idempotent producers).
    pub fn decide_any(
        &self,
        acls: &acls::AclImage,
        who: &Subject,
        op: AclOperation,
        resource: ResourceType,
    ) -> bool {
        let Some(config) = &self.0 else {
            return true;
        };
        who.super_user
            || acls.authorize_any(who.requester(), op, resource, default(config))
                == Decision::Allowed
    }

    /// The `AuthorizedOperations` bit field for one resource: the supported operations `who`
    /// is allowed (all of them without an authorizer).
    pub fn authorized_operations(
        &self,
        acls: &acls::AclImage,
        who: &Subject,
        resource: ResourceType,
        name: &str,
    ) -> i32 {
        if self.0.is_none() || who.super_user {
            return authorized_operations(resource);
        }
        operation_bits(
            supported_operations(resource)
                .iter()
                .filter(|op| self.decide(acls, who, **op, resource, name, false)),
        )
    }
}

/// The decision for a resource no ACL names (`allow.everyone.if.no.acl.found`).
fn default(config: &AuthorizerConfig) -> Decision {
    if config.allow_everyone_if_no_acl_found {
        Decision::Allowed
    } else {
        Decision::Denied
    }
}

/// The client address as Java's `InetAddress.getHostAddress` writes it, which is what ACL
/// hosts are compared with: an IPv4-mapped IPv6 address as plain IPv4, IPv6 as eight
/// uncompressed hex groups (`0:0:0:0:0:0:0:1`).
pub fn java_host_address(ip: std::net::IpAddr) -> String {
    match ip.to_canonical() {
        std::net::IpAddr::V4(v4) => v4.to_string(),
        std::net::IpAddr::V6(v6) => v6
            .segments()
            .iter()
            .map(|s| format!("{s:x}"))
            .collect::<Vec<_>>()
            .join(":"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn super_users_are_matched_by_type_and_name() {
        let authz = Authz::standard(AuthorizerConfig {
            super_users: ["User:admin".to_string()].into(),
            ..Default::default()
        });
        assert!(authz.is_super_user(&KafkaPrincipal::user("admin")));
        assert!(!authz.is_super_user(&KafkaPrincipal::user("admi")));
        assert!(!authz.is_super_user(&KafkaPrincipal::user("xadmin")));
        assert!(Authz::off().is_super_user(&KafkaPrincipal::user("anyone")));
    }

    #[test]
    fn hosts_are_written_as_java_writes_them() {
        let host = |s: &str| java_host_address(s.parse().unwrap());
        assert_eq!(host("127.0.0.1"), "127.0.0.1");
        assert_eq!(host("::ffff:10.0.0.7"), "10.0.0.7");
        assert_eq!(host("::1"), "0:0:0:0:0:0:0:1");
        assert_eq!(host("fe80::1:ab"), "fe80:0:0:0:0:0:1:ab");
    }

    #[test]
    fn bit_fields_as_kafka_4_4_reports_them_without_an_authorizer() {
        // The values Apache Kafka 4.4.0 answers DescribeGroups / ConsumerGroupDescribe,
        // Metadata v8 (cluster) and Metadata (topics) with.
        assert_eq!(authorized_operations(ResourceType::Group), 3400);
        assert_eq!(authorized_operations(ResourceType::Cluster), 8096);
        assert_eq!(authorized_operations(ResourceType::Topic), 3576);
    }
}
