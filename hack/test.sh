#!/usr/bin/env bash
# The project's test command (README, .ci/run): setup, lint, type check, tests.
#   ./hack/test.sh [pytest args...]     e.g. ./hack/test.sh tests/unit -k selector
# Runs `ruff check .`, `lint-imports` (the import contracts in .importlinter), `mypy`
# (pyproject's [tool.mypy]) and `pytest -q --durations=30` (the 30 slowest set-ups and tests are
# listed at the end, so the suite's time stays in view). Fails when any fails; exits with pytest's
# exit code, except that "no tests collected" (5) is a failure (1).
# When every test path given is under tests/unit, the set-up is the venv alone: unit tests
# need no Docker, no etcd and no root.
set -euo pipefail

MINIK8S_LOG_PREFIX="${MINIK8S_LOG_PREFIX:-test}"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "${MINIK8S_ROOT}"

# unit_only ARGS...: true when the arguments name test paths and all of them are in tests/unit.
# An argument counts as a path when it exists (a pytest node id is cut at "::"); the values of
# pytest's options (`-k selector`, `--deselect tests/unit/x.py::t`) are not test paths. No path
# at all means the whole suite.
unit_only() {
  local arg path found="" root skip_value=""
  root="$(realpath -- "${MINIK8S_ROOT}")"
  for arg in "$@"; do
    if [[ -n "${skip_value}" ]]; then
      skip_value=""
      continue
    fi
    case "${arg}" in
      -k | -m | -p | -o | -c | --deselect | --ignore | --ignore-glob | --rootdir | --confcutdir | --basetemp)
        skip_value=1
        continue
        ;;
      -*) continue ;;
    esac
    path="${arg%%::*}"
    [[ -e "${path}" ]] || continue
    path="$(realpath -- "${path}")"
    [[ "${path}/" == "${root}/tests/unit/"* ]] || return 1
    found=1
  done
  [[ -n "${found}" ]]
}

if unit_only "$@"; then
  log "unit tests only: setting up the venv alone (no Docker, no etcd)"
  "${MINIK8S_ROOT}/hack/setup.sh" --venv-only
else
  "${MINIK8S_ROOT}/hack/setup.sh"
fi

# The checks run one after another and the tests run whatever they say; the exit code says all.
failed_checks=()
check() { # check NAME CMD [ARG...]
  local name="$1" rc=0
  shift
  log "${name}"
  "$@" || rc=$?
  if [[ ${rc} -ne 0 ]]; then
    log "${name} failed (exit ${rc}); going on"
    failed_checks+=("${name}")
  fi
}
check "ruff check ." "${MINIK8S_VENV}/bin/ruff" check .
# lint-imports puts the working directory first on sys.path: it reads this tree, not an installed copy
check "lint-imports" "${MINIK8S_VENV}/bin/lint-imports" --no-logo
check "mypy" "${MINIK8S_VENV}/bin/mypy"

# --durations=30: the slowest set-ups and tests at the end of every run, so the suite's time stays visible.
# MINIK8S_TEST_WORKERS=N (default 0: every test in this process) runs the suite on N pytest-xdist workers, a
# module at a time (`--dist loadgroup`: tests/conftest.py gives each test its module's group, and one group to
# the modules that share the e2e clusters or the compose images), in collection order: whole clusters first.
workers="${MINIK8S_TEST_WORKERS:-0}"
xdist=()
if [[ "${workers}" != 0 ]]; then
  xdist=(-n "${workers}" --dist loadgroup --no-loadscope-reorder)
fi
log "python -m pytest -q --durations=30 ${xdist[*]} $*"
pytest_rc=0
"${MINIK8S_VENV}/bin/python" -m pytest -q --durations=30 "${xdist[@]}" "$@" || pytest_rc=$?

if [[ ${pytest_rc} -eq 5 ]]; then
  log "FAILED: pytest collected no tests (exit 5); a test run must run tests"
  exit 1
fi
if [[ ${pytest_rc} -ne 0 ]]; then
  log "FAILED: pytest exited ${pytest_rc}${failed_checks[*]:+; also failed: ${failed_checks[*]}}"
  exit "${pytest_rc}"
fi
if [[ ${#failed_checks[@]} -ne 0 ]]; then
  log "FAILED: tests passed but these failed: ${failed_checks[*]}"
  exit 1
fi
log "OK: ruff check, lint-imports, mypy and pytest passed"
