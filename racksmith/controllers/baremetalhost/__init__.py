"""The BareMetalHost controller: Metal3's life cycle over a Provisioner.

Modules: ``states`` (the transition table and its diagram), ``handlers*``
(one per state; they propose), ``committer`` (applies, logs, counts,
emits Events), ``inventory`` (the BareMetalHostInventory write),
``controller`` (reconciler and runtime wiring), ``index`` (Secrets and
profiles → hosts, as indexes of the shared host informer), ``settings``,
``calls`` (the budgeted provisioner), ``provisioning`` (profile rendering
and requests). All API access goes through the runtime ``Client``. The
annotations it honours and its finalizer are ``racksmith.kinds.hostannotations``.
"""

from racksmith.controllers.baremetalhost.controller import (
    CONTROLLER_NAME,
    BareMetalHostReconciler,
    baremetalhost_controller,
)
from racksmith.controllers.baremetalhost.settings import BareMetalHostSettings
from racksmith.controllers.baremetalhost.states import TRANSITIONS, render_mermaid
from racksmith.kinds.hostannotations import FINALIZER

__all__ = [
    "CONTROLLER_NAME",
    "FINALIZER",
    "TRANSITIONS",
    "BareMetalHostReconciler",
    "BareMetalHostSettings",
    "baremetalhost_controller",
    "render_mermaid",
]
