"""The part every FSDP role engine shares: model, sharding, optimizer, batching, state.

An engine lives in one process of a torch.distributed group (or in a plain
process without one) and holds one role's model. Subclasses add the role's
operations (:mod:`.actor`, :mod:`.critic`, :mod:`.scorer`). Engines know
nothing about Ray; a worker wraps them.

Every rank of the group must call the same operations with batches of the
same size (the dispatcher pads to a divisor), because FSDP gathers weights
collectively in each forward and backward. Training gives the padding rows
no weight (:func:`without_padding_weight`).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from hfsdk import (
    Batch,
    HfsdkError,
    LossAggregation,
    LossCounts,
    group_split,
    load_checkpoint_file,
    load_tokenizer,
    model_inputs_of,
    position_ids_from_mask,
    row_group,
)
from hfsdk_backend_common.compile_caches import key_compile_caches_by_cpu
from hfsdk_backend_common.cpu_allocator import keep_freed_cpu_memory
from hfsdk_backend_common.engine_support import (
    MetricAccumulator,
    check_minibatch_groups,
    resolve_device,
)
from hfsdk_backend_common.lr_schedule import apply_optim_config, build_optimizer
from hfsdk_backend_fsdp import sharding
from hfsdk_backend_fsdp.fsdp_config import FSDPRoleConfig
from hfsdk_backend_fsdp.micro_batches import row_extents, token_budget_groups
from hfsdk_backend_fsdp.models import (
    ModelKind,
    build_model_on_meta,
    check_model_dir,
    has_tied_weights,
    load_model,
    quiet_loading,
)

if TYPE_CHECKING:
    from torch.distributed import ProcessGroup
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

CHECKPOINT_FILE = "{role}_engine.pt"
"""The older single-file checkpoint (full state gathered on rank 0); still loaded."""
DCP_DIR = "{role}_dcp"
"""Sharded checkpoint directory (``torch.distributed.checkpoint``: one shard file per rank)."""
EXTRA_FILE = "extra.pt"
BASE_BIT_SUM_KEY = "lora_base_bit_sum"
"""``extra.pt``'s record of a LoRA actor's frozen base (:meth:`FSDPEngine._base_bit_sum`)."""
LORA_CONFIG_KEY = "lora_config"
"""``extra.pt``'s record of a trained role's adapters (:meth:`FSDPEngine._lora_record`)."""
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def resolve_model_path(config: FSDPRoleConfig, role: str) -> Path:
    """The role's model directory; the default task's model when ``model_path`` is unset."""
    if config.model_path is None:
        from hfsdk import default_model_dir

        return default_model_dir()
    return check_model_dir(config.model_path, role)


PROCESSOR_FILES = ("preprocessor_config.json", "processor_config.json", "chat_template.json")
"""A model directory's non-tokenizer processor files (an image processor's settings)."""


def copy_processor_files(source: Path, directory: Path) -> None:
    """Copy ``source``'s processor files into the export ``directory``, so a vision-language
    model's export loads with its processor as the model it started from did."""
    import shutil

    for name in PROCESSOR_FILES:
        if (source / name).is_file():
            shutil.copyfile(source / name, directory / name)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


