#!/usr/bin/env bash
# Release artifacts of outbox-cdc, for make (build, dist, image-context,
# image, release):
#
#   scripts/release.sh version   the version: git describe --tags (v0.1.0,
#                                v0.1.0-3-gabc1234, …-dirty), or
#                                v0.0.0-dev.gSHORTSHA before the first tag
#   scripts/release.sh dist      static archives for $PLATFORMS and .deb and
#                                .rpm packages for its linux platforms, with
#                                an SPDX SBOM each, and SHA256SUMS, in $DIST
#   scripts/release.sh context   the image's build context: static linux
#                                binaries in bin/image/linux_ARCH/ and the
#                                CA certificates in bin/image/
#   scripts/release.sh image     the OCI image for $IMAGE_PLATFORMS, built
#                                with buildah from ./Dockerfile (no Docker
#                                engine, no registry), joined in a manifest
#                                list and written to $DIST as an OCI archive
#   scripts/release.sh release   archives and packages, then image, then
#                                SHA256SUMS of all
#
# Environment: VERSION, COMMIT (default from git), DIST (dist),
# PLATFORMS (linux/amd64 linux/arm64 darwin/amd64 darwin/arm64),
# IMAGE_PLATFORMS (linux/amd64 linux/arm64), IMAGE (localhost/outbox-cdc),
# BUILDAH_ROOT and BUILDAH_RUNROOT (buildah's storage, default its own),
# IMAGE_CONTEXT (the build context holding bin/image/, default .),
# SOURCE_DATE_EPOCH (default the commit's time: archives, packages, SBOMs
# and image layers carry it, so a rebuild of a commit gives the same
# archives, packages, SBOMs and image IDs; the OCI archive's own tar headers
# still differ).
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
DIST=${DIST:-dist}
PLATFORMS=${PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}
IMAGE_PLATFORMS=${IMAGE_PLATFORMS:-linux/amd64 linux/arm64}
IMAGE=${IMAGE:-localhost/outbox-cdc}
CA_CERTS=${CA_CERTS:-/etc/ssl/certs/ca-certificates.crt}
IMAGE_CONTEXT=${IMAGE_CONTEXT:-.}

version() {
  local v sha
  if v=$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null); then
    echo "$v"
  elif sha=$(git rev-parse --short HEAD 2>/dev/null); then
    git diff --quiet HEAD 2>/dev/null && echo "v0.0.0-dev.g$sha" || echo "v0.0.0-dev.g$sha-dirty"
  else
    echo "v0.0.0-dev"
  fi
}

: "${VERSION:=$(version)}"
: "${COMMIT:=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
: "${SOURCE_DATE_EPOCH:=$(git log -1 --format=%ct 2>/dev/null || date +%s)}"
export SOURCE_DATE_EPOCH

# build OS ARCH OUT: the static binary, stamped with the version.
build() {
  CGO_ENABLED=0 GOOS=$1 GOARCH=$2 GOFLAGS=-buildvcs=auto $GO build -trimpath \
    -ldflags "-s -w -X main.version=$VERSION -X main.commit=$COMMIT" -o "$3" ./cmd/outbox-cdc
}

