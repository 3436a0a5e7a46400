"""Build this rank's megatron-core GPT shard from an HF model shape, and set up parallel state.

One process holds one (tp, pp, dp) position; megatron-core keeps its groups
in module-global ``parallel_state``, so every megatron role in a process
(fused colocation) must share one layout.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from hfsdk import HfsdkError
from hfsdk_backend_megatron.arch import ModelShape
from hfsdk_backend_megatron.convert import Head


def init_parallel_state(tp: int, pp: int) -> tuple[int, int, int]:
    """Initialise (or reuse) megatron-core's groups for (tp, pp); returns ``(tp, pp, dp)``.

    torch.distributed must be initialised (a single process gets a
    one-rank gloo group here). A process that already holds another layout
    is refused: megatron-core's parallel state is global to the process.
    """
    import torch.distributed as dist
    from megatron.core import parallel_state as mpu

    if not dist.is_initialized():
        import os

        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(_free_port()))
        dist.init_process_group("gloo", rank=0, world_size=1)
    world = dist.get_world_size()
    if world % (tp * pp):
        raise HfsdkError(
            f"tp={tp} x pp={pp} does not divide the {world} ranks of this group; choose "
            "tp·pp dividing the number of devices"
        )
    if mpu.model_parallel_is_initialized():
        have = (
            mpu.get_tensor_model_parallel_world_size(),
            mpu.get_pipeline_model_parallel_world_size(),
        )
        if have != (tp, pp):
            raise HfsdkError(
                f"this process already runs megatron roles at (tp, pp)={have}, not ({tp}, {pp}); "
                "megatron roles fused into one process must share one layout — give them the "
                "same parallel settings or put them on separate pools"
            )
    else:
        mpu.initialize_model_parallel(
            tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp
        )
    from megatron.core.tensor_parallel import model_parallel_cuda_manual_seed

    if torch.cuda.is_available():
        model_parallel_cuda_manual_seed(1234)
    return tp, pp, world // (tp * pp)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ScalarHead(torch.nn.Module):
    """A one-output linear head (value or score), replicated on every tensor-parallel rank.

    Called like megatron's output layer: ``head(hidden, weight=None,
    runtime_gather_output=None) -> (out, None)``. ``dtype`` is the model's: a
    frozen bfloat16 scorer's hidden states are bfloat16, and the fsdp backend
    loads such a model's score head in bfloat16 too.
    """

    def __init__(
        self, hidden_size: int, bias: bool, std: float, dtype: torch.dtype = torch.float32
    ) -> None:
        super().__init__()
        # Drawn in float32 then cast, so a float32 head's initial weights are unchanged.
        weight = torch.empty(1, hidden_size).normal_(0.0, std).to(dtype)
        self.weight = torch.nn.Parameter(weight)
        self.bias = torch.nn.Parameter(torch.zeros(1, dtype=dtype)) if bias else None

    def forward(
        self, hidden: torch.Tensor, weight: Any = None, runtime_gather_output: Any = None
    ) -> tuple[torch.Tensor, None]:
        """``[s, b, h] -> [s, b, 1]`` in the head's dtype (the engine reads it as float32)."""
        return F.linear(hidden, self.weight, self.bias), None


def transformer_config(
    shape: ModelShape,
    tp: int,
    pp: int,
    dtype: torch.dtype,
    sequence_parallel: bool,
    recompute: bool = False,
) -> Any:
    """megatron-core's ``TransformerConfig`` for ``shape`` at (tp, pp).

    ``recompute``: full activation recompute of every layer (each layer's input
    is kept; its inside is recomputed in backward), megatron-core's own
    ``tensor_parallel.checkpoint`` with its RNG-state tracking.
    """
    from megatron.core.transformer.transformer_config import TransformerConfig

    recompute_args: dict[str, Any] = {}
    # megatron-core's checkpoint saves and restores CUDA RNG states, so it needs a GPU;
    # elsewhere :func:`recompute_layers` does the same recompute with torch's checkpoint.
    if recompute and torch.cuda.is_available():
        recompute_args = {
            "recompute_granularity": "full",
            "recompute_method": "uniform",
            "recompute_num_layers": 1,
        }
    return TransformerConfig(
        **recompute_args,
        num_layers=shape.num_layers,
        hidden_size=shape.hidden_size,
        num_attention_heads=shape.num_heads,
        num_query_groups=shape.num_kv_heads,
        kv_channels=shape.head_dim,
        ffn_hidden_size=shape.ffn_hidden_size,
        normalization="RMSNorm",
        layernorm_epsilon=shape.norm_eps,
        gated_linear_unit=True,
        activation_func=F.silu,
        add_bias_linear=False,
        add_qkv_bias=shape.qkv_bias,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        tensor_model_parallel_size=tp,
        pipeline_model_parallel_size=pp,
        sequence_parallel=sequence_parallel,
        use_cpu_initialization=True,
        perform_initialization=False,
        params_dtype=dtype,
        pipeline_dtype=dtype,
        bf16=dtype == torch.bfloat16,
        bias_activation_fusion=False,
        bias_dropout_fusion=False,
        masked_softmax_fusion=False,
        apply_rope_fusion=False,
        gradient_accumulation_fusion=False,
        persist_layer_norm=False,
        init_method_std=shape.initializer_range,
    )


