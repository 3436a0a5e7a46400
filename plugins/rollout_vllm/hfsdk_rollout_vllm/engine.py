"""The vLLM engine of one actor rank: built once in this process, reloaded in place.

Three facts of vLLM 0.32 shape this module:

* ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` keeps the engine core in the calling
  process (a Ray actor here), so it shares the actor's device and memory and
  ``collective_rpc`` calls reach the model directly (no pickling of weights).
* On CPU, vLLM repacks linear weights into its kernels' layout after loading,
  so ``model.load_weights`` on a running engine writes into the wrong layout.
  The worker's ``reload_weights`` does it properly: it restores each layer's
  checkpoint-format parameters, loads the new tensors and re-runs the
  post-load processing (repacking) layer by layer, then copies the result
  into the kernel tensors the engine already uses.
* ``sleep`` / ``wake_up`` release and re-create the KV cache on CUDA; the CPU
  worker ignores them (its KV cache stays allocated, sized by
  ``VLLM_CPU_KVCACHE_SPACE``).
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from hfsdk_backend_common.compile_caches import key_compile_caches_by_cpu

if TYPE_CHECKING:
    from hfsdk_rollout_vllm.vllm_config import VLLMRolloutConfig

DTYPE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}
RELOAD_LOGGER = "vllm.model_executor.model_loader.reload.layerwise"
RENDERER_LOGGER = "vllm.renderers.base"


class _BenignWarnings(logging.Filter):
    """Drops warnings that are expected in this setup and would repeat as noise.

    * The reload's "<layer>: Failed to load weights" for rotary embeddings:
      their only tensor is a cos/sin cache computed from the config, never a
      checkpoint weight, and vLLM keeps it.
    * "Chat template warmup failed" (with a traceback): the engine is built
      without a tokenizer (token ids in and out), so it has no chat template
      to warm up; hfsdk never renders chats through vLLM. For the same reason
      vLLM knows no EOS id ("Using None for EOS token id"): every request
      passes the EOS ids as ``stop_token_ids``.
    * The reload's message for the vocabulary layers of a tensor-parallel rank
      whose vocabulary shard is all padding (``padding_only_vocab``): vLLM pads
      the vocabulary to a multiple of 64 rows, so with a small vocabulary the last
      ranks hold no real row and, correctly, load nothing there.
    """

    def __init__(self, padding_only_vocab: bool = False) -> None:
        super().__init__()
        self.expected: tuple[str, ...] = ("RotaryEmbedding",)
        if padding_only_vocab:
            self.expected += ("VocabParallelEmbedding", "ParallelLMHead")

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        if "Chat template warmup failed" in message or "because tokenizer is not" in message:
            return False
        args = record.args if isinstance(record.args, tuple) else ()
        expected = bool(args) and str(args[0]).endswith(self.expected)
        return not ("Failed to load weights" in message and expected)


class ColocatedEngine:
    """A vLLM ``LLM`` in this process with sleep/wake bookkeeping and in-place weight reload.

    ``model_dir`` gives the architecture and the first weights; ``dtype`` is the
    generation dtype; ``on_cpu`` selects the CPU platform's settings.
    ``tensor_parallel_size`` > 1 splits the engine over that many ranks of the
    caller's torch.distributed world (vLLM's external launcher: every rank of
    the world builds its engine at the same time and consecutive ranks form
    one tensor-parallel engine).
    """

    def __init__(
        self,
        config: VLLMRolloutConfig,
        model_dir: Path,
        dtype: torch.dtype,
        on_cpu: bool,
        tensor_parallel_size: int = 1,
    ) -> None:
        # Read by vLLM when the engine is created, so they must be set before.
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        # vLLM logs every request batch at INFO; a training run wants its warnings only.
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        if on_cpu:
            os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(config.cpu_kv_cache_gib)
            key_compile_caches_by_cpu()  # its compiled kernels are for this CPU's vector ISA
        from vllm import LLM

        for name in (RELOAD_LOGGER, RENDERER_LOGGER):
            logging.getLogger(name).addFilter(_BenignWarnings())

        self.on_cpu = on_cpu
        self.dtype = dtype
        caveat = config.logprobs_caveat()
        if caveat is not None:
            logging.getLogger(__name__).warning(caveat)
        # vLLM seeds the process-wide generators (random, numpy, torch) with its own
        # seed when it runs in-process; the actor's sampling state must not change.
        rng_states = (random.getstate(), np.random.get_state(), torch.get_rng_state())
        cuda_states = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
        self.sleep_enabled = config.sleep == "on" or (config.sleep == "auto" and not on_cpu)
        parallel: dict[str, Any] = {}
        if tensor_parallel_size > 1:
            parallel = {
                "tensor_parallel_size": tensor_parallel_size,
                "distributed_executor_backend": "external_launcher",
            }
        self.llm = LLM(
            model=str(model_dir),
            tokenizer=str(model_dir),
            skip_tokenizer_init=True,  # token ids in, token ids out; hfsdk decodes
            generation_config="vllm",  # the model directory's sampling defaults never apply
            dtype=DTYPE_NAMES[dtype],
            max_model_len=config.max_prompt_length + config.max_response_length,
            max_num_seqs=config.max_num_seqs,
            enforce_eager=config.enforce_eager,
            gpu_memory_utilization=config.gpu_memory_utilization,
            enable_sleep_mode=self.sleep_enabled,
            # The actor's log-probs (temperature only), not the top-k/top-p-renormalised ones.
            logprobs_mode=config.logprobs_mode(),
            seed=config.seed,
            **parallel,
        )
        if tensor_parallel_size > 1:
            if on_cpu:
                _unlink_cpu_shm()
            if _padding_only_vocab(self.llm):
                logging.getLogger(RELOAD_LOGGER).addFilter(_BenignWarnings(True))
        random.setstate(rng_states[0])
        np.random.set_state(rng_states[1])
        torch.set_rng_state(rng_states[2])
        if cuda_states is not None:
            torch.cuda.set_rng_state_all(cuda_states)
        self._asleep: set[str] = set()

    def generate(self, requests: list[dict[str, Any]], params: list[Any]) -> list[Any]:
        """``LLM.generate`` on token-id prompts, waking the KV cache first if it sleeps."""
        self.wake_up()
        return self.llm.generate(requests, params, use_tqdm=False)

    def sleep(self) -> None:
        """Free the KV cache and offload the weights (CUDA only; a no-op on CPU)."""
        if self.sleep_enabled and not self._asleep:
            self.llm.sleep(level=1)
            self._asleep = {"weights", "kv_cache"}

    def wake_up(self, tags: tuple[str, ...] = ("weights", "kv_cache")) -> None:
        """Bring back what :meth:`sleep` released (only the ``tags`` asked for)."""
        wanted = [t for t in tags if t in self._asleep]
        if wanted:
            self.llm.wake_up(tags=wanted)
            self._asleep -= set(wanted)

    def close(self) -> None:
        """Shut the engine down (its process groups too) while torch.distributed still exists."""
        self.llm.llm_engine.engine_core.shutdown()

    def reload_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Load (HF name, tensor) pairs into the running engine, in place, layer by layer.

        Only the weights wake up; the KV cache stays released until the next
        generation. Cached prompt prefixes were computed with the old weights,
        so they are dropped.
        """
        self.wake_up(("weights",))
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": iter(weights)})
        self.llm.apply_model(refresh_head_kernels)
        self.llm.reset_prefix_cache()

    def held_sums(self) -> dict[str, int]:
        """Engine tensor name → exact bit sum of what this rank's engine generates with
        (:func:`~hfsdk_rollout_vllm.readback.held_sums`, read in this process)."""
        from hfsdk_rollout_vllm.readback import held_sums

        self.wake_up(("weights",))
        return self.llm.apply_model(held_sums)[0]

    def engine_name(self) -> Callable[[str], str]:
        """HF weight name → engine tensor name (:func:`~.readback.name_mapping`)."""
        from hfsdk_rollout_vllm.readback import name_mapping

        return self.llm.apply_model(name_mapping)[0]

    def rank_slicer(self) -> Callable[[str, torch.Tensor], torch.Tensor]:
        """(HF name, whole tensor) → this tensor-parallel rank's slice of it
        (:func:`~.readback.rank_slicer`)."""
        from hfsdk_rollout_vllm.readback import rank_slicer

        return self.llm.apply_model(rank_slicer)[0]


