//! The ACL store and the decision (Kafka's `StandardAuthorizerData` semantics), as a pure
//! value: the metadata image holds one [`AclImage`], rebuilt from `AccessControlEntryRecord`s
//! and `RemoveAccessControlEntryRecord`s, and every check reads it without locks.
//!
//! A decision, for a principal at a host wanting an operation on a named resource:
//! - ACLs apply when their pattern matches the name: LITERAL equal, the LITERAL wildcard `*`,
//!   or PREFIXED with a prefix of the name;
//! - of those, an ACL counts when its principal is the client's or `User:*`, its host the
//!   client's address or `*`, and its operation the one asked, ALL, or (ALLOW only) one that
//!   implies it: READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies
//!   DESCRIBE_CONFIGS;
//! - a counting DENY wins over any ALLOW; with only ALLOWs the answer is yes; with ACLs on the
//!   resource but none counting, no; with no ACL on the resource at all, the
//!   `allow.everyone.if.no.acl.found` default.
//!
//! Super users never get here (the [`super::Authz`] handle answers them first).

use std::collections::{BTreeMap, HashMap};

use kactor_protocol::metadata::AccessControlEntryRecord;
use kactor_protocol::Uuid;

use super::{codes, AclOperation, ResourceType};

/// One ACL as stored (the fields of `AccessControlEntryRecord`, Kafka's codes).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StandardAcl {
    pub resource_type: i8,
    pub resource_name: String,
    pub pattern_type: i8,
    /// `Type:name`, e.g. `User:alice` or `User:*`.
    pub principal: String,
    pub host: String,
    pub operation: i8,
    pub permission: i8,
}

impl StandardAcl {
    /// The ACL of an `AccessControlEntryRecord`.
    pub fn from_record(r: &AccessControlEntryRecord) -> Self {
        StandardAcl {
            resource_type: r.resource_type,
            resource_name: r.resource_name.clone(),
            pattern_type: r.pattern_type,
            principal: r.principal.clone(),
            host: r.host.clone(),
            operation: r.operation,
            permission: r.permission_type,
        }
    }

    /// The `AccessControlEntryRecord` that stores this ACL under `id`.
    pub fn to_record(&self, id: Uuid) -> AccessControlEntryRecord {
        AccessControlEntryRecord {
            id,
            resource_type: self.resource_type,
            resource_name: self.resource_name.clone(),
            pattern_type: self.pattern_type,
            principal: self.principal.clone(),
            host: self.host.clone(),
            operation: self.operation,
            permission_type: self.permission,
            ..Default::default()
        }
    }
}

/// What an ACL filter (DescribeAcls, DeleteAcls) names; `None` strings match anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclFilter {
    pub resource_type: i8,
    pub resource_name: Option<String>,
    pub pattern_type: i8,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: i8,
    pub permission: i8,
}

impl AclFilter {
    /// Kafka's `AclBindingFilter.matches`: the pattern filter, then the entry filter.
    pub fn matches(&self, acl: &StandardAcl) -> bool {
        use codes::pattern::*;
        if self.resource_type != codes::resource::ANY && self.resource_type != acl.resource_type {
            return false;
        }
        if self.pattern_type != ANY
            && self.pattern_type != MATCH
            && self.pattern_type != acl.pattern_type
        {
            return false;
        }
        let name_ok = match &self.resource_name {
            None => true,
            Some(name) if self.pattern_type == ANY || self.pattern_type == acl.pattern_type => {
                *name == acl.resource_name
            }
            // MATCH: every stored pattern that would apply to a resource of this name.
            Some(name) => match acl.pattern_type {
                LITERAL => *name == acl.resource_name || acl.resource_name == WILDCARD,
                PREFIXED => name.starts_with(&acl.resource_name),
                _ => false,
            },
        };
        name_ok
            && self.principal.as_ref().is_none_or(|p| *p == acl.principal)
            && self.host.as_ref().is_none_or(|h| *h == acl.host)
            && (self.operation == codes::operation::ANY || self.operation == acl.operation)
            && (self.permission == codes::permission::ANY || self.permission == acl.permission)
    }

    /// Kafka's `validateFilter` (DeleteAcls): a filter with an UNKNOWN part matches nothing
    /// anyone can name, so it is refused.
    pub fn unknown_part(&self) -> Option<&'static str> {
        if self.resource_type == codes::resource::UNKNOWN
            || self.pattern_type == codes::pattern::UNKNOWN
        {
            Some("Unknown patternFilter.")
        } else if self.operation == codes::operation::UNKNOWN
            || self.permission == codes::permission::UNKNOWN
        {
            Some("Unknown entryFilter.")
        } else {
            None
        }
    }
}