def layer_spec(device: torch.device) -> Any:
    """The local GPT layer spec; on CPU its core attention is :class:`SDPACoreAttention`."""
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec

    spec = get_gpt_layer_local_spec(normalization="RMSNorm")
    if device.type != "cuda":
        from hfsdk_backend_megatron.sdpa_attention import SDPACoreAttention

        spec.submodules.self_attention.submodules.core_attention = SDPACoreAttention
    return spec


def build_gpt(
    shape: ModelShape,
    *,
    head: Head,
    dtype: torch.dtype,
    device: torch.device,
    sequence_parallel: bool = False,
    score_bias: bool = False,
    recompute: bool = False,
    pad_token_id: int | None = None,
) -> torch.nn.Module:
    """This rank's GPTModel shard (empty weights; load them with :func:`load_shard`).

    ``recompute`` turns on activation recompute: megatron-core's own on CUDA
    (see :func:`transformer_config`), :func:`recompute_layers` elsewhere.
    ``pad_token_id``: the embedding lookup sends that row no gradient, as
    transformers' ``padding_idx`` does (see :func:`cut_pad_gradient`).
    """
    from megatron.core import parallel_state as mpu
    from megatron.core.models.gpt import GPTModel

    tp = mpu.get_tensor_model_parallel_world_size()
    pp = mpu.get_pipeline_model_parallel_world_size()
    config = transformer_config(shape, tp, pp, dtype, sequence_parallel, recompute)
    model = GPTModel(
        config=config,
        transformer_layer_spec=layer_spec(device),
        vocab_size=shape.padded_vocab(tp),
        max_sequence_length=shape.max_positions,
        pre_process=mpu.is_pipeline_first_stage(),
        post_process=mpu.is_pipeline_last_stage(),
        parallel_output=True,
        # At pp > 1 the last stage's copy of a tied embedding is a plain parameter here:
        # megatron-core's own tying moves it to CUDA; the engine sums the two gradients.
        share_embeddings_and_output_weights=shape.tie_embeddings and head == "lm" and pp == 1,
        position_embedding_type="rope",
        rotary_base=int(shape.rope_theta),
    )
    if head != "lm" and mpu.is_pipeline_last_stage():
        model.output_layer = ScalarHead(
            shape.hidden_size, score_bias, shape.initializer_range, dtype=dtype
        )
    if pad_token_id is not None and mpu.is_pipeline_first_stage():
        cut_pad_gradient(model.embedding.word_embeddings, pad_token_id)
    if recompute and not torch.cuda.is_available():
        recompute_layers(model)
    return model.to(device)


def cut_pad_gradient(embedding: torch.nn.Module, pad_token_id: int) -> None:
    """Make ``embedding``'s lookup send no gradient to the ``pad_token_id`` row (forward unchanged).

    transformers builds its input embedding with ``padding_idx=config.pad_token_id``;
    megatron-core's ``VocabParallelEmbedding`` has no such option. Without this, a pad
    id sampled into a response trains that row here but not under fsdp, and gradient
    clipping then moves every other weight differently. A tied output layer still
    trains the row, as in transformers. The hook sees the tp-reduced output, laid
    out ``[b, s, h]`` like its input ids ``[b, s]``.
    """

    def hook(module: torch.nn.Module, args: tuple[Any, ...], output: torch.Tensor) -> Any:
        if not (torch.is_grad_enabled() and output.requires_grad):
            return None  # inference or a frozen model: nothing to cut
        is_pad = args[0] == pad_token_id
        if is_pad.shape != output.shape[:-1]:
            raise HfsdkError(
                f"the embedding output has shape {tuple(output.shape)}, not [b, s, h] for input "
                f"ids {tuple(is_pad.shape)}; the pad-row gradient cut needs sequence_parallel off"
            )
        return torch.where(is_pad.unsqueeze(-1), output.detach(), output)

    embedding.register_forward_hook(hook)


def recompute_layers(model: torch.nn.Module) -> None:
    """Recompute each transformer layer in backward (torch's non-reentrant checkpoint).

    The same granularity as megatron-core's ``full``/``uniform``/1 recompute:
    only a layer's inputs are kept from the forward. Without dropout (the
    builder sets none) the recomputed forward is the same computation, so no
    RNG state needs restoring — which is why this works without CUDA.
    Inference (no grad, or eval mode) runs the layers as they are.
    """
    import functools

    from torch.utils.checkpoint import checkpoint

    for layer in model.decoder.layers:
        plain = layer.forward

        def forward(*args: Any, _plain: Any = plain, _layer: Any = layer, **kwargs: Any) -> Any:
            if not (_layer.training and torch.is_grad_enabled()):
                return _plain(*args, **kwargs)
            return checkpoint(_plain, *args, use_reentrant=False, **kwargs)

        layer.forward = functools.wraps(plain)(forward)


def load_shard(model: torch.nn.Module, shard: dict[str, torch.Tensor]) -> None:
    """Copy a converter shard into ``model``'s parameters (every parameter must be given)."""
    params = dict(model.named_parameters())
    missing = sorted(set(params) - set(shard))
    unknown = sorted(set(shard) - set(params))
    if missing or unknown:
        raise HfsdkError(
            f"megatron shard does not match the model: missing {missing[:4]}, unexpected "
            f"{unknown[:4]}; the checkpoint was made for another model shape or head"
        )
    with torch.no_grad():
        for name, param in params.items():
            value = shard[name]
            if value.shape != param.shape:
                raise HfsdkError(
                    f"megatron parameter {name} has shape {tuple(param.shape)} but the "
                    f"converted weight has {tuple(value.shape)}"
                )
            param.copy_(value.to(param.dtype))
