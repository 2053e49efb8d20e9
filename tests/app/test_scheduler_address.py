"""The sidebar's scheduler address: garbage, a closed port and a web server each give a message
on the page within 15 s; the session keeps working afterwards."""

from __future__ import annotations

import http.server
import threading
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

pytestmark = pytest.mark.dask
pytest.importorskip("distributed")

APP = str(Path(__file__).resolve().parents[2] / "analysis_core_dashboard" / "app.py")


@pytest.fixture(scope="module")
def web_server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_port
    srv.shutdown()


@pytest.mark.parametrize("kind", ["garbage", "closed port", "web server"])
def test_a_bad_scheduler_address_is_a_message_within_15_s(kind, web_server, free_port):
    address = {"garbage": "not an address", "closed port": f"tcp://127.0.0.1:{free_port}",
               "web server": f"tcp://127.0.0.1:{web_server}"}[kind]
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.radio(key="compute_mode").set_value("scheduler").run(timeout=60)
    at.text_input(key="compute_address").set_value(address)
    t0 = time.monotonic()
    at.run(timeout=60)
    took = time.monotonic() - t0
    assert not at.exception
    shown = [e.value for e in at.error]
    assert len(shown) == 1 and shown[0].startswith("**The Dask cluster could not be used.**"), shown
    assert address in shown[0] and "Traceback" not in shown[0]
    assert took < 15, took
    at.radio(key="compute_mode").set_value("process").run()
    assert not at.exception and not at.error and at.dataframe
