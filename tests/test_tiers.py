"""The suite's tiers and worker groups (tests/conftest.py) as pytest-xdist applies them."""
import pytest


@pytest.mark.ray
def test_a_ray_test_runs_in_the_ray_group(request):
    """`make test` runs the slow tier with `--dist loadgroup`, every Ray test in one group, on one worker: the group must
    reach pytest-xdist, which names it in the test's id (pytest 9.2 dropped it without a word). Marked as the Ray tests
    are, this one starts no cluster."""
    if not getattr(request.config.option, "loadgroup", False):  # set on pytest-xdist's workers
        pytest.skip("run without --dist loadgroup: no worker groups")
    assert request.node.nodeid.endswith("@ray")
