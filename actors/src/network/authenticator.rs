//! The SASL gate of a connection on a `SASL_PLAINTEXT` / `SASL_SSL` listener (Kafka's
//! `SaslServerAuthenticator` and the session expiry of `KafkaChannel`), as a pure state
//! machine the [`ConnectionActor`](super::connection::ConnectionActor) consults for every
//! request before routing it.
//!
//! Until a client has authenticated it may send ApiVersions and SaslHandshake, then
//! SaslAuthenticate; anything else fails its authentication. A failed exchange is answered
//! after `connection.failed.authentication.delay.ms`, then the connection closed. With
//! `connections.max.reauth.ms` a session expires: the client re-authenticates on the same
//! connection (KIP-368) with a new SaslHandshake, as the same principal and mechanism, or its
//! next request closes the connection.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kactor_protocol::errors::{
    ILLEGAL_SASL_STATE, NONE, SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM,
};
use kactor_protocol::messages::{SaslAuthenticateResponse, SaslHandshakeResponse};
use kactor_protocol::{ApiKey, RequestBody, ResponseBody};

use crate::group::core::hashing::{java_hash_order, java_string_hash};
use crate::security::sasl::{
    CredentialLookup, SaslServer, SaslSettings, SaslStep, SUPPORTED_MECHANISMS,
};
use crate::security::KafkaPrincipal;

/// What the connection does with a request.
#[derive(Debug)]
pub enum Gate {
    /// Route it as usual.
    Pass,
    /// Answer with this body and go on reading.
    Answer(ResponseBody),
    /// Authentication succeeded: answer, and serve the client as `principal` from now on.
    Authenticated {
        body: ResponseBody,
        principal: KafkaPrincipal,
        mechanism: String,
    },
    /// Authentication failed: answer with `body` (if any) and close, after
    /// `connection.failed.authentication.delay.ms` when `delayed` (Kafka delays failed
    /// authentications, not expired sessions).
    Fail {
        body: Option<ResponseBody>,
        reason: String,
        delayed: bool,
    },
    /// A request of another API during the exchange: answer it with ILLEGAL_SASL_STATE in its
    /// own format where the router can build one (Kafka's `getErrorResponse`), then close.
    IllegalState { reason: String },
}

#[derive(Debug)]
enum State {
    /// Nothing negotiated yet (Kafka's HANDSHAKE_OR_VERSIONS_REQUEST / HANDSHAKE_REQUEST);
    /// `versions_seen`: the one ApiVersions Kafka allows before the handshake has come.
    Handshake { versions_seen: bool },
    /// A mechanism was chosen; SaslAuthenticate requests carry its tokens. `server` is `None`
    /// when a re-authentication asked for another mechanism (Kafka's REAUTH_BAD_MECHANISM):
    /// its first token fails.
    Authenticating {
        mechanism: String,
        server: Option<SaslServer>,
    },
    Authenticated {
        mechanism: String,
        expires_at: Option<Instant>,
    },
}

#[derive(Debug)]
struct Reauth {
    mechanism: String,
    principal: KafkaPrincipal,
}

#[derive(Debug)]
pub struct Authenticator {
    settings: Arc<SaslSettings>,
    state: State,
    /// The session being renewed while a client re-authenticates.
    reauth: Option<Reauth>,
    principal: KafkaPrincipal,
    /// Some SaslAuthenticate of this connection was v1 or later (Kafka's
    /// `connectedClientSupportsReauthentication`): only such a client may re-authenticate.
    client_supports_reauth: bool,
}

impl Authenticator {
    /// `settings.enabled_mechanisms` should already be in [`java_hash_map_order`]: the
    /// handshake answer lists them as they are.
    pub fn new(settings: Arc<SaslSettings>) -> Self {
        Authenticator {
            settings,
            state: State::Handshake {
                versions_seen: false,
            },
            reauth: None,
            principal: KafkaPrincipal::anonymous(),
            client_supports_reauth: false,
        }
    }

