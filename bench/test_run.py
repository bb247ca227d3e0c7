"""Unit tests of the benchmark's planning and report (no broker): `python3 -m pytest bench/`."""
import argparse
import datetime

import run


def test_full_plan_is_the_issue_matrix():
    prods, consumes, e2es, _ = run.plan("full", None)
    assert len(prods) == 16  # 2 sizes x 2 acks x 2 partition counts x 2 producer counts
    assert {(p.size, p.acks, p.partitions, p.producers) for p in prods} == {
        (s, a, p, x) for s in (100, 1024) for a in ("1", "all") for p in (1, 8) for x in (1, 4)}
    assert all(p.acks == "1" and p.producers == 1 for p in consumes)
    assert e2es == [(1024, "1"), (1024, "all")]


def test_smoke_is_small_and_filters_apply():
    prods, _, e2es, d = run.plan("smoke", None)
    assert len(prods) == 2 and len(e2es) == 1 and d["produce"] <= 3
    prods, _, _, _ = run.plan("full", "1KiB acks=all p=8")
    assert [p.name for p in prods] == ["produce 1KiB acks=all p=8 x1", "produce 1KiB acks=all p=8 x4"]


def test_a_consumer_filter_needs_no_producer_scenario():
    prods, consumes, e2es, d = run.plan("quick", "consume 100B")
    assert prods == [] and e2es == []
    assert [run.consume_name(p) for p in consumes] == [
        "consume 100B acks=1 p=1 x1", "consume 100B acks=1 p=8 x1"]
    # Both brokers read the same number of records: 2 GiB of values in quick mode.
    assert run.consume_records(d["consume_mib"], 100) == 21_474_836
    # A filter naming the producer scenario selects its consumer as before.
    prods, consumes, _, _ = run.plan("quick", "1KiB acks=1 p=1")
    assert [p.name for p in prods] == ["produce 1KiB acks=1 p=1 x1"]
    assert [run.consume_name(p) for p in consumes] == ["consume 1KiB acks=1 p=1 x1"]


def test_every_scenario_is_bounded_in_bytes():
    assert run.max_records(100) * 100 <= 1 << 30
    assert run.max_records(1024) * 1024 <= 1 << 30


def fake(rps, p99=1000):
    return {"records_per_s": rps, "mib_per_s": rps / 1024, "records": rps, "bytes": rps * 1024,
            "latency": {"p99_us": p99}}


def test_report_shows_ratios_and_pending_kactor():
    prods, consumes, e2es, d = run.plan("smoke", None)
    args = argparse.Namespace(argv=["--smoke"], mode="smoke", durations=d, e2e_linger_ms=1)
    kafka = {"produce": {p.name: fake(100_000) for p in prods}, "consume": {}, "e2e": {},
             "loadavg_start": (0.5, 0.5, 0.5), "cpu_s_per_gb": 10.0, "idle_rss": 400 << 20}
    kactor = {"fatal": "no first produce: timed out", "loadavg_start": (0.5, 0.5, 0.5)}
    ceil = {"tcp": {1024: {"mib_per_s": 500.0, "writes_per_s": 5e5}}, "mock": {}}
    text = run.report(args, {"kafka": kafka, "kactor": kactor}, ceil, prods, consumes, e2es, {},
                      datetime.datetime(2026, 1, 1), (0.5, 0.5, 0.5))
    assert "kactor: pending (no first produce" in text
    assert "| produce 1KiB acks=1 p=1 x1 | 100,000 (97.7 MiB/s) | – | – |" in text
    assert "shared with other work" not in text

    kactor = {"produce": {p.name: fake(250_000) for p in prods}, "consume": {}, "e2e": {},
              "loadavg_start": (0.5, 0.5, 0.5), "cpu_s_per_gb": 4.0, "idle_rss": 10 << 20}
    text = run.report(args, {"kafka": kafka, "kactor": kactor}, ceil, prods, consumes, e2es, {},
                      datetime.datetime(2026, 1, 1), (5.0, 0.5, 0.5))
    assert "| 2.50× |" in text
    assert "| CPU per GB ≤ 0.5× Kafka | 0.40× | yes |" in text
    assert "| idle RSS ≤ 30 MiB | 10.0 MiB | yes |" in text
    assert "shared with other work" in text


def test_settle_primes_memory_and_leaves_nothing_behind(tmp_path):
    datadir = tmp_path / "data"
    datadir.mkdir()
    run.settle(datadir, 3 * run.MIB)
    run.settle()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]
