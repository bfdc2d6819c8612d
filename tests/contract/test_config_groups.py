"""``edgerl.contract.config_groups``: settings named by their own names find their group."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from edgerl.contract.config_groups import build, change, setting_names


@dataclass(frozen=True)
class _Retry:
    tries: int = 3
    pause_s: float = 0.5


@dataclass(frozen=True)
class _Limits:
    max_rows: int = 16
    pause_s: float = 1.0


@dataclass(frozen=True)
class _Config:
    host: str
    retry: _Retry = _Retry()
    limits: _Limits = field(default_factory=_Limits)
    tries: int = 9  # a top-level name wins over a group's


def test_build_and_change_route_each_name_to_its_group():
    cfg = build(_Config, host="h", max_rows=4)
    assert cfg == _Config(host="h", limits=_Limits(max_rows=4))
    assert change(cfg, tries=1).tries == 1 and cfg.retry.tries == 3
    assert setting_names(_Config) == {"host", "tries", "max_rows", "pause_s"}
    assert change(cfg, limits=_Limits(max_rows=2), max_rows=3).limits.max_rows == 3


def test_a_name_two_groups_share_or_nobody_holds_is_refused():
    with pytest.raises(TypeError, match="pause_s"):
        build(_Config, host="h", pause_s=1.0)
    with pytest.raises(TypeError, match="bogus"):
        change(_Config(host="h"), bogus=1)
