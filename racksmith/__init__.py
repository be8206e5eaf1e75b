"""Racksmith: Kubernetes on bare metal, every object a Kubernetes resource."""

__version__ = "0.1.0"
