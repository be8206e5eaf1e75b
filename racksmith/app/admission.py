"""The API server's admission checks for Racksmith's kinds.

Owns :func:`kind_admission`: the ``AdmissionCheck`` the composition root
(``runner``) gives the API server, which refuses a BareMetalHost breaking
Metal3's rules (``racksmith.kinds.metal3rules``) with 422 Invalid, every
violation a cause with its field path. It is the in-process counterpart of
BMO's validating webhook: the API server knows nothing of the kinds' rules,
the kinds know nothing of the API server, and this module joins them.
"""

from __future__ import annotations

from typing import Any

from racksmith.apiserver import errors
from racksmith.apiserver.errors import Cause
from racksmith.apiserver.registry import ResourceInfo
from racksmith.kinds.metal import BareMetalHost
from racksmith.kinds.metal3rules import host_violations

Obj = dict[str, Any]
_HOSTS = (BareMetalHost.info.group, BareMetalHost.info.plural)


def kind_admission(info: ResourceInfo, namespace: str, obj: Obj, old: Obj | None,
                   _user: object) -> None:
    """Refuse ``obj`` (over ``old``) when it breaks its kind's rules (422)."""
    if (info.group, info.plural) != _HOSTS:
        return
    violations = host_violations(obj, old, namespace)
    if violations:
        name = str((obj.get("metadata") or {}).get("name") or "")
        raise errors.invalid(info.kind, name, [Cause(path, f"Forbidden: {message}",
                                                     "FieldValueForbidden")
                                               for path, message in violations],
                             group=info.group)
