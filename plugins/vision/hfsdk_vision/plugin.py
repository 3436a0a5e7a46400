"""Hook implementations of the vision plugin."""

from __future__ import annotations

import hfsdk
from hfsdk import Register


@hfsdk.hookimpl
def hfsdk_register_reward_functions(register: Register) -> None:
    """Register ``shapes``: 1.0 where the response names the largest shape's colour."""
    from hfsdk_vision import shapes

    register(shapes.REWARD_FUNCTION_NAME, shapes.shapes_reward)


@hfsdk.hookimpl
def hfsdk_register_model_inputs(register: Register) -> None:
    """Register ``qwen2_vl_images``: rows with images through a Qwen2-VL-family forward."""
    from hfsdk_vision.forward_inputs import NAME, Qwen2VLImages

    register(NAME, Qwen2VLImages())


@hfsdk.hookimpl
def hfsdk_register_rollout_backends(register: Register) -> None:
    """Register ``hf_vision``: generation from image prompts with the actor's own module."""
    from hfsdk_vision.rollout import BACKEND, VisionRollout, VisionRolloutConfig

    register(BACKEND, VisionRollout, config_cls=VisionRolloutConfig)


@hfsdk.hookimpl
def hfsdk_register_preflight_checks(register: Register) -> None:
    """Register ``images`` (image prompts need ``rollout.backend=hf_vision``; images decode)
    and ``vision_backend`` (image runs train on ``fsdp``)."""
    from hfsdk_vision.preflight import BACKEND_CHECK_NAME, NAME, backend_check, images_check

    register(NAME, images_check)
    register(BACKEND_CHECK_NAME, backend_check)


# optionalhook: the migration plugin adds this hook; without it the rest of vision still loads.
@hfsdk.hookimpl(optionalhook=True)
def hfsdk_register_prompt_describers(register: Register) -> None:
    """Register ``images`` (``hfsdk data inspect``: image and image-token counts)."""
    from hfsdk_vision.inspection import NAME, describe_images

    register(NAME, describe_images)


@hfsdk.hookimpl
def hfsdk_register_tasks(register: Register) -> None:
    """Register ``shapes`` (``--task shapes``: a tiny VLM names the largest shape's colour)."""
    from hfsdk_vision.shapes_task import TASK_NAME, shapes_task

    task = shapes_task()
    register(TASK_NAME, task, doc=task.summary)
