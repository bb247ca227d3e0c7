//! Client quotas on the controller (AlterClientQuotas, `kafka-configs --alter --entity-type
//! users|clients|ips --add-config producer_byte_rate=...`; Kafka's `ClientQuotaControlManager`):
//! each alteration is checked against Kafka's rules and becomes `ClientQuotaRecord`s, one per
//! key whose value changes. The records replay into the image's `client_quotas`, which
//! DescribeClientQuotas reads and the brokers' quota managers enforce.
//!
//! Kafka keeps entities, their ops and the results in Java `HashMap`s, so which of two invalid
//! keys is reported, the order of an entity's components in the answer and the order of the
//! answer's entries follow Java's hash order. [`java_hash_order`] reproduces it, so that a
//! client sees the same bytes from both brokers.

use std::collections::{BTreeMap, BTreeSet};

use kactor_protocol::errors::*;
use kactor_protocol::metadata::client_quota_record::EntityData;
use kactor_protocol::metadata::ClientQuotaRecord;

use super::errors::*;
use super::{ControllerResult, QuorumControllerCore};
use crate::group::core::hashing::{java_hash_order, java_string_hash};
use crate::metadata::core::{MetadataRecord, QuotaEntity};

pub const USER: &str = "user";
pub const CLIENT_ID: &str = "client-id";
pub const IP: &str = "ip";

pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
pub const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";
pub const CONNECTION_CREATION_RATE: &str = "connection_creation_rate";

/// The type a quota key is declared with in Kafka's `QuotaConfig`, which decides the checks
/// a value gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QuotaType {
    Long,
    Int,
    Double,
}

/// Keys of user and client-id entities (Kafka's `userAndClientQuotaConfigs`).
const USER_CLIENT_KEYS: [(&str, QuotaType); 4] = [
    (PRODUCER_BYTE_RATE, QuotaType::Long),
    (CONSUMER_BYTE_RATE, QuotaType::Long),
    (REQUEST_PERCENTAGE, QuotaType::Double),
    (CONTROLLER_MUTATION_RATE, QuotaType::Double),
];
/// Keys of ip entities (Kafka's `ipConfigs`).
const IP_KEYS: [(&str, QuotaType); 1] = [(CONNECTION_CREATION_RATE, QuotaType::Int)];

/// One entry of an AlterClientQuotas request: the entity's components as sent and the ops
/// (key, `Some(value)` to set, `None` to remove).
#[derive(Debug, Clone, PartialEq)]
pub struct QuotaAlteration {
    pub entity: Vec<(String, Option<String>)>,
    pub ops: Vec<(String, Option<f64>)>,
}

/// An entity's components in the order Kafka lists them (its `HashMap`'s), each type once.
pub type EntityComponents = Vec<(String, Option<String>)>;

/// Java's `Objects.hashCode` of an optional string.
fn opt_hash(s: &Option<String>) -> i32 {
    s.as_deref().map_or(0, java_string_hash)
}

/// The request's components as Kafka's `ClientQuotaEntity` holds them: a map built by
/// `new HashMap<>(n)`, a repeated type keeping its position and its last name.
pub fn entity_components(sent: &[(String, Option<String>)]) -> EntityComponents {
    let mut merged: Vec<(String, Option<String>)> = Vec::new();
    for (t, n) in sent {
        match merged.iter_mut().find(|(mt, _)| mt == t) {
            Some(slot) => slot.1 = n.clone(),
            None => merged.push((t.clone(), n.clone())),
        }
    }
    java_hash_order(
        merged
            .into_iter()
            .map(|(t, n)| (java_string_hash(&t), (t, n)))
            .collect(),
        sent.len(),
    )
}

/// Java's `ClientQuotaEntity.hashCode` (`Objects.hash(entries)`).
fn entity_hash(components: &EntityComponents) -> i32 {
    let map_hash = components.iter().fold(0i32, |acc, (t, n)| {
        acc.wrapping_add(java_string_hash(t) ^ opt_hash(n))
    });
    31i32.wrapping_add(map_hash)
}

