"""A managed cluster's control plane, as data: pure, no API I/O.

Owns what every place that builds or reaches a cluster's control plane
shares, so the virtual datacenter and real hosts (kubeadm, keepalived,
HAProxy) render from one source:

* :mod:`.pki` — the cluster's certificate authorities and service-account
  key pair in kubeadm's layout, as Cluster API's Secrets
  (``<cluster>-ca``, ``-etcd``, ``-proxy``, ``-sa``), and the certificates
  issued from them;
* :mod:`.endpoint` — where the cluster's API is reached
  (``status.controlPlaneEndpoint``) and whether its VIP is sound (inside a
  control-plane network, not another cluster's);
* :mod:`.kubeconfig` — the admin kubeconfig (``<cluster>-kubeconfig``, key
  ``value``), for people;
* :mod:`.haproxy` — the proxy in front of every control-plane API server;
* :mod:`.vrrp` — keepalived's VRRP router ids and configuration of the VIP.

Called by the Cluster controller (which writes the Secrets and the status)
and by the CLI (``racksmith kubeconfig --cluster``).
"""
