"""Shared helpers for the Python tests: fresh randomness each run, reported on failure."""

import os

import numpy as np
import pytest


@pytest.fixture
def rng(request):
    """A generator seeded freshly each run (override with TESSERA_TEST_SEED); the seed is
    printed so a failing run can be repeated."""
    seed = int(os.environ.get("TESSERA_TEST_SEED", np.random.SeedSequence().entropy % (2**32)))
    print(f"{request.node.name}: TESSERA_TEST_SEED={seed}")
    return np.random.default_rng(seed)
