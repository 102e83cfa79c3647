#!/usr/bin/env bash
# The project's test command (README, .ci/run): setup, lint, tests.
#   ./hack/test.sh [pytest args...]     e.g. ./hack/test.sh tests/unit -k selector
# Runs `ruff check .` and `pytest -q`. Fails when either fails; exits with
# pytest's exit code, except that "no tests collected" (5) is a failure (1).
set -euo pipefail

MINIK8S_LOG_PREFIX="${MINIK8S_LOG_PREFIX:-test}"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

"${MINIK8S_ROOT}/hack/setup.sh"
cd "${MINIK8S_ROOT}"

log "ruff check ."
ruff_rc=0
"${MINIK8S_VENV}/bin/ruff" check . || ruff_rc=$?
if [[ ${ruff_rc} -ne 0 ]]; then
  log "ruff check failed (exit ${ruff_rc}); running the tests anyway"
fi

log "python -m pytest -q $*"
pytest_rc=0
"${MINIK8S_VENV}/bin/python" -m pytest -q "$@" || pytest_rc=$?

if [[ ${pytest_rc} -eq 5 ]]; then
  log "FAILED: pytest collected no tests (exit 5); a test run must run tests"
  exit 1
fi
if [[ ${pytest_rc} -ne 0 ]]; then
  log "FAILED: pytest exited ${pytest_rc}"
  exit "${pytest_rc}"
fi
if [[ ${ruff_rc} -ne 0 ]]; then
  log "FAILED: tests passed but ruff check failed"
  exit 1
fi
log "OK: ruff check and pytest passed"
