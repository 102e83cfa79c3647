#!/usr/bin/env bash
# Builds, locally, every image the docker-compose cluster (docker-compose.yml) runs; no registry is
# needed or used:
#   minik8s/base:bookworm   Debian 12 from `debootstrap --variant=minbase` (a few minutes, once), with
#                           python3, python3-venv, iproute2, iptables and etcd-server; etcd runs on it
#   minik8s/minik8s:dev     build/Dockerfile: the base plus a venv (/opt/minik8s) holding this checkout
#                           as a wheel and its dependencies as wheels built on the host (pip inside a
#                           container has no CA bundle here); apiserver, controllers, scheduler, kubelets
#   the pod images          hack/images.sh (pause, busybox, httpd)
# Idempotent: the base is made only when missing (or its package list changed); the component
# image only when the sources changed (label io.minik8s.source = hash of pyproject.toml, the
# packages' files as git sees them, and build/). Every image is labelled io.minik8s.managed=true.
#   hack/cluster-images.sh [--force] [--no-pod-images]
# Environment: MINIK8S_DEBIAN_MIRROR (default: this host's apt mirror, else deb.debian.org),
# MINIK8S_BASE_IMAGE, MINIK8S_IMAGE (image names), MINIK8S_IMAGE_FROM (the component image's base:
# default the debootstrapped one; an upstream image such as debian:bookworm-slim where pulls work).
set -euo pipefail

MINIK8S_LOG_PREFIX="${MINIK8S_LOG_PREFIX:-cluster-images}"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

BASE_IMAGE="${MINIK8S_BASE_IMAGE:-minik8s/base:bookworm}"
# What build/Dockerfile starts from: the base, or on a machine that can pull, an upstream image
# (e.g. debian:bookworm-slim; the Dockerfile installs python3 and the tools with apt then).
FROM_IMAGE="${MINIK8S_IMAGE_FROM:-${BASE_IMAGE}}"
IMAGE="${MINIK8S_IMAGE:-minik8s/minik8s:dev}"
SUITE="bookworm"
# What the base holds beyond minbase: the components' runtime (python3 + venv), what the kubelet
# and the CNI plugins call (ip, iptables; mount/umount are in minbase), and etcd.
BASE_PACKAGES="python3,python3-venv,iproute2,iptables,etcd-server"
BASE_RECIPE_VERSION=1 # bump to force a new base everywhere
PACKAGES=(apiserver controllers scheduler kubelet dockershim cni kubectl machinery containerd_node dns proxy local_path_provisioner metrics_server ingress_nginx road)
BUILD_DIR="${MINIK8S_ROOT}/build"
WHEELS="${BUILD_DIR}/wheels"
PIP=("${MINIK8S_VENV}/bin/python" -m pip)

force=0
pod_images=1
for arg in "$@"; do
  case "${arg}" in
    --force) force=1 ;;
    --no-pod-images) pod_images=0 ;;
    -h | --help)
      sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *) die "unknown argument: ${arg} (usage: hack/cluster-images.sh [--force] [--no-pod-images])" ;;
  esac
done

docker_running || die "docker does not answer (hack/setup.sh starts dockerd)"
[[ -x "${MINIK8S_VENV}/bin/python" ]] || die "no ${MINIK8S_VENV}: run hack/setup.sh first"

# One build at a time on this machine (a test fixture and a developer may both ask).
exec 8>"/var/lock/minik8s-cluster-images.lock"
if ! flock -n 8; then
  log "another hack/cluster-images.sh is building; waiting for it"
  flock -w 1800 8 || die "timed out waiting for /var/lock/minik8s-cluster-images.lock"
fi

WORK=""
cleanup_work() {
  [[ -n "${WORK}" && -d "${WORK}" ]] || return 0
  # debootstrap mounts proc/sys (and may bind /dev) inside the target: unmount before removing.
  local m
  while read -r m; do
    if [[ -n "${m}" ]]; then
      umount -l "${m}" 2>/dev/null || true
    fi
  done < <(findmnt -rn -o TARGET | grep -F "${WORK}/" | sort -r || true)
  rm -rf --one-file-system "${WORK}"
}
trap cleanup_work EXIT

image_label() { # image_label IMAGE LABEL: prints the label's value ("" when the image is missing)
  docker image inspect --format "{{ index .Config.Labels \"$2\" }}" "$1" 2>/dev/null || true
}

elapsed() { printf '%ds' $((SECONDS - $1)); }

# ------------------------------------------------------------------- base ---

debian_mirror() {
  if [[ -n "${MINIK8S_DEBIAN_MIRROR:-}" ]]; then
    printf '%s\n' "${MINIK8S_DEBIAN_MIRROR}"
    return
  fi
  local uri
  uri="$(awk '/^URIs:/ && $2 ~ /\/debian\/?$/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)"
  if [[ -z "${uri}" ]]; then
    uri="$(awk '$1 == "deb" && $2 ~ /\/debian\/?$/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)"
  fi
  printf '%s\n' "${uri:-http://deb.debian.org/debian}"
}

