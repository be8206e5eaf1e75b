"""The host agent (``racksmith agent``): applies a machine's LCMMachine state items.

Runs on every machine of a cluster (on emulated hosts: as a process the
virtual datacenter starts, with ``--emulated --root``). Parts, one owner
each: ``config`` (agent.yaml), ``host`` (the Host seam: real or emulated),
``executors`` (file, package, service, command, kubeadm), ``kubeadm`` (the
kubeadm config file), ``kube`` (every API call), ``loop`` (the reconcile
loop and status reports), ``kubelet`` (the emulated kubelet), ``storage``
(the Volume storage tasks: prepare/unprepare jobs of its node) and ``main``
(``run_agent``, the composition root). It talks to the API only through
the Kubernetes protocol and never imports the API server, the app, the
controllers, the provisioners or the emulator.
"""

from racksmith.agent.main import AGENT_VERSION, run_agent

__all__ = ["AGENT_VERSION", "run_agent"]
