//! A listener's security settings from the broker config, as Kafka reads them: every `ssl.*`
//! and `sasl.*` key may be given once for all listeners or under `listener.name.<name>.`
//! (lower case), and the SASL login settings under `listener.name.<name>.<mechanism>.`.

use std::collections::HashMap;
use std::sync::Arc;

use kactor_actors::network::authenticator::{check_mechanisms, java_hash_map_order};
use kactor_actors::security::sasl::{self, SaslSettings};
use kactor_actors::security::tls::{ClientAuth, SslSettings, StoreSpec, TlsListener};
use kactor_actors::security::{ListenerSecurity, SecurityError, SecurityProtocol};

use crate::config::BrokerConfig;

/// `listener.name.<listener>.<key>` when given, else `<key>`.
fn listener_value<'a>(cfg: &'a BrokerConfig, listener: &str, key: &str) -> Option<&'a str> {
    let prefixed = format!("listener.name.{}.{key}", listener.to_ascii_lowercase());
    cfg.get_str(&prefixed)
        .or_else(|| cfg.get_str(key))
        .filter(|v| !v.trim().is_empty())
}

fn listener_list(cfg: &BrokerConfig, listener: &str, key: &str) -> Vec<String> {
    listener_value(cfg, listener, key)
        .map(|v| {
            v.split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

fn store(cfg: &BrokerConfig, listener: &str, which: &str) -> StoreSpec {
    let get = |suffix: &str| {
        listener_value(cfg, listener, &format!("ssl.{which}.{suffix}")).map(str::to_string)
    };
    StoreSpec {
        store_type: get("type").unwrap_or_else(|| "JKS".into()),
        location: get("location"),
        password: get("password"),
        key_password: (which == "keystore")
            .then(|| listener_value(cfg, listener, "ssl.key.password").map(str::to_string))
            .flatten(),
        pem_key: (which == "keystore").then(|| get("key")).flatten(),
        pem_certificates: if which == "keystore" {
            get("certificate.chain")
        } else {
            get("certificates")
        },
    }
}

fn ssl_settings(
    cfg: &BrokerConfig,
    listener: &str,
    protocol: SecurityProtocol,
) -> Result<SslSettings, SecurityError> {
    // On SASL_SSL only the listener's own ssl.client.auth counts (Kafka's ChannelBuilders):
    // a broker-wide `required` meant for an SSL listener must not demand certificates from
    // SASL clients.
    let client_auth = if protocol == SecurityProtocol::SaslSsl {
        let key = format!(
            "listener.name.{}.ssl.client.auth",
            listener.to_ascii_lowercase()
        );
        cfg.get_str(&key).unwrap_or("none")
    } else {
        listener_value(cfg, listener, "ssl.client.auth").unwrap_or("none")
    };
    Ok(SslSettings {
        keystore: store(cfg, listener, "keystore"),
        truststore: store(cfg, listener, "truststore"),
        client_auth: ClientAuth::parse(client_auth)?,
        enabled_protocols: listener_list(cfg, listener, "ssl.enabled.protocols"),
        principal_mapping_rules: listener_value(cfg, listener, "ssl.principal.mapping.rules")
            .unwrap_or("DEFAULT")
            .to_string(),
    })
}

fn sasl_settings(cfg: &BrokerConfig, listener: &str) -> Result<SaslSettings, SecurityError> {
    let enabled = listener_list(cfg, listener, "sasl.enabled.mechanisms");
    check_mechanisms(&enabled).map_err(|e| SecurityError::config("sasl.enabled.mechanisms", e))?;
    let lower = listener.to_ascii_lowercase();
    let mut plain_users = HashMap::new();
    let mut oauthbearer = sasl::UnsecuredJwtOptions::default();
    let mut max_reauth_ms = HashMap::new();
    for mechanism in &enabled {
        let mech_key = |key: &str| {
            format!(
                "listener.name.{lower}.{}.{key}",
                mechanism.to_ascii_lowercase()
            )
        };
        if mechanism == sasl::PLAIN {
            let key = mech_key("sasl.jaas.config");
            let jaas = cfg.get_str(&key).ok_or_else(|| {
                SecurityError::config(
                    &key,
                    "PLAIN needs a JAAS config naming its users (user_<name>=\"<password>\")",
                )
            })?;
            let options =
                sasl::parse_jaas_options(jaas).map_err(|e| SecurityError::config(&key, e))?;
            plain_users = sasl::plain_users(&options);
        }
        if mechanism == sasl::OAUTHBEARER {
            // Kafka's broker validates OAUTHBEARER tokens with its unsecured validator unless
            // a JWKS endpoint and OAuthBearerValidatorCallbackHandler are configured; kactor
            // has only the former so far and must not accept signed tokens unchecked.
            let handler = cfg
                .get_str(&mech_key("sasl.server.callback.handler.class"))
                .or_else(|| cfg.get_str("sasl.server.callback.handler.class"));
            let jwks = listener_value(cfg, listener, "sasl.oauthbearer.jwks.endpoint.url");
            if handler.is_some() || jwks.is_some() {
                return Err(SecurityError::config(
                    "sasl.oauthbearer.jwks.endpoint.url",
                    "OAUTHBEARER token validation against a JWKS endpoint (or a custom \
                     callback handler) is not served by kactor yet; only Kafka's unsecured \
                     validator is",
                ));
            }
            let key = mech_key("sasl.jaas.config");
            if let Some(jaas) = cfg.get_str(&key) {
                let options =
                    sasl::parse_jaas_options(jaas).map_err(|e| SecurityError::config(&key, e))?;
                oauthbearer = sasl::UnsecuredJwtOptions::from_jaas(&options)
                    .map_err(|e| SecurityError::config(&key, e))?;
            }
        }
        let reauth = cfg
            .get_str(&mech_key("connections.max.reauth.ms"))
            .or_else(|| cfg.get_str("connections.max.reauth.ms"))
            .unwrap_or("0");
        let reauth: i64 = reauth.trim().parse().map_err(|_| {
            SecurityError::config("connections.max.reauth.ms", "expected a 64-bit integer")
        })?;
        max_reauth_ms.insert(mechanism.clone(), reauth);
    }
    let max_receive_size = listener_value(cfg, listener, "sasl.server.max.receive.size")
        .unwrap_or("524288")
        .trim()
        .parse::<usize>()
        .map_err(|_| {
            SecurityError::config(
                "sasl.server.max.receive.size",
                "expected a positive integer",
            )
        })?;
    Ok(SaslSettings {
        // Kafka's handshake lists them in a Java HashMap's order; sorted once here.
        enabled_mechanisms: java_hash_map_order(&enabled),
        plain_users,
        max_reauth_ms,
        max_receive_size,
        oauthbearer,
    })
}

/// The security of listener `name`, whose protocol the config's map gives.
pub fn listener_security(
    cfg: &BrokerConfig,
    name: &str,
) -> Result<ListenerSecurity, SecurityError> {
    let protocol_name = cfg
        .security_protocol_map()
        .get(name)
        .cloned()
        .unwrap_or_else(|| "PLAINTEXT".into());
    let protocol = SecurityProtocol::parse(&protocol_name).ok_or_else(|| {
        SecurityError::config(
            "listener.security.protocol.map",
            format!("unknown security protocol {protocol_name} for listener {name}"),
        )
    })?;
    let tls = if protocol.uses_tls() {
        Some(Arc::new(
            TlsListener::new(&ssl_settings(cfg, name, protocol)?).map_err(|e| {
                SecurityError::config(&e.key, format!("listener {name}: {}", e.reason))
            })?,
        ))
    } else {
        None
    };
    let sasl = if protocol.uses_sasl() {
        Some(Arc::new(sasl_settings(cfg, name).map_err(|e| {
            SecurityError::config(&e.key, format!("listener {name}: {}", e.reason))
        })?))
    } else {
        None
    };
    Ok(ListenerSecurity {
        protocol,
        tls,
        sasl,
        failed_authentication_delay_ms: cfg
            .get_i64("connection.failed.authentication.delay.ms")
            .max(0) as u64,
    })
}
