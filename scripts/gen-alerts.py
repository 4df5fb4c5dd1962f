#!/usr/bin/env python3
"""Writes the runbook_url of every alert of alerts/redis-streams.rules.yml from one base.

    runbook_url = RUNBOOK_BASE + "#" + <alert name in lowercase>

RUNBOOK_BASE is the one configuration value of the rules, as `runbookURLPattern` is in the
monitoring mixins (kube-prometheus): the shipped file points at this repository's alerts/runbook.md,
whose section headings are the alert names. To point a copy at your own runbook (a wiki page, an
internal fork of alerts/runbook.md), write it elsewhere and load that copy in Prometheus:

    python3 scripts/gen-alerts.py --runbook-base https://wiki.example.com/redis-streams --output my.rules.yml

With no option it rewrites alerts/redis-streams.rules.yml in place (run it after adding an alert or
changing RUNBOOK_BASE, then scripts/gen-kubernetes.py, which embeds the rules). With --check it writes
nothing and exits 1 when a runbook_url is missing or differs (tests/assets/monitoring_assets.rs runs that).

Standard library only. The file is edited line by line, so its comments and layout stay as they are.
"""

import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
RULES = ROOT / "alerts" / "redis-streams.rules.yml"
# The base every runbook_url is built from.
RUNBOOK_BASE = (
    "https://github.com/redis-streams-exporter/redis-streams-exporter/blob/main/alerts/runbook.md"
)

ALERT = re.compile(r"^\s*- alert:\s*(\S+)\s*$")
RUNBOOK = re.compile(r"^(\s*)runbook_url:.*$")


def rewrite(text: str, base: str) -> tuple[str, list[str]]:
    """The text with every runbook_url built from `base`, and the alerts that have none."""
    out = []
    current = None
    seen = set()
    alerts = []
    for line in text.splitlines(keepends=True):
        match = ALERT.match(line)
        if match:
            current = match.group(1)
            alerts.append(current)
        runbook = RUNBOOK.match(line.rstrip("\n"))
        if runbook and current is not None:
            line = f"{runbook.group(1)}runbook_url: {base}#{current.lower()}\n"
            seen.add(current)
        out.append(line)
    return "".join(out), [a for a in alerts if a not in seen]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runbook-base", default=RUNBOOK_BASE, help="base URL of the runbook")
    parser.add_argument("--output", type=pathlib.Path, help="write here instead of in place")
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is not up to date")
    args = parser.parse_args()
    base = args.runbook_base.rstrip("#")
    text = RULES.read_text(encoding="utf-8")
    new, missing = rewrite(text, base)
    if missing:
        print(f"{RULES.relative_to(ROOT)}: no runbook_url for {', '.join(missing)}", file=sys.stderr)
        return 1
    if args.check:
        if new != text:
            print(
                f"stale: {RULES.relative_to(ROOT)} (run: scripts/regen.sh)",
                file=sys.stderr,
            )
            return 1
        return 0
    target = args.output or RULES
    target.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