/// The LITERAL resource name that matches every resource of its type.
pub const WILDCARD: &str = "*";

/// Kafka's `AclControlManager.validateNewAcl` (and the broker's checks before it), in its
/// order and words: `Err(message)` is answered INVALID_REQUEST.
pub fn validate_new_acl(acl: &StandardAcl) -> Result<(), String> {
    use codes::*;
    if matches!(acl.resource_type, resource::UNKNOWN | resource::ANY)
        || ResourceType::from_code(acl.resource_type).is_none()
    {
        return Err(format!(
            "Invalid resourceType {}",
            resource::name(acl.resource_type)
        ));
    }
    if !matches!(acl.pattern_type, pattern::LITERAL | pattern::PREFIXED) {
        return Err(format!(
            "Invalid patternType {}",
            pattern::name(acl.pattern_type)
        ));
    }
    if matches!(acl.operation, operation::UNKNOWN | operation::ANY)
        || !(0..=15).contains(&acl.operation)
    {
        return Err(format!(
            "Invalid operation {}",
            operation::name(acl.operation)
        ));
    }
    if !matches!(acl.permission, permission::DENY | permission::ALLOW) {
        return Err(format!(
            "Invalid permissionType {}",
            permission::name(acl.permission)
        ));
    }
    if acl.resource_type == resource::CLUSTER && acl.resource_name != super::CLUSTER_NAME {
        return Err(format!(
            "The only valid name for the CLUSTER resource is {}",
            super::CLUSTER_NAME
        ));
    }
    if acl.resource_name.is_empty() {
        return Err("Invalid empty resource name".into());
    }
    match acl.principal.split_once(':') {
        Some((t, n)) if !t.is_empty() && !n.is_empty() => Ok(()),
        _ => Err(format!(
            "Could not parse principal from `{}` (no colon is found)",
            acl.principal
        )),
    }
}

/// The ACLs of one resource type, indexed for a decision: by exact name (LITERAL, the
/// wildcard included) and by prefix (PREFIXED), so that a check costs one lookup per prefix
/// length of the name rather than a scan of every ACL.
#[derive(Debug, Clone, Default)]
struct TypeAcls {
    literal: HashMap<String, Vec<StandardAcl>>,
    prefixed: HashMap<String, Vec<StandardAcl>>,
    /// The byte lengths of the stored prefixes, so that a check probes only those.
    prefix_lengths: std::collections::BTreeSet<usize>,
}

/// Every ACL in the cluster, by id (Kafka's `AclsImage`), with the decision index.
#[derive(Debug, Clone, Default)]
pub struct AclImage {
    by_id: BTreeMap<Uuid, StandardAcl>,
    index: HashMap<i8, TypeAcls>,
}

impl PartialEq for AclImage {
    fn eq(&self, other: &Self) -> bool {
        // The index is derived from the ACLs.
        self.by_id == other.by_id
    }
}

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allowed,
    Denied,
}

/// Who is asking: the principal as `Type:name` and the client's address as text.
#[derive(Debug, Clone, Copy)]
pub struct Requester<'a> {
    pub principal: &'a str,
    pub host: &'a str,
}

impl AclImage {
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn get(&self, id: &Uuid) -> Option<&StandardAcl> {
        self.by_id.get(id)
    }

