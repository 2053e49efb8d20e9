"""Slider responsiveness on the demo many-class set: the wall time of a full page re-render
(Streamlit AppTest: script run + every element) after moving the class-count or group-size
slider, once the page has been opened (the first pass done and cached).

Usage: ``python benchmarks/bench_dashboard.py``."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "dashboard" / "app.py")


def main() -> None:
    at = AppTest.from_file(APP, default_timeout=300).run()
    at.radio(key="data_source").set_value("many_classes").run()
    at.switch_page("views/class_count.py").run()
    assert not at.exception
    for key, values in (("cc-classes", [50, 100, 200, 300, 450, 599, 600]), ("cc-group", [5, 8, 12, 20, 40, 60])):
        times = []
        for v in values:
            t = time.perf_counter()
            at.slider(key=key).set_value(v).run()
            times.append(time.perf_counter() - t)
            assert not at.exception
        print(f"{key}: re-render after a move, new values (not cached): median {statistics.median(times):.3f} s, "
              f"max {max(times):.3f} s over {len(times)} moves")
    t = time.perf_counter()
    at.slider(key="cc-classes").set_value(100).run()
    print(f"cc-classes back to a value seen before (cached): {time.perf_counter() - t:.3f} s")


if __name__ == "__main__":
    main()
