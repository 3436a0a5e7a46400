"""One frozen base model, many LoRA adapters: each training client's own weights and optimizer.

The base model is loaded once (the fsdp backend's loader), on several ranks
sharded with FSDP2 ``fully_shard`` (the backend's
:func:`~hfsdk_backend_fsdp.sharding.shard_model`: each rank keeps 1/N of the
frozen base weights), and wrapped once by the backend's
:func:`~hfsdk_backend_fsdp.lora.attach_adapters` (frozen base weights, seeded
adapter initialisation). Adapters are added after the sharding, so their
parameters are plain tensors outside the sharded units: replicated on every
rank, their gradients summed over the ranks by the caller. Every training client
then gets a peft adapter of its own, named after its model id, and an AdamW
optimizer over that adapter's parameters only. peft computes only the active
adapter, and only the active one requires gradients, so one client's forward,
backward and step never touch another client's adapter, gradients or optimizer
state.

Everything here runs on the server's single model thread (see :mod:`.service`):
activating an adapter and using it is not safe to interleave.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import torch

from hfsdk import HfsdkError, load_tokenizer, seeded_rng
from hfsdk_backend_common.lora_config import LoraConfig
from hfsdk_backend_fsdp.lora import adapters_disabled, attach_adapters
from hfsdk_backend_fsdp.models import load_model
from hfsdk_backend_fsdp.sharding import data_parallel, gathered, is_sharded, shard_model

PLACEHOLDER = "default"
"""The adapter ``attach_adapters`` creates; never trained, never active (clients get their own)."""

ATTN_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_MODULES = ("gate_proj", "up_proj", "down_proj")
UNEMBED_MODULES = ("lm_head",)


@attrs.frozen(kw_only=True)
class AdapterSpec:
    """What a client asked for: LoRA rank, which layers get adapters, the init seed."""

    rank: int
    seed: int = 0
    train_attn: bool = True
    train_mlp: bool = True
    train_unembed: bool = True
    alpha: float = 16.0

    def lora_config(self) -> LoraConfig:
        """The backend's LoRA config for this spec (one clear error when nothing would train)."""
        targets = (
            (ATTN_MODULES if self.train_attn else ())
            + (MLP_MODULES if self.train_mlp else ())
            + (UNEMBED_MODULES if self.train_unembed else ())
        )
        if self.rank < 1:
            raise HfsdkError(f"LoRA rank {self.rank}: expected a rank of at least 1")
        if not targets:
            raise HfsdkError(
                "train_attn, train_mlp and train_unembed are all false: no layer would get "
                "an adapter; enable at least one"
            )
        return LoraConfig(rank=self.rank, alpha=self.alpha, target_modules=targets)

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict (stored in checkpoints)."""
        return attrs.asdict(self)


@attrs.define
class Adapter:
    """One client's adapter: its spec, parameters (by name, adapter key normalised) and AdamW."""

    name: str
    spec: AdapterSpec
    params: dict[str, torch.nn.Parameter]
    optimizer: torch.optim.AdamW | None
    steps: int = 0
    version: int = 0
    """Changes whenever the weights do (unique over the pool's adapters; see
    :meth:`AdapterPool.touch`), so a sampler that keeps merged weights knows when they are stale."""


def _tied_head(model: torch.nn.Module) -> str | None:
    """The name of ``model``'s LM head when it shares its weight with the input embeddings."""
    head, embed = model.get_output_embeddings(), model.get_input_embeddings()
    if head is None or embed is None or head.weight is not embed.weight:
        return None
    return next(n for n, m in model.named_modules() if m is head)


def _key(param_name: str, adapter: str) -> str:
    """``param_name`` with the adapter's own key replaced, so states move between adapters."""
    return param_name.replace(f".{adapter}.", ".{adapter}.")


