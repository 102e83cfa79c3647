"""dockershim's exec Status on the error channel (what client-go, kubectl and the JavaScript client read an exit
code from): worded as containerd's CRI, the argv printed as Go prints a []string."""

from __future__ import annotations

from dockershim.streaming import exec_status


def test_exit_codes_and_errors() -> None:
    assert exec_status(0, ["true"]) == {"metadata": {}, "status": "Success"}
    assert exec_status(None, ["true"]) == {"metadata": {}, "status": "Success"}
    assert exec_status(3, ["sh", "-c", "echo out; exit 3"]) == {
        "metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
        "message": "command terminated with non-zero exit code: error executing command [sh -c echo out; exit 3], "
                   "exit code 3",
        "details": {"causes": [{"reason": "ExitCode", "message": "3"}]}}
    assert exec_status(None, ["nope"], "exec failed: no such file") == {
        "metadata": {}, "status": "Failure", "message": "exec failed: no such file", "reason": "InternalError",
        "code": 500}