/// Kafka's `ClientQuotaEntity.toString`, for messages that name an entity.
pub fn entity_string(components: &EntityComponents) -> String {
    let entries: Vec<String> = components
        .iter()
        .map(|(t, n)| format!("{t}={}", n.as_deref().unwrap_or("null")))
        .collect();
    format!("ClientQuotaEntity(entries={{{}}})", entries.join(", "))
}

fn to_entity(components: &EntityComponents) -> QuotaEntity {
    components.iter().cloned().collect()
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::new(INVALID_REQUEST, message)
}

/// Kafka's `validateEntity`: known types only, no empty names.
fn validate_entity(components: &EntityComponents) -> Result<(), ApiError> {
    if components.is_empty() {
        return Err(invalid("Invalid empty client quota entity"));
    }
    for (t, n) in components {
        if !matches!(t.as_str(), USER | CLIENT_ID | IP) {
            return Err(invalid(format!("Unhandled client quota entity type: {t}")));
        }
        if n.as_deref() == Some("") {
            return Err(invalid(format!("Empty {t} not supported")));
        }
    }
    Ok(())
}

/// Kafka's `configKeysForEntityType`: the combination decides the valid keys; an ip entity
/// must name an address or a resolvable host (`unresolvable` holds the names that are not,
/// found by the shell: the core does no DNS).
fn keys_for(
    entity: &QuotaEntity,
    unresolvable: &BTreeSet<String>,
) -> Result<&'static [(&'static str, QuotaType)], ApiError> {
    let (user, client, ip) = (
        entity.contains_key(USER),
        entity.contains_key(CLIENT_ID),
        entity.get(IP),
    );
    match ip {
        Some(_) if user || client => Err(invalid(
            // Kafka's message, its missing space included.
            "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId",
        )),
        Some(Some(name)) if unresolvable.contains(name) => Err(invalid(format!(
            "{name} is not a valid IP or resolvable host."
        ))),
        Some(_) => Ok(&IP_KEYS),
        None if user || client => Ok(&USER_CLIENT_KEYS),
        None => Err(invalid("Invalid empty client quota entity")),
    }
}

/// Kafka's `validateQuotaKeyValue`.
fn validate_value(keys: &[(&str, QuotaType)], key: &str, value: f64) -> Result<(), ApiError> {
    let Some((_, ty)) = keys.iter().find(|(k, _)| *k == key) else {
        return Err(invalid(format!("Invalid configuration key {key}")));
    };
    if value <= 0.0 {
        return Err(invalid(format!("Quota {key} must be greater than 0")));
    }
    let (max, name) = match ty {
        QuotaType::Double => return Ok(()),
        QuotaType::Int => (i32::MAX as f64, "an INT"),
        QuotaType::Long => (i64::MAX as f64, "a LONG"),
    };
    if value > max {
        return Err(invalid(format!(
            "Proposed value for {key} is too large for {name}."
        )));
    }
    // Java's `%` keeps the dividend's sign, as Rust's does.
    if (value % 1.0).abs() > 1e-6 {
        return Err(invalid(format!("{key} cannot be a fractional value.")));
    }
    Ok(())
}

