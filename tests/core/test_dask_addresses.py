"""A Dask scheduler address that is garbage, closed, or not Dask: a ComputeError naming the
problem within 15 s (never a ValueError traceback, never a hang)."""

from __future__ import annotations

import http.server
import threading
import time

import pytest

pytestmark = pytest.mark.dask
pytest.importorskip("distributed")

from analysis_core.engine.distributed import DaskCompute  # noqa: E402
from analysis_core.errors import ComputeError  # noqa: E402


@pytest.fixture(scope="module")
def http_server():
    """A web server: accepts the connection and waits for an HTTP request that never comes."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"tcp://127.0.0.1:{srv.server_port}"
    srv.shutdown()


@pytest.mark.parametrize(("address", "says"), [
    ("not an address", "is not a Dask scheduler address"),
    ("tcp://", "is not a Dask scheduler address"),
    ("tcp://127.0.0.1:99999", "is not a Dask scheduler address"),
    ("http://127.0.0.1:8786", "is not a Dask scheduler address"),
    ("tcp://a host:8786", "is not a Dask scheduler address"),
])
def test_a_malformed_address_is_refused_at_once(address, says):
    t0 = time.monotonic()
    with pytest.raises(ComputeError, match=says) as err:
        DaskCompute(scheduler=address).start()
    assert time.monotonic() - t0 < 5
    assert "tcp://HOST:PORT" in str(err.value)


def test_a_closed_port_is_a_message_within_15_s(free_port):
    address = f"tcp://127.0.0.1:{free_port}"
    t0 = time.monotonic()
    with pytest.raises(ComputeError, match="cannot reach"):
        DaskCompute(scheduler=address).start()
    assert time.monotonic() - t0 < 15


def test_a_server_that_is_not_dask_is_a_message_within_15_s(http_server):
    t0 = time.monotonic()
    with pytest.raises(ComputeError, match="gave no Dask answer"):
        DaskCompute(scheduler=http_server).start()
    assert time.monotonic() - t0 < 15
