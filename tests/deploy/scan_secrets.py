"""Fail when an output of the test suite carries a credential the tests use.

  scan_secrets.py DIR

DIR holds every CLI output and daemon log of the run (LANDFALL_TEST_OUTPUTS, set by
scripts/test.sh). The credentials are the distinctive ones the tests put in configurations
and environments: every `LFSECRET-...`, `SUPERSECRET-...` and `...-token-landfall-test-...`
string in the test sources, and Azurite's account key (the emulator's, but a key all the same:
landfall signs with it and must never print it). A file that has one is named with the line.
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
PATTERN = re.compile(r"(?:LFSECRET|SUPERSECRET)-[A-Za-z0-9-]+|[a-z]+-token-landfall-test-[0-9a-f]+")


def credentials():
    found = {AZURITE_KEY, "LFSECRET", "SUPERSECRET"}
    tests = os.path.join(ROOT, "crates", "landfall", "tests")
    for dirpath, _, files in os.walk(tests):
        for f in files:
            if f.endswith(".rs"):
                found.update(PATTERN.findall(open(os.path.join(dirpath, f), encoding="utf-8").read()))
    return sorted(found)


def main(directory):
    secrets = credentials()
    files = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
    if not files:
        sys.exit(f"scan_secrets: no outputs in {directory}: the suite kept none (LANDFALL_TEST_OUTPUTS)")
    leaks = 0
    size = 0
    for name in files:
        text = open(os.path.join(directory, name), encoding="utf-8", errors="replace").read()
        size += len(text)
        for line in text.splitlines():
            for s in secrets:
                if s in line:
                    leaks += 1
                    print(f"{name}: shows `{s}`: {line[:300]}")
                    break
    print(f"scan_secrets: {len(files)} outputs, {size / 1e6:.1f} MB, {len(secrets)} credentials, {leaks} leak(s)")
    sys.exit(1 if leaks else 0)


if __name__ == "__main__":
    main(sys.argv[1])
