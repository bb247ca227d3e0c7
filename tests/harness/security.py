"""Secured brokers for tests/security: PEM certificates made with openssl, and `SecureBroker`,
a single node with PLAINTEXT, SSL (client certificates required), SASL_SSL and SASL_PLAINTEXT
listeners. The same broker config serves kactor and Apache Kafka 4.4."""
import subprocess
from pathlib import Path

from harness.broker import Broker, free_port
from harness.cli import run_tool

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" '
              'user_admin="admin-secret" user_alice="alice-plain";')
SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required;'
OAUTH_JAAS = 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;'
SCRAM_USER, SCRAM_PASSWORD = "alice", "alice-secret"
PLAIN_USER, PLAIN_PASSWORD = "alice", "alice-plain"


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certs(d):
    """Writes into directory `d` a CA (ca.pem), a server certificate for 127.0.0.1 and localhost
    and a client certificate (CN=alice-client): for each, <name>.key (unencrypted PKCS#8),
    <name>.crt, and <name>.pem, Kafka's PEM key store file (the key, then the chain)."""
    d = Path(d)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
             "-subj", "/CN=kactor-test-ca", "-keyout", "ca.key", "-out", "ca.pem", cwd=d)
    (d / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    # X.509 v3 (any extension makes openssl write v3): rustls refuses v1 certificates, which
    # Java still takes; see docs/security.md.
    (d / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for name, subj in [("server", "/CN=localhost"),
                       ("client", "/C=US/O=kactor/OU=eng/CN=alice-client")]:
        ext = ["-extfile", f"{name}.ext"]
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subj,
                 "-keyout", f"{name}.rsa", "-out", f"{name}.csr", cwd=d)
        _openssl("pkcs8", "-topk8", "-nocrypt", "-in", f"{name}.rsa", "-out", f"{name}.key",
                 cwd=d)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-days", "2", "-out", f"{name}.crt", *ext, cwd=d)
        (d / f"{name}.pem").write_text((d / f"{name}.key").read_text()
                                       + (d / f"{name}.crt").read_text())
    return d


class SecureBroker(Broker):
    """A single node with PLAINTEXT (inter-broker, admin), SSL (client certificates required),
    SASL_SSL and SASL_PLAINTEXT (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) client listeners."""

    def __init__(self, workdir, certs, **kw):
        super().__init__(workdir, **kw)
        self.certs = Path(certs)
        self.ssl_port = free_port()
        self.sasl_ssl_port = free_port()
        self.sasl_plain_port = free_port()

    def base_config(self):
        cfg = super().base_config()
        h = self.host
        cfg["listeners"] = (f"PLAINTEXT://{h}:{self.port},SSL://{h}:{self.ssl_port},"
                            f"SASL_SSL://{h}:{self.sasl_ssl_port},"
                            f"SASL_PLAINTEXT://{h}:{self.sasl_plain_port},"
                            f"CONTROLLER://{h}:{self.controller_port}")
        cfg["advertised.listeners"] = (f"PLAINTEXT://{h}:{self.port},SSL://{h}:{self.ssl_port},"
                                       f"SASL_SSL://{h}:{self.sasl_ssl_port},"
                                       f"SASL_PLAINTEXT://{h}:{self.sasl_plain_port}")
        cfg["listener.security.protocol.map"] = (
            "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
            "CONTROLLER:PLAINTEXT")
        cfg["ssl.keystore.type"] = "PEM"
        cfg["ssl.keystore.location"] = str(self.certs / "server.pem")
        cfg["ssl.truststore.type"] = "PEM"
        cfg["ssl.truststore.location"] = str(self.certs / "ca.pem")
        cfg["listener.name.ssl.ssl.client.auth"] = "required"
        cfg["sasl.enabled.mechanisms"] = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"
        for listener in ("sasl_ssl", "sasl_plaintext"):
            cfg[f"listener.name.{listener}.plain.sasl.jaas.config"] = PLAIN_JAAS
            # Kafka's default broker validator for OAUTHBEARER: unsecured (unsigned) JWTs.
            cfg[f"listener.name.{listener}.oauthbearer.sasl.jaas.config"] = OAUTH_JAAS
            for m in ("scram-sha-256", "scram-sha-512"):
                cfg[f"listener.name.{listener}.{m}.sasl.jaas.config"] = SCRAM_JAAS
        return cfg

    def add_scram_user(self, user=SCRAM_USER, password=SCRAM_PASSWORD,
                       mechanisms=("SCRAM-SHA-256", "SCRAM-SHA-512")):
        """SCRAM credentials stored through the plaintext listener, as an operator would."""
        for mechanism in mechanisms:
            run_tool("configs", "--bootstrap-server", self.bootstrap, "--alter",
                     "--add-config", f"{mechanism}=[iterations=4096,password={password}]",
                     "--entity-type", "users", "--entity-name", user)


AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTHZ_USERS = {"admin": "admin-secret", "alice": "alice-plain", "bob": "bob-plain"}
AUTHZ_PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
                    'username="admin" password="admin-secret" '
                    + " ".join(f'user_{u}="{p}"' for u, p in AUTHZ_USERS.items()) + ";")


