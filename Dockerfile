# outbox-cdc's container image: the static binary make builds, the CA
# certificates of the machine that built it, and nothing else. No base image
# is pulled, so it builds where no registry can be reached, with or without
# a Docker engine. This is the file make image builds and test/packaging
# runs (TestImageRelaysEvents).
#
#   make image            # buildah: linux/amd64 and linux/arm64, a multi-arch
#                         # OCI archive in dist/ (see scripts/release.sh)
#   make image-context && docker build -t outbox-cdc .    # with Docker
#   docker run --rm outbox-cdc check --postgres-url … --kafka-brokers …
#
# make image-context puts the binaries in bin/image/linux_ARCH/ and the
# certificates in bin/image/; TARGETARCH is set by docker build and buildah
# from the target platform.
FROM scratch
ARG TARGETARCH
ARG VERSION=dev
ARG REVISION=unknown
ARG CREATED=1970-01-01T00:00:00Z
COPY bin/image/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY bin/image/linux_${TARGETARCH}/outbox-cdc /outbox-cdc
LABEL org.opencontainers.image.title="outbox-cdc" \
      org.opencontainers.image.description="Relays a PostgreSQL transactional outbox to Kafka through logical replication" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="https://github.com/outbox-cdc/outbox-cdc" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.vendor="The outbox-cdc authors"
# nonroot, as in distroless images; the binary needs no file of its own.
USER 65532:65532
# Metrics and probes on the container's interfaces (the binary's own default
# is loopback only).
ENV OUTBOX_CDC_HTTP_ADDR=:9090
EXPOSE 9090
ENTRYPOINT ["/outbox-cdc"]
CMD ["run"]
