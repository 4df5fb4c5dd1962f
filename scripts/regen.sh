#!/usr/bin/env bash
# Rewrites every derived file from its source, in dependency order:
#   - alerts/redis-streams.rules.yml's runbook_urls          (scripts/gen-alerts.py)
#   - deploy/kubernetes/ and the Helm chart's rules, dashboards (scripts/gen-kubernetes.py)
#   - mixin/rules/*.rules.json                               (tests/assets/mixin.rs)
#   - tests/golden/exposition.*, tests/golden/probe_answer.* (metrics::render::golden)
#   - docs/metrics.md                                        (metrics::reference)
# Review the diff afterwards.
#
# With --check it writes nothing and exits non-zero when any derived file is stale: the
# generators' own --check, and the tests that hold each file (they fail on drift).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--check" ]; then
  python3 scripts/gen-alerts.py --check
  python3 scripts/gen-kubernetes.py --check
  cargo test -q --test assets mixin::
  cargo test -q --lib -- golden metric_reference
  echo "derived files are up to date"
  exit 0
fi
[ $# -eq 0 ] || { echo "usage: $0 [--check]" >&2; exit 2; }

python3 scripts/gen-alerts.py
python3 scripts/gen-kubernetes.py
# The tests that hold a derived file rewrite it under RSE_REGEN=1 (src/derived.rs).
RSE_REGEN=1 cargo test -q --test assets mixin::
RSE_REGEN=1 cargo test -q --lib -- golden metric_reference
git status --short
