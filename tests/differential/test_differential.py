"""The differential suite (issue #23): every case of the corpus sent to kactor and to Apache Kafka
4.4.0 in one session, both responses decoded in full and compared field by field. Fails on a
difference not listed in known_differences.py and on a listed difference that no longer
occurs. The report (per API, share identical) is printed at the end of the pytest run.

It always runs both brokers, so it is skipped when the session targets Kafka alone
(KACTOR_TEST_TARGET=kafka): the kactor run covers it."""
import os

import pytest

from harness.broker import TARGET

from . import suite
from .engine import CASES, show

pytestmark = pytest.mark.skipif(TARGET != "kactor", reason="the differential suite runs both "
                                "brokers itself; it runs in the kactor session")


@pytest.fixture(scope="module")
def outcome(tmp_path_factory, request):
    with suite.brokers(tmp_path_factory.mktemp("differential")) as ports:
        out = suite.run(ports)
    request.config._kactor_differential_report = out.report
    path = os.environ.get("KACTOR_DIFF_REPORT")
    if path:
        with open(path, "w") as f:
            f.write(out.report + "\n")
    return out


def test_every_served_api_has_cases(outcome):
    """The corpus covers every API kactor advertises (checked against a live ApiVersions)."""
    from .client import API_NAMES
    served = {r.case.api for r in outcome.results}
    advertised = set(outcome.advertised)
    missing = sorted(API_NAMES.get(k, str(k)) for k in advertised
                     if API_NAMES.get(k) not in served)
    assert not missing, f"advertised APIs without a differential case: {missing}"


def test_no_unlisted_difference(outcome):
    lines = []
    for r, d in outcome.unlisted:
        key = d.path.rsplit(".", 1)[-1]
        lines.append(f"{r.case.name} | {d.path} | kactor {show(d.kactor, key)} | "
                     f"kafka {show(d.kafka, key)}")
    assert not lines, ("differences not in tests/differential/known_differences.py (fix "
                       "kactor, or list them; `tests/differential/run.py --suggest` prints "
                       "entries):\n" + "\n".join(lines))


def test_listed_differences_still_occur(outcome):
    stale = [f"{e['case']} | {e['path']}" for e in outcome.stale]
    assert not stale, ("listed differences that no longer occur: remove them from "
                       "known_differences.py and regenerate docs/differences.md "
                       "(run.py --docs):\n" + "\n".join(stale))


def test_docs_page_matches_the_list():
    assert suite.DOCS.exists() and suite.DOCS.read_text() == suite.docs_text() + "\n", \
        "docs/differences.md is out of date: run tests/differential/run.py --docs"


def test_case_names_are_unique_and_named_by_api():
    from .client import API_KEYS
    names = [c.name for c in CASES]
    assert len(names) == len(set(names))
    assert all(c.api in API_KEYS for c in CASES)
