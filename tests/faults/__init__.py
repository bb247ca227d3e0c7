"""A fault harness in the spirit of Jepsen (issue #30), the single-node slice.

Workloads (`workloads.py`) drive real clients against one broker while a nemesis (`nemesis.py`)
kills, pauses or fills the disk of the broker process on a seeded schedule; every client
operation is recorded in a `History` (`history.py`, saved as JSON lines) and the checkers
(`checkers.py`, pure functions over the history) look for lost, duplicated, reordered,
aborted-but-visible and skipped records and for offsets going backwards. `runner.py` ties one
run together; `test_fault_runs.py` is the short CI run and `scripts/faults` the long one."""
