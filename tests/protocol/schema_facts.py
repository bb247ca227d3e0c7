#!/usr/bin/env python3
"""Checks our JSON schemas in schemas/ against the protocol facts of Apache Kafka 4.4.0.

The reference is read straight from the Kafka 4.4.0 jars in the local Maven cache (they ship
their message schemas); nothing of theirs is copied into the repository. Compared: api key,
type, valid/flexible versions, and for every field (recursively, plus common structs) its name,
type, versions, nullable/tagged versions, tag, default and ignorable flag. Prose ("about") is not
compared: ours is our own.

Usage: schema_facts.py [--m2 ~/.m2/repository] [--only NAME ...]   exit 1 on any mismatch.
"""
import argparse
import glob
import json
import os
import re
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JARS = ["kafka-clients", "kafka-metadata", "kafka-group-coordinator",
        "kafka-transaction-coordinator", "kafka-share-coordinator", "kafka-raft", "kafka-storage"]
DIRS = ["messages", "metadata", "coordinator"]


def strip_comments(text):
    out = []
    for line in text.splitlines():
        # Kafka's files carry // line comments; ours must be plain JSON but tolerate them too.
        in_str = False
        for i, ch in enumerate(line):
            if ch == '"' and (i == 0 or line[i - 1] != "\\"):
                in_str = not in_str
            if not in_str and line[i:i + 2] == "//":
                line = line[:i]
                break
        out.append(line)
    return "\n".join(out)


def load_reference(m2):
    ref = {}
    for jar in JARS:
        for path in glob.glob(os.path.join(m2, "org/apache/kafka", jar, "4.4.0", f"{jar}-4.4.0.jar")):
            with zipfile.ZipFile(path) as z:
                for name in z.namelist():
                    if name.endswith(".json"):
                        doc = json.loads(strip_comments(z.read(name).decode()))
                        ref.setdefault(doc.get("name"), doc)
    return ref


def norm_default(v):
    if v is None:
        return None
    s = str(v).strip().lower()
    if re.fullmatch(r"-?0x[0-9a-f]+", s):
        return str(int(s, 16))
    return s


FIELD_KEYS = ["type", "versions", "nullableVersions", "taggedVersions", "tag", "ignorable"]


def compare_fields(path, ours, theirs, errors):
    on = [f.get("name") for f in ours]
    tn = [f.get("name") for f in theirs]
    if on != tn:
        errors.append(f"{path}: field names/order differ: ours {on} vs reference {tn}")
        return
    for o, t in zip(ours, theirs):
        p = f"{path}.{o['name']}"
        for k in FIELD_KEYS:
            ov, tv = o.get(k), t.get(k)
            if k == "versions":
                # Kafka's generator lets a tagged field omit "versions": it then defaults to
                # taggedVersions (e.g. TransactionLogValue). Compare the effective range.
                ov = ov if ov is not None else o.get("taggedVersions")
                tv = tv if tv is not None else t.get("taggedVersions")
            if k == "ignorable":
                ov, tv = bool(ov), bool(tv)
            if ov != tv:
                errors.append(f"{p}: {k} = {ov!r}, reference {tv!r}")
        if norm_default(o.get("default")) != norm_default(t.get("default")):
            errors.append(f"{p}: default = {o.get('default')!r}, reference {t.get('default')!r}")
        compare_fields(p, o.get("fields", []), t.get("fields", []), errors)


def compare(ours, theirs):
    errors = []
    name = ours.get("name")
    for k in ["apiKey", "type", "validVersions", "flexibleVersions"]:
        if ours.get(k) != theirs.get(k):
            errors.append(f"{name}: {k} = {ours.get(k)!r}, reference {theirs.get(k)!r}")
    compare_fields(name, ours.get("fields", []), theirs.get("fields", []), errors)
    oc = {c["name"]: c for c in ours.get("commonStructs", [])}
    tc = {c["name"]: c for c in theirs.get("commonStructs", [])}
    if set(oc) != set(tc):
        errors.append(f"{name}: commonStructs {sorted(oc)} vs reference {sorted(tc)}")
    for cname in set(oc) & set(tc):
        if oc[cname].get("versions") != tc[cname].get("versions"):
            errors.append(f"{name}.{cname}: versions {oc[cname].get('versions')!r} vs {tc[cname].get('versions')!r}")
        compare_fields(f"{name}.{cname}", oc[cname].get("fields", []), tc[cname].get("fields", []), errors)
    return errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--m2", default=os.path.expanduser("~/.m2/repository"))
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()
    ref = load_reference(args.m2)
    if not ref:
        print("no Kafka 4.4.0 jars found under", args.m2, file=sys.stderr)
        return 2
    failed = checked = 0
    for d in DIRS:
        for path in sorted(glob.glob(os.path.join(ROOT, "schemas", d, "*.json"))):
            with open(path) as f:
                ours = json.load(f)  # ours must be strict JSON
            name = ours.get("name")
            if args.only and name not in args.only:
                continue
            checked += 1
            if name not in ref:
                print(f"FAIL {name}: no reference schema of that name in Kafka 4.4.0")
                failed += 1
                continue
            errs = compare(ours, ref[name])
            if errs:
                failed += 1
                print(f"FAIL {name}")
                for e in errs:
                    print("   ", e)
    print(f"{checked - failed} passed, {failed} failed")
    return 1 if failed or not checked else 0


if __name__ == "__main__":
    sys.exit(main())