def refresh_head_kernels(model: torch.nn.Module) -> int:
    """Rebuild the CPU matrix-product handle of each tied LM-head-like layer from its weight.

    On CPU vLLM packs the head's weight for oneDNN once, at load. An in-place reload
    refreshes it only where the head's own weight was loaded: a tied head (Qwen2, Qwen3,
    GPT-2 with ``tie_word_embeddings``) shares the input embeddings' weight, which is loaded
    under that name, so its packed copy kept the first weights and every later rollout
    sampled from a stale head. Only layers whose weight is shared are rebuilt (an untied
    head's reload rebuilt it already). Returns how many were rebuilt (0 off CPU).
    """
    from collections import Counter

    from vllm.model_executor.layers.vocab_parallel_embedding import UnquantizedEmbeddingMethod

    holders = Counter(id(p) for _, p in model.named_parameters(remove_duplicate=False))
    rebuilt = 0
    for module in model.modules():
        method = getattr(module, "quant_method", None)
        shared = holders[id(getattr(module, "weight", None))] > 1
        if (
            isinstance(method, UnquantizedEmbeddingMethod)
            and shared
            and hasattr(module, "cpu_linear")
        ):
            method.process_weights_after_loading(module)
            rebuilt += 1
    return rebuilt


def _unlink_cpu_shm() -> None:
    """Remove the name of this rank's shared-memory segment of vLLM's CPU tensor-parallel group.

    vLLM's CPU all-reduce maps one ``/dev/shm`` segment per rank, named after
    the group only (no per-run part under the external launcher), and unlinks
    them only on a clean shutdown; a Ray worker that is killed leaves them and
    the next run fails with "create shm in SHMManager failed. errno: 17". Every
    member has mapped every segment once the engine is built (vLLM barriers
    after joining), so the names can go now; the mappings stay valid.
    """
    from vllm.distributed.parallel_state import get_tp_group

    group = get_tp_group()
    shm = getattr(group.device_communicator, "dist_module", None)
    name = getattr(shm, "group_name", None)
    if name:
        Path("/dev/shm", f"{name.lstrip('/')}_{group.rank_in_group}").unlink(missing_ok=True)


def _padding_only_vocab(llm: Any) -> bool:
    """Whether this tensor-parallel rank's vocabulary shard holds padding rows only."""
    from vllm.distributed.parallel_state import get_tp_group

    vocab = llm.llm_engine.model_config.get_vocab_size()
    group = get_tp_group()
    padded = -(-vocab // 64) * 64  # vLLM's vocabulary padding (64 rows)
    return group.rank_in_group * (padded // group.world_size) >= vocab
