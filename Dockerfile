# syntax=docker/dockerfile:1
# outbox-cdc as a container: a static binary (CGO_ENABLED=0) on distroless,
# running as a non-root user.
#
#   docker build --build-arg VERSION=$(git describe --tags --always) -t outbox-cdc .
#   docker run --rm outbox-cdc check --postgres-url … --kafka-brokers …
#
# No Docker engine runs in this project's CI: test/packaging checks this
# file's structure and builds the same static binary without Docker.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" \
      -o /out/outbox-cdc ./cmd/outbox-cdc

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/outbox-cdc /usr/local/bin/outbox-cdc
USER nonroot:nonroot
# Metrics and probes on the container's interfaces (the binary's own default
# is loopback only).
ENV OUTBOX_CDC_HTTP_ADDR=:9090
EXPOSE 9090
ENTRYPOINT ["outbox-cdc"]
CMD ["run"]
