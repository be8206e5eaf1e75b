"""CRD structural schemas: validation, defaulting, pruning, structural checks.

Owns the pure (no I/O) schema machinery the API server applies to custom
resources, in kube-apiserver's order: :func:`prune` unknown fields,
:func:`apply_defaults`, then :func:`validate`. :func:`check_structural`
vets a CRD's ``openAPIV3Schema`` itself. Each submodule documents what it
simplifies relative to Kubernetes.
"""

from racksmith.apiserver.schema.defaults import apply_defaults
from racksmith.apiserver.schema.formats import check_format
from racksmith.apiserver.schema.prune import prune
from racksmith.apiserver.schema.structural import check_structural
from racksmith.apiserver.schema.validate import validate

__all__ = ["apply_defaults", "check_format", "check_structural", "prune", "validate"]
