//! Who a connection is: the authenticated principal (Kafka's `KafkaPrincipal`) that
//! authorization and quotas key on. Plaintext and unauthenticated connections are
//! `User:ANONYMOUS`, as in Kafka.

pub mod principal_mapper;
pub mod sasl;
pub mod tls;

use std::fmt;
use std::sync::Arc;

/// Kafka's `KafkaPrincipal`: a type (`User` for every built-in authenticator) and a name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KafkaPrincipal {
    pub principal_type: Arc<str>,
    pub name: Arc<str>,
}

impl KafkaPrincipal {
    pub const USER_TYPE: &'static str = "User";

    pub fn user(name: &str) -> Self {
        KafkaPrincipal {
            principal_type: Arc::from(Self::USER_TYPE),
            name: Arc::from(name),
        }
    }

    /// `User:ANONYMOUS`: the principal of a PLAINTEXT connection or of SSL without a client
    /// certificate.
    pub fn anonymous() -> Self {
        Self::user("ANONYMOUS")
    }
}

impl Default for KafkaPrincipal {
    fn default() -> Self {
        Self::anonymous()
    }
}

impl fmt::Display for KafkaPrincipal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.principal_type, self.name)
    }
}

/// A listener's `listener.security.protocol.map` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.trim() {
            "PLAINTEXT" => SecurityProtocol::Plaintext,
            "SSL" => SecurityProtocol::Ssl,
            "SASL_PLAINTEXT" => SecurityProtocol::SaslPlaintext,
            "SASL_SSL" => SecurityProtocol::SaslSsl,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

/// Everything a listener needs to secure its connections.
#[derive(Debug, Clone)]
pub struct ListenerSecurity {
    pub protocol: SecurityProtocol,
    /// `Some` exactly when the protocol uses TLS.
    pub tls: Option<Arc<tls::TlsListener>>,
    /// `Some` exactly when the protocol uses SASL.
    pub sasl: Option<Arc<sasl::SaslSettings>>,
    /// `connection.failed.authentication.delay.ms`: how long the error answer (and the close)
    /// of a connection that failed to authenticate is held back (slows down password guessing).
    pub failed_authentication_delay_ms: u64,
}

impl ListenerSecurity {
    pub fn plaintext() -> Self {
        ListenerSecurity {
            protocol: SecurityProtocol::Plaintext,
            tls: None,
            sasl: None,
            failed_authentication_delay_ms: 100,
        }
    }
}

/// A security setting that cannot be used; names the key, never a secret.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{key}: {reason}")]
pub struct SecurityError {
    pub key: String,
    pub reason: String,
}

impl SecurityError {
    pub fn config(key: &str, reason: impl Into<String>) -> Self {
        SecurityError {
            key: key.to_string(),
            reason: reason.into(),
        }
    }
}
