#!/usr/bin/env bash
# Builds the container images minik8s needs, locally (no registry is reachable):
#   minik8s/pause:3.9      the pod sandbox: a static C program that waits for signals and reaps children
#   minik8s/busybox:1.35   Debian's busybox-static (/bin/busybox + applet links), CMD sh; also :latest
#   minik8s/httpd:1        that busybox running `httpd -f -p 80 -h /www` with a small page
# Every image carries the labels io.minik8s.managed=true and io.minik8s.recipe=<hash of its inputs>;
# an image whose recipe hash is unchanged is skipped, so running this again is cheap.
#
# Names are the project's own (the issue: never retag upstream names). For manifests written
# for upstream images, MINIK8S_UPSTREAM_ALIASES=1 also tags busybox:1.36 and busybox:latest.
#
# Your own image: build or `docker load` it on this machine and reference it with
# imagePullPolicy IfNotPresent or Never (there is no registry to pull from), as `kind load` does.
#   hack/images.sh [--force]
set -euo pipefail

MINIK8S_LOG_PREFIX="${MINIK8S_LOG_PREFIX:-images}"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PAUSE_IMAGE="minik8s/pause:3.9"
BUSYBOX_IMAGE="minik8s/busybox:1.35"
HTTPD_IMAGE="minik8s/httpd:1"
RECIPE_VERSION=2 # bump to force a rebuild everywhere

force=0
for arg in "$@"; do
  case "${arg}" in
    --force) force=1 ;;
    -h | --help)
      sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *) die "unknown argument: ${arg} (usage: hack/images.sh [--force])" ;;
  esac
done

docker_running || die "docker does not answer (hack/setup.sh starts dockerd)"

WORK="$(mktemp -d /tmp/minik8s-images.XXXXXX)"
trap 'rm -rf "${WORK}"' EXIT

# recipe_of NAME INPUT...: a hash of this script, the image name and its inputs.
recipe_of() {
  { sha256sum <"${BASH_SOURCE[0]}"; printf '%s\n' "${RECIPE_VERSION}" "$@"; } | sha256sum | cut -c1-16
}

# up_to_date IMAGE RECIPE: true when IMAGE exists with that recipe label.
up_to_date() {
  [[ ${force} -eq 0 ]] || return 1
  local have
  have="$(docker image inspect --format '{{ index .Config.Labels "io.minik8s.recipe" }}' "$1" 2>/dev/null)" || return 1
  [[ "${have}" == "$2" ]]
}

# import_rootfs DIR IMAGE RECIPE [--change ...]: a reproducible tar of DIR imported as IMAGE.
import_rootfs() {
  local dir="$1" image="$2" recipe="$3"
  shift 3
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "${dir}" -c . |
    docker import "$@" \
      --change "LABEL io.minik8s.managed=true io.minik8s.recipe=${recipe}" \
      --message "minik8s hack/images.sh" - "${image}" >/dev/null
  log "${image}: built ($(docker image inspect --format '{{.Id}}' "${image}" | cut -c1-19))"
}

# ------------------------------------------------------------------ pause ---