class AdapterPool:
    """The base model of ``model_dir`` with one LoRA adapter per training client.

    ``group``: a torch.distributed group of several ranks to shard the base weights
    over (``None``: every weight whole in this process). Sharded, every forward and
    backward is collective over the group.
    """

    def __init__(self, model_dir: str | Path, *, seed: int = 0, group: Any = None) -> None:
        self.model_dir = Path(model_dir).resolve()
        self.tokenizer = load_tokenizer(self.model_dir)
        model = load_model(
            self.model_dir, "causal_lm", torch.float32, pad_token_id=self.tokenizer.pad_token_id
        )
        model.requires_grad_(False)
        model.eval()
        self.arch = type(model).__name__
        self.tied_head = _tied_head(model)
        if group is not None:
            shard_model(model, data_parallel(group), "cpu")
        self.sharded = is_sharded(model)
        # Rank 1 on one module: the wrapper exists, the placeholder costs nothing and is
        # never active once a client has an adapter.
        self.peft = attach_adapters(
            model, LoraConfig(rank=1, target_modules=("q_proj",)), seed=seed
        )
        self.peft.eval()
        self.adapters: dict[str, Adapter] = {}
        self._versions = itertools.count(1)  # 0 is the base model's version
        self.vocab_size = int(model.config.vocab_size)
        self.max_length = int(getattr(model.config, "max_position_embeddings", 0) or 0)

    def base_storage(self) -> tuple[int, int]:
        """(bytes of base weights this rank holds, bytes of the whole base model)."""
        from torch.distributed.tensor import DTensor

        held = whole = 0
        for name, p in self.peft.get_base_model().named_parameters():
            if ".lora_" in name:
                continue
            local = p.to_local() if isinstance(p, DTensor) else p
            held += local.numel() * local.element_size()
            whole += p.numel() * p.element_size()
        return held, whole

    @contextlib.contextmanager
    def whole(self) -> Iterator[None]:
        """Every base weight whole on this rank for the block (collective when sharded:
        every rank enters; inside, this rank's forwards need no other rank)."""
        if not self.sharded:
            yield
            return
        with gathered(self.peft.get_base_model()):
            yield

    @property
    def hf_config(self) -> Any:
        """The base model's transformers config."""
        return self.peft.get_base_model().config

    def untied_config(self) -> Any:
        """The base model's config with an LM head of its own (``tie_word_embeddings`` off).

        For a rollout on a tied base: an adapter on the head changes the head only, so the
        policy's head and input embeddings differ and a tied architecture cannot hold both.
        """
        config = copy.deepcopy(self.hf_config)
        config.tie_word_embeddings = False
        return config

    def trains_tied_head(self, name: str | None) -> bool:
        """Whether adapter ``name`` has a LoRA on an LM head the base ties to its embeddings."""
        return self.tied_head is not None and name is not None and self.get(name).spec.train_unembed

    def _peft_config(self, spec: AdapterSpec) -> Any:
        lora = spec.lora_config()
        config = copy.deepcopy(self.peft.peft_config[PLACEHOLDER])
        config.r = lora.rank
        config.lora_alpha = lora.alpha
        config.target_modules = set(lora.target_modules)
        return config

    def max_rank(self, targets: tuple[str, ...]) -> tuple[int, list[str]]:
        """The smallest input or output size of the base's layers named in ``targets``, and
        the names of the layers that have it (``(0, [])`` when none is found)."""
        sizes: dict[str, int] = {}
        for module_name, module in self.peft.get_base_model().named_modules():
            leaf = module_name.rpartition(".")[2]
            if leaf in targets and hasattr(module, "in_features"):
                size = min(int(module.in_features), int(module.out_features))
                sizes[leaf] = min(size, sizes.get(leaf, size))
        if not sizes:
            return 0, []
        limit = min(sizes.values())
        return limit, sorted(k for k, v in sizes.items() if v == limit)

    def _check_rank(self, spec: AdapterSpec) -> None:
        """Refuse a rank above min(in, out) of a targeted layer: beyond it ``B·A`` gains no
        rank, only memory (a typo such as 50000 would take every user's state down)."""
        targets = spec.lora_config().target_modules
        limit, layers = self.max_rank(tuple(targets))
        if limit and spec.rank > limit:
            raise HfsdkError(
                f"LoRA rank {spec.rank} is above {limit}, the smallest input or output size of "
                f"the targeted layers ({', '.join(layers)}) of {self.model_dir.name}: a larger "
                f"rank adds no capacity, only memory; pass a rank of at most {limit}"
                + (" (or train_unembed=False)" if "lm_head" in layers else "")
            )

    def add(self, name: str, spec: AdapterSpec, *, trainable: bool = True) -> Adapter:
        """A new adapter ``name`` (``B`` at zero: it computes the base model exactly)."""
        if name in self.adapters:
            raise HfsdkError(f"adapter {name!r} exists already")
        self._check_rank(spec)
        config = self._peft_config(spec)
        with seeded_rng(spec.seed), warnings.catch_warnings():
            # peft warns that a tied head's adapter unties it; merged_weights handles that.
            warnings.filterwarnings("ignore", message=".*ensure_weight_tying.*")
            self.peft.add_adapter(name, config)
        params = {_key(n, name): p for n, p in self.peft.named_parameters() if f".{name}." in n}
        if not params:
            raise HfsdkError(
                f"the base model {self.model_dir.name} has none of the modules "
                f"{sorted(config.target_modules)}; LoRA needs Llama-style projection layers"
            )
        for p in params.values():
            p.requires_grad_(False)
        optimizer = torch.optim.AdamW(list(params.values()), lr=0.0) if trainable else None
        adapter = Adapter(name=name, spec=spec, params=params, optimizer=optimizer)
        self.adapters[name] = adapter
        self.touch(name)
        return adapter

    def touch(self, name: str) -> None:
        """Adapter ``name``'s weights changed: give it a version no adapter had before."""
        self.get(name).version = next(self._versions)

    def version(self, name: str | None) -> int:
        """The weights version of adapter ``name`` (``None``, the base model alone: 0)."""
        return 0 if name is None else self.get(name).version

    def merged_weights(
        self, name: str | None, probes: dict[str, Any] | None = None, *, untied_head: bool = False
    ) -> Iterator[tuple[str, torch.Tensor]]:
        """The HF model adapter ``name`` computes, as (HF name, tensor): ``W + s·B·A``.

        Each LoRA layer's base weight plus that adapter's delta (``s`` its
        ``alpha / r``), new tensors; every other weight is the base model's own
        tensor. ``None``: the base model alone. For a rollout engine that keeps
        its own copy of the weights; the pool's module is never changed (peft's
        in-place merge and unmerge would round the base weights). A sharded pool
        yields them only inside :meth:`whole`. ``probes`` (when given) receives each merged
        weight's :func:`hfsdk_backend_common.low_rank_probe` before the weight is yielded, so
        a rollout checks the merge it receives (the contract's ``ActorSource.weight_probes``).
        ``untied_head`` (for a rollout of :meth:`untied_config`): a base model that ties its
        LM head to its input embeddings yields the head's weight too, with its delta, under
        the head's own name (else only the embeddings, as the tied architecture has).
        """
        from peft.tuners.lora import LoraLayer

        from hfsdk_backend_common import low_rank_probe

        model = self.peft.get_base_model()
        layers = {n: m for n, m in model.named_modules() if isinstance(m, LoraLayer)}
        # named_parameters() keeps a tied weight once (the embeddings' name), which drops
        # the head and its delta; an untied rollout needs both, so the head comes too.
        head = f"{self.tied_head}." if untied_head and self.tied_head is not None else None
        seen: set[int] = set()
        with torch.no_grad():
            for param_name, param in model.named_parameters(remove_duplicate=False):
                if ".lora_" in param_name:
                    continue
                if head is None or not param_name.startswith(head):
                    if id(param) in seen:
                        continue
                    seen.add(id(param))
                owner, _, leaf = param_name.rpartition(".base_layer.")
                if not owner:
                    yield param_name, param.detach()
                    continue
                layer = layers[owner]
                weight = param.detach()
                if name is not None and leaf == "weight" and name in layer.lora_A:
                    delta = layer.lora_B[name].weight.float() @ layer.lora_A[name].weight.float()
                    if layer.fan_in_fan_out:
                        delta = delta.T
                    if probes is not None:
                        probes[f"{owner}.{leaf}"] = low_rank_probe(
                            weight,
                            layer.lora_A[name].weight,
                            layer.lora_B[name].weight,
                            layer.scaling[name],
                            transposed=layer.fan_in_fan_out,
                            dtype=weight.dtype,
                        )
                    weight = (weight.float() + delta * layer.scaling[name]).to(weight.dtype)
                yield f"{owner}.{leaf}", weight

    def remove(self, name: str) -> None:
        """Drop adapter ``name`` and its optimizer."""
        if self.adapters.pop(name, None) is not None:
            self.peft.delete_adapter(name)

    def get(self, name: str) -> Adapter:
        """The adapter ``name`` (an :class:`HfsdkError` naming it when there is none)."""
        adapter = self.adapters.get(name)
        if adapter is None:
            raise HfsdkError(f"no adapter {name!r} on this server (unknown or released model)")
        return adapter

    @contextlib.contextmanager
    def active(self, name: str | None, *, train: bool = False) -> Iterator[Adapter | None]:
        """Forwards inside run with adapter ``name`` (``None``: the base model alone).

        With ``train`` the adapter's parameters require gradients for the context.
        """
        if name is None:
            with adapters_disabled(self.peft):
                yield None
            return
        adapter = self.get(name)
        self.peft.set_adapter(name)
        # set_adapter marks the active adapter trainable; only forward_backward wants that.
        for p in adapter.params.values():
            p.requires_grad_(train)
        try:
            yield adapter
        finally:
            for p in adapter.params.values():
                p.requires_grad_(False)

    # -- state -----------------------------------------------------------------------------

    def copy_into(self, source: str, target: str) -> None:
        """Adapter ``target``'s weights := adapter ``source``'s (same spec)."""
        src, dst = self.get(source), self.get(target)
        with torch.no_grad():
            for key, p in dst.params.items():
                p.copy_(src.params[key])
        self.touch(target)

    def adapter_state(self, name: str) -> dict[str, torch.Tensor]:
        """Adapter ``name``'s weights, cloned, by normalised name."""
        return {k: p.detach().clone() for k, p in self.get(name).params.items()}

    def load_adapter_state(self, name: str, state: dict[str, torch.Tensor]) -> None:
        """Set adapter ``name``'s weights from :meth:`adapter_state`'s output (exact copy)."""
        adapter = self.get(name)
        if set(state) != set(adapter.params):
            missing = sorted(set(adapter.params) - set(state))[:2]
            extra = sorted(set(state) - set(adapter.params))[:2]
            raise HfsdkError(
                f"the checkpoint's adapter does not fit model {name!r} (missing {missing}, "
                f"unexpected {extra}); load it into a client created with the same rank and "
                "layers, or create one from the checkpoint"
            )
        # Versioned even when a shape check fails half way: some tensors may have changed.
        with torch.no_grad(), contextlib.ExitStack() as stack:
            stack.callback(self.touch, name)
            for key, p in adapter.params.items():
                value = state[key]
                if value.shape != p.shape:
                    raise HfsdkError(
                        f"checkpoint tensor {key} has shape {tuple(value.shape)} but model "
                        f"{name!r} has {tuple(p.shape)}; the LoRA ranks differ"
                    )
                p.copy_(value)
