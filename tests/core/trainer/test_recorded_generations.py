"""``trainer.mode: train_only`` asks ``hfsdk_recorded_generations`` for its generations: with
no plugin implementing it the run is refused in one line, and a plugin that answers ``None``
leaves nothing silently generating."""

from __future__ import annotations

import types

import pytest

import hfsdk
from hfsdk.core.config import load_run_config
from hfsdk.core.errors import HfsdkError
from hfsdk.core.plugin_manager import get_plugin_manager, reset_plugin_manager
from hfsdk.core.trainer.preflight import RUN_RECORDS, check_features
from hfsdk.core.trainer.trainer import Trainer

TRAIN_ONLY = ["trainer.mode=train_only", "trainer.rollouts_from=/runs/r"]


@pytest.fixture
def no_record_plugins(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """The plugin manager with every plugin that implements the hook disabled."""
    reset_plugin_manager()
    hook = get_plugin_manager().hook.hfsdk_recorded_generations
    names = [impl.plugin_name for impl in hook.get_hookimpls()]
    monkeypatch.setenv("HFSDK_DISABLE_PLUGINS", ",".join(names))
    reset_plugin_manager()
    yield
    monkeypatch.delenv("HFSDK_DISABLE_PLUGINS")
    reset_plugin_manager()


def test_train_only_without_a_plugin_reading_records_is_one_line(no_record_plugins) -> None:  # type: ignore[no-untyped-def]
    assert not get_plugin_manager().hook.hfsdk_recorded_generations.get_hookimpls()
    with pytest.raises(HfsdkError) as info:
        check_features(load_run_config("grpo", None, TRAIN_ONLY))
    line = str(info.value)
    assert line.startswith(f"trainer.mode=train_only comes with {RUN_RECORDS}") and "\n" not in line


class _AnswersNone:
    @hfsdk.hookimpl
    def hfsdk_recorded_generations(self, config: object) -> None:
        return None


class _AnswersOne:
    source = object()

    @hfsdk.hookimpl
    def hfsdk_recorded_generations(self, config: object) -> object:
        return self.source


def _pipeline(config: object) -> object:
    return Trainer._build_pipeline(types.SimpleNamespace(config=config), None, None)  # type: ignore[arg-type]


def test_the_trainer_trains_from_what_the_hook_answers(no_record_plugins) -> None:  # type: ignore[no-untyped-def]
    config = load_run_config("grpo", None, TRAIN_ONLY)
    manager = get_plugin_manager().pm
    manager.register(_AnswersNone(), name="answers_none")
    check_features(config)  # a plugin implements it: the preflight lets it through
    with pytest.raises(HfsdkError, match=r"no plugin reads trainer\.rollouts_from='/runs/r'"):
        _pipeline(config)
    manager.register(_AnswersOne(), name="answers_one")
    assert _pipeline(config) is _AnswersOne.source
