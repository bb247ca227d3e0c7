"""Fixtures of the security suites: `certs` (CA, server and client PEM files made with openssl
for the module) and `secure`, one SecureBroker per module with the SCRAM user alice (both
SCRAM-SHA-256 and -512) stored, handed to each test the way conftest's `broker` is (restarted
if a test left it dead, its log attached to a failure); `authz`, likewise one AuthzBroker per
module (ACLs enforced by the StandardAuthorizer; super users admin and ANONYMOUS)."""
import pytest

from harness.broker import use_shared
from harness.security import AuthzBroker, SecureBroker, make_certs


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def _secure(tmp_path_factory, certs):
    b = SecureBroker(tmp_path_factory.mktemp("secure"), certs, name="secure")
    b.start()
    try:
        b.add_scram_user()
        yield b
    finally:
        b.stop()


@pytest.fixture
def secure(_secure, request):
    return use_shared(_secure, request)


@pytest.fixture(scope="module")
def _authz(tmp_path_factory, certs):
    b = AuthzBroker(tmp_path_factory.mktemp("authz"), certs, name="authz")
    b.start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture
def authz(_authz, request):
    return use_shared(_authz, request)
