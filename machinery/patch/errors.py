"""The error every patch function raises (upstream's strategicpatch and json-patch return Go errors the
apiserver's patch handler turns into a 400 or 422 Status; here the error carries that code and reason)."""

from __future__ import annotations


class PatchError(ValueError):
    """A patch that cannot be applied; `code`/`reason` say which Status the apiserver returns."""

    code: int = 400
    reason: str = "BadRequest"

    def __init__(self, message: str, *, code: int | None = None, reason: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        if reason is not None:
            self.reason = reason


def invalid(message: str) -> PatchError:
    """An error upstream reports as 422 (json-patch application failures, lists of lists)."""
    return PatchError(message, code=422, reason="Invalid")