    /// The largest frame to read next: `sasl.server.max.receive.size` until the client has
    /// authenticated, so a hostile peer cannot make the broker allocate a large buffer first.
    pub fn max_frame(&self) -> Option<usize> {
        match self.state {
            State::Authenticated { .. } => None,
            _ => Some(self.settings.max_receive_size),
        }
    }

    /// Whether a request of this API may be decoded at all in the current state: before
    /// authentication only the SASL APIs and ApiVersions are, so unauthenticated bytes never
    /// reach the other decoders (Kafka refuses them by api key before parsing).
    pub fn admits(&self, api_key: ApiKey) -> bool {
        match self.state {
            State::Authenticated { .. } => true,
            State::Handshake { .. } => {
                matches!(api_key, ApiKey::ApiVersions | ApiKey::SaslHandshake)
            }
            State::Authenticating { .. } => api_key == ApiKey::SaslAuthenticate,
        }
    }

    /// A request [`Self::admits`] refuses: the gate for it, decided by api key alone.
    pub fn refuse(&self, api_key: ApiKey) -> Gate {
        match self.state {
            State::Authenticating { .. } => Gate::IllegalState {
                reason: format!(
                    "Unexpected Kafka request of type {} during SASL authentication.",
                    api_key.name()
                ),
            },
            _ => Gate::Fail {
                body: None,
                reason: format!(
                    "Unexpected Kafka request of type {} during SASL handshake.",
                    api_key.name()
                ),
                delayed: true,
            },
        }
    }

    pub fn is_authenticated(&self) -> bool {
        matches!(self.state, State::Authenticated { .. })
    }

    fn reauthenticating(&self) -> bool {
        self.reauth.is_some()
    }

    pub fn on_request(
        &mut self,
        api_key: ApiKey,
        version: i16,
        body: &RequestBody,
        now: Instant,
        credentials: CredentialLookup<'_>,
    ) -> Gate {
        match &self.state {
            State::Authenticated { expires_at, .. } => {
                if api_key == ApiKey::SaslHandshake && self.client_supports_reauth {
                    return self.handshake(body, version);
                }
                if expires_at.is_some_and(|t| now >= t) {
                    return Gate::Fail {
                        body: None,
                        reason: "the SASL session expired and the client did not \
                                 re-authenticate (connections.max.reauth.ms)"
                            .into(),
                        delayed: false,
                    };
                }
                Gate::Pass
            }
            State::Handshake { versions_seen } => match api_key {
                // One ApiVersions only: answering any number of them would let a peer hold a
                // connection open forever without authenticating (Kafka closes on a second).
                ApiKey::ApiVersions if !versions_seen => {
                    self.state = State::Handshake {
                        versions_seen: true,
                    };
                    Gate::Pass
                }
                ApiKey::SaslHandshake => self.handshake(body, version),
                other => Gate::Fail {
                    body: None,
                    reason: format!(
                        "Unexpected Kafka request of type {} during SASL handshake.",
                        other.name()
                    ),
                    delayed: true,
                },
            },
            State::Authenticating { .. } => {
                if api_key != ApiKey::SaslAuthenticate {
                    return Gate::IllegalState {
                        reason: format!(
                            "Unexpected Kafka request of type {} during SASL authentication.",
                            api_key.name()
                        ),
                    };
                }
                if version > 0 {
                    self.client_supports_reauth = true;
                }
                self.authenticate(body, now, credentials)
            }
        }
    }

