"""Racksmith's resource kinds, each declared once as typed pydantic models.

Per group: ``metal`` (+ ``hardware``, ``hostprofile``, and ``hostannotations``,
the names and predicates of a host's annotations), ``ipam``, ``cluster``,
``storage``, ``lcm`` and ``maintenance`` (both ``lcm.racksmith.io``). Shared
pieces live in ``base`` and ``common``; ``registry.ALL_KINDS`` lists the
catalogue; ``crdgen`` derives the CRD manifests and ``docgen`` the API
reference.
This package never imports ``racksmith.apiserver``.
"""