build_pause() {
  ensure_apt_packages gcc:gcc libc6-dev
  local recipe
  recipe="$(recipe_of "${PAUSE_IMAGE}" "$(gcc -dumpfullversion 2>/dev/null || gcc -dumpversion)")"
  if up_to_date "${PAUSE_IMAGE}" "${recipe}"; then
    log "${PAUSE_IMAGE}: skip, up to date"
    return 0
  fi
  mkdir -p "${WORK}/pause/root"
  cat >"${WORK}/pause/pause.c" <<'EOF'
/* The pod sandbox's only process: hold the namespaces, reap orphans, exit on SIGINT/SIGTERM. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_down(int signo) {
  (void)signo;
  _exit(0);
}

static void on_child(int signo) {
  (void)signo;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(int argc, char **argv) {
  if (argc > 1 && (strcmp(argv[1], "-v") == 0 || strcmp(argv[1], "--version") == 0)) {
    printf("pause (minik8s) 3.9\n");
    return 0;
  }
  if (getpid() != 1) fprintf(stderr, "warning: pause should be the first process\n");
  struct sigaction down = {.sa_handler = on_down};
  struct sigaction child = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP};
  if (sigaction(SIGINT, &down, NULL) < 0 || sigaction(SIGTERM, &down, NULL) < 0 ||
      sigaction(SIGCHLD, &child, NULL) < 0) {
    perror("sigaction");
    return 1;
  }
  for (;;) pause();
  return 42;
}
EOF
  gcc -static -Os -Wall -Werror -o "${WORK}/pause/root/pause" "${WORK}/pause/pause.c"
  strip "${WORK}/pause/root/pause"
  import_rootfs "${WORK}/pause/root" "${PAUSE_IMAGE}" "${recipe}" --change 'ENTRYPOINT ["/pause"]'
}

# ---------------------------------------------------------------- busybox ---

# fetch_busybox: downloads Debian's busybox-static .deb into WORK and prints its path.
fetch_busybox() {
  local dir="${WORK}/deb"
  mkdir -p "${dir}"
  if ! (cd "${dir}" && apt-get download -q -o APT::Sandbox::User=root busybox-static >&2); then
    log "busybox-static: apt-get download failed; running apt-get update once"
    apt-get update -q -o DPkg::Lock::Timeout=300 >&2
    (cd "${dir}" && apt-get download -q -o APT::Sandbox::User=root busybox-static >&2) || die "cannot download busybox-static"
  fi
  ls "${dir}"/busybox-static_*.deb
}

# busybox_rootfs DIR: a minimal root filesystem with busybox and its applets in DIR.
busybox_rootfs() {
  local root="$1" deb
  deb="$(fetch_busybox)"
  mkdir -p "${WORK}/deb/x" "${root}"/{bin,sbin,usr/bin,usr/sbin,etc,root,home,tmp,var/www,proc,sys,dev}
  dpkg-deb -x "${deb}" "${WORK}/deb/x"
  install -m 0755 "${WORK}/deb/x/bin/busybox" "${root}/bin/busybox"
  local applet
  while read -r applet; do
    [[ -n "${applet}" && "${applet}" != "bin/busybox" ]] || continue
    [[ -e "${root}/${applet}" ]] || ln -s /bin/busybox "${root}/${applet}"
  done < <("${root}/bin/busybox" --list-full)
  chmod 1777 "${root}/tmp"
  chmod 0700 "${root}/root"
  printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' 'nobody:x:65534:65534:nobody:/home:/bin/false' >"${root}/etc/passwd"
  printf '%s\n' 'root:x:0:' 'nogroup:x:65534:' >"${root}/etc/group"
}

build_busybox() {
  local version recipe
  version="$(apt-cache policy busybox-static 2>/dev/null | awk '/Candidate:/ {print $2}')"
  recipe="$(recipe_of "${BUSYBOX_IMAGE}" "${version}")"
  if up_to_date "${BUSYBOX_IMAGE}" "${recipe}"; then
    log "${BUSYBOX_IMAGE}: skip, up to date (busybox-static ${version})"
  else
    busybox_rootfs "${WORK}/busybox"
    import_rootfs "${WORK}/busybox" "${BUSYBOX_IMAGE}" "${recipe}" \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'CMD ["sh"]'
  fi
  docker tag "${BUSYBOX_IMAGE}" "${BUSYBOX_IMAGE%:*}:latest"
  if [[ "${MINIK8S_UPSTREAM_ALIASES:-0}" == 1 ]]; then
    docker tag "${BUSYBOX_IMAGE}" busybox:1.36
    docker tag "${BUSYBOX_IMAGE}" busybox:latest
    log "tagged busybox:1.36 and busybox:latest (MINIK8S_UPSTREAM_ALIASES=1)"
  fi

  # httpd as PID 1 would ignore SIGTERM (the kernel drops signals PID 1 has no handler for), so every pod
  # of it waited out its grace period: Debian's tini runs first, forwards the signal and reaps.
  ensure_apt_packages tini:tini-static
  version="${version} httpd tini $(dpkg-query -W -f '${Version}' tini)"
  recipe="$(recipe_of "${HTTPD_IMAGE}" "${version}")"
  if up_to_date "${HTTPD_IMAGE}" "${recipe}"; then
    log "${HTTPD_IMAGE}: skip, up to date"
    return 0
  fi
  [[ -d "${WORK}/busybox" ]] || busybox_rootfs "${WORK}/busybox"
  install -m 0755 "$(command -v tini-static)" "${WORK}/busybox/sbin/tini"
  cat >"${WORK}/busybox/var/www/index.html" <<'EOF'
<!DOCTYPE html>
<html><head><title>Welcome to minik8s httpd</title></head>
<body><h1>Welcome to minik8s httpd</h1><p>Served by busybox httpd in a minik8s pod.</p></body></html>
EOF
  import_rootfs "${WORK}/busybox" "${HTTPD_IMAGE}" "${recipe}" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'EXPOSE 80/tcp' \
    --change 'ENTRYPOINT ["/sbin/tini", "--"]' \
    --change 'CMD ["httpd", "-f", "-v", "-p", "80", "-h", "/var/www"]'
}

build_pause
build_busybox
log "ready: ${PAUSE_IMAGE} ${BUSYBOX_IMAGE} ${HTTPD_IMAGE}"