    fn handshake(&mut self, body: &RequestBody, version: i16) -> Gate {
        let RequestBody::SaslHandshake(req) = body else {
            unreachable!("routed by api key");
        };
        let enabled = self.settings.enabled_mechanisms.clone();
        let mechanism = req.mechanism.clone();
        let answer = |error_code| {
            ResponseBody::SaslHandshake(SaslHandshakeResponse {
                error_code,
                mechanisms: enabled.clone(),
            })
        };
        if version == 0 {
            // v0 is followed by raw tokens outside Kafka's framing (0.10 clients); every
            // client since Kafka 1.0 sends v1 and SaslAuthenticate, so kactor serves only that.
            return Gate::Fail {
                body: Some(answer(UNSUPPORTED_SASL_MECHANISM)),
                reason: "SaslHandshake v0 (unframed SASL tokens) is not served".into(),
                delayed: true,
            };
        }
        if !enabled.contains(&mechanism) {
            return Gate::Fail {
                body: Some(answer(UNSUPPORTED_SASL_MECHANISM)),
                reason: format!("Unsupported SASL mechanism {}", loggable(&mechanism)),
                delayed: true,
            };
        }
        if let State::Authenticated {
            mechanism: current, ..
        } = &self.state
        {
            self.reauth = Some(Reauth {
                mechanism: current.clone(),
                principal: self.principal.clone(),
            });
        }
        let server = match &self.reauth {
            Some(r) if r.mechanism != mechanism => None,
            _ => SaslServer::new(&mechanism),
        };
        self.state = State::Authenticating { mechanism, server };
        Gate::Answer(answer(NONE))
    }

    fn authenticate(
        &mut self,
        body: &RequestBody,
        now: Instant,
        credentials: CredentialLookup<'_>,
    ) -> Gate {
        let RequestBody::SaslAuthenticate(req) = body else {
            unreachable!("routed by api key");
        };
        let State::Authenticating { mechanism, server } = &mut self.state else {
            unreachable!("called in the authenticating state");
        };
        let mechanism = mechanism.clone();
        let fail = |message: String, log: String| Gate::Fail {
            body: Some(ResponseBody::SaslAuthenticate(SaslAuthenticateResponse {
                error_code: SASL_AUTHENTICATION_FAILED,
                error_message: Some(message),
                ..Default::default()
            })),
            reason: log,
            delayed: true,
        };
        let Some(server) = server else {
            let previous = self.reauth.as_ref().map(|r| r.mechanism.clone());
            let m = format!(
                "SASL mechanism '{mechanism}' requested by client is not supported for \
                 re-authentication of mechanism '{}'",
                previous.unwrap_or_default()
            );
            return fail(m.clone(), m);
        };
        match server.step(&req.auth_bytes, &self.settings, credentials) {
            Ok(SaslStep::Challenge(bytes)) => {
                Gate::Answer(ResponseBody::SaslAuthenticate(SaslAuthenticateResponse {
                    error_code: NONE,
                    auth_bytes: bytes.into(),
                    ..Default::default()
                }))
            }
            Ok(SaslStep::Done {
                response,
                principal,
                credential_expires_ms,
            }) => {
                if let Some(r) = &self.reauth {
                    if r.principal != principal {
                        let m = format!(
                            "Cannot change principals during re-authentication from {}.{}: {}.{}",
                            r.principal.principal_type,
                            r.principal.name,
                            principal.principal_type,
                            principal.name
                        );
                        return fail(m.clone(), m);
                    }
                }
                let max_reauth_ms = self
                    .settings
                    .max_reauth_ms
                    .get(&mechanism)
                    .copied()
                    .filter(|ms| *ms > 0);
                // Kafka's session lifetime: the shorter of the credential's remaining life and
                // connections.max.reauth.ms, whichever are set.
                let credential_left_ms = credential_expires_ms.map(|exp| {
                    let wall_now_ms = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_millis() as i64);
                    (exp - wall_now_ms).max(0)
                });
                let lifetime = match (credential_left_ms, max_reauth_ms) {
                    (None, None) => None,
                    (Some(c), None) => Some(c),
                    (None, Some(m)) => Some(m),
                    (Some(c), Some(m)) => Some(c.min(m)),
                };
                let lifetime_ms = lifetime.unwrap_or(0);
                let expires_at = lifetime.map(|ms| now + Duration::from_millis(ms as u64));
                self.state = State::Authenticated {
                    mechanism: mechanism.clone(),
                    expires_at,
                };
                self.reauth = None;
                self.principal = principal.clone();
                Gate::Authenticated {
                    body: ResponseBody::SaslAuthenticate(SaslAuthenticateResponse {
                        error_code: NONE,
                        auth_bytes: response.into(),
                        session_lifetime_ms: lifetime_ms,
                        ..Default::default()
                    }),
                    principal,
                    mechanism,
                }
            }
            Err(failure) => {
                let message = failure.client_message(&mechanism, self.reauthenticating());
                let log = format!(
                    "{mechanism} {} failed: {}",
                    if self.reauthenticating() {
                        "re-authentication"
                    } else {
                        "authentication"
                    },
                    failure.log_message()
                );
                fail(message, log)
            }
        }
    }
}