# archive OS ARCH: DIST/outbox-cdc_VERSION_OS_ARCH.tar.gz and its SBOM.
archive() {
  local name="outbox-cdc_${VERSION}_$1_$2" stage
  stage=$(mktemp -d)
  mkdir "$stage/$name"
  build "$1" "$2" "$stage/$name/outbox-cdc"
  cp LICENSE NOTICE CHANGELOG.md README.md sql/*.sql "$stage/$name/"
  $GO run ./internal/tools/sbom -name "$name" -version "$VERSION" -o "$DIST/$name.spdx.json" "$stage/$name/outbox-cdc"
  # Modes set here, not by the builder's umask: two builds of one commit
  # are byte-identical.
  tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner --mode=u=rwX,go=rX --mtime="@$SOURCE_DATE_EPOCH" -cf - "$name" |
    gzip -n -9 >"$DIST/$name.tar.gz"
  rm -rf "$stage"
  echo "release: $DIST/$name.tar.gz"
}

# nfpm: the package builder, at the version tools/go.mod pins, built once a
# run (the build cache makes it a second after the first time).
nfpm_() {
  if [ -z "${NFPM:-}" ]; then
    NFPM=$(mktemp -d)/nfpm
    $GO -C tools build -o "$NFPM" github.com/goreleaser/nfpm/v2/cmd/nfpm
  fi
  "$NFPM" "$@"
}

# packages ARCH: DIST/outbox-cdc_VERSION_linux_ARCH.deb and .rpm, from
# deploy/packages/nfpm.yaml, with an SBOM each (the binary is the archive's,
# byte for byte).
packages() {
  local name="outbox-cdc_${VERSION}_linux_$1" stage fmt
  stage=$(mktemp -d)
  build linux "$1" "$stage/outbox-cdc"
  for fmt in deb rpm; do
    PKG_VERSION=$VERSION PKG_ARCH=$1 PKG_BIN=$stage/outbox-cdc \
      nfpm_ package --config deploy/packages/nfpm.yaml --packager "$fmt" --target "$DIST/$name.$fmt" >/dev/null
    $GO run ./internal/tools/sbom -name "$name.$fmt" -version "$VERSION" -o "$DIST/$name.$fmt.spdx.json" "$stage/outbox-cdc"
    echo "release: $DIST/$name.$fmt"
  done
  rm -rf "$stage"
}

sums() {
  (cd "$DIST" && find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%f\n' | LC_ALL=C sort | xargs sha256sum >SHA256SUMS)
  cat "$DIST/SHA256SUMS"
}

archives() {
  rm -rf "$DIST" && mkdir -p "$DIST"
  for p in $PLATFORMS; do archive "${p%/*}" "${p#*/}"; done
  for p in $PLATFORMS; do
    if [ "${p%/*}" = linux ]; then packages "${p#*/}"; fi
  done
  [ -z "${NFPM:-}" ] || rm -rf "$(dirname "$NFPM")"
}

context() {
  [ -r "$CA_CERTS" ] || { echo "release: no CA certificates at $CA_CERTS (apt-get install ca-certificates)" >&2; exit 1; }
  local dir="$IMAGE_CONTEXT/bin/image"
  rm -rf "$dir" && mkdir -p "$dir"
  cp "$CA_CERTS" "$dir/ca-certificates.crt"
  for p in $IMAGE_PLATFORMS; do build linux "${p#*/}" "$dir/linux_${p#*/}/outbox-cdc"; done
}

buildah_() {
  local storage=(--storage-driver vfs)
  [ -n "${BUILDAH_ROOT:-}" ] && storage+=(--root "$BUILDAH_ROOT" --runroot "${BUILDAH_RUNROOT:-$BUILDAH_ROOT/run}")
  buildah "${storage[@]}" "$@"
}

image() {
  command -v buildah >/dev/null || { echo "release: buildah not found: apt-get install -y buildah" >&2; exit 1; }
  context
  mkdir -p "$DIST"
  local tag=${VERSION//+/_} created archive arch
  created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
  buildah_ manifest rm "$IMAGE:$tag" >/dev/null 2>&1 || true # rmi would remove an image it lists
  buildah_ manifest create "$IMAGE:$tag" >/dev/null
  for p in $IMAGE_PLATFORMS; do
    arch=${p#*/}
    buildah_ rmi -f "$IMAGE:$tag-linux-$arch" >/dev/null 2>&1 || true
    buildah_ bud --quiet --platform "linux/$arch" --timestamp "$SOURCE_DATE_EPOCH" \
      --build-arg TARGETARCH="$arch" --build-arg VERSION="$VERSION" --build-arg REVISION="$COMMIT" \
      --build-arg CREATED="$created" -f Dockerfile -t "$IMAGE:$tag-linux-$arch" "$IMAGE_CONTEXT" >/dev/null
    buildah_ manifest add "$IMAGE:$tag" "$IMAGE:$tag-linux-$arch" >/dev/null
    echo "release: image $IMAGE:$tag-linux-$arch"
  done
  archive="$DIST/outbox-cdc_${VERSION}_oci.tar"
  rm -f "$archive"
  buildah_ manifest push --quiet --all "$IMAGE:$tag" "oci-archive:$archive:$tag"
  echo "release: $archive (to a registry: skopeo copy --all oci-archive:$archive docker://REGISTRY/outbox-cdc:$tag)"
}

case "${1:-}" in
version) echo "$VERSION" ;;
dist)
  archives
  sums
  ;;
context) context ;;
image) image ;;
release)
  archives # one step a line: set -e does not apply inside a function called in an && list
  image
  sums
  ;;
*)
  echo "usage: scripts/release.sh version|dist|context|image|release" >&2
  exit 2
  ;;
esac
