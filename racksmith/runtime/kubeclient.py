"""Building a kubernetes_asyncio ``ApiClient``: the only module that touches
kubernetes_asyncio's configuration loading.

Called by the composition root; everything else receives the ``ApiClient``.

Every client built here reads the proxy environment (``HTTPS_PROXY``,
``NO_PROXY``, ...) once, when it is built, and sets the proxy it names for the
API server explicitly; its HTTP session then no longer looks the environment
and ``~/.netrc`` up again on each request (aiohttp's ``trust_env``, which
kubernetes_asyncio turns on, does both in the thread pool for every request:
two thread hand-offs per API call, measured as a fifth of an IPAM claimer's
CPU). An API server is authenticated by token or certificate, never netrc.
"""

from __future__ import annotations

import os
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.config import incluster_config, kube_config

from racksmith.redact import register_secret

READ_BUFSIZE = 2**21
"""kubernetes_asyncio's read buffer (a watch event of a large object)."""


async def api_client_from_kubeconfig(
    path: str | Path | None = None, *, context: str | None = None
) -> ApiClient:
    """An ``ApiClient`` for ``path`` (None: ``$KUBECONFIG`` or ``~/.kube/config``)
    and ``context`` (None: the current context). Close it with ``await client.close()``.
    """
    client = await kube_config.new_client_from_config(
        config_file=str(path) if path is not None else None,
        context=context,
        persist_config=False,
    )
    _register_credentials(client)
    resolve_proxy_once(client)
    return client


def resolve_proxy_once(client: ApiClient) -> None:
    """Set the environment's proxy for the API server (if any applies and none
    is configured) and stop the per-request environment and netrc lookups;
    see the module doc."""
    conf = client.configuration
    rest = client.rest_client
    if not conf.proxy:
        url = urlsplit(str(conf.host))
        proxies = urllib.request.getproxies()
        proxy = proxies.get(url.scheme or "https")
        if proxy and not urllib.request.proxy_bypass(url.hostname or ""):
            conf.proxy = proxy
            rest.proxy = proxy
    # aiohttp sets trust_env once, at the session's making: a session of our
    # own takes the same connector (its TLS context and pool) over.
    made = rest.pool_manager
    if made.trust_env:
        rest.pool_manager = aiohttp.ClientSession(connector=made.connector, trust_env=False,
                                                  read_bufsize=READ_BUFSIZE)
        made.detach()


def _register_credentials(client: ApiClient) -> None:
    """The client's token (and password) never appear in a log line (racksmith.redact)."""
    conf = client.configuration
    for value in (getattr(conf, "api_key", None) or {}).values():
        if isinstance(value, str):
            register_secret(value.removeprefix("Bearer ").strip())
    register_secret(getattr(conf, "password", None))


def api_client_with_token(server: str, token: str, ca_file: Path | None) -> ApiClient:
    """An ``ApiClient`` for ``server`` with a bearer ``token`` (renewable: set
    ``configuration.api_key["BearerToken"]``), trusting the CA in ``ca_file``
    (None: the system's)."""
    configuration = Configuration(host=server.rstrip("/"))
    configuration.api_key = {"BearerToken": token}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    if ca_file is not None:
        configuration.ssl_ca_cert = str(ca_file)
    register_secret(token)
    client = ApiClient(configuration=configuration)
    resolve_proxy_once(client)
    return client


def api_client_with_certificate(server: str, ca_file: Path, cert_file: Path | None,
                                key_file: Path | None) -> ApiClient:
    """An ``ApiClient`` for ``server`` trusting the CA in ``ca_file``,
    authenticated by the client certificate in ``cert_file``/``key_file``
    (None: anonymous, for a probe of a public path such as ``/readyz``)."""
    configuration = Configuration(host=server.rstrip("/"))
    configuration.ssl_ca_cert = str(ca_file)
    if cert_file is not None and key_file is not None:
        configuration.cert_file = str(cert_file)
        configuration.key_file = str(key_file)
    client = ApiClient(configuration=configuration)
    resolve_proxy_once(client)
    return client


def api_client_in_cluster() -> ApiClient:
    """An ``ApiClient`` from the pod's service account (when run as a Deployment)."""
    configuration = Configuration()
    incluster_config.load_incluster_config(client_configuration=configuration)
    client = ApiClient(configuration=configuration)
    _register_credentials(client)
    resolve_proxy_once(client)
    return client


async def api_client(kubeconfig: str | Path | None = None) -> ApiClient:
    """In-cluster config when running in a pod and no kubeconfig is given,
    else the kubeconfig."""
    if kubeconfig is None and os.environ.get(incluster_config.SERVICE_HOST_ENV_NAME):
        return api_client_in_cluster()
    return await api_client_from_kubeconfig(kubeconfig)
