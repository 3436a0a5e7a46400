"""Multi-turn with images: a tool returns an image, the next turn sees it, training scores it.

The agent loop runs on ``hf_vision`` through the agents plugin's ``ImageTurns`` seam: the
prompt's image and the tool's image are both in the trajectory's tokens and images, the tool's
image tokens are context (loss mask 0), the image-token invariant holds on the assembled batch,
and the actor's recomputed log-probs of the model's tokens equal the sampler's.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch
from PIL import Image

import hfsdk
from hfsdk import Batch, DataConfig, HfsdkError, build_rollout, load_run_config
from hfsdk.core.plugin_manager import get_plugin_manager, reset_plugin_manager
from hfsdk.core.trainer.trainer import Trainer
from hfsdk_agents import AgentLoop, MultiTurnConfig, ParsedTurn, ToolCall, Trajectory
from hfsdk_agents.generate import AgentRollout
from hfsdk_agents.loops import AgentContext
from hfsdk_backend_fsdp.actor import ActorEngine
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_datasets import PromptLoader
from hfsdk_vision.rollout import VisionRolloutConfig
from hfsdk_vision.shapes import shapes_rows, write_parquet

ATOL = 2e-5  # as in test_rollout: cached decoding against one full forward, float32

COLOURS = {"red": (220, 30, 30), "blue": (30, 30, 220)}


def draw(colour: str) -> Image.Image:
    """A 56 px square of one colour.

    Args:
        colour: red or blue.
    """
    return Image.new("RGB", (56, 56), COLOURS[colour])


class LookTwice(AgentLoop):
    """Turn 1, then a ``draw`` call whatever the model said, then a turn after it; with
    ``uneven``, data-parallel rank 0 draws and answers twice (ranks then take different
    numbers of turns and hold different numbers of images)."""

    async def run(
        self, prompt_ids: tuple[int, ...], row: Mapping[str, Any], ctx: AgentContext, *, seed: int
    ) -> Trajectory:
        rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
        rounds = 2 if self.loop_args.get("uneven") and rank == 0 else 1
        trajectory = ctx.new_trajectory(prompt_ids, row)
        await ctx.model_turn(trajectory, seed=seed)
        for turn in range(rounds):
            call = ToolCall(name="draw", arguments={"colour": "red"})
            outputs = await ctx.run_tools(ParsedTurn(calls=(call,)))
            if not ctx.add_tool_turn(trajectory, outputs):
                return trajectory
            await ctx.model_turn(trajectory, seed=seed + 1 + turn)
        trajectory.finish = "stop"
        return trajectory


@pytest.fixture(scope="module")
def actor(vlm_dir: Path) -> ActorEngine:
    return ActorEngine(
        FSDPRoleConfig(model_path=str(vlm_dir), mini_batch_size=6, micro_batch_size=6),
        role="actor",
    )


def _prompts(actor: ActorEngine, count: int) -> Batch:
    loader = PromptLoader(
        shapes_rows(count, seed=1), actor.tokenizer, DataConfig(batch_size=count), seed=0
    )
    return loader.next_batch()


def _agents(actor: ActorEngine, budget: int, **loop_args: Any) -> AgentRollout:
    rollout = build_rollout(VisionRolloutConfig(max_response_length=4, temperature=1.0), actor)
    config = MultiTurnConfig(tools=(draw,), max_turns=2, max_response_tokens=budget)
    agents = AgentRollout(rollout, config)
    agents.loop = LookTwice(**loop_args)
    return agents


def test_a_tools_image_reaches_the_next_turn_and_training_scores_what_was_sampled(
    actor: ActorEngine,
) -> None:
    agents = _agents(actor, budget=24)
    prompts = _prompts(actor, count=3)
    prompts.meta["n"] = 2
    torch.manual_seed(0)
    out = agents.generate(prompts)
    assert len(out) == 6
    assert out["images_per_row"].tolist() == [2] * 6  # the prompt's image, then the tool's
    image_id = actor.module.config.image_token_id
    responses, mask = out["responses"], out["response_mask"]
    tool_image_tokens = (responses == image_id).sum(dim=1)
    assert tool_image_tokens.tolist() == [4] * 6  # a 56 px image: 4 features
    assert not mask[responses == image_id].any()  # context, never trained on
    for row in out["agent_trajectory"]:
        assert [s["role"] for s in row["segments"]] == ["assistant", "tool", "assistant"]
        assert row["segments"][1]["tool_results"][0]["images"] == 1
    # The actor recomputes what the sampler saw: both images, multimodal positions.
    old = actor.compute_log_prob(out)["old_log_probs"]
    torch.testing.assert_close(old * mask, out["rollout_log_probs"], atol=ATOL, rtol=0)
    # The second turn reads the tool's image: another image changes its log-probs.
    second_turn = mask.bool() & (
        torch.arange(mask.shape[1]) > responses.eq(image_id).int().argmax(1)[:, None]
    )
    blue = agents.rollout.with_images(
        out.index(torch.arange(len(out))),
        [[*row_images[:1], draw("blue")] for row_images in _images_of(out)],
    )
    changed = actor.compute_log_prob(blue)["old_log_probs"]
    assert (changed - old)[second_turn].abs().max() > 1e-3
    torch.testing.assert_close(changed[~second_turn], old[~second_turn], atol=ATOL, rtol=0)


def _images_of(out: Any) -> list[list[Any]]:
    """Each row's prompt image as the dataset item (the tool image is replaced by the caller)."""
    return [list(images) for images in out["images"]]


