#!/usr/bin/env python3
"""The differential suite from the command line (the pytest test runs the same thing).

    .venv/bin/python tests/differential/run.py                 start kactor + Kafka 4.4.0, run
                                                                every case, print the report
    .venv/bin/python tests/differential/run.py -k Fetch/ -k Produce   a subset (name substring)
    .venv/bin/python tests/differential/run.py --suggest       also print known_differences.py
                                                                entries for unlisted differences
    .venv/bin/python tests/differential/run.py --ports K,F     use brokers already running on
                                                                127.0.0.1 ports K (kactor), F
    .venv/bin/python tests/differential/run.py --docs          rewrite docs/differences.md

Exit status 1 when a difference is not listed or a listed one no longer occurs."""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from differential import suite  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-k", action="append", default=[], help="case name substring / glob")
    ap.add_argument("--suggest", action="store_true")
    ap.add_argument("--ports", help="KACTOR_PORT,KAFKA_PORT of running brokers")
    ap.add_argument("--docs", action="store_true", help="rewrite docs/differences.md and exit")
    ap.add_argument("-v", action="store_true", help="print each case as it runs")
    ap.add_argument("--workdir", help="keep the brokers' data and logs in this directory")
    ap.add_argument("--show", action="store_true",
                    help="print both brokers' normalised responses of each case run")
    args = ap.parse_args()
    if args.docs:
        path = suite.write_docs()
        print(f"wrote {path}")
        return 0
    if args.ports:
        k, f = (int(x) for x in args.ports.split(","))
        outcome = suite.run({"kactor": k, "kafka": f}, args.k, verbose=args.v)
    elif args.workdir:
        with suite.brokers(args.workdir) as ports:
            outcome = suite.run(ports, args.k, verbose=args.v)
    else:
        with tempfile.TemporaryDirectory(prefix="kactor-diff-") as d:
            with suite.brokers(d) as ports:
                outcome = suite.run(ports, args.k, verbose=args.v)
    if args.show:
        import pprint
        for r in outcome.results:
            for target, responses in r.normalised.items():
                print(f"=== {r.case.name} on {target}")
                pprint.pprint(responses, width=110, sort_dicts=False)
    print(outcome.report)
    if args.suggest and outcome.unlisted:
        from differential.engine import suggest
        print("\n# unlisted differences, as known_differences.py entries:")
        print(suggest(outcome.unlisted))
    ok = not outcome.unlisted and (args.k or not outcome.stale)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
