"""The IpamHost and L2Template controllers: each machine's network, rendered.

Modules: ``host`` (the IpamHost reconciler: template, subnets, addresses,
netplan, status, finalizer), ``template`` (the L2Template reconciler:
validity and change confirmation), ``selection`` (which template a host
renders; the confirmation rule), ``addresses`` (reuse, claim, release one
host's IPaddrs), ``layout`` (l3Layout → Subnets), ``sample`` (a template
rendered for a sample host), ``status`` (status and conditions, pure),
``index`` (which hosts an event concerns), ``kube`` (API access),
``timings`` (the IpamHost controller's waits), ``names``.
The contracts are in ``docs/design/cluster-contracts.md``.
"""

from racksmith.controllers.ipamhost.host import (
    IpamHostReconciler,
    ipamhost_controller,
)
from racksmith.controllers.ipamhost.names import (
    CONFIRM_GENERATION,
    FINALIZER,
    INTERFACE_LABEL,
    IPAMHOST_LABEL,
    RENDERED_GENERATION,
)
from racksmith.controllers.ipamhost.template import (
    L2TemplateReconciler,
    l2template_controller,
)
from racksmith.controllers.ipamhost.timings import IpamHostTimings

__all__ = [
    "CONFIRM_GENERATION",
    "FINALIZER",
    "INTERFACE_LABEL",
    "IPAMHOST_LABEL",
    "RENDERED_GENERATION",
    "IpamHostReconciler",
    "IpamHostTimings",
    "L2TemplateReconciler",
    "ipamhost_controller",
    "l2template_controller",
]
