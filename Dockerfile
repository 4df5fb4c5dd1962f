# syntax=docker/dockerfile:1
#
# redis-streams-exporter container image.
#
#   docker build -t redis-streams-exporter \
#     --build-arg REVISION="$(git rev-parse HEAD)" \
#     --build-arg SOURCE_DATE_EPOCH="$(git log -1 --format=%ct)" \
#     --build-arg CREATED="$(date -u +%Y-%m-%dT%H:%M:%SZ)" .
#   docker run --rm -p 9763:9763 redis-streams-exporter --redis.url redis://redis.example:6379
#
# .git is not in the build context: REVISION is how `--version` and build_info{revision} learn
# the revision (build.rs reads it as RSE_GIT_REVISION; without it they say "unknown").
# SOURCE_DATE_EPOCH, when given, is the build date they show (reproducible builds).
#
# Stages:
#   builder    rust:1-bookworm; dependencies are compiled in their own layer (a stub crate with the
#              real Cargo.toml and Cargo.lock), then the crate with `cargo build --release --locked`.
#   simulator  the fault simulator (src/bin/redis-streams-simulator/) for the docker-compose demo;
#              build it with `--target simulator`. It writes to Redis: never point it at production.
#   (last)     the exporter: distroless cc image (glibc, libgcc, CA certificates, no shell), non-root.

ARG RUST_VERSION=1

FROM rust:${RUST_VERSION}-bookworm AS builder
WORKDIR /build
# .cargo/config.toml bakes the jemalloc settings into tikv-jemalloc-sys (behind the benchmark's memory
# figures): it must be there before the dependency layer builds that crate.
COPY .cargo/config.toml .cargo/config.toml
# Dependency layer: rebuilt only when the manifest or the lock file change. The stubs stand in for
# build.rs, the library and both binaries (the simulator is auto-discovered from src/bin/).
COPY Cargo.toml Cargo.lock ./
RUN mkdir -p src/bin/redis-streams-simulator \
    && echo 'fn main() {}' > build.rs \
    && echo '//! stub' > src/lib.rs \
    && echo 'fn main() {}' > src/main.rs \
    && echo 'fn main() {}' > src/bin/redis-streams-simulator/main.rs \
    && cargo build --release --locked --bins \
    && rm -rf build.rs src
# The crate itself. COPY keeps the files' modification times, which may be older than the stub
# build: touch them so that cargo rebuilds the crate instead of shipping the stubs.
COPY build.rs ./
COPY src ./src
# Declared after the dependency layer so that a new revision does not rebuild the dependencies.
# SOURCE_DATE_EPOCH reaches build.rs as it is (an ARG is in the environment of RUN).
ARG REVISION=unknown
ARG SOURCE_DATE_EPOCH
RUN touch build.rs src/lib.rs src/main.rs src/bin/redis-streams-simulator/main.rs \
    && RSE_GIT_REVISION="${REVISION}" cargo build --release --locked --bins \
    && install -D -m 0755 target/release/redis-streams-exporter /out/redis-streams-exporter \
    && install -D -m 0755 target/release/redis-streams-simulator /out/redis-streams-simulator

FROM gcr.io/distroless/cc-debian12:nonroot AS simulator
LABEL org.opencontainers.image.title="redis-streams-simulator" \
      org.opencontainers.image.description="Drives a Redis through Redis Streams failure modes (test and demo tool; it writes to Redis)." \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/redis-streams-exporter/redis-streams-exporter"
COPY --from=builder /out/redis-streams-simulator /usr/local/bin/redis-streams-simulator
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/redis-streams-simulator"]
CMD ["--help"]

FROM gcr.io/distroless/cc-debian12:nonroot
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="redis-streams-exporter" \
      org.opencontainers.image.description="Prometheus exporter for Redis Streams used as message queues: lag, pending entries, poison and ghost messages, dead letters, group status." \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/redis-streams-exporter/redis-streams-exporter" \
      org.opencontainers.image.documentation="https://github.com/redis-streams-exporter/redis-streams-exporter/blob/main/README.md" \
      org.opencontainers.image.vendor="redis-streams-exporter" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}"
COPY --from=builder /out/redis-streams-exporter /usr/local/bin/redis-streams-exporter
# distroless's "nonroot" user; the exporter needs no privilege and no writable path.
USER 65532:65532
EXPOSE 9763
ENTRYPOINT ["/usr/local/bin/redis-streams-exporter"]