/// Client-supplied text for a log line or reason: at most 128 characters, escaped, so a peer
/// can neither flood the log nor forge lines in it.
pub fn loggable(s: &str) -> String {
    let mut out: String = s.chars().take(128).flat_map(char::escape_debug).collect();
    if s.chars().count() > 128 {
        out.push('…');
    }
    out
}

/// The order Kafka lists mechanisms in its handshake answer: the iteration order of a
/// default-sized Java `HashMap` keyed by mechanism name (bucket by the spread `String`
/// hash, insertion order within a bucket), not the configured order.
pub fn java_hash_map_order(names: &[String]) -> Vec<String> {
    let items = names
        .iter()
        .map(|n| (java_string_hash(n), n.clone()))
        .collect();
    java_hash_order(items, 16)
}

/// Checks a listener's `sasl.enabled.mechanisms` against what kactor implements.
pub fn check_mechanisms(enabled: &[String]) -> Result<(), String> {
    if enabled.is_empty() {
        return Err("a SASL listener needs at least one mechanism".into());
    }
    for m in enabled {
        if !SUPPORTED_MECHANISMS.contains(&m.as_str()) {
            return Err(format!(
                "mechanism {m} is not served by kactor (it serves {})",
                SUPPORTED_MECHANISMS.join(", ")
            ));
        }
    }
    Ok(())
}