impl QuorumControllerCore {
    /// Applies (or, with `validate_only`, only checks) the alterations as Kafka's controller
    /// does: one result per distinct entity, in Kafka's answer order. `unresolvable`: ip
    /// entity names that are neither an address nor a host that resolves.
    pub fn alter_client_quotas(
        &mut self,
        alterations: &[QuotaAlteration],
        validate_only: bool,
        unresolvable: &BTreeSet<String>,
    ) -> ControllerResult<Vec<(EntityComponents, ApiError)>> {
        if let Some(r) = self.not_controller(Vec::new()) {
            return r;
        }
        let mut records = Vec::new();
        // Results keyed by entity, in first-seen order (re-ordered as Kafka's map at the end).
        let mut results: Vec<(EntityComponents, ApiError)> = Vec::new();
        fn put(
            results: &mut Vec<(EntityComponents, ApiError)>,
            entity: &EntityComponents,
            e: ApiError,
        ) {
            let map = to_entity(entity);
            match results.iter_mut().find(|(c, _)| to_entity(c) == map) {
                Some(slot) => slot.1 = e,
                None => results.push((entity.clone(), e)),
            }
        }
        for alteration in alterations {
            let entity = entity_components(&alteration.entity);
            let map = to_entity(&entity);
            // The ops as Kafka's map of them: a repeated key fails the entity.
            let mut ops: Vec<(String, Option<f64>)> = Vec::new();
            let mut duplicate = false;
            for (key, value) in &alteration.ops {
                if ops.iter().any(|(k, _)| k == key) {
                    duplicate = true;
                } else {
                    ops.push((key.clone(), *value));
                }
            }
            // Kafka records "Duplicate quota key" and then, finding the entity answered,
            // replaces it by the message below; an entity met again in the request gets it too.
            if duplicate || results.iter().any(|(c, _)| to_entity(c) == map) {
                let message = format!("Ignoring duplicate entity {}", entity_string(&entity));
                put(&mut results, &entity, invalid(message));
                continue;
            }
            let n = alteration.ops.len();
            let ops = java_hash_order(
                ops.into_iter()
                    .map(|(k, v)| (java_string_hash(&k), (k, v)))
                    .collect(),
                n,
            );
            match self.quota_records(&entity, &map, &ops, unresolvable) {
                Ok(mut new) => {
                    records.append(&mut new);
                    put(&mut results, &entity, ApiError::NONE);
                }
                Err(e) => put(&mut results, &entity, e),
            }
        }
        let ordered = java_hash_order(
            results
                .into_iter()
                .map(|(c, e)| (entity_hash(&c), (c, e)))
                .collect(),
            16,
        );
        if validate_only {
            return ControllerResult::of(Vec::new(), ordered);
        }
        self.finish(records, ordered)
    }

    /// The records one entity's ops produce, or the first error (Kafka's
    /// `alterClientQuotaEntity`).
    fn quota_records(
        &self,
        components: &EntityComponents,
        entity: &QuotaEntity,
        ops: &[(String, Option<f64>)],
        unresolvable: &BTreeSet<String>,
    ) -> Result<Vec<MetadataRecord>, ApiError> {
        validate_entity(components)?;
        let keys = keys_for(entity, unresolvable)?;
        let current = self.image.client_quotas.get(entity);
        let record = |key: &str, value: f64, remove: bool| {
            MetadataRecord::ClientQuota(ClientQuotaRecord {
                entity: components
                    .iter()
                    .map(|(t, n)| EntityData {
                        entity_type: t.clone(),
                        entity_name: n.clone(),
                        ..Default::default()
                    })
                    .collect(),
                key: key.to_string(),
                value,
                remove,
                ..Default::default()
            })
        };
        let mut out = Vec::new();
        for (key, value) in ops {
            let existing = current.and_then(|c| c.get(key)).copied();
            match value {
                // Removing a key that is not set writes nothing, whatever the key.
                None => {
                    if existing.is_some() {
                        out.push(record(key, 0.0, true));
                    }
                }
                Some(v) => {
                    validate_value(keys, key, *v)?;
                    // Java's Double.equals: bit equality (NaN equals NaN, 0.0 is not -0.0).
                    if existing.map(f64::to_bits) != Some(v.to_bits()) {
                        out.push(record(key, *v, false));
                    }
                }
            }
        }
        Ok(out)
    }
}

