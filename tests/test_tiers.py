"""The suite's tiers and worker groups (tests/conftest.py) as pytest-xdist applies them."""
import pytest


def test_a_test_that_loads_the_model_here_runs_in_the_models_group(lm, request):
    """`make test` runs the slow tier with `--dist loadgroup`: each test's group must reach pytest-xdist, which names it
    in the test's id, or the model would load on both workers."""
    if not request.config.getvalue("loadgroup"):
        pytest.skip("run without --dist loadgroup: no worker groups")
    assert request.node.nodeid.endswith("@models")
