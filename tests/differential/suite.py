"""The whole differential suite: both brokers, every case, the report, the docs page."""
import contextlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness import wire
from harness.broker import Broker, kactor_bin

from . import (  # noqa: F401
    corpus_cluster, corpus_data, corpus_groups, corpus_share, corpus_topics, corpus_txn)
from .engine import CASES, _glob, run_case, select, summary
from .known_differences import KNOWN

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "differences.md"


@dataclass
class Outcome:
    report: str
    results: list
    listed: list = field(default_factory=list)
    unlisted: list = field(default_factory=list)
    stale: list = field(default_factory=list)
    seconds: float = 0.0
    advertised: dict = field(default_factory=dict)  # kactor's ApiVersions: key -> (min, max)


@contextlib.contextmanager
def brokers(workdir):
    """One kactor and one Apache Kafka 4.4.0 broker (same single-node configuration); yields
    {"kactor": port, "kafka": port}."""
    made = {}
    try:
        for target in ("kactor", "kafka"):
            made[target] = Broker(Path(workdir) / target, target=target, name=f"diff-{target}")
            made[target].start(timeout=120)
        yield {t: b.port for t, b in made.items()}
    finally:
        for b in made.values():
            b.stop()


def run(ports, patterns=(), verbose=False):
    t0 = time.monotonic()
    advertised = wire.api_versions(ports["kactor"], 3)[2]
    cases = select(CASES, patterns)
    results = []
    for c in cases:
        r = run_case(c, ports)
        if verbose:
            print(f"{c.name}: {'same' if r.identical else f'{len(r.diffs)} diffs'} "
                  f"({r.seconds:.2f}s)", flush=True)
        for t, tb in r.errors.items():
            if verbose or os.environ.get("KACTOR_DIFF_TRACEBACKS"):
                print(f"--- {c.name} on {t}:\n{tb}", flush=True)
        results.append(r)
    names = [c.name for c in cases]
    kb = kactor_bin()
    built = (time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(kb.stat().st_mtime))
             if kb.exists() else "missing")
    known = [e for e in KNOWN if any(_glob(e["case"]).match(n) for n in names)]
    report, (listed, unlisted, stale) = summary(results, known)
    took = time.monotonic() - t0
    report = f"kactor binary: {kb} (modified {built} UTC); run took {took:.0f} s\n" + report
    return Outcome(report, results, listed, unlisted, stale, time.monotonic() - t0, advertised)


def docs_text():
    """docs/differences.md, generated from known_differences.py."""
    out = ["# kactor and Apache Kafka 4.4.0: known differences on the wire", "",
           "Generated from `tests/differential/known_differences.py` by "
           "`tests/differential/run.py --docs`; do not edit by hand.", "",
           "The differential suite (`tests/differential/`, see tests/README.md) sends the same "
           "raw request sequences to kactor and to Apache Kafka 4.4.0, decodes both responses "
           "in full from the schemas and compares them field by field after normalising ids, "
           "times and hosts. Every difference it finds is listed here: *intentional* ones with "
           "the reason kactor differs on purpose, *pending* ones are kactor defects still to "
           "fix. The suite fails on a difference not listed and on a listed one that no longer "
           "occurs.", ""]
    for status, title in (("intentional", "Intentional differences"),
                          ("pending", "Pending (kactor defects not fixed yet)")):
        entries = [e for e in KNOWN if e["status"] == status]
        out += [f"## {title}", ""]
        if not entries:
            out += ["None.", ""]
            continue
        by_api = {}
        for e in entries:
            by_api.setdefault(e["case"].split("/")[0], []).append(e)
        for api in sorted(by_api):
            out += [f"### {api}", "", "| case | field | kactor | Kafka 4.4.0 | reason |",
                    "|---|---|---|---|---|"]
            for e in by_api[api]:
                cells = [_code(e["case"]), _code(e["path"]), _code(e.get("kactor", "")),
                         _code(e.get("kafka", "")), _text(e.get("reason", ""))]
                out.append("| " + " | ".join(cells) + " |")
            out.append("")
    return "\n".join(out)


def _text(x):
    return str(x).replace("|", "\\|").replace("\n", " ")


def _code(x):
    return "`" + _text(x).replace("`", "'") + "`" if x else ""


def write_docs():
    DOCS.parent.mkdir(parents=True, exist_ok=True)
    DOCS.write_text(docs_text() + "\n")
    return DOCS