    /// Every ACL with its id, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (&Uuid, &StandardAcl)> {
        self.by_id.iter()
    }

    /// Whether an identical ACL is stored (CreateAcls adds no record for one).
    pub fn contains(&self, acl: &StandardAcl) -> bool {
        self.index
            .get(&acl.resource_type)
            .and_then(|t| {
                let map = if acl.pattern_type == codes::pattern::PREFIXED {
                    &t.prefixed
                } else {
                    &t.literal
                };
                map.get(&acl.resource_name)
            })
            .is_some_and(|v| v.contains(acl))
    }

    pub fn insert(&mut self, id: Uuid, acl: StandardAcl) {
        if let Some(old) = self.by_id.insert(id, acl.clone()) {
            self.unindex(&old);
        }
        let t = self.index.entry(acl.resource_type).or_default();
        let map = if acl.pattern_type == codes::pattern::PREFIXED {
            t.prefix_lengths.insert(acl.resource_name.len());
            &mut t.prefixed
        } else {
            &mut t.literal
        };
        map.entry(acl.resource_name.clone()).or_default().push(acl);
    }

    pub fn remove(&mut self, id: &Uuid) -> Option<StandardAcl> {
        let acl = self.by_id.remove(id)?;
        self.unindex(&acl);
        Some(acl)
    }

    fn unindex(&mut self, acl: &StandardAcl) {
        let Some(t) = self.index.get_mut(&acl.resource_type) else {
            return;
        };
        let map = if acl.pattern_type == codes::pattern::PREFIXED {
            &mut t.prefixed
        } else {
            &mut t.literal
        };
        if let Some(v) = map.get_mut(&acl.resource_name) {
            if let Some(i) = v.iter().position(|a| a == acl) {
                v.swap_remove(i);
            }
            if v.is_empty() {
                map.remove(&acl.resource_name);
            }
        }
        t.prefix_lengths = t.prefixed.keys().map(String::len).collect();
    }

    /// The decision for `who` wanting `op` on the resource `resource`/`name`, with
    /// `default` when no ACL names the resource at all.
    pub fn authorize(
        &self,
        who: Requester<'_>,
        op: AclOperation,
        resource: ResourceType,
        name: &str,
        default: Decision,
    ) -> Decision {
        let Some(t) = self.index.get(&resource.code()) else {
            return default;
        };
        let mut named = false;
        let mut allowed = false;
        let exact = t.literal.get(name).into_iter().flatten();
        let wildcard = t.literal.get(WILDCARD).into_iter().flatten();
        let prefixes = t
            .prefix_lengths
            .range(..=name.len())
            .filter(|&&n| name.is_char_boundary(n))
            .filter_map(|&n| t.prefixed.get(&name[..n]))
            .flatten();
        for acl in exact.chain(prefixes).chain(wildcard) {
            // The wildcard literal is stored under `*`; a literal `*` looked up as `name`
            // when the name is itself `*` would be seen twice, which changes nothing.
            named = true;
            match counts(acl, who, op) {
                Some(Decision::Denied) => return Decision::Denied,
                Some(Decision::Allowed) => allowed = true,
                None => {}
            }
        }
        if allowed {
            Decision::Allowed
        } else if named {
            Decision::Denied
        } else {
            default
        }
    }

    /// Kafka's `Authorizer.authorizeByResourceType`: whether `who` could do `op` on some
    /// resource of this type. First the decision for a name no ACL is likely to cover
    /// (Kafka's "hardcode", so that the no-ACL default applies as in Kafka); then: a wildcard
    /// DENY refuses, a wildcard ALLOW allows, and otherwise some ALLOW pattern must not be
    /// covered by a DENY (a PREFIXED DENY covers the names it is a prefix of; a LITERAL DENY
    /// the same LITERAL). Operations match exactly or by ALL, without implication.
    pub fn authorize_any(
        &self,
        who: Requester<'_>,
        op: AclOperation,
        resource: ResourceType,
        default: Decision,
    ) -> Decision {
        if self.authorize(who, op, resource, "hardcode", default) == Decision::Allowed {
            return Decision::Allowed;
        }
        let Some(t) = self.index.get(&resource.code()) else {
            return Decision::Denied;
        };
        let applies = |acl: &StandardAcl, permission: i8| {
            acl.permission == permission
                && principal_matches(acl, who)
                && host_matches(acl, who)
                && (acl.operation == codes::operation::ALL || acl.operation == op as i8)
        };
        let all = || t.literal.values().chain(t.prefixed.values()).flatten();
        let denies: Vec<&StandardAcl> = all()
            .filter(|a| applies(a, codes::permission::DENY))
            .collect();
        let wildcard = |a: &StandardAcl| {
            a.pattern_type == codes::pattern::LITERAL && a.resource_name == WILDCARD
        };
        if denies.iter().any(|d| wildcard(d)) {
            return Decision::Denied;
        }
        let allows: Vec<&StandardAcl> = all()
            .filter(|a| applies(a, codes::permission::ALLOW))
            .collect();
        if allows.iter().any(|a| wildcard(a)) {
            return Decision::Allowed;
        }
        let covered = |allow: &StandardAcl| {
            denies.iter().any(|d| match d.pattern_type {
                codes::pattern::PREFIXED => allow.resource_name.starts_with(&d.resource_name),
                _ => {
                    allow.pattern_type == codes::pattern::LITERAL
                        && allow.resource_name == d.resource_name
                }
            })
        };
        if allows.iter().any(|a| !covered(a)) {
            Decision::Allowed
        } else {
            Decision::Denied
        }
    }
}

fn principal_matches(acl: &StandardAcl, who: Requester<'_>) -> bool {
    acl.principal == who.principal || acl.principal == "User:*"
}

