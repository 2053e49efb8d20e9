"""Names vulture (``python -m vulture``, settings in pyproject.toml ``[tool.vulture]``) reports as
unused but that are used from outside its view: by Python itself, by plotly, by tests and
benchmarks that call the public statistics directly, or by readers. One line per name, with why.
vulture reads this file; nothing imports it (``Store.computed`` is an instance attribute)."""

# bare names are the point: each one is "used" for vulture
# ruff: noqa: B018
from plotly.graph_objects import Histogram

import analysis_core
import analysis_core.stats
from analysis_core.engine.results import PassResult
from analysis_core.engine.topk import top_k
from analysis_core.evaluation import Evaluation
from analysis_core.metrics.registry import MetricSpec
from analysis_core.stats.class_mixed_model import class_mixed_model
from analysis_core.stats.mixed_model import mixed_model
from analysis_core.stats.paired_tests import paired_tests
from analysis_core.stats.permutation import sign_flip_p_values
from analysis_core.stats.run_mixed_model import RunMixedModelResult
from analysis_core_dashboard.jobs import Store
from analysis_core_dashboard.uploads import Ledger, dataset_bytes

analysis_core.__getattr__  # PEP 562: Python calls it for the lazily imported public names
analysis_core.__dir__  # PEP 562: dir(analysis_core) lists the lazy names too
analysis_core.stats.__getattr__  # PEP 562, as above

PassResult.replicate_n  # scored queries left per jackknife group: the pass's result, checked in test_replicates.py
top_k  # public API of the bench extra (README, extras.py), tested in tests/core/test_topk.py
MetricSpec.doc  # each metric's one-line definition, kept in the registry for its readers
# the upload budget's API for memory held outside a load (data kept server-side across a reload),
# tested in tests/app/test_upload_budget.py
dataset_bytes
Ledger.reserve

# the statistics on one long table, public and tested against their oracles (R's lme4, scipy); the
# report and analyse() reach the same arithmetic through fit objects and batched helpers
class_mixed_model  # tests/core/test_class_mixed_model.py (lme4), benchmarks/calibration*.py
mixed_model  # tests/core/test_mixed_model.py (lme4), tests/core/test_variability.py
paired_tests  # tests/core/test_variability.py, test_method_tests.py, test_edge_inputs2.py
sign_flip_p_values  # the test's definition for one matrix (sign_flip_p_values_many batches it); tests

Store.computed  # computations finished: read by tests/app/test_cache.py (what an interaction recomputed)
Store.background_running  # a page's background work: tests/app/conftest.py settle, benchmarks/bench_dashboard.py
Histogram().marker.color  # analysis_core_dashboard/views/ties.py sets it on a plotly trace: plotly reads it
Exception().__traceback__, Exception().__context__, Exception().__cause__  # jobs.py: a kept error drops frames

Evaluation.family_tests  # public API (SPEC §8, issue 27): the family comparisons frame, tests/core/test_runs.py
RunMixedModelResult.contrast  # public API: one family difference (lmerTest's contest1D), test_run_mixed_model.py
