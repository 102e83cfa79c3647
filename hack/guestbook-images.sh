#!/usr/bin/env bash
# Builds the images of the guestbook example (examples/guestbook/), locally like the others (no registry):
#   minik8s/redis:1       Debian 12's redis-server and redis-tools (redis-cli) under tini; redis-server saves and
#                         exits on SIGTERM
#   minik8s/guestbook:1   Debian 12's python3 and python3-redis with examples/guestbook/frontend/guestbook.py under
#                         tini; it stops on SIGTERM after its SHUTDOWN_DELAY_SECONDS
# On the compose base image (minik8s/base:bookworm, hack/cluster-images.sh) when there is one: apt inside a
# build container, seconds. Without it: `debootstrap --variant=minbase` with the packages (a few minutes, once).
# Labelled io.minik8s.managed=true and io.minik8s.recipe=<hash>; an image with the same recipe is skipped.
#   hack/guestbook-images.sh [--force]
set -euo pipefail

MINIK8S_LOG_PREFIX="${MINIK8S_LOG_PREFIX:-guestbook-images}"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REDIS_IMAGE="minik8s/redis:1"
GUESTBOOK_IMAGE="minik8s/guestbook:1"
BASE_IMAGE="${MINIK8S_BASE_IMAGE:-minik8s/base:bookworm}"
SUITE="bookworm"
APP="${MINIK8S_ROOT}/examples/guestbook/frontend/guestbook.py"

force=0
for arg in "$@"; do
  case "${arg}" in
    --force) force=1 ;;
    -h | --help)
      sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *) die "unknown argument: ${arg} (usage: hack/guestbook-images.sh [--force])" ;;
  esac
done

docker_running || die "docker does not answer (hack/setup.sh starts dockerd)"

# recipe_of IMAGE PACKAGES: a hash of this script, the image, its packages and the frontend's source.
recipe_of() {
  { sha256sum <"${BASH_SOURCE[0]}"; sha256sum <"${APP}"; printf '%s\n' "$@" "${SUITE}"; } | sha256sum | cut -c1-16
}

up_to_date() {
  [[ ${force} -eq 0 ]] || return 1
  local have
  have="$(docker image inspect --format '{{ index .Config.Labels "io.minik8s.recipe" }}' "$1" 2>/dev/null)" || return 1
  [[ "${have}" == "$2" ]]
}

WORK=""
cleanup_work() {
  [[ -n "${WORK}" ]] || return 0
  local m
  while read -r m; do
    [[ -n "${m}" ]] && umount -l "${m}" 2>/dev/null || true
  done < <(findmnt -rn -o TARGET | grep -F "${WORK}/" | sort -r || true)
  rm -rf --one-file-system "${WORK}"
}
trap cleanup_work EXIT

# build IMAGE NAME PACKAGES CMD-JSON: the image with PACKAGES (comma-separated), /app/guestbook.py and /data. Its
# entrypoint is tini (a pod's `args` replace CMD and keep it): SIGTERM reaches the process also before its own
# handler is installed (PID 1 of a namespace ignores a signal it has no handler for), and zombies are reaped.
build() {
  local image="$1" name="$2" packages="$3" cmd="$4" recipe start
  recipe="$(recipe_of "${image}" "${packages}" "${cmd}")"
  if up_to_date "${image}" "${recipe}"; then
    log "${image}: skip, up to date"
    return 0
  fi
  start=${SECONDS}
  local labels="LABEL io.minik8s.managed=true io.minik8s.recipe=${recipe} io.minik8s.image=${name}"
  rm -rf "${WORK:?}/${name}" && mkdir -p "${WORK}/${name}"
  cp "${APP}" "${WORK}/${name}/guestbook.py"
  if docker image inspect "${BASE_IMAGE}" >/dev/null 2>&1; then
    log "${image}: ${BASE_IMAGE} + apt-get install ${packages//,/ }"
    cat >"${WORK}/${name}/Dockerfile" <<DOCKERFILE
FROM ${BASE_IMAGE}
RUN apt-get update && apt-get install -y --no-install-recommends ${packages//,/ } \\
 && apt-get clean && rm -rf /var/lib/apt/lists/* && mkdir -p /data
COPY guestbook.py /app/guestbook.py
${labels}
ENV LANG=C.UTF-8 PYTHONUNBUFFERED=1
ENTRYPOINT ["tini", "--"]
CMD ${cmd}
DOCKERFILE
    DOCKER_BUILDKIT=0 docker build -q -t "${image}" "${WORK}/${name}" >/dev/null 2>"${WORK}/${name}/build.log" || {
      cat "${WORK}/${name}/build.log" >&2
      die "${image}: docker build failed"
    }
  else
    ensure_apt_packages debootstrap:debootstrap
    local mirror rootfs="${WORK}/${name}/rootfs"
    mirror="$(awk '/^URIs:/ && $2 ~ /\/debian\/?$/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)"
    mirror="${MINIK8S_DEBIAN_MIRROR:-${mirror:-http://deb.debian.org/debian}}"
    log "${image}: debootstrap --variant=minbase ${SUITE} with ${packages} from ${mirror} (a few minutes, once)"
    debootstrap --variant=minbase --include="${packages}" "${SUITE}" "${rootfs}" "${mirror}" \
      >"${WORK}/${name}/debootstrap.log" 2>&1 || {
      tail -n 30 "${WORK}/${name}/debootstrap.log" >&2
      die "${image}: debootstrap failed"
    }
    chroot "${rootfs}" apt-get clean
    rm -rf "${rootfs}"/var/lib/apt/lists/* "${rootfs}/debootstrap"
    install -D -m 0644 "${APP}" "${rootfs}/app/guestbook.py"
    mkdir -p "${rootfs}/data"
    tar --numeric-owner --one-file-system -C "${rootfs}" -c . |
      docker import --change "${labels}" --change 'ENV LANG=C.UTF-8 PYTHONUNBUFFERED=1' \
        --change 'ENTRYPOINT ["tini", "--"]' --change "CMD ${cmd}" \
        --message "minik8s hack/guestbook-images.sh" - "${image}" >/dev/null
  fi
  log "${image}: built in $((SECONDS - start))s"
}

# One build at a time on this machine (several test sessions may ask at once).
exec 8>"/var/lock/minik8s-guestbook-images.lock"
flock -w 900 8 || die "timed out waiting for /var/lock/minik8s-guestbook-images.lock"
WORK="$(mktemp -d /var/tmp/minik8s-guestbook-images.XXXXXX)"

build "${REDIS_IMAGE}" redis "redis-server,redis-tools,tini" \
  '["redis-server", "--bind", "0.0.0.0", "--protected-mode", "no", "--dir", "/data"]'
build "${GUESTBOOK_IMAGE}" guestbook "python3,python3-redis,tini" '["tini", "--", "python3", "/app/guestbook.py"]'
