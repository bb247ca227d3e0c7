"""kactor's group metrics on /metrics (issue #5 item 5): group counts by state and type,
members, rebalances, offset commits, committed offset and consumer lag per partition."""
import re
import time
import urllib.request

import pytest

from harness.clients import create_topic
from groups.helpers import Member, commit, produce, wait_for


def sample(text, name, **labels):
    """The value of `name{labels...}` in a Prometheus text exposition (labels may be a
    subset), or None."""
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][\w:]*)(\{(.*)\})?\s+(\S+)$", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        if all(got.get(k) == str(v) for k, v in labels.items()):
            return float(m.group(4))
    return None


def test_group_metrics(broker, topic_name, target):
    if target != "kactor":
        pytest.skip("kactor's own metric families")
    create_topic(broker, topic_name, partitions=2)
    produce(broker, topic_name, [10, 10])
    simple = f"simple-{topic_name}"
    commit(broker, simple, topic_name, [4, 10])
    live = f"live-{topic_name}"
    m = Member(broker, live, topic_name, "consumer")
    try:
        wait_for(lambda: len(m.messages()) == 20, 60, "the member to read everything", [m])

        def scrape():
            with urllib.request.urlopen(broker.metrics_url, timeout=10) as r:
                return r.read().decode()

        want = [
            ("kactor_group_consumer_lag", dict(group=simple, topic=topic_name, partition=0), 6),
            ("kactor_group_consumer_lag", dict(group=simple, topic=topic_name, partition=1), 0),
            ("kactor_group_committed_offset",
             dict(group=simple, topic=topic_name, partition=0), 4),
            ("kactor_group_consumer_lag", dict(group=live, topic=topic_name, partition=0), 0),
            ("kactor_group_members", dict(group=live, type="consumer"), 1),
        ]
        deadline = time.monotonic() + 30  # refreshed every 5 s
        while True:
            text = scrape()
            got = [sample(text, n, **labels) for n, labels, _ in want]
            if got == [v for _, _, v in want]:
                break
            assert time.monotonic() < deadline, list(zip(want, got))
            time.sleep(1)
        assert sample(text, "kactor_groups", state="Stable", type="consumer") >= 1
        assert sample(text, "kactor_group_rebalances_total", type="consumer") is not None
        assert sample(text, "kactor_group_offset_commits_total", api="OffsetCommit") >= 22
    finally:
        m.stop()
