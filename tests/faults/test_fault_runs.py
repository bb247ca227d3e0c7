"""Fault runs (issue #30): the queue and the transactional copier under kill -9, SIGSTOP and a
full data log dir, on a seeded schedule, judged by the checkers. Any anomaly fails the test;
the message names the directory holding the history (history.jsonl), the result
(result.json) and the broker's log.

Short in CI: KACTOR_FAULT_MINUTES (default 1 minute of faults per workload; fractions allowed).
Long runs: scripts/faults --minutes N [--seed S] [--workload queue|copier|all]
[--target kactor|kafka]. KACTOR_FAULT_SEED fixes the seed (else a fresh one, printed and
recorded); KACTOR_FAULT_WORKLOAD picks one workload; KACTOR_FAULT_OUT keeps the runs under that
directory. Both targets: KACTOR_TEST_TARGET=kafka runs the same schedule against Kafka 4.4."""
import json
import os
import random
import time
from pathlib import Path

import pytest

from faults.runner import Run, describe

MINUTES = float(os.environ.get("KACTOR_FAULT_MINUTES", "1"))
SECONDS = MINUTES * 60
WORKLOADS = [w for w in ("queue", "copier")
             if os.environ.get("KACTOR_FAULT_WORKLOAD", "all") in ("all", w)]
# Faults, then a drain (<= 2 min), final reads and up to two broker starts (Kafka's JVM).
BUDGET = int(SECONDS + 600)


def _seed():
    s = os.environ.get("KACTOR_FAULT_SEED")
    return int(s) if s else random.SystemRandom().randrange(1, 2**31)


@pytest.mark.timeout(BUDGET)
@pytest.mark.parametrize("workload", WORKLOADS)
def test_no_anomaly_under_faults(workload, target, tmp_path):
    seed = _seed()
    base = os.environ.get("KACTOR_FAULT_OUT")
    outdir = (Path(base) if base else tmp_path) / f"{workload}-{target}-seed{seed}-{int(time.time())}"
    print(f"\nfault run: workload={workload} target={target} seed={seed} "
          f"minutes={MINUTES} dir={outdir}", flush=True)
    result = Run(workload, SECONDS, seed, target, outdir).execute()
    print(describe(result, limit=10), flush=True)
    print("RESULT " + json.dumps({k: result[k] for k in (
        "workload", "target", "seed", "fault_seconds", "total_seconds", "faults",
        "ops_total", "operations", "anomaly_counts", "restart_seconds_max")}), flush=True)
    assert result["faults"] and sum(result["faults"].values()) > 0, "no fault was injected"
    sends = result["operations"].get("send", {}).get("ok", 0)
    assert sends > 100, f"only {sends} sends acknowledged: nothing to check ({outdir})"
    if workload == "copier":
        assert result["operations"].get("txn", {}).get("ok", 0) > 10, "too few transactions"
    assert not result["anomalies"], (
        f"{len(result['anomalies'])} anomalies (seed {seed}); history, result and broker log "
        f"in {outdir}\n{describe(result, limit=10)}")