@contextlib.contextmanager
def _dcp_warnings_off() -> Iterator[None]:
    """DCP's warnings off while it loads: of a damaged checkpoint it logs each failed
    metadata read with its traceback, and hfsdk reports the failure in one line instead."""
    import torch.distributed.checkpoint as dcp

    package = str(Path(dcp.__file__).parent) + os.sep
    named = logging.getLogger("torch.distributed.checkpoint")
    level = named.level
    root = logging.getLogger()

    # state_dict_loader logs through the root logger: told apart by the file it logs from.
    def not_dcp_below_error(record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR or not record.pathname.startswith(package)

    named.setLevel(logging.ERROR)
    root.addFilter(not_dcp_below_error)
    try:
        yield
    finally:
        root.removeFilter(not_dcp_below_error)
        named.setLevel(level)


def _require_cpp_compiler(role: str) -> None:
    """``compile`` on CPU: inductor builds C++ kernels, so refuse it in one line without a
    compiler (instead of the first pass failing inside a worker)."""
    from torch._inductor.cpp_builder import get_cpp_compiler
    from torch._inductor.exc import InvalidCxxCompiler

    try:
        get_cpp_compiler()
    except InvalidCxxCompiler:
        raise HfsdkError(
            f"{role}.compile=true: torch.compile on CPU builds C++ kernels and no C++ "
            f"compiler was found (g++, or $CXX); install one or set {role}.compile: false"
        ) from None


def _detached_copy(value: Any) -> Any:
    """``value`` with every tensor inside (dicts, lists, tuples) replaced by a detached clone."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, dict):
        return {k: _detached_copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_detached_copy(v) for v in value)
    return value


class FSDPEngine:
    """One role's HF model under FSDP2 in this process, with its optimizer if it trains.

    ``process_group`` is the group to shard over (default: the whole world
    when torch.distributed is initialised; none otherwise). ``total_steps``
    fills ``optim.total_steps`` for a cosine schedule when the config leaves it 0.
    """

    kind: ClassVar[ModelKind] = "causal_lm"
    trainable: ClassVar[bool] = False

    def __init__(
        self,
        config: FSDPRoleConfig,
        *,
        role: str,
        process_group: ProcessGroup | None = None,
        total_steps: int | None = None,
    ) -> None:
        self.config = config
        self.role = role
        self.dp = sharding.data_parallel(process_group)
        self.device = resolve_device(config.device)
        if self.device.type == "cpu":
            keep_freed_cpu_memory()
        self.model_path = resolve_model_path(config, role)
        self.tokenizer: PreTrainedTokenizerBase = load_tokenizer(
            config.tokenizer_path or self.model_path
        )
        self.compute_dtype = DTYPES[config.dtype]
        if config.compile and self.device.type == "cpu":
            _require_cpp_compiler(role)
            key_compile_caches_by_cpu()  # inductor's C++ kernels are for this CPU's vector ISA
        # Trained roles keep float32 master weights; frozen ones are stored in the compute dtype.
        weights_dtype = torch.float32 if self.trainable else self.compute_dtype
        # Load once: with several ranks only rank 0 reads the weights; the others build the
        # model on the meta device, shard it and receive their shards from rank 0, so no
        # other rank ever holds the full model. (Tied embeddings would be untied by
        # materialising a meta model, so those models are read on every rank.)
        broadcast = (
            self.dp.distributed and self.dp.size > 1 and not has_tied_weights(self.model_path)
        )
        on_meta = broadcast and self.dp.rank != 0
        pad_token_id = self.tokenizer.pad_token_id
        if on_meta:
            model = build_model_on_meta(
                self.model_path, self.kind, weights_dtype, pad_token_id=pad_token_id
            )
        else:
            # A frozen scorer's missing head never trains: load_model warns about it.
            frozen_role = role if self.kind == "sequence_score" and not self.trainable else None
            model = load_model(
                self.model_path,
                self.kind,
                weights_dtype,
                pad_token_id=pad_token_id,
                frozen_role=frozen_role,
            )
        self.model_class: type[PreTrainedModel] = type(model)
        attention = self._attn_implementation()
        if attention is not None:
            model.set_attn_implementation(attention)
        if self.trainable and config.gradient_checkpointing:
            model.gradient_checkpointing_enable()
        self._prepare_model(model)
        if self.trainable and config.freeze_vision:
            from hfsdk_backend_common.vision_tower import freeze_vision_tower

            freeze_vision_tower(model, f"{role}.freeze_vision")
        self.lora = self.trainable and config.lora.enabled
        if config.lora.enabled and not (self.trainable and self.kind == "causal_lm"):
            raise HfsdkError(
                f"{role}.lora.rank={config.lora.rank}: LoRA adapters train the policy only; "
                f"set {role}.lora.rank: 0"
            )
        if self.lora:
            from hfsdk_backend_fsdp.lora import attach_adapters

            if config.gradient_checkpointing:
                # The frozen embedding's output needs a gradient for checkpointed blocks.
                model.enable_input_require_grads()
            model = attach_adapters(model, config.lora, seed=config.seed)
        self.materialized_before_sharding = sum(
            p.numel() for p in model.parameters() if p.device.type != "meta"
        )
        full_state = dict(model.state_dict()) if broadcast and not on_meta else {}
        if not self.trainable:
            model.requires_grad_(False)
        model.eval()
        if not on_meta:
            # full_state keeps rank 0's loaded (CPU) tensors: the source of the broadcast.
            model.to(self.device)
        # The dtype FSDP gathers the shards in (mixed precision), None: the shards' own.
        self.param_dtype = (
            self.compute_dtype if (self.trainable and config.dtype != "float32") else None
        )
        self.module: PreTrainedModel = sharding.shard_model(
            model,
            self.dp,
            self.device.type,
            compute_dtype=self.param_dtype,
            reshard_after_forward=config.reshard_after_forward,
            offload=sharding.offload_enabled(config.offload, self.device.type, role),
        )
        # What the log-prob, value and training passes call: the module itself, or
        # torch.compile's wrapper of it (same parameters; state dicts stay the module's).
        self.compute_module: torch.nn.Module = (
            torch.compile(self.module) if config.compile else self.module
        )
        if broadcast:
            if on_meta:
                self.module.to_empty(device=self.device)
            sharding.load_full_model_state(self.module, full_state, self.dp)
            sharding.broadcast_buffers(self.module, self.dp)
            del full_state
        self.update_calls = 0
        self.optimizer: torch.optim.Optimizer | None = None
        self.scheduler: torch.optim.lr_scheduler.LRScheduler | None = None
        if self.trainable:
            # With LoRA only the adapters train: the frozen base gets no optimizer state.
            trained = [p for p in self.module.parameters() if p.requires_grad]
            self.optimizer, self.scheduler = build_optimizer(trained, config.optim, total_steps)
        # Once, here: a LoRA checkpoint holds the adapters only, so a resume must find the
        # base it was trained on in model_path (one pass over this rank's shard of it).
        self.base_bit_sum = self._base_bit_sum() if self.lora else None

    def _base_bit_sum(self) -> int:
        """The frozen base weights' exact bit sum (:func:`~hfsdk_backend_common.bit_sum`)
        over every rank: the same at any world size and on any device (every rank must call)."""
        from torch.distributed.tensor import DTensor

        from hfsdk_backend_common import bit_sum

        total = 0
        for param in self.module.parameters():
            if param.requires_grad:
                continue
            if isinstance(param, DTensor):  # shards add up to the full tensor's sum
                total += bit_sum(param.to_local().detach())
            elif self.dp.rank == 0:  # every rank holds all of it: counted once
                total += bit_sum(param.detach())
        if not self.dp.distributed:
            return total
        import torch.distributed as dist

        totals: list[int | None] = [None] * self.dp.size
        dist.all_gather_object(totals, total, group=self.dp.group)
        return sum(t or 0 for t in totals)

    def _base_changed(self, extra: dict[str, Any], path: Path) -> str | None:
        """Why the checkpoint at ``path`` (its ``extra``) was trained on another base model than
        ``model_path`` holds now (``None``: the same, or a checkpoint older than the record)."""
        saved = extra.get(BASE_BIT_SUM_KEY)
        if not self.lora or saved is None or saved == self.base_bit_sum:
            return None
        return (
            f"{path} holds LoRA adapters trained on another base model than "
            f"{str(self.model_path)!r} holds now (its weights changed since the checkpoint was "
            f"saved); restore that base model in {self.role}.model_path, or start a new run"
        )

    def _lora_record(self) -> dict[str, Any]:
        """What the trained weights depend on in ``lora``: rank (0: no adapters), alpha and
        the target modules (dropout only shapes training passes)."""
        if not self.lora:
            return {"rank": 0}
        lora = self.config.lora
        return {
            "rank": lora.rank,
            "alpha": float(lora.alpha),
            "target_modules": sorted(lora.target_modules),
        }

    def _lora_changed(self, extra: dict[str, Any], path: Path) -> str | None:
        """Why the checkpoint at ``path`` (its ``extra``) cannot load into this engine's
        adapters (``None``: the same, or a checkpoint older than the record).

        Adapters load non-strictly (the frozen base is not checkpointed), so other target
        modules or another alpha would otherwise load silently: dropped or rescaled.
        """
        saved = extra.get(LORA_CONFIG_KEY)
        if not self.trainable or saved is None:
            return None
        now = self._lora_record()
        # Without adapters on either side only the rank says what differs.
        keys = (
            ("rank", "alpha", "target_modules") if saved.get("rank") and now["rank"] else ("rank",)
        )
        fields = [k for k in keys if saved.get(k) != now.get(k)]
        if not fields:
            return None
        had = ", ".join(f"{k}={saved.get(k, 'none')}" for k in fields)
        has = ", ".join(f"{k}={now.get(k, 'none')}" for k in fields)
        return (
            f"{path} holds {self.role} weights trained with other LoRA adapters: "
            f"{self.role}.lora's {', '.join(fields)} differ (checkpoint: {had}; config: {has}); "
            f"set {self.role}.lora back to the checkpoint's values, or start a new run"
        )

    def _attn_implementation(self) -> str | None:
        """``attn_implementation`` with ``auto`` resolved (``None``: keep the model's default)."""
        choice = self.config.attn_implementation
        if choice != "auto":
            return choice
        bf16_training_on_cpu = (
            self.trainable and self.config.dtype == "bfloat16" and self.device.type == "cpu"
        )
        return "eager" if bf16_training_on_cpu else None

    def _prepare_model(self, model: PreTrainedModel) -> None:
        """Hook for subclasses to look at the model before it is sharded."""

    # -- forward passes ------------------------------------------------------------------

    @contextlib.contextmanager
    def _autocast(self) -> Iterator[None]:
        """bfloat16 autocast for a trained model that is not under FSDP mixed precision."""
        if (
            self.trainable
            and self.config.dtype != "float32"
            and not sharding.is_sharded(self.module)
        ):
            with torch.autocast(self.device.type, dtype=self.compute_dtype):
                yield
        else:
            yield

    def _model_inputs(self, micro: Batch) -> dict[str, Any]:
        """The forward's arguments for ``micro``: token ids, mask and positions, plus what
        the batch's ``hfsdk.ModelInputs`` entry adds (pixel values, multimodal positions)."""
        input_ids = micro["input_ids"].to(self.device)
        attention_mask = micro["attention_mask"].to(self.device)
        if "position_ids" in micro:
            position_ids = micro["position_ids"].to(self.device)
        else:
            position_ids = position_ids_from_mask(attention_mask)
        inputs: dict[str, Any] = {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "position_ids": position_ids,
            "use_cache": False,
        }
        extra = model_inputs_of(micro)
        if extra is not None:  # images and the like: the model family's entry builds the call
            inputs = extra.forward_kwargs(self.module, micro, inputs)
        return inputs

    def _forward(self, micro: Batch) -> Any:
        with self._autocast():
            return self.compute_module(**self._model_inputs(micro))

    def _forward_micro_batches(self, batch: Batch) -> Iterator[Batch]:
        """Micro-batches for inference, consecutive rows (the same count on every rank)."""
        if not len(batch):
            return iter(())
        if self.config.micro_batch_tokens is not None:
            return iter(self._token_budget_split(batch, by_length=False))
        size = self.config.forward_micro_batch_size or self.config.micro_batch_size
        return iter(batch.split(size))

    def _train_micro_batches(self, mini: Batch) -> list[Batch]:
        """The forward/backward passes of one mini-batch (gradients accumulate over them).

        Row groups (``hfsdk.ROW_GROUP``, e.g. preference pairs) stay whole in one pass.
        """
        if self.config.micro_batch_tokens is not None:
            if row_group(mini) > 1:
                raise HfsdkError(
                    f"{self.role}.micro_batch_tokens splits rows by length, but this batch's "
                    f"rows come in groups of {row_group(mini)} that must share a pass "
                    f"(preference pairs); unset {self.role}.micro_batch_tokens and use "
                    f"{self.role}.micro_batch_size"
                )
            return self._token_budget_split(mini, by_length=True)
        return group_split(mini, self.config.micro_batch_size)

    def _packs_rows(self, batch: Batch) -> bool:
        """Whether this engine's passes over ``batch`` pack its rows into one sequence."""
        return self.config.packing

    def _drops_padding_columns(self, batch: Batch) -> bool:
        """Whether this engine's unpacked passes over ``batch`` drop the columns that are
        padding in every row; ``False``: they run at the batch's full width."""
        return False

    def _token_budget_split(self, batch: Batch, *, by_length: bool) -> list[Batch]:
        """``micro_batch_tokens`` passes; the ranks agree on their number (FSDP needs it)."""
        budget = self.config.micro_batch_tokens
        assert budget is not None
        packed = self._packs_rows(batch)  # a packed pass costs its rows' summed length
        lengths: list[Any]
        if not packed and not self._drops_padding_columns(batch):
            # The pass runs at the batch's full width whatever its rows hold: price every
            # row at that width (counting only real tokens ran ~6x over the budget).
            lengths = [int(batch["attention_mask"].shape[1])] * len(batch)
        elif "responses" in batch:
            # A pass runs at its longest prompt plus its longest response (padding columns
            # are dropped only where every row has them), so that is what the budget counts.
            lengths = row_extents(batch["attention_mask"], batch["responses"].shape[1])
        else:
            lengths = [int(n) for n in batch["attention_mask"].sum(dim=-1).tolist()]
        count = len(token_budget_groups(lengths, budget, by_length=by_length, packed=packed))
        if self.dp.distributed:
            import torch.distributed as dist

            agreed = torch.tensor([count], dtype=torch.int64, device=self.device)
            dist.all_reduce(agreed, op=dist.ReduceOp.MAX, group=self.dp.group)
            count = int(agreed.item())
        groups = token_budget_groups(
            lengths, budget, count=count, by_length=by_length, packed=packed
        )
        return [batch.index(rows) for rows in groups]

    # -- training helpers ----------------------------------------------------------------

    def _global_counts(self, response_mask: torch.Tensor) -> LossCounts:
        """Valid tokens and sequences of a mini-batch summed over the data-parallel ranks."""
        mask = response_mask != 0
        counts = torch.tensor(
            [float(mask.sum()), float(mask.any(dim=-1).sum())],
            dtype=torch.float64,
            device=self.device,
        )
        if self.dp.distributed:
            import torch.distributed as dist

            dist.all_reduce(counts, op=dist.ReduceOp.SUM, group=self.dp.group)
        return LossCounts(tokens=float(counts[0]), sequences=float(counts[1]))

    def _aggregation(
        self,
        mini: Batch,
        mode: str,
        norm_length: float | None,
        counts: LossCounts | None = None,
    ) -> LossAggregation:
        """How every loss of mini-batch ``mini`` aggregates: global counts, length, dp size.

        ``norm_length`` ``None`` uses the response width (the same on every rank,
        since rollouts pad responses to the configured maximum).
        """
        return LossAggregation.from_counts(
            mode,
            counts or self._global_counts(mini["response_mask"]),
            norm_length=norm_length or float(mini["responses"].shape[1]),
            dp_size=self.dp.size,
        )

    def _local_minibatch_size(self) -> int:
        size = self.config.mini_batch_size
        if size % self.dp.size:
            raise HfsdkError(
                f"{self.role}.mini_batch_size={size} is not divisible by the {self.dp.size} "
                "data-parallel ranks; make it a multiple of the number of ranks"
            )
        return size // self.dp.size

    def _minibatches(self, batch: Batch, epoch: int) -> Iterator[Batch]:
        group = row_group(batch)
        local = self._local_minibatch_size()
        # iter_minibatches would round a part group up: fewer optimizer steps than configured.
        check_minibatch_groups(self.role, self.config.mini_batch_size, self.dp.size, group)
        size = min(local, len(batch))
        seed = self.config.seed + 100_003 * self.update_calls + epoch
        return batch.iter_minibatches(size, shuffle=self.config.shuffle, seed=seed, group=group)

    def _optimizer_step(self, metrics: MetricAccumulator, prefix: str) -> None:
        """Clip, then step unless the gradient norm is not finite (that step is skipped)."""
        assert self.optimizer is not None
        grad_norm = sharding.total_grad_norm(self.module, self.config.optim.grad_clip)
        metrics.add_mean(f"{prefix}/grad_norm", grad_norm)
        if math.isfinite(grad_norm):
            self.optimizer.step()
            metrics.add_mean(f"{prefix}/skipped_steps", 0.0)
        else:
            metrics.add_mean(f"{prefix}/skipped_steps", 1.0)
        self.optimizer.zero_grad(set_to_none=True)

    def _finish_update(self, metrics: MetricAccumulator, prefix: str) -> dict[str, float]:
        assert self.scheduler is not None
        metrics.add_mean(f"{prefix}/lr", float(self.scheduler.get_last_lr()[0]))
        with warnings.catch_warnings():
            # After a skipped (non-finite) step torch warns about the call order; the schedule
            # still counts training iterations, which is what we want.
            warnings.filterwarnings("ignore", message="Detected call of `lr_scheduler.step")
            self.scheduler.step()
        self.update_calls += 1
        # Weighted means and maxima over every rank (the core only averages ranks' results).
        if self.dp.distributed:
            metrics.gather(self.dp.group)
        return metrics.result()

    # -- state ---------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Model, optimizer and scheduler state, unsharded; the tensors are on rank 0 only.

        Every rank must call it (the weights are gathered collectively). Other
        ranks get the same structure with empty ``model`` and ``optimizer``.
        """
        state: dict[str, Any] = {
            "model": sharding.full_model_state(self.module),
            "update_calls": self.update_calls,
        }
        if self.trainable:
            assert self.optimizer is not None and self.scheduler is not None
            with sharding.unstepped_kept(self.optimizer) as unstepped:
                state["optimizer"] = sharding.full_optimizer_state(self.module, self.optimizer)
            state["optimizer_unstepped"] = unstepped
            state["scheduler"] = self.scheduler.state_dict()
        # Without sharding the state dicts alias the live tensors; a snapshot must not move.
        return _detached_copy(state)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output (rank 0's tensors are broadcast to the others)."""
        missing = [k for k in ("model", "update_calls") if k not in state]
        if self.trainable:
            missing += [k for k in ("optimizer", "scheduler") if k not in state]
        if missing:
            raise HfsdkError(
                f"{self.role} engine state lacks {missing}; pass what state_dict() returned"
            )
        sharding.load_full_model_state(self.module, state["model"], self.dp)
        if self.trainable:
            assert self.optimizer is not None and self.scheduler is not None
            sharding.load_full_optimizer_state(
                self.module, self.optimizer, state["optimizer"], self.dp
            )
            # The saved groups' lr, betas, eps and weight decay must not outlive the config.
            apply_optim_config(self.optimizer, self.config.optim)
            if state.get("optimizer_unstepped"):
                self.optimizer.state.clear()
            self.scheduler.load_state_dict(state["scheduler"])
        self.update_calls = int(state["update_calls"])

    def save_checkpoint(self, directory: str | Path) -> Path:
        """Write a sharded checkpoint: every rank writes its own shard (every rank must call).

        Model and optimizer go through ``torch.distributed.checkpoint`` into
        ``<role>_dcp/`` (nothing is gathered on rank 0, and the checkpoint reloads at
        another world size); rank 0 adds the small rest (LR schedule, counters).
        """
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.api import CheckpointException
        from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

        path = Path(directory) / DCP_DIR.format(role=self.role)
        state: dict[str, Any] = {"model": self._checkpointed_model_state()}
        unstepped = False
        if self.trainable:
            assert self.optimizer is not None
            with sharding.unstepped_kept(self.optimizer) as unstepped:
                state["optimizer"] = get_optimizer_state_dict(self.module, self.optimizer)
        try:
            dcp.save(
                state,
                checkpoint_id=str(path),
                process_group=self.dp.group,
                no_dist=not self.dp.distributed,
            )
        except CheckpointException as exc:
            # A stop (a second Ctrl-C) or an error inside DCP's writers, as it was raised.
            raise rank_failure(exc) from None
        if self.dp.rank == 0:
            extra: dict[str, Any] = {
                "update_calls": self.update_calls,
                "optimizer_unstepped": unstepped,
            }
            if self.scheduler is not None:
                extra["scheduler"] = self.scheduler.state_dict()
            if self.lora:
                extra[BASE_BIT_SUM_KEY] = self.base_bit_sum
            if self.trainable:
                extra[LORA_CONFIG_KEY] = self._lora_record()
            torch.save(extra, path / EXTRA_FILE)
        self._barrier()
        return path

    def _checkpointed_model_state(self) -> dict[str, Any]:
        """This rank's model state to checkpoint: with LoRA only the (trainable) adapters.

        The frozen base is the role's ``model_path`` and is rebuilt from it on resume.
        """
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        options = StateDictOptions(ignore_frozen_params=self.lora)
        return get_model_state_dict(self.module, options=options)

    def load_checkpoint(self, directory: str | Path) -> None:
        """Load what :meth:`save_checkpoint` wrote, at this engine's world size.

        A missing, truncated or corrupt file fails on every rank with the path named
        (no rank waits in a collective for another). Checkpoints of the older
        single-file format (``<role>_engine.pt``, written by rank 0) still load.
        """
        if (Path(directory) / CHECKPOINT_FILE.format(role=self.role)).is_file():
            self._load_full_checkpoint(directory)
            return
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.api import CheckpointException
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            get_optimizer_state_dict,
            set_model_state_dict,
            set_optimizer_state_dict,
        )

        path = Path(directory) / DCP_DIR.format(role=self.role)
        failure = None
        state: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        if not (path / ".metadata").is_file():
            failure = f"no {self.role} engine checkpoint at {path}"
        else:
            try:
                # The small record first: adapters of another shape are named, not a DCP
                # size mismatch.
                extra = load_checkpoint_file(path / EXTRA_FILE)
                failure = self._lora_changed(extra, path)
                if failure is None:
                    state = {"model": self._checkpointed_model_state()}
                    if self.trainable:
                        assert self.optimizer is not None
                        state["optimizer"] = get_optimizer_state_dict(self.module, self.optimizer)
                    with _dcp_warnings_off():
                        dcp.load(
                            state,
                            checkpoint_id=str(path),
                            process_group=self.dp.group,
                            no_dist=not self.dp.distributed,
                        )
            except (Exception, CheckpointException) as exc:  # a bad shard, metadata or extra
                # (DCP's CheckpointException is a BaseException; it reaches every rank)
                cause = rank_failure(exc) if isinstance(exc, CheckpointException) else exc
                failure = f"{path} cannot be read ({type(cause).__name__}: {_first_line(cause)})"
        if failure is None:
            failure = self._base_changed(extra, path)
        failure = self._any_failure(failure)
        if failure is not None:
            raise HfsdkError(failure)
        set_model_state_dict(
            self.module, state["model"], options=StateDictOptions(strict=not self.lora)
        )
        if self.trainable:
            assert self.optimizer is not None and self.scheduler is not None
            set_optimizer_state_dict(self.module, self.optimizer, state["optimizer"])
            apply_optim_config(self.optimizer, self.config.optim)
            if extra.get("optimizer_unstepped"):
                self.optimizer.state.clear()
            self.scheduler.load_state_dict(extra["scheduler"])
        self.update_calls = int(extra["update_calls"])

    def _any_failure(self, failure: str | None) -> str | None:
        """The first rank's failure, on every rank (``None`` if all succeeded)."""
        if not self.dp.distributed:
            return failure
        import torch.distributed as dist

        failures: list[str | None] = [None] * self.dp.size
        dist.all_gather_object(failures, failure, group=self.dp.group)
        return next((f for f in failures if f is not None), None)

    def _load_full_checkpoint(self, directory: str | Path) -> None:
        """The older single-file format (rank 0 reads; the state is broadcast)."""
        path = Path(directory) / CHECKPOINT_FILE.format(role=self.role)
        state: dict[str, Any] = {}
        failure = None
        if self.dp.rank == 0:
            try:
                state = load_checkpoint_file(path)
            except Exception as exc:  # truncated or corrupt: every rank must learn of it
                failure = f"{path} cannot be read ({type(exc).__name__}: {_first_line(exc)})"
        # The small parts (scheduler, counters) go to every rank; the tensors are broadcast later.
        small = {k: v for k, v in state.items() if k not in ("model", "optimizer")}
        failure = self._any_failure(failure)
        if failure is not None:
            raise HfsdkError(failure)
        if self.dp.distributed:
            import torch.distributed as dist

            holder = [small]
            dist.broadcast_object_list(
                holder, src=dist.get_global_rank(self.dp.group, 0), group=self.dp.group
            )
            small = holder[0]
        state = {"model": {}, "optimizer": {}, **state, **small}
        self.load_state_dict(state)

    def _barrier(self) -> None:
        if self.dp.distributed:
            import torch.distributed as dist

            dist.barrier(group=self.dp.group)

    def export_hf(self, directory: str | Path) -> Path:
        """Save the model in HF format with its tokenizer beside it (rank 0 writes).

        Every rank must call it. The result loads with the HF auto class of the
        role (``AutoModelForCausalLM`` for the actor) from the directory alone.
        A LoRA actor writes its adapter instead (``adapter_config.json`` and
        ``adapter_model.safetensors``, peft's format, naming the base model's
        directory) and, with ``lora.export_merged``, the merged model in ``merged/``.
        """
        state = sharding.full_model_state(self.module)
        directory = Path(directory)
        if self.lora:
            self._export_lora(state, directory)
            self._barrier()
            return directory
        if self.dp.rank == 0:
            self._write_hf(state, directory)
        self._barrier()
        return directory

    def export_base_hf(self, directory: str | Path) -> Path:
        """A LoRA actor's frozen base model, adapters left out, in HF format with its tokenizer
        (rank 0 writes; every rank must call): the export of a reference that shares it."""
        from hfsdk_backend_fsdp import lora

        state = sharding.full_model_state(self.module)
        directory = Path(directory)
        if self.dp.rank == 0:
            self._write_hf(lora.base_state(state), directory)
        self._barrier()
        return directory

    def _export_lora(self, state: dict[str, torch.Tensor], directory: Path) -> None:
        """The adapter (peft format) in ``directory``; on request the merged one in ``merged/``."""
        from hfsdk_backend_fsdp import lora

        if self.dp.rank != 0:
            return
        lora.export_adapter(self.module, state, directory, str(self.model_path))
        self.tokenizer.save_pretrained(str(directory))
        # As a full export: a vision-language adapter loads with its base's image processor.
        copy_processor_files(self.model_path, directory)
        if self.config.lora.export_merged:
            self._write_hf(lora.merged_state(self.module, state), directory / lora.MERGED_DIR)

    def _write_hf(self, state: dict[str, torch.Tensor], directory: Path) -> None:
        """Save a plain HF state dict of this role's model class, with the tokenizer (rank 0)."""
        config = self.module.config
        with torch.device("meta"):
            fresh = self.model_class(config)
        fresh.load_state_dict(state, assign=True, strict=True)
        if getattr(self.module, "generation_config", None) is not None:
            fresh.generation_config = self.module.generation_config
        directory.mkdir(parents=True, exist_ok=True)
        with quiet_loading():  # no per-save progress bar on the console
            fresh.save_pretrained(str(directory))
            self.tokenizer.save_pretrained(str(directory))
        copy_processor_files(self.model_path, directory)


def rank_failure(exc: Any) -> BaseException:
    """The first failing rank's own exception inside DCP's ``CheckpointException`` (whose
    message is only ``CheckpointException ranks:...``): a size mismatch, a stop request."""
    failures = sorted(exc.failures.items())
    return failures[0][1][0] if failures else exc
