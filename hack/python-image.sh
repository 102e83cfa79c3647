#!/usr/bin/env bash
# Builds minik8s/python:1 locally: Debian 12's python3 with the official Kubernetes client (Debian's
# python3-kubernetes), for pods that talk to the apiserver from inside the cluster
# (`config.load_incluster_config()` reads the service-account mount and KUBERNETES_SERVICE_HOST).
# On the compose base image (minik8s/base:bookworm, hack/cluster-images.sh) when there is one: apt inside a
# build container, seconds. Without it: `debootstrap --variant=minbase` with the packages (a few minutes, once).
# Labelled io.minik8s.managed=true and io.minik8s.recipe=<hash>; an image with the same recipe is skipped.
#   hack/python-image.sh [--force]
set -euo pipefail

MINIK8S_LOG_PREFIX="${MINIK8S_LOG_PREFIX:-python-image}"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PYTHON_IMAGE="minik8s/python:1"
BASE_IMAGE="${MINIK8S_BASE_IMAGE:-minik8s/base:bookworm}"
# python3-cffi-backend by name: python3-cryptography (under python3-kubernetes) depends on the virtual
# python3-cffi-backend-api-min/-max, which debootstrap does not resolve to the package that provides them
PACKAGES="python3,python3-kubernetes,python3-cffi-backend"
SUITE="bookworm"

force=0
for arg in "$@"; do
  case "${arg}" in
    --force) force=1 ;;
    -h | --help)
      sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *) die "unknown argument: ${arg} (usage: hack/python-image.sh [--force])" ;;
  esac
done

docker_running || die "docker does not answer (hack/setup.sh starts dockerd)"

recipe="$({ sha256sum <"${BASH_SOURCE[0]}"; printf '%s\n' "${PACKAGES}" "${SUITE}"; } | sha256sum | cut -c1-16)"
have="$(docker image inspect --format '{{ index .Config.Labels "io.minik8s.recipe" }}' "${PYTHON_IMAGE}" 2>/dev/null || true)"
if [[ ${force} -eq 0 && "${have}" == "${recipe}" ]]; then
  log "${PYTHON_IMAGE}: skip, up to date"
  exit 0
fi

# One build at a time on this machine (several test sessions may ask at once).
exec 8>"/var/lock/minik8s-python-image.lock"
flock -w 900 8 || die "timed out waiting for /var/lock/minik8s-python-image.lock"

WORK="$(mktemp -d /var/tmp/minik8s-python-image.XXXXXX)"
cleanup_work() {
  local m
  while read -r m; do
    [[ -n "${m}" ]] && umount -l "${m}" 2>/dev/null || true
  done < <(findmnt -rn -o TARGET | grep -F "${WORK}/" | sort -r || true)
  rm -rf --one-file-system "${WORK}"
}
trap cleanup_work EXIT

start=${SECONDS}
labels="LABEL io.minik8s.managed=true io.minik8s.recipe=${recipe} io.minik8s.image=python"
if docker image inspect "${BASE_IMAGE}" >/dev/null 2>&1; then
  log "${PYTHON_IMAGE}: ${BASE_IMAGE} + apt-get install ${PACKAGES//,/ }"
  cat >"${WORK}/Dockerfile" <<DOCKERFILE
FROM ${BASE_IMAGE}
RUN apt-get update && apt-get install -y --no-install-recommends ${PACKAGES//,/ } \\
 && apt-get clean && rm -rf /var/lib/apt/lists/*
${labels}
CMD ["python3"]
DOCKERFILE
  DOCKER_BUILDKIT=0 docker build -q -t "${PYTHON_IMAGE}" "${WORK}" >/dev/null 2>"${WORK}/build.log" || {
    cat "${WORK}/build.log" >&2
    die "${PYTHON_IMAGE}: docker build failed"
  }
else
  ensure_apt_packages debootstrap:debootstrap
  mirror="$(awk '/^URIs:/ && $2 ~ /\/debian\/?$/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)"
  mirror="${MINIK8S_DEBIAN_MIRROR:-${mirror:-http://deb.debian.org/debian}}"
  log "${PYTHON_IMAGE}: debootstrap --variant=minbase ${SUITE} with ${PACKAGES} from ${mirror} (a few minutes, once)"
  debootstrap --variant=minbase --include="${PACKAGES}" "${SUITE}" "${WORK}/rootfs" "${mirror}" >"${WORK}/debootstrap.log" 2>&1 || {
    tail -n 30 "${WORK}/debootstrap.log" >&2
    die "${PYTHON_IMAGE}: debootstrap failed"
  }
  chroot "${WORK}/rootfs" apt-get clean
  rm -rf "${WORK}/rootfs"/var/lib/apt/lists/* "${WORK}/rootfs/debootstrap"
  tar --numeric-owner --one-file-system -C "${WORK}/rootfs" -c . |
    docker import --change "${labels}" --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' \
      --message "minik8s hack/python-image.sh" - "${PYTHON_IMAGE}" >/dev/null
fi
log "${PYTHON_IMAGE}: built in $((SECONDS - start))s ($(docker run --rm "${PYTHON_IMAGE}" python3 -c \
  'import kubernetes; print("kubernetes client", kubernetes.__version__)'))"