fn host_matches(acl: &StandardAcl, who: Requester<'_>) -> bool {
    acl.host == WILDCARD || acl.host == who.host
}

/// Whether one ACL that names the resource counts for this request, and which way.
fn counts(acl: &StandardAcl, who: Requester<'_>, op: AclOperation) -> Option<Decision> {
    if !principal_matches(acl, who) || !host_matches(acl, who) {
        return None;
    }
    let allow = acl.permission == codes::permission::ALLOW;
    if acl.operation != codes::operation::ALL {
        let acl_op = acl.operation;
        let matched = if allow {
            match op {
                AclOperation::Describe => [
                    AclOperation::Describe,
                    AclOperation::Read,
                    AclOperation::Write,
                    AclOperation::Delete,
                    AclOperation::Alter,
                ]
                .iter()
                .any(|o| *o as i8 == acl_op),
                AclOperation::DescribeConfigs => {
                    acl_op == AclOperation::DescribeConfigs as i8
                        || acl_op == AclOperation::AlterConfigs as i8
                }
                _ => acl_op == op as i8,
            }
        } else {
            acl_op == op as i8
        };
        if !matched {
            return None;
        }
    }
    match acl.permission {
        codes::permission::ALLOW => Some(Decision::Allowed),
        codes::permission::DENY => Some(Decision::Denied),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use codes::{operation as o, pattern as p, permission as perm, resource as r};

    fn acl(name: &str, pt: i8, principal: &str, host: &str, op: i8, allow: bool) -> StandardAcl {
        StandardAcl {
            resource_type: r::TOPIC,
            resource_name: name.into(),
            pattern_type: pt,
            principal: principal.into(),
            host: host.into(),
            operation: op,
            permission: if allow { perm::ALLOW } else { perm::DENY },
        }
    }

    fn image(acls: &[StandardAcl]) -> AclImage {
        let mut img = AclImage::default();
        for a in acls {
            img.insert(Uuid::random(), a.clone());
        }
        img
    }

    const ALICE: Requester<'static> = Requester {
        principal: "User:alice",
        host: "127.0.0.1",
    };

    fn check(img: &AclImage, op: AclOperation, topic: &str) -> Decision {
        img.authorize(ALICE, op, ResourceType::Topic, topic, Decision::Denied)
    }

    #[test]
    fn literal_prefixed_and_wildcard_patterns_apply_to_the_names_they_cover() {
        let img = image(&[
            acl("orders", p::LITERAL, "User:alice", "*", o::READ, true),
            acl("pay-", p::PREFIXED, "User:alice", "*", o::WRITE, true),
        ]);
        assert_eq!(check(&img, AclOperation::Read, "orders"), Decision::Allowed);
        assert_eq!(check(&img, AclOperation::Read, "orders2"), Decision::Denied);
        assert_eq!(
            check(&img, AclOperation::Write, "pay-eu"),
            Decision::Allowed
        );
        assert_eq!(check(&img, AclOperation::Write, "pay"), Decision::Denied);
        let img = image(&[acl("*", p::LITERAL, "User:*", "*", o::ALL, true)]);
        assert_eq!(check(&img, AclOperation::Alter, "x"), Decision::Allowed);
    }

    #[test]
    fn deny_wins_and_only_allow_implies_describe() {
        let img = image(&[
            acl("t", p::PREFIXED, "User:alice", "*", o::ALL, true),
            acl("t1", p::LITERAL, "User:alice", "*", o::WRITE, false),
        ]);
        assert_eq!(check(&img, AclOperation::Write, "t1"), Decision::Denied);
        assert_eq!(check(&img, AclOperation::Read, "t1"), Decision::Allowed);
        let img = image(&[
            acl("t", p::LITERAL, "User:alice", "*", o::WRITE, true),
            acl("u", p::LITERAL, "User:alice", "*", o::READ, false),
            acl("u", p::LITERAL, "User:alice", "*", o::DESCRIBE, true),
        ]);
        assert_eq!(check(&img, AclOperation::Describe, "t"), Decision::Allowed);
        assert_eq!(check(&img, AclOperation::Read, "t"), Decision::Denied);
        // A DENY READ does not deny DESCRIBE.
        assert_eq!(check(&img, AclOperation::Describe, "u"), Decision::Allowed);
        let img = image(&[acl(
            "c",
            p::LITERAL,
            "User:alice",
            "*",
            o::ALTER_CONFIGS,
            true,
        )]);
        assert_eq!(
            check(&img, AclOperation::DescribeConfigs, "c"),
            Decision::Allowed
        );
    }

    #[test]
    fn principal_host_and_the_no_acl_default() {
        let img = image(&[acl("t", p::LITERAL, "User:bob", "10.0.0.1", o::READ, true)]);
        // ACLs name t, none counts for alice: denied even with allow.everyone.
        assert_eq!(
            img.authorize(
                ALICE,
                AclOperation::Read,
                ResourceType::Topic,
                "t",
                Decision::Allowed
            ),
            Decision::Denied
        );
        // No ACL names u: the default.
        assert_eq!(
            img.authorize(
                ALICE,
                AclOperation::Read,
                ResourceType::Topic,
                "u",
                Decision::Allowed
            ),
            Decision::Allowed
        );
        let bob = Requester {
            principal: "User:bob",
            host: "10.0.0.2",
        };
        assert_eq!(
            img.authorize(
                bob,
                AclOperation::Read,
                ResourceType::Topic,
                "t",
                Decision::Denied
            ),
            Decision::Denied
        );
    }

    #[test]
    fn removing_an_acl_takes_it_out_of_every_decision() {
        let mut img = AclImage::default();
        let id = Uuid::random();
        let a = acl("t", p::PREFIXED, "User:alice", "*", o::READ, true);
        img.insert(id, a.clone());
        assert!(img.contains(&a));
        assert_eq!(check(&img, AclOperation::Read, "t1"), Decision::Allowed);
        assert_eq!(img.remove(&id), Some(a.clone()));
        assert!(!img.contains(&a) && img.is_empty());
        assert_eq!(check(&img, AclOperation::Read, "t1"), Decision::Denied);
    }

    #[test]
    fn filters_match_as_kafka_binding_filters_do() {
        let stored = acl("pay-", p::PREFIXED, "User:alice", "*", o::WRITE, true);
        let any = AclFilter {
            resource_type: r::ANY,
            resource_name: None,
            pattern_type: p::ANY,
            principal: None,
            host: None,
            operation: o::ANY,
            permission: perm::ANY,
        };
        assert!(any.matches(&stored));
        let matching = AclFilter {
            resource_type: r::TOPIC,
            resource_name: Some("pay-eu".into()),
            pattern_type: p::MATCH,
            ..any.clone()
        };
        assert!(matching.matches(&stored));
        let literal = AclFilter {
            pattern_type: p::LITERAL,
            ..matching.clone()
        };
        assert!(!literal.matches(&stored));
        let exact = AclFilter {
            resource_name: Some("pay-".into()),
            pattern_type: p::ANY,
            ..matching
        };
        assert!(exact.matches(&stored));
        assert!(AclFilter {
            operation: o::UNKNOWN,
            ..any
        }
        .unknown_part()
        .is_some());
    }

    #[test]
    fn by_resource_type_needs_an_allow_not_covered_by_a_deny() {
        let img = image(&[acl("t", p::LITERAL, "User:alice", "*", o::WRITE, true)]);
        let any = |img: &AclImage| {
            img.authorize_any(
                ALICE,
                AclOperation::Write,
                ResourceType::Topic,
                Decision::Denied,
            )
        };
        assert_eq!(any(&img), Decision::Allowed);
        let img = image(&[
            acl("t", p::LITERAL, "User:alice", "*", o::WRITE, true),
            acl("t", p::PREFIXED, "User:alice", "*", o::WRITE, false),
        ]);
        assert_eq!(any(&img), Decision::Denied);
        assert_eq!(any(&AclImage::default()), Decision::Denied);
        // With allow.everyone.if.no.acl.found, ACLs on other topics do not take the default
        // away (Kafka decides for a name no ACL covers first).
        let img = image(&[acl("t", p::LITERAL, "User:bob", "*", o::WRITE, true)]);
        assert_eq!(
            img.authorize_any(
                ALICE,
                AclOperation::Write,
                ResourceType::Topic,
                Decision::Allowed
            ),
            Decision::Allowed
        );
    }

    #[test]
    fn new_acls_are_validated_in_kafkas_words() {
        let mut a = acl("t", p::LITERAL, "User:alice", "*", o::READ, true);
        assert!(validate_new_acl(&a).is_ok());
        a.pattern_type = p::MATCH;
        assert_eq!(
            validate_new_acl(&a).unwrap_err(),
            "Invalid patternType MATCH"
        );
        a.pattern_type = p::LITERAL;
        a.resource_type = r::CLUSTER;
        assert!(validate_new_acl(&a)
            .unwrap_err()
            .contains("only valid name for the CLUSTER"));
        a.resource_type = r::TOPIC;
        a.principal = "alice".into();
        assert!(validate_new_acl(&a).is_err());
    }
}
