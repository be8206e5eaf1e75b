"""Exceptions raised by the patch and apply functions.

Owns: :class:`PatchError` (a bad patch: ``code`` 400 for a patch that cannot
be decoded, 422 for one that is well-formed but does not apply, as
kube-apiserver answers), :class:`PatchTestFailed` (a JSON patch ``test`` op
failed: 422) and :class:`ApplyConflict` (server-side apply conflicts: 409
``Conflict`` with one ``FieldManagerConflict`` cause per field).
"""

from __future__ import annotations

from racksmith.apiserver.errors import Cause


class PatchError(ValueError):
    """A patch the server rejects; ``code`` is the HTTP status to answer."""

    def __init__(self, message: str, code: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class PatchTestFailed(PatchError):
    """A JSON patch ``test`` operation did not hold (422)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, 422)


class ApplyConflict(Exception):
    """Server-side apply would change fields owned by other managers.

    ``conflicts`` lists ``(field path, manager)`` with kube's path syntax
    (``.spec.replicas``, ``.spec.containers[name="app"].image``);
    ``api_versions`` gives each conflicting manager's apiVersion for the
    message (``conflict with "kubectl" using apps/v1``).
    """

    def __init__(self, conflicts: list[tuple[str, str]],
                 api_versions: dict[str, str] | None = None) -> None:
        self.conflicts = conflicts
        self.api_versions = api_versions or {}
        super().__init__(self.message)

    def _with(self, manager: str) -> str:
        version = self.api_versions.get(manager, "")
        return f'conflict with "{manager}"' + (f" using {version}" if version else "")

    @property
    def message(self) -> str:
        n = len(self.conflicts)
        head = f"Apply failed with {n} conflict{'s' if n != 1 else ''}: "
        if n == 1:
            path, manager = self.conflicts[0]
            return head + f"{self._with(manager)}: {path}"
        lines = [f"{self._with(m)}: {p}" for p, m in self.conflicts]
        return head + "\n".join(lines)

    def causes(self) -> list[Cause]:
        """``details.causes`` for the 409 Status (reason ``FieldManagerConflict``)."""
        return [Cause(path, self._with(manager), "FieldManagerConflict")
                for path, manager in self.conflicts]