def test_a_tool_turn_over_the_budget_leaves_its_image_out(actor: ActorEngine) -> None:
    agents = _agents(actor, budget=6)  # turn 1 (up to 4) leaves no room for a 6-token image turn
    torch.manual_seed(1)
    out = agents.generate(_prompts(actor, count=2))
    assert out["images_per_row"].tolist() == [1, 1]
    assert not (out["responses"] == actor.module.config.image_token_id).any()
    assert [row["finish"] for row in out["agent_trajectory"]] == ["budget", "budget"]
    old = actor.compute_log_prob(out)["old_log_probs"]
    torch.testing.assert_close(
        old * out["response_mask"], out["rollout_log_probs"], atol=ATOL, rtol=0
    )


def test_an_image_from_a_tool_with_a_text_only_rollout_is_refused_in_one_line() -> None:
    from hfsdk_agents.tools import ToolOutput
    from hfsdk_agents.trajectory import PlainRenderer

    class NoTokenizer:
        def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
            return [1] * len(text)

    ctx = AgentContext(
        generate=None, tokenizer=NoTokenizer(), tools={}, parser=None,
        renderer=PlainRenderer(NoTokenizer()), config=MultiTurnConfig(), stop_token_ids=(),
    )  # fmt: skip
    output = ToolOutput(name="draw", content="", ok=True, images=(b"\x89PNG",))
    with pytest.raises(HfsdkError) as caught:
        ctx.add_tool_turn(Trajectory(prompt_ids=(1, 2)), [output])
    message = str(caught.value)
    assert "\n" not in message and "'draw' returned 1 image(s)" in message
    assert "rollout.backend=hf_vision" in message


class _Plugin:
    """Keeps each step's trained batch (in the controller)."""

    batches: ClassVar[list[Any]] = []

    @staticmethod
    @hfsdk.hookimpl
    def hfsdk_register_step_observers(register: Any) -> None:
        class Keep(hfsdk.StepObserver):
            def on_step_trained(self, view: Any) -> None:
                _Plugin.batches.append(view.algorithm.last_batch)

        register("keep_batches", lambda config, run_dir: Keep())


@pytest.fixture
def plugin() -> Any:
    reset_plugin_manager()
    _Plugin.batches = []
    get_plugin_manager().pm.register(_Plugin, name="image_tools_test")
    yield _Plugin
    reset_plugin_manager()


@pytest.mark.heavy  # two GRPO steps of 4 prompts x 4 two-turn trajectories: ~15 s, 2 ranks ~45 s
@pytest.mark.parametrize("devices", [1, 2])
def test_grpo_trains_on_trajectories_whose_tool_returned_an_image(
    plugin: Any, tmp_path: Path, vlm_dir: Path, devices: int
) -> None:
    # The tool and the loop by file path: Ray workers load them there (no registration).
    here = Path(__file__).resolve()
    train = write_parquet(shapes_rows(16, seed=0), tmp_path / "train.parquet")
    overrides = [
        f"actor.model_path={vlm_dir}",
        f"data.train_files=[{train}]",
        "data.batch_size=4",
        "algorithm.n_samples_per_prompt=4",
        "actor.mini_batch_size=16",
        "actor.micro_batch_size=8",
        "rollout.backend=hf_vision",
        "rollout.max_response_length=4",
        f"rollout.multi_turn.tools=[{here}:draw]",
        f"rollout.multi_turn.agent_loop={here}:LookTwice",
        "rollout.multi_turn.max_turns=3",
        "rollout.multi_turn.max_response_tokens=40",
        f"rollout.multi_turn.loop_args={{uneven: {str(devices > 1).lower()}}}",
        "reward.functions=[{name: shapes}]",
        "trainer.loggers=[jsonl]",
        "trainer.total_steps=2",
        f"placement.pools.global.devices={devices}",
        *(["trainer.executor=local"] if devices == 1 else []),
    ]
    rows = Trainer(load_run_config("grpo", None, overrides), tmp_path / "run", quiet=True).fit()
    assert len(rows) == 2 and len(plugin.batches) == 2
    # With two ranks, rank 0's rows drew twice: three images a row against two, and more turns
    # (generate calls) than rank 1 — its module is held for the step, and the image columns
    # are padded to the widest rank's, so the ranks' outputs concatenate.
    images = [2] * 16 if devices == 1 else [3] * 8 + [2] * 8
    for row, batch in zip(rows, plugin.batches, strict=True):
        # Each old/reference/actor forward saw every image where the sampler did.
        assert row["rollout/log_prob_diff_max"] < 1e-5
        assert row["agent/tool_calls_per_trajectory"] == (1.0 if devices == 1 else 1.5)
        assert sorted(batch["images_per_row"].tolist(), reverse=True) == images
        image = batch["responses"] == batch_image_token(vlm_dir)
        tool_images = batch["images_per_row"] - 1
        assert image.sum(dim=1).tolist() == (4 * tool_images).tolist()
        assert not batch["response_mask"][image].any()
    assert rows[1]["actor/kl"] > 0  # the first update moved the policy


def batch_image_token(model_dir: Path) -> int:
    from transformers import AutoConfig

    return int(AutoConfig.from_pretrained(str(model_dir)).image_token_id)
