#!/usr/bin/env bash
# Builds Redis 8.6 once into .cache/servers/redis86/redis-server (called by
# scripts/test.sh; runnable alone). Does nothing when the binary is there.
#
# Debian 12 ships Redis 7.0; 8.6 is only in Debian's experimental suite (and
# unstable may catch up). So: a PRIVATE apt configuration under
# .cache/apt-redis8 (its own deb-src list for unstable and experimental on
# the machine's configured Debian mirror, its own state and cache dirs, the
# system keyring for signatures; /etc/apt is only read, never changed),
# `apt-get update` on it, `apt-get source --download-only` of the newest
# 8.6.x found, then the pristine upstream tarball (redis_8.6.*.orig.tar.gz)
# is built with `make BUILD_TLS=no MALLOC=libc OPTIMIZATION=-O2 redis-server`
# (no network needed).
# Needs: apt-get, python3, tar, make, gcc and g++ (Redis 8 compiles C++).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
cache="$root/.cache"
dest="$cache/servers/redis86"
binary="$dest/redis-server"

if [ -x "$binary" ]; then
  exit 0
fi

die() {
  echo "build-redis8: $*" >&2
  exit 1
}

# The machine's Debian mirror and keyring, read from its apt sources
# (deb822 .sources files first, then the one-line sources.list): the first
# `deb` entry for the archive itself (not -security, -updates or -backports).
read -r mirror keyring < <(python3 - <<'PY'
import glob, re
entries = []  # (uri, suite, signed_by)
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    for stanza in re.split(r"\n\s*\n", open(path, encoding="utf-8").read()):
        fields = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line or line[:1].isspace():
                continue
            key, value = line.split(":", 1)
            fields[key.strip().lower()] = value.strip()
        if "deb" not in fields.get("types", "").split():
            continue
        if fields.get("enabled", "yes").lower() == "no":
            continue
        for uri in fields.get("uris", "").split():
            for suite in fields.get("suites", "").split():
                entries.append((uri, suite, fields.get("signed-by", "")))
lists = ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list"))
for path in lists:
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except FileNotFoundError:
        continue
    for line in lines:
        line = line.split("#", 1)[0].strip()
        m = re.match(r"deb\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)", line)
        if not m:
            continue
        opts = dict(o.split("=", 1) for o in (m.group(1) or "").split() if "=" in o)
        entries.append((m.group(2), m.group(3), opts.get("signed-by", "")))
for uri, suite, signed_by in entries:
    if "security" in uri or "-" in suite:
        continue
    # A Signed-By that is an inline key block cannot be reused as a path.
    if not signed_by.startswith("/"):
        signed_by = "/usr/share/keyrings/debian-archive-keyring.gpg"
    print(uri.rstrip("/"), signed_by)
    break
PY
) || true
[ -n "${mirror:-}" ] || die "no Debian mirror found in /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list"
[ -r "$keyring" ] || die "keyring $keyring not readable (install debian-archive-keyring)"

apt_dir="$cache/apt-redis8"
mkdir -p "$apt_dir/sources.list.d" "$apt_dir/state/lists/partial" \
  "$apt_dir/cache/archives/partial" "$apt_dir/download"
{
  echo "deb-src [signed-by=$keyring] $mirror unstable main"
  echo "deb-src [signed-by=$keyring] $mirror experimental main"
} >"$apt_dir/sources.list"
apt_opts=(
  -o "Dir::Etc::SourceList=$apt_dir/sources.list"
  -o "Dir::Etc::SourceParts=$apt_dir/sources.list.d"
  -o "Dir::State=$apt_dir/state"
  -o "Dir::Cache=$apt_dir/cache"
  # Root would hand downloads to the _apt user, who may not reach this tree.
  -o "APT::Sandbox::User=root"
)
echo "build-redis8: reading unstable and experimental sources from $mirror (private apt state in $apt_dir)"
apt-get "${apt_opts[@]}" -qq update

# Every redis source version in both suites; keep the newest 8.6.x.
version=""
while read -r v; do
  upstream=${v#*:}
  case $upstream in
    8.6.*) ;;
    *) continue ;;
  esac
  if [ -z "$version" ] || dpkg --compare-versions "$v" gt "$version"; then
    version=$v
  fi
done < <(apt-cache "${apt_opts[@]}" showsrc redis 2>/dev/null | sed -n 's/^Version: //p')
if [ -z "$version" ]; then
  found=$(apt-cache "${apt_opts[@]}" showsrc redis 2>/dev/null | sed -n 's/^Version: //p' | paste -sd ' ')
  die "no Redis 8.6.x source package in Debian unstable or experimental on $mirror (found: ${found:-none}); point RSE_REDIS8_SERVER at a Redis 8.6+ redis-server and rerun scripts/test.sh"
fi
echo "build-redis8: downloading source package redis=$version"
(cd "$apt_dir/download" && apt-get "${apt_opts[@]}" -qq source --download-only "redis=$version")

fetched=$SECONDS
upstream=${version#*:}
upstream=${upstream%-*}
tarball=$(find "$apt_dir/download" -maxdepth 1 -name "redis_${upstream}.orig.tar.*" | head -n 1)
[ -n "$tarball" ] || die "redis_${upstream}.orig.tar.* not among the downloaded files: $(ls "$apt_dir/download")"
build="$cache/build/redis-$upstream"
rm -rf "$build"
mkdir -p "$build"
tar -xf "$tarball" -C "$build" --strip-components=1
make_args=(BUILD_TLS=no MALLOC=libc OPTIMIZATION=-O2 redis-server)
echo "build-redis8: building redis-server $upstream (make -j2 ${make_args[*]})"
# GIT_DIR: the build dir sits inside this repository, whose commit Redis would
# otherwise stamp into its version line as its own sha. A test server, built
# for the build's time: libc's malloc (as the 6.2 and Valkey wheels have; no
# jemalloc to configure and build) and -O2, which leaves out the link-time
# optimisation Redis adds to its default -O3.
GIT_DIR=/nonexistent make -C "$build" -j2 "${make_args[@]}" >"$build/make.log" 2>&1 ||
  { tail -n 40 "$build/make.log" >&2; die "make failed; full log in $build/make.log"; }
mkdir -p "$dest"
cp "$build/src/redis-server" "$binary.tmp"
mv "$binary.tmp" "$binary"
rm -rf "$build"
rmdir "$cache/build" 2>/dev/null || true
echo "build-redis8: $binary ready after ${SECONDS}s (source fetched after ${fetched}s)"
"$binary" --version
