"""The shared test harness: what the tests would otherwise copy.

- :mod:`tests.harness.wait`: ``eventually``, the one bounded polling wait;
- :mod:`tests.harness.api`: CRDs built once, in-process servers, clients,
  giving a shared server back clean, and ``World``, the test's view of the
  API;
- :mod:`tests.harness.fixtures`: the pytest fixtures (``api_server``,
  ``ns``, ``client``, ``server_process``) -- one server per module or one
  per test -- and the loop-scope rule for async fixtures;
- :mod:`tests.harness.controllers`: running controllers and managers for
  the length of a block, stopped even when the test fails;
- :mod:`tests.harness.baremetal`: the BareMetalHost controller's fast
  settings and the fixture provisioner;
- :mod:`tests.harness.http`: a raw HTTP client for exact requests;
- :mod:`tests.harness.process`: the server as its own process;
- :mod:`tests.harness.manifests`: the user CRD (widgets) some tests apply.
"""
