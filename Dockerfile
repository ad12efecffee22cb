# syntax=docker/dockerfile:1
# nodescope: the admission webhook server.
#   docker build -t ghcr.io/nodescope/nodescope:0.1.0 .
# Build stage: the release binary, built from the lockfile exactly.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
# Cache mounts keep the registry and target dir between builds (BuildKit);
# the binary is copied out because the target cache is not part of the layer.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin nodescope \
 && install -D -m 0755 target/release/nodescope /out/nodescope

# Runtime: glibc and libgcc only (distroless cc), no shell, no package manager,
# runs as the image's nonroot user (65532), which the Deployment also enforces.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/nodescope /usr/local/bin/nodescope
USER 65532:65532
# 8443: HTTPS admission (/mutate, /validate); 9090: plain-HTTP /metrics and probes.
EXPOSE 8443 9090
ENTRYPOINT ["/usr/local/bin/nodescope"]
CMD ["serve", "--help"]