class AuthzBroker(SecureBroker):
    """A SecureBroker with ACL authorization (KRaft's StandardAuthorizer) and the PLAIN users
    admin, alice and bob. User:admin and User:ANONYMOUS are super users: ANONYMOUS is the
    principal of the PLAINTEXT and CONTROLLER listeners, which the node itself and the admin CLI
    use, so only the SASL and SSL listeners are subject to ACLs. With no ACL on a resource,
    access is denied (allow.everyone.if.no.acl.found=false, the default)."""

    def base_config(self):
        cfg = super().base_config()
        cfg["authorizer.class.name"] = AUTHORIZER
        cfg["super.users"] = "User:admin;User:ANONYMOUS"
        cfg["allow.everyone.if.no.acl.found"] = "false"
        for listener in ("sasl_ssl", "sasl_plaintext"):
            cfg[f"listener.name.{listener}.plain.sasl.jaas.config"] = AUTHZ_PLAIN_JAAS
        return cfg


def sasl_plain_client(port, user="alice", password=None, source_host=None, timeout=15.0):
    """A differential `Client` (raw requests from the schemas, responses decoded) whose
    connection authenticates with SASL PLAIN first: SaslHandshake v1 (PLAIN), then
    SaslAuthenticate v2 with `\\0user\\0password`. `source_host` binds the client's end of the
    connection (e.g. 127.0.0.2) for host-restricted ACLs. Reconnects authenticate again."""
    import socket

    from differential.client import Client

    password = AUTHZ_USERS[user] if password is None else password

    class SaslClient(Client):
        def _connect(self):
            if self.sock is None:
                src = (source_host, 0) if source_host else None
                self.sock = socket.create_connection(("127.0.0.1", self.port),
                                                     timeout=self.timeout, source_address=src)
                self.sock.settimeout(self.timeout)
                try:
                    self._authenticate()
                except BaseException:
                    self.close()
                    raise
            return self.sock

        def _authenticate(self):
            # Sent on the socket just opened, with correlation ids of their own: call() has
            # already numbered the request that made this connection.
            from differential.client import SCHEMAS
            from harness import schema_codec as sc
            for corr, (key, version, body) in enumerate(
                    ((17, 1, {"Mechanism": "PLAIN"}),
                     (36, 2, {"AuthBytes": f"\0{user}\0{password}".encode()})), 1 << 30):
                self.sock.sendall(sc.encode_request(SCHEMAS, key, version, body, corr))
                size = int.from_bytes(self._recv_exact(4), "big", signed=True)
                _, resp = sc.decode_response(SCHEMAS, key, version, self._recv_exact(size))
                if resp["ErrorCode"] != 0:
                    raise ConnectionError(f"SASL PLAIN as {user}: {resp}")

    return SaslClient("sasl", port, timeout=timeout)
