"""Fixtures for the export tests (builders live in ``tests.helpers.export_models``)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.export_models import parity_observations


@pytest.fixture(scope="session")
def parity_obs() -> np.ndarray:
    """1000 (N, D) observations: half a smooth 'trajectory', half wide random."""
    return parity_observations()
