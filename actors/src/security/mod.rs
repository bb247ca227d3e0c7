//! Who a connection is: the authenticated principal (Kafka's `KafkaPrincipal`) that
//! authorization and quotas key on. Plaintext and unauthenticated connections are
//! `User:ANONYMOUS`, as in Kafka.

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