/// Kafka's answers to SaslHandshake / SaslAuthenticate outside an exchange (`KafkaApis`): on a
/// listener without SASL, or from a client that has authenticated and does not re-authenticate.
pub fn after_authentication_answer(api_key: ApiKey) -> Option<ResponseBody> {
    match api_key {
        ApiKey::SaslHandshake => Some(ResponseBody::SaslHandshake(SaslHandshakeResponse {
            error_code: ILLEGAL_SASL_STATE,
            ..Default::default()
        })),
        ApiKey::SaslAuthenticate => {
            Some(ResponseBody::SaslAuthenticate(SaslAuthenticateResponse {
                error_code: ILLEGAL_SASL_STATE,
                error_message: Some(
                    "SaslAuthenticate request received after successful authentication".into(),
                ),
                ..Default::default()
            }))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kactor_protocol::messages::{
        ApiVersionsRequest, MetadataRequest, SaslAuthenticateRequest, SaslHandshakeRequest,
    };
    use std::collections::HashMap;

    fn settings(reauth_ms: i64) -> Arc<SaslSettings> {
        Arc::new(SaslSettings {
            enabled_mechanisms: java_hash_map_order(&["PLAIN".into(), "SCRAM-SHA-256".into()]),
            plain_users: HashMap::from([
                ("alice".into(), "pw".into()),
                ("bob".into(), "pw2".into()),
            ]),
            max_reauth_ms: HashMap::from([("PLAIN".into(), reauth_ms)]),
            max_receive_size: 524288,
            oauthbearer: Default::default(),
        })
    }

    fn handshake(m: &str) -> RequestBody {
        RequestBody::SaslHandshake(SaslHandshakeRequest {
            mechanism: m.into(),
        })
    }

    fn token(t: &[u8]) -> RequestBody {
        RequestBody::SaslAuthenticate(SaslAuthenticateRequest {
            auth_bytes: bytes::Bytes::copy_from_slice(t),
            ..Default::default()
        })
    }

    const NO_CREDENTIALS: CredentialLookup<'static> = &|_, _| None;

    fn login(a: &mut Authenticator, user: &[u8], now: Instant) -> Gate {
        let g = a.on_request(
            ApiKey::SaslHandshake,
            1,
            &handshake("PLAIN"),
            now,
            NO_CREDENTIALS,
        );
        assert!(matches!(g, Gate::Answer(_)), "{g:?}");
        a.on_request(
            ApiKey::SaslAuthenticate,
            2,
            &token(user),
            now,
            NO_CREDENTIALS,
        )
    }

    #[test]
    fn plain_login_then_requests_pass() {
        let mut a = Authenticator::new(settings(0));
        let now = Instant::now();
        let v = RequestBody::ApiVersions(ApiVersionsRequest::default());
        assert!(matches!(
            a.on_request(ApiKey::ApiVersions, 3, &v, now, NO_CREDENTIALS),
            Gate::Pass
        ));
        assert_eq!(a.max_frame(), Some(524288));
        match login(&mut a, b"\0alice\0pw", now) {
            Gate::Authenticated {
                principal, body, ..
            } => {
                assert_eq!(principal.to_string(), "User:alice");
                let ResponseBody::SaslAuthenticate(r) = body else {
                    panic!()
                };
                assert_eq!(r.session_lifetime_ms, 0);
            }
            g => panic!("{g:?}"),
        }
        assert_eq!(a.max_frame(), None);
        let m = RequestBody::Metadata(MetadataRequest::default());
        assert!(matches!(
            a.on_request(ApiKey::Metadata, 12, &m, now, NO_CREDENTIALS),
            Gate::Pass
        ));
    }

    #[test]
    fn only_one_api_versions_and_only_sasl_apis_before_authentication() {
        let mut a = Authenticator::new(settings(0));
        let now = Instant::now();
        let v = RequestBody::ApiVersions(ApiVersionsRequest::default());
        assert!(a.admits(ApiKey::ApiVersions) && !a.admits(ApiKey::Metadata));
        assert!(matches!(
            a.on_request(ApiKey::ApiVersions, 3, &v, now, NO_CREDENTIALS),
            Gate::Pass
        ));
        assert!(matches!(
            a.on_request(ApiKey::ApiVersions, 3, &v, now, NO_CREDENTIALS),
            Gate::Fail { delayed: true, .. }
        ));
        let mut a = Authenticator::new(settings(0));
        a.on_request(
            ApiKey::SaslHandshake,
            1,
            &handshake("PLAIN"),
            now,
            NO_CREDENTIALS,
        );
        assert!(a.admits(ApiKey::SaslAuthenticate) && !a.admits(ApiKey::ApiVersions));
        assert!(matches!(
            a.refuse(ApiKey::Produce),
            Gate::IllegalState { .. }
        ));
        assert!(loggable(&"x\n".repeat(100)).len() < 300);
    }

    #[test]
    fn requests_before_authentication_fail_it() {
        let mut a = Authenticator::new(settings(0));
        let now = Instant::now();
        let m = RequestBody::Metadata(MetadataRequest::default());
        assert!(matches!(
            a.on_request(ApiKey::Metadata, 12, &m, now, NO_CREDENTIALS),
            Gate::Fail { body: None, reason, .. } if reason.contains("during SASL handshake")
        ));
        let mut a = Authenticator::new(settings(0));
        a.on_request(
            ApiKey::SaslHandshake,
            1,
            &handshake("PLAIN"),
            now,
            NO_CREDENTIALS,
        );
        assert!(matches!(
            a.on_request(ApiKey::Metadata, 12, &m, now, NO_CREDENTIALS),
            Gate::IllegalState { .. }
        ));
    }

    #[test]
    fn unknown_mechanism_and_wrong_password_are_answered_then_closed() {
        let mut a = Authenticator::new(settings(0));
        let now = Instant::now();
        match a.on_request(
            ApiKey::SaslHandshake,
            1,
            &handshake("GSSAPI"),
            now,
            NO_CREDENTIALS,
        ) {
            Gate::Fail {
                body: Some(ResponseBody::SaslHandshake(r)),
                ..
            } => {
                assert_eq!(r.error_code, UNSUPPORTED_SASL_MECHANISM);
                assert_eq!(r.mechanisms, vec!["PLAIN", "SCRAM-SHA-256"]);
            }
            g => panic!("{g:?}"),
        }
        let mut a = Authenticator::new(settings(0));
        match login(&mut a, b"\0alice\0nope", now) {
            Gate::Fail {
                body: Some(ResponseBody::SaslAuthenticate(r)),
                ..
            } => {
                assert_eq!(r.error_code, SASL_AUTHENTICATION_FAILED);
                assert_eq!(
                    r.error_message.as_deref(),
                    Some("Authentication failed: Invalid username or password")
                );
            }
            g => panic!("{g:?}"),
        }
    }

    #[test]
    fn sessions_expire_and_reauthentication_keeps_the_principal() {
        let mut a = Authenticator::new(settings(1000));
        let t0 = Instant::now();
        match login(&mut a, b"\0alice\0pw", t0) {
            Gate::Authenticated { body, .. } => {
                let ResponseBody::SaslAuthenticate(r) = body else {
                    panic!()
                };
                assert_eq!(r.session_lifetime_ms, 1000);
            }
            g => panic!("{g:?}"),
        }
        let m = RequestBody::Metadata(MetadataRequest::default());
        let later = t0 + Duration::from_millis(1500);
        // Re-authenticating as the same user renews the session.
        assert!(matches!(
            login(&mut a, b"\0alice\0pw", later),
            Gate::Authenticated { .. }
        ));
        assert!(matches!(
            a.on_request(ApiKey::Metadata, 12, &m, later, NO_CREDENTIALS),
            Gate::Pass
        ));
        // Another user is refused.
        assert!(matches!(
            login(&mut a, b"\0bob\0pw2", later),
            Gate::Fail { reason, .. } if reason.contains("Cannot change principals")
        ));
        // Without re-authentication the next request after expiry closes the connection.
        let mut a = Authenticator::new(settings(1000));
        login(&mut a, b"\0alice\0pw", t0);
        assert!(matches!(
            a.on_request(ApiKey::Metadata, 12, &m, later, NO_CREDENTIALS),
            Gate::Fail { body: None, .. }
        ));
    }

    #[test]
    fn reauthentication_with_another_mechanism_fails() {
        let mut a = Authenticator::new(settings(1000));
        let t0 = Instant::now();
        login(&mut a, b"\0alice\0pw", t0);
        let g = a.on_request(
            ApiKey::SaslHandshake,
            1,
            &handshake("SCRAM-SHA-256"),
            t0,
            NO_CREDENTIALS,
        );
        assert!(matches!(g, Gate::Answer(_)));
        assert!(matches!(
            a.on_request(ApiKey::SaslAuthenticate, 2, &token(b"n,,n=alice,r=x"), t0, NO_CREDENTIALS),
            Gate::Fail { reason, .. } if reason.contains("not supported for re-authentication")
        ));
    }

    #[test]
    fn handshake_lists_mechanisms_in_kafkas_order() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // Kafka 4.4 answers PLAIN, SCRAM-SHA-512, SCRAM-SHA-256 for this configuration.
        assert_eq!(
            java_hash_map_order(&names(&["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])),
            names(&["PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256"])
        );
    }

    #[test]
    fn mechanisms_kactor_does_not_serve_are_refused_at_start() {
        assert!(check_mechanisms(&["PLAIN".into(), "SCRAM-SHA-512".into()]).is_ok());
        assert!(check_mechanisms(&["GSSAPI".into()]).is_err());
        assert!(check_mechanisms(&[]).is_err());
    }
}
