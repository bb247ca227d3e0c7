//! ACLs (CreateAcls, DeleteAcls, `kafka-acls --add/--remove`; Kafka's `AclControlManager`):
//! new ACLs are checked and written as `AccessControlEntryRecord`s under fresh ids; a filter
//! removes every stored ACL it matches with `RemoveAccessControlEntryRecord`s. Brokers
//! enforce them from their image (`crate::authorization`).

use std::collections::{BTreeSet, HashSet};

use kactor_protocol::errors::*;
use kactor_protocol::metadata::RemoveAccessControlEntryRecord;
use kactor_protocol::Uuid;

use super::errors::ApiError;
use super::{ControllerResult, QuorumControllerCore};
use crate::authorization::acls::{validate_new_acl, AclFilter, StandardAcl};
use crate::metadata::core::MetadataRecord;

/// Kafka's bound on the records one admin operation may write (`MAX_RECORDS_PER_USER_OP`).
const MAX_RECORDS_PER_USER_OP: usize = 10_000;

/// One filter's outcome: the ACLs it removed, or why it was refused.
pub type DeleteAclsResult = Result<Vec<StandardAcl>, ApiError>;

impl QuorumControllerCore {
    /// One result per ACL, in request order. An ACL identical to a stored one (or to an
    /// earlier one of the same request) succeeds without a new record, as in Kafka.
    /// An inactive controller answers nothing.
    pub fn create_acls(&mut self, acls: &[StandardAcl]) -> ControllerResult<Vec<ApiError>> {
        if let Some(r) = self.not_controller(Vec::new()) {
            return r;
        }
        let mut records = Vec::new();
        let mut results = Vec::with_capacity(acls.len());
        let mut added: HashSet<&StandardAcl> = HashSet::new();
        let mut ids: BTreeSet<Uuid> = BTreeSet::new();
        for acl in acls {
            if let Err(message) = validate_new_acl(acl) {
                results.push(ApiError::new(INVALID_REQUEST, message));
                continue;
            }
            if records.len() >= MAX_RECORDS_PER_USER_OP {
                results.push(ApiError::new(
                    POLICY_VIOLATION,
                    format!(
                        "Cannot create more than {MAX_RECORDS_PER_USER_OP} acls in a single operation."
                    ),
                ));
                continue;
            }
            if !self.image.acls.contains(acl) && added.insert(acl) {
                let id = loop {
                    let id = Uuid::random_with(&mut self.rng);
                    if self.image.acls.get(&id).is_none() && ids.insert(id) {
                        break id;
                    }
                };
                records.push(MetadataRecord::AccessControlEntry(acl.to_record(id)));
            }
            results.push(ApiError::NONE);
        }
        self.finish(records, results)
    }

    /// One result per filter, in request order: the stored ACLs each matched (an ACL matched
    /// by several filters is removed once and listed under each). An inactive controller
    /// answers nothing.
    pub fn delete_acls(
        &mut self,
        filters: &[AclFilter],
    ) -> ControllerResult<Vec<DeleteAclsResult>> {
        if let Some(r) = self.not_controller(Vec::new()) {
            return r;
        }
        let mut removed: BTreeSet<Uuid> = BTreeSet::new();
        let mut results = Vec::with_capacity(filters.len());
        for filter in filters {
            if let Some(message) = filter.unknown_part() {
                results.push(Err(ApiError::new(INVALID_REQUEST, message)));
                continue;
            }
            let matched: Vec<(Uuid, StandardAcl)> = self
                .image
                .acls
                .iter()
                .filter(|(_, acl)| filter.matches(acl))
                .map(|(id, acl)| (*id, acl.clone()))
                .collect();
            let new = matched
                .iter()
                .filter(|(id, _)| !removed.contains(id))
                .count();
            if removed.len() + new > MAX_RECORDS_PER_USER_OP {
                results.push(Err(ApiError::new(
                    UNKNOWN_SERVER_ERROR,
                    format!(
                        "Cannot remove more than {MAX_RECORDS_PER_USER_OP} acls in a single delete operation."
                    ),
                )));
                continue;
            }
            removed.extend(matched.iter().map(|(id, _)| *id));
            results.push(Ok(matched.into_iter().map(|(_, acl)| acl).collect()));
        }
        let records = removed
            .into_iter()
            .map(|id| {
                MetadataRecord::RemoveAccessControlEntry(RemoveAccessControlEntryRecord {
                    id,
                    ..Default::default()
                })
            })
            .collect();
        self.finish(records, results)
    }
}