# debootstrap prints a line per package and step; show the stages and a running count instead.
debootstrap_progress() {
  awk -v prefix="  debootstrap: " '
    function count(what, n, pkg) { if (n == 1 || n % 20 == 0) { printf "%s%s %d packages (%s)\n", prefix, what, n, pkg; fflush() } }
    /^I: Retrieving (InRelease|Release|Packages)/ { print prefix substr($0, 4); fflush(); next }
    /^I: Retrieving /  { count("downloaded", ++r, $3); next }
    /^I: Validating /  { next }
    /^I: Extracting /  { count("extracted", ++x, $3); next }
    /^I: Unpacking /   { if ($0 ~ /Unpacking (required|the base)/) { print prefix substr($0, 4); fflush(); next } count("unpacked", ++u, $3); next }
    /^I: Configuring / { if ($0 ~ /Configuring (required|the base)/) { print prefix substr($0, 4); fflush(); next } count("configured", ++c, $3); next }
    { sub(/^I: /, ""); print prefix $0; fflush() }
  '
}

build_base() {
  local recipe
  recipe="$( {
    printf '%s\n' "${SUITE}" "${BASE_PACKAGES}" "${BASE_RECIPE_VERSION}"
  } | sha256sum | cut -c1-16)"
  if [[ ${force} -eq 0 && "$(image_label "${BASE_IMAGE}" io.minik8s.recipe)" == "${recipe}" ]]; then
    log "${BASE_IMAGE}: skip, up to date"
    return 0
  fi
  local mirror start=${SECONDS}
  mirror="$(debian_mirror)"
  ensure_apt_packages debootstrap:debootstrap
  WORK="$(mktemp -d /var/tmp/minik8s-rootfs.XXXXXX)"
  local root="${WORK}/rootfs"
  log "${BASE_IMAGE}: debootstrap --variant=minbase ${SUITE} from ${mirror} (a few minutes, once)"
  if ! debootstrap --variant=minbase --include="${BASE_PACKAGES}" "${SUITE}" "${root}" "${mirror}" 2>&1 |
    debootstrap_progress; then
    tail -n 30 "${root}/debootstrap/debootstrap.log" >&2 2>/dev/null || true
    die "${BASE_IMAGE}: debootstrap failed"
  fi
  # The host's apt sources (bookworm-updates, security) when it runs the same suite.
  if grep -qs "^VERSION_CODENAME=${SUITE}$" /etc/os-release && [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
    cp /etc/apt/sources.list.d/debian.sources "${root}/etc/apt/sources.list.d/debian.sources"
    : >"${root}/etc/apt/sources.list"
  fi
  chroot "${root}" apt-get clean
  rm -rf "${root}"/var/lib/apt/lists/* "${root}"/var/cache/apt/*.bin "${root}"/var/log/*.log "${root}/debootstrap"
  # etcd's package starts nothing here, but keep its default data dir out of the image.
  rm -rf "${root}/var/lib/etcd/"*
  log "${BASE_IMAGE}: importing the root filesystem ($(du -sh --one-file-system "${root}" | cut -f1))"
  tar --numeric-owner --one-file-system -C "${root}" -c . |
    docker import \
      --change "LABEL io.minik8s.managed=true io.minik8s.recipe=${recipe} io.minik8s.image=base" \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8' \
      --change 'CMD ["bash"]' \
      --message "minik8s hack/cluster-images.sh: debootstrap --variant=minbase ${SUITE} + ${BASE_PACKAGES}" \
      - "${BASE_IMAGE}" >/dev/null
  cleanup_work
  WORK=""
  log "${BASE_IMAGE}: built in $(elapsed "${start}") ($(docker image inspect --format '{{.Size}}' "${BASE_IMAGE}" |
    awk '{printf "%.0f MB", $1 / 1e6}'))"
}

# ---------------------------------------------------------------- wheels ---

# source_files: the files that make the project's wheel, as git sees them (tracked, plus new files
# not ignored), relative to the repository root.
source_files() {
  (cd "${MINIK8S_ROOT}" && git ls-files -co --exclude-standard -- pyproject.toml "${PACKAGES[@]}" |
    sort -u | while read -r f; do [[ -f "${f}" ]] && printf '%s\n' "${f}"; done)
}

# venv_constraints: the versions the tests run with (the dev venv), to pin the image's dependencies.
venv_constraints() {
  "${PIP[@]}" freeze --exclude-editable --disable-pip-version-check 2>/dev/null | grep -v '^minik8s[= @]' || true
}

build_wheels() {
  local srcdir="$1" deps_hash="$2"
  mkdir -p "${WHEELS}"
  local stamp="${WHEELS}/deps/.minik8s-deps-hash"
  if [[ ${force} -eq 0 && -f "${stamp}" && "$(cat "${stamp}")" == "${deps_hash}" ]]; then
    log "wheels: skip dependencies, unchanged ($(find "${WHEELS}/deps" -name '*.whl' | wc -l) wheels in build/wheels/deps)"
  else
    local start=${SECONDS}
    log "wheels: building the dependencies' wheels on the host (pinned to .venv's versions)"
    rm -rf "${WHEELS}/deps"
    mkdir -p "${WHEELS}/deps"
    venv_constraints >"${WORK}/constraints.txt"
    # pip's notes about this machine's absent local index folders are dropped.
    if ! "${PIP[@]}" wheel -q --disable-pip-version-check -c "${WORK}/constraints.txt" -w "${WHEELS}/deps" \
      "${srcdir}" 2>&1 | { grep -v "^WARNING: Location 'file://.*' is ignored" || true; } >&2; then
      die "wheels: pip wheel of the dependencies failed"
    fi
    rm -f "${WHEELS}/deps"/minik8s-*.whl
    printf '%s\n' "${deps_hash}" >"${stamp}"
    log "wheels: $(find "${WHEELS}/deps" -name '*.whl' | wc -l) dependency wheels in $(elapsed "${start}")"
  fi
  rm -rf "${WHEELS}/project"
  mkdir -p "${WHEELS}/project"
  if ! "${PIP[@]}" wheel -q --disable-pip-version-check --no-deps -w "${WHEELS}/project" "${srcdir}" 2>&1 |
    { grep -v "^WARNING: Location 'file://.*' is ignored" || true; } >&2; then
    die "wheels: pip wheel of the project failed"
  fi
  log "wheels: $(find "${WHEELS}/project" -name '*.whl' -printf '%f\n')"
}

# ----------------------------------------------------------- minik8s:dev ---

build_component_image() {
  WORK="$(mktemp -d /var/tmp/minik8s-wheels.XXXXXX)"
  local files src_hash deps_hash start=${SECONDS}
  mapfile -t files < <(source_files)
  [[ ${#files[@]} -gt 0 ]] || die "no source files found (is ${MINIK8S_ROOT} a git checkout?)"
  deps_hash="$( {
    sed -n '/^dependencies = \[/,/^\]/p' "${MINIK8S_ROOT}/pyproject.toml"
    venv_constraints
  } | sha256sum | cut -c1-16)"
  src_hash="$( {
    (cd "${MINIK8S_ROOT}" && sha256sum -- "${files[@]}")
    (cd "${MINIK8S_ROOT}" && sha256sum -- build/Dockerfile build/*.sh)
    printf '%s\n' "deps ${deps_hash}" "from $(docker image inspect --format '{{.Id}}' "${FROM_IMAGE}")"
  } | sha256sum | cut -c1-16)"
  if [[ ${force} -eq 0 && "$(image_label "${IMAGE}" io.minik8s.source)" == "${src_hash}" ]]; then
    log "${IMAGE}: skip, up to date (sources ${src_hash}, ${#files[@]} files)"
    cleanup_work
    WORK=""
    return 0
  fi
  log "${IMAGE}: sources changed (hash ${src_hash}, ${#files[@]} files); building"
  # A clean copy of exactly those files: the wheel holds nothing stale and the checkout gets no build/lib.
  mkdir -p "${WORK}/src"
  (cd "${MINIK8S_ROOT}" && tar -c -- "${files[@]}") | tar -x -C "${WORK}/src"
  build_wheels "${WORK}/src" "${deps_hash}"
  if ! docker build --force-rm --label "io.minik8s.source=${src_hash}" --build-arg "BASE_IMAGE=${FROM_IMAGE}" \
    -t "${IMAGE}" -f "${BUILD_DIR}/Dockerfile" "${BUILD_DIR}" 2>&1 | sed -u 's/^/  docker build: /'; then
    die "${IMAGE}: docker build failed"
  fi
  # The image this one replaced (now untagged), unless a container still uses it.
  docker image prune -f --filter "label=io.minik8s.image=minik8s" >/dev/null 2>&1 || true
  cleanup_work
  WORK=""
  log "${IMAGE}: built in $(elapsed "${start}")"
}

total_start=${SECONDS}
build_base
if [[ "${FROM_IMAGE}" != "${BASE_IMAGE}" ]] && ! docker image inspect "${FROM_IMAGE}" >/dev/null 2>&1; then
  log "${FROM_IMAGE}: pulling (MINIK8S_IMAGE_FROM)"
  docker pull "${FROM_IMAGE}" || die "cannot pull ${FROM_IMAGE}; unset MINIK8S_IMAGE_FROM to use ${BASE_IMAGE}"
fi
build_component_image
if [[ ${pod_images} -eq 1 ]]; then
  "${MINIK8S_ROOT}/hack/images.sh"
fi
log "ready in $(elapsed "${total_start}"): ${BASE_IMAGE} ${IMAGE}$([[ ${pod_images} -eq 1 ]] && echo ' + pod images')"
