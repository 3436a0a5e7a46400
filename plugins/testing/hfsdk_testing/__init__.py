"""hfsdk's test helpers, for plugin authors' tests and this repository's (as pytest ships
``pytester``): a test-time dependency, never imported by a plugin's own code.

- :mod:`.fakes`: :class:`FakeRun` runs an algorithm's ``step()`` in milliseconds against
  fake roles that offer only their kind's operations and record every call;
- :mod:`.models`: tiny random Llama models and the transformers-only references engine
  tests compare against;
- :mod:`.runs`: two runs of one config are bitwise identical;
- :mod:`.cli`: the CLI's one-line refusal of bad input;
- :mod:`.rng`: which generators a seeded block forks, with a CUDA device faked.

    from hfsdk_testing import FakeRun

    run = FakeRun.for_algorithm("grpo", rewards=[1.0, 0.0, 1.0, 0.0])
    metrics = run.step()
    assert run.calls_of("actor")[0].method == "generate_sequences"
"""

from hfsdk_testing.cli import alias_bomb, assert_refused_in_one_line
from hfsdk_testing.fakes import (
    OPERATIONS,
    PROMPT_WIDTH,
    RESPONSE_WIDTH,
    Call,
    FakeFuture,
    FakeMethod,
    FakeRole,
    FakeRun,
    FakeSignal,
    fake_prompts,
)
from hfsdk_testing.models import hf_greedy_responses, hf_sequence_scores, save_tiny_llama
from hfsdk_testing.rng import RngForked, record_rng_forks
from hfsdk_testing.runs import (
    SMALL_GRPO,
    TIMED_METRIC_PREFIXES,
    assert_runs_identical,
    untimed_metrics,
)

__all__ = [
    "OPERATIONS",
    "PROMPT_WIDTH",
    "RESPONSE_WIDTH",
    "SMALL_GRPO",
    "TIMED_METRIC_PREFIXES",
    "Call",
    "FakeFuture",
    "FakeMethod",
    "FakeRole",
    "FakeRun",
    "FakeSignal",
    "RngForked",
    "alias_bomb",
    "assert_refused_in_one_line",
    "assert_runs_identical",
    "fake_prompts",
    "hf_greedy_responses",
    "hf_sequence_scores",
    "record_rng_forks",
    "save_tiny_llama",
    "untimed_metrics",
]
