//! SCRAM credentials (AlterUserScramCredentials, `kafka-configs --entity-type users
//! --add-config 'SCRAM-SHA-256=[password=...]'`; Kafka's `ScramControlManager`): checked and
//! turned into `UserScramCredentialRecord`s. The client sends the salted password; what is
//! stored is RFC 5802's StoredKey = H(HMAC(salted, "Client Key")) and ServerKey =
//! HMAC(salted, "Server Key"), from which a SCRAM server checks a login without the password
//! (kactor's SASL listeners read them from the image, `security/sasl.rs`).

use std::collections::BTreeMap;

use bytes::Bytes;
use kactor_protocol::errors::*;
use kactor_protocol::metadata::{RemoveUserScramCredentialRecord, UserScramCredentialRecord};

use super::errors::*;
use super::{ControllerResult, QuorumControllerCore};
use crate::metadata::core::MetadataRecord;
use crate::security::sasl::ScramHash;

/// Kafka's `ScramMechanism` type ids.
pub const SCRAM_SHA_256: i8 = 1;
pub const SCRAM_SHA_512: i8 = 2;
/// Kafka's bounds on the iteration count (the same for both mechanisms).
const MIN_ITERATIONS: i32 = 4096;
const MAX_ITERATIONS: i32 = 16384;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramDeletion {
    pub name: String,
    pub mechanism: i8,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramUpsertion {
    pub name: String,
    pub mechanism: i8,
    pub iterations: i32,
    pub salt: Bytes,
    pub salted_password: Bytes,
}

/// (StoredKey, ServerKey) for a salted password under `mechanism` (1 or 2).
pub fn scram_keys(mechanism: i8, salted_password: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    ScramHash::from_type_id(mechanism).map(|h| h.keys(salted_password))
}

impl QuorumControllerCore {
    /// Applies deletions and upsertions, as Kafka does: entries are checked in order
    /// (deletions first); a user's first failing entry decides its answer and its later
    /// entries are skipped, and a user named again after a valid entry is refused as a whole
    /// (DUPLICATE_RESOURCE). Returns one (user, outcome) per user, in the order first named.
    pub fn alter_user_scram_credentials(
        &mut self,
        deletions: &[ScramDeletion],
        upsertions: &[ScramUpsertion],
    ) -> ControllerResult<Vec<(String, ApiError)>> {
        if let Some(r) = self.not_controller(Vec::new()) {
            return r;
        }
        let entries = deletions
            .iter()
            .map(|d| (d.name.as_str(), self.deletion_record(d)))
            .chain(
                upsertions
                    .iter()
                    .map(|u| (u.name.as_str(), upsertion_record(u))),
            );
        let mut order: Vec<&str> = Vec::new();
        let mut outcome: BTreeMap<&str, Result<MetadataRecord, ApiError>> = BTreeMap::new();
        for (user, checked) in entries {
            match outcome.get(user) {
                None => {
                    order.push(user);
                    outcome.insert(user, checked);
                }
                Some(Err(_)) => {}
                Some(Ok(_)) => {
                    outcome.insert(
                        user,
                        Err(ApiError::new(
                            DUPLICATE_RESOURCE,
                            "A user credential cannot be altered twice in the same request",
                        )),
                    );
                }
            }
        }
        let mut records = Vec::new();
        let mut results = Vec::new();
        for user in order {
            match outcome
                .remove(user)
                .expect("every named user has an outcome")
            {
                Ok(record) => {
                    records.push(record);
                    results.push((user.to_string(), ApiError::NONE));
                }
                Err(e) => results.push((user.to_string(), e)),
            }
        }
        self.finish(records, results)
    }

    fn deletion_record(&self, d: &ScramDeletion) -> Result<MetadataRecord, ApiError> {
        check_name_and_mechanism(&d.name, d.mechanism)?;
        let exists = self
            .image
            .scram_credentials
            .get(&d.name)
            .is_some_and(|m| m.contains_key(&d.mechanism));
        if !exists {
            return Err(ApiError::new(
                RESOURCE_NOT_FOUND,
                "Attempt to delete a user credential that does not exist",
            ));
        }
        Ok(MetadataRecord::RemoveUserScramCredential(
            RemoveUserScramCredentialRecord {
                name: d.name.clone(),
                mechanism: d.mechanism,
                ..Default::default()
            },
        ))
    }
}

fn check_name_and_mechanism(name: &str, mechanism: i8) -> Result<(), ApiError> {
    if name.is_empty() {
        return Err(ApiError::new(
            UNACCEPTABLE_CREDENTIAL,
            "Username must not be empty",
        ));
    }
    if !matches!(mechanism, SCRAM_SHA_256 | SCRAM_SHA_512) {
        return Err(ApiError::new(
            UNSUPPORTED_SASL_MECHANISM,
            "Unknown SCRAM mechanism",
        ));
    }
    Ok(())
}

/// Kafka's checks of an upsertion; on success the record to store.
fn upsertion_record(u: &ScramUpsertion) -> Result<MetadataRecord, ApiError> {
    check_name_and_mechanism(&u.name, u.mechanism)?;
    if u.iterations < MIN_ITERATIONS {
        return Err(ApiError::new(UNACCEPTABLE_CREDENTIAL, "Too few iterations"));
    }
    if u.iterations > MAX_ITERATIONS {
        return Err(ApiError::new(
            UNACCEPTABLE_CREDENTIAL,
            "Too many iterations",
        ));
    }
    // Kafka's HMAC refuses an empty key and the request fails with an unexpected error and no
    // message; the same answer here, so that tools see one behaviour.
    if u.salted_password.is_empty() {
        return Err(ApiError::code(UNKNOWN_SERVER_ERROR));
    }
    let (stored_key, server_key) =
        scram_keys(u.mechanism, &u.salted_password).expect("mechanism checked above");
    Ok(MetadataRecord::UserScramCredential(
        UserScramCredentialRecord {
            name: u.name.clone(),
            mechanism: u.mechanism,
            salt: u.salt.clone(),
            stored_key: stored_key.into(),
            server_key: server_key.into(),
            iterations: u.iterations,
            ..Default::default()
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// RFC 7677's example credential (password "pencil", salt W22ZaJ0SNY7soEsUEjb6gQ==, 4096
    /// iterations); the expected keys were computed with Python's hashlib and hmac.
    #[test]
    fn keys_follow_rfc_5802() {
        let salted = hex("c4a49510323ab4f952cac1fa99441939e78ea74d6be81ddf7096e87513dc615d");
        let (stored, server) = scram_keys(SCRAM_SHA_256, &salted).unwrap();
        assert_eq!(
            stored,
            hex("586e5df283e6dceb5c3e791d8b8528ec191e664045ce971792e2e6b5bb13e2a6")
        );
        assert_eq!(
            server,
            hex("c1f3cbc1c13a9d35a14c0990eed97629ea225863e566a4314ab99f3f00e5d9d5")
        );
        let salted = hex("f16efe1be67f1d09502ebd5ed9262fddffba5a377ab4f0b687e5ed5ba0f50686b8a4ae166476da8ab3b951d2fa9238b63998f45461bc33a464814949cec9631d");
        let (stored, server) = scram_keys(SCRAM_SHA_512, &salted).unwrap();
        assert_eq!(stored, hex("e8002e6f7d3ae446119b216933644dc2a2be7869eb918b8459b5e7d7d2ec12606aceef106825cd735170a675fd3611f684affad1dce3f43a0ee43bd590e1dbbe"));
        assert_eq!(server, hex("8d91db6230b5687874fe129bc7206e1858c3ae08e02934f57ac03b6b05a229c459d28ff46f5c9611e6c179256490215ec1ff759cb0df285db89af0f99e613aac"));
        assert!(scram_keys(3, &salted).is_none());
    }
}
