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
    args = argparse.Namespace(argv=["--smoke"], mode="smoke", durations=d, e2e_linger_ms=1,
                              rounds=1)
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


def test_the_prime_covers_more_than_the_log_and_stays_bounded():
    # The load tool's buffers and the indexes take free memory too.
    assert run.prime_bytes(1 << 30) >= (1 << 30) + (256 << 20)
    assert run.prime_bytes(1 << 40) == 4 << 30


def test_settle_primes_memory_and_leaves_nothing_behind(tmp_path):
    datadir = tmp_path / "data"
    datadir.mkdir()
    run.settle(datadir, 3 * run.MIB)
    run.settle()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_rounds_fold_into_the_median_round_with_each_round_paired():
    prods, consumes, e2es, d = run.plan("smoke", None)
    name = prods[0].name

    def broker(target, rates, p99s, cpu):
        return [{"target": target, "produce": {name: fake(r)}, "consume": {},
                 "e2e": {(1024, "1"): {"latency": {"p99_us": p, "p50_us": p // 10},
                                       "produce_latency": {"p50_us": 5},
                                       "received": 10, "sent": 10}},
                 "cpu_s_per_gb": c, "idle_rss": 8 << 20, "peak_rss": (100 + i) << 20,
                 "first_produce": {"start_to_first_produce_ms": 30 + i},
                 "loadavg_start": (0.5, 0.5, 0.5)}
                for i, (r, p, c) in enumerate(zip(rates, p99s, cpu))]

    kafka_runs = broker("kafka", [300, 100, 200], [9000, 7000, 8000], [3, 2, 1])
    for r, c in zip(kafka_runs, [2.0, 5.5, 2.25]):
        r["produce"][name]["cpu_s_per_gb"] = c
    kafka = run.merge_rounds(kafka_runs)
    kactor_runs = broker("kactor", [600, 900, 100], [100, 300, 200], [1, 1, 2])
    for r, c in zip(kactor_runs, [1.0, 0.75, None]):
        r["produce"][name]["cpu_s_per_gb"] = c
    kactor_runs[2]["produce"][name] = {"error": "broker died"}
    kactor_runs[2]["fatal"] = "died"
    kactor = run.merge_rounds(kactor_runs)
    # The median round, and every round's figure in round order (None where it failed).
    assert kafka["produce"][name]["records_per_s"] == 200
    assert kafka["produce"][name]["rounds"] == [300, 100, 200]
    assert kactor["produce"][name]["records_per_s"] == 600  # lower median of 600 and 900
    assert kactor["produce"][name]["rounds"] == [600, 900, None]
    assert kactor["round_failures"] == ["round 3: died"] and "fatal" not in kactor
    # Each e2e percentile is its own median over the rounds.
    assert kafka["e2e"][(1024, "1")]["latency"] == {"p99_us": 8000, "p50_us": 800}
    assert kafka["cpu_s_per_gb"] == 2 and kafka["peak_rss"] == 102 << 20
    assert kafka["first_produce"]["start_to_first_produce_ms"] == 31
    assert run.per_round(kafka["produce"][name], kactor["produce"][name]) == "2.00 · 9.00 · –"

    args = argparse.Namespace(argv=["--quick"], mode="quick", durations=d, e2e_linger_ms=1,
                              rounds=3)
    text = run.report(args, {"kafka": kafka, "kactor": kactor},
                      {"tcp": {}, "mock": run.merge_mock([{name: fake(1000)}])}, prods, consumes,
                      [(1024, "1")], {(1024, "1"): 100}, datetime.datetime(2026, 1, 1),
                      (0.5, 0.5, 0.5))
    assert f"| {name} | 200 (0.2 MiB/s) | 600 (0.6 MiB/s) | 3.00× | 2.00 · 9.00 · – |" in text
    assert "kactor, round 3: died" in text
    # Each round's broker CPU per GB, so a round that met cold memory stands out; the ratio is
    # of the median rounds (by throughput: Kafka's third, kactor's first).
    assert f"| {name} | 2.00 · 5.50 · 2.25 | 1.00 · 0.75 · – | 0.44× |" in text
    # The mock's lead over Kafka bounds what the producer targets can show.
    assert "| (ceiling) mock broker / Kafka at 1024 B: the most any broker could show | " \
           "5.00–5.00× | – |" in text


def test_e2e_debug_passes_the_contexts_and_names_one_log_per_run(tmp_path, monkeypatch):
    monkeypatch.setitem(run.E2E_DEBUG, "contexts", None)
    assert run.e2e_debug_args("kactor", 1024, "1") == ([], None)
    monkeypatch.setitem(run.E2E_DEBUG, "contexts", "fetch,protocol")
    monkeypatch.setitem(run.E2E_DEBUG, "dir", str(tmp_path / "logs"))
    args, log_to = run.e2e_debug_args("kafka", 1024, "all")
    assert args == ["-X", "debug=fetch,protocol"]
    assert log_to.parent == tmp_path / "logs" and log_to.parent.is_dir()
    assert log_to.name.startswith("e2e-kafka-1024B-acksall-") and log_to.suffix == ".log"


def test_the_e2e_section_says_what_its_rate_is_half_of():
    maxima = {(1024, "1"): {"basis": "pipeline", "target": "kafka", "max": 402003.0},
              (1024, "all"): {"basis": "pipeline", "target": "kafka", "max": None,
                              "error": "timed out"}}
    text = run.e2e_rate_text(None, maxima)
    assert text.startswith("Each rate is 50% of Apache Kafka's end-to-end maximum")
    assert "at most 8 MiB of records not yet consumed" in text
    assert "1KiB acks=1: 402,003/s, 1KiB acks=all: not measured (timed out)" in text
    text = run.e2e_rate_text(None, {(1024, "1"): {"basis": "producer", "target": "kafka",
                                                  "max": 680156}})
    assert "producer-only maximum" in text and "680,156/s" in text
    assert run.e2e_rate_text(150000, {}) == "The rate is fixed by `--e2e-rate 150000`."
    # The 1 KiB window is 8192 records: several 1 MB batches and fetches in flight.
    assert run.E2E_MAX_UNCONSUMED_BYTES // 1024 == 8192


def test_the_producer_basis_takes_half_of_the_producer_scenario():
    res = {"produce": {"produce 1KiB acks=1 p=1 x1": fake(680_000)}}
    maxima = {}
    run.E2E_BASIS["basis"] = "producer"
    try:
        b = argparse.Namespace(name="kafka")
        rate = run.e2e_rate(b, res, 1024, "1", {"e2e": 6.0}, None, 1, maxima)
    finally:
        run.E2E_BASIS["basis"] = "pipeline"
    assert rate == 340_000
    assert maxima == {(1024, "1"): {"basis": "producer", "target": "kafka", "max": 680_000}}


def test_the_disk_estimate_covers_a_full_run_and_warns_when_short(tmp_path, monkeypatch):
    prods, consumes, e2es, d = run.plan("full", None)
    need = run.disk_need(prods, consumes, e2es, d)
    # 16 producer scenarios at their bound (~19 GB), 4 consumer data sets of 4 GiB of values
    # (~19 GB), two e2e scenarios with their calibration, and the 4 GiB prime.
    assert 50e9 < need < 70e9
    smoke = run.disk_need(*run.plan("smoke", None))
    assert smoke < 10e9
    monkeypatch.setattr(run.shutil, "disk_usage", lambda p: argparse.Namespace(free=int(40e9)))
    text = run.disk_warning(tmp_path / "not" / "yet", need)
    assert text.startswith(f"{tmp_path} has 40 GB free") and "KACTOR_BENCH_DATA" in text
    assert run.disk_warning(tmp_path, int(39e9)) is None


def test_the_consumer_ceiling_takes_out_only_the_round_trip_above_the_floor():
    # 1,000 MiB/s with a 1,000 µs cycle: 1 MiB per fetch, whose floor is 250 µs (the line
    # through 250 µs at 1 MiB and 1,650 µs at 8 MiB); of the 600 µs round trip a broker
    # could take out 350 µs at most.
    r = {"records_per_s": 1_024_000, "mib_per_s": 1000.0,
         "fetch_cycle": {"cycle_us": 1000.0, "rtt_us": 600.0, "fetches": 900}}
    floor = {1 << 20: {"rtt": {"mean_us": 250.0, "p50_us": 240}},
             8 << 20: {"rtt": {"mean_us": 1650.0, "p50_us": 1600}}}
    ceil = {"tcp": {}, "mock": {}, "fetch_floor": floor}
    assert abs(run.consume_ceiling(r, ceil) - 1000 / 650) < 1e-9
    # 4 MiB per fetch: the floor is on the line, 850 µs.
    assert abs(run.fetch_floor_us(4.0, ceil) - 850.0) < 1e-9
    # A round trip already at the floor leaves a broker nothing to take out.
    r["fetch_cycle"]["rtt_us"] = 200.0
    assert run.consume_ceiling(r, ceil) == 1.0
    # No statistics or no floor: no ceiling rather than a made-up one.
    assert run.consume_ceiling({"mib_per_s": 1000.0}, ceil) is None
    assert run.consume_ceiling(r, {"tcp": {}, "mock": {}}) is None

    prods, consumes, e2es, d = run.plan("quick", "consume 1KiB acks=1 p=1")
    args = argparse.Namespace(argv=["--quick"], mode="quick", durations=d, e2e_linger_ms=1,
                              rounds=1)
    r["fetch_cycle"]["rtt_us"] = 600.0
    res = {t: {"produce": {}, "consume": {"consume 1KiB acks=1 p=1 x1": r}, "e2e": {},
               "loadavg_start": (0.5, 0.5, 0.5)} for t in ("kafka", "kactor")}
    text = run.report(args, res, ceil, prods, consumes, e2es, {},
                      datetime.datetime(2026, 1, 1), (0.5, 0.5, 0.5))
    assert "| 1,000 / 600 | 1,000 / 600 | 1.54× |" in text
    assert "the most any broker could show | 1.54–1.54× | – |" in text
    assert "| fetch round trip floor, 8 MiB response by sendfile, 100 KiB send buffer | " \
           "1,650 µs mean, 1,600 µs p50 |" in text