/// The entities of `quotas` a DescribeClientQuotas filter matches (Kafka's
/// `ClientQuotasImage.describe` after its checks): `exact` maps types to the name (or default,
/// `None`) they must have, `any` lists types that must be present; `strict` wants no other
/// component.
pub fn matching_entities<'a>(
    quotas: &'a BTreeMap<QuotaEntity, BTreeMap<String, f64>>,
    exact: &BTreeMap<String, Option<String>>,
    any: &BTreeSet<String>,
    strict: bool,
) -> Vec<(&'a QuotaEntity, &'a BTreeMap<String, f64>)> {
    quotas
        .iter()
        .filter(|(entity, _)| {
            (!strict || entity.len() == exact.len() + any.len())
                && exact.iter().all(|(t, n)| entity.get(t) == Some(n))
                && any.iter().all(|t| entity.contains_key(t))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comp(t: &str, n: Option<&str>) -> (String, Option<String>) {
        (t.to_string(), n.map(String::from))
    }

    #[test]
    fn java_string_hashes() {
        // Values of "x".hashCode() in Java.
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("user"), 3599307);
        assert_eq!(java_string_hash("client-id"), -1904137635);
        assert_eq!(java_string_hash("ip"), 3367);
    }

    #[test]
    fn entity_components_follow_java_hash_order_and_last_name_wins() {
        // In a 4-slot table "client-id" is in bucket 0 and "user" in bucket 1, whatever the
        // order sent.
        let a = entity_components(&[comp(USER, Some("u")), comp(CLIENT_ID, None)]);
        let b = entity_components(&[comp(CLIENT_ID, None), comp(USER, Some("u"))]);
        assert_eq!(a, b);
        assert_eq!(a[0].0, CLIENT_ID);
        let merged = entity_components(&[comp(USER, Some("a")), comp(USER, Some("b"))]);
        assert_eq!(merged, vec![comp(USER, Some("b"))]);
    }

    #[test]
    fn value_checks_follow_kafka() {
        let k = &USER_CLIENT_KEYS;
        let msg = |r: Result<(), ApiError>| r.unwrap_err().message.unwrap();
        assert_eq!(
            msg(validate_value(k, "foo", 1.0)),
            "Invalid configuration key foo"
        );
        assert_eq!(
            msg(validate_value(k, PRODUCER_BYTE_RATE, 0.0)),
            "Quota producer_byte_rate must be greater than 0"
        );
        assert_eq!(
            msg(validate_value(k, PRODUCER_BYTE_RATE, 1.5)),
            "producer_byte_rate cannot be a fractional value."
        );
        assert_eq!(
            msg(validate_value(k, CONSUMER_BYTE_RATE, 1e20)),
            "Proposed value for consumer_byte_rate is too large for a LONG."
        );
        assert!(validate_value(k, REQUEST_PERCENTAGE, 12.5).is_ok());
        assert_eq!(
            msg(validate_value(&IP_KEYS, CONNECTION_CREATION_RATE, 3e9)),
            "Proposed value for connection_creation_rate is too large for an INT."
        );
    }

    #[test]
    fn describe_filters_match_exact_default_and_any() {
        let mut quotas: BTreeMap<QuotaEntity, BTreeMap<String, f64>> = BTreeMap::new();
        let v: BTreeMap<String, f64> = [(PRODUCER_BYTE_RATE.to_string(), 1.0)].into();
        let e = |c: &[(String, Option<String>)]| -> QuotaEntity { c.iter().cloned().collect() };
        quotas.insert(e(&[comp(USER, Some("alice"))]), v.clone());
        quotas.insert(e(&[comp(USER, None)]), v.clone());
        quotas.insert(
            e(&[comp(USER, Some("alice")), comp(CLIENT_ID, Some("c"))]),
            v.clone(),
        );
        quotas.insert(e(&[comp(CLIENT_ID, None)]), v.clone());
        let exact = |pairs: &[(String, Option<String>)]| -> BTreeMap<_, _> {
            pairs.iter().cloned().collect()
        };
        let none = BTreeSet::new();
        let alice = exact(&[comp(USER, Some("alice"))]);
        assert_eq!(matching_entities(&quotas, &alice, &none, false).len(), 2);
        assert_eq!(matching_entities(&quotas, &alice, &none, true).len(), 1);
        let default_user = exact(&[comp(USER, None)]);
        assert_eq!(
            matching_entities(&quotas, &default_user, &none, true).len(),
            1
        );
        let any_user: BTreeSet<String> = [USER.to_string()].into();
        assert_eq!(
            matching_entities(&quotas, &BTreeMap::new(), &any_user, false).len(),
            3
        );
        assert_eq!(
            matching_entities(&quotas, &BTreeMap::new(), &any_user, true).len(),
            2
        );
        assert_eq!(
            matching_entities(&quotas, &BTreeMap::new(), &none, false).len(),
            4
        );
    }
}
