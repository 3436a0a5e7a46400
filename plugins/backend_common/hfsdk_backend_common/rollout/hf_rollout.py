"""The ``hf`` rollout backend: decoding on the actor's own weights, for any training backend.

Written against the rollout contract (:mod:`hfsdk.core.rollout_contract`)
only; the path follows from what the actor offers:

- **shards** — the actor reshards into a tensor-parallel generation layout
  (:meth:`ActorSource.generation_shards`; the megatron actor's 3D-HybridEngine,
  the fsdp actor at ``actor.rollout_layout.tp > 1``): every rank takes part,
  its generation replica decodes its rows with ``TPDecoder`` and the
  generation slices are dropped before training resumes;
- **live module** — the actor's own HF module can generate as is (an fsdp
  actor in one process at float32, or gathered under ``weight_sync: gather``);
- **generation module** — otherwise a module of the actor's architecture,
  built once with no weights (:mod:`.generation_module`), is filled from
  :meth:`ActorSource.hf_weights` for the call and freed after it: between
  calls only the training shard is held.

Under the module paths ``rollout.decoder`` picks the decoding code (``hfsdk``:
``TPDecoder`` at tg = 1 on the module's weights; ``transformers``:
``model.generate``; ``auto``: hfsdk when the model is supported). Under
``decoder: transformers`` the shard path is not taken.

Requests (:meth:`HFRollout.generate_request`, token-in / token-out, many in
flight) are served by a :class:`.request_server.RequestServer`: continuous
batching over the hfsdk decoder at tg = 1 on this rank's full weights (the
actor's tg = 1 generation shards, else its HF weights, also when its
generation layout is tensor-parallel: every rank then holds a full copy while
serving). :meth:`HFRollout.serving` holds those weights for a run of requests;
models the hfsdk decoder does not support are served one request at a time
by the contract's default.

Prompts come in left-padded; responses go out right-padded to exactly
``max_response_length`` (so every rank's output has the same shape and
results concatenate). The response mask is 1 up to and including the first
EOS; tokens after it are the pad id. Each call reports ``timing/reshard_s``,
``perf/reshard_bytes`` (bytes received per rank) and
``perf/reshard_peak_extra_bytes`` in the output's ``meta['rollout_metrics']``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch

from hfsdk import (
    ActorSource,
    Batch,
    GenerationRequest,
    GenerationResult,
    HfsdkError,
    RolloutBackend,
    assemble_rollout,
    eos_token_ids,
)
from hfsdk_backend_common.engine_support import require_keys
from hfsdk_backend_common.hybrid.decoder import DecoderShape, TPDecoder
from hfsdk_backend_common.hybrid.llama_format import hf_llama_shape, hf_llama_to_megatron
from hfsdk_backend_common.hybrid.shards import GenerationShards
from hfsdk_backend_common.hybrid.support import decoder_problems
from hfsdk_backend_common.rollout.actor_weights import ActorWeights
from hfsdk_backend_common.rollout.request_server import RequestServer
from hfsdk_backend_common.weight_check import require_loaded

if TYPE_CHECKING:
    from transformers import GenerationConfig

    from hfsdk_backend_common.rollout_config import HFRolloutConfig

PROMPT_KEYS = ("input_ids", "attention_mask")


@contextlib.contextmanager
def without_model_defaults(module: torch.nn.Module) -> Iterator[None]:
    """Hide ``module.generation_config`` (the model directory's defaults) for the context.

    transformers' ``generate`` fills every field the caller's ``GenerationConfig`` leaves
    unset from ``module.generation_config`` (``_prepare_generation_config``; 5.x has no switch
    to stop it), so a model directory's ``repetition_penalty`` or ``no_repeat_ngram_size``
    would reshape the sampled distribution while training's log-probs assume it untouched.
    A fresh config keeps only the model's token ids (the caller passes its own eos and pad);
    fields left unset then fall back to transformers' neutral global defaults. The module's
    own config is restored afterwards, also when ``generate`` raises.
    """
    from transformers import GenerationConfig

    own = module.generation_config
    module.generation_config = GenerationConfig(
        bos_token_id=own.bos_token_id,
        eos_token_id=own.eos_token_id,
        pad_token_id=own.pad_token_id,
    )
    try:
        yield
    finally:
        module.generation_config = own


class HFRollout(RolloutBackend):
    """Generates ``n`` responses per prompt with the actor's current weights.

    ``generate_sequences(prompts, n=None, greedy=None)``: ``n`` and ``greedy``
    default to ``prompts.meta['n']`` / ``prompts.meta['greedy']``, then to the
    config (``n``; greedy when ``temperature`` is 0). Greedy decoding is what
    ReMax baselines and validation use. Collective: every path reads the
    actor's weights over all its ranks.
    """

    config: HFRolloutConfig
    collective = True
    builds_from_actor_config = True

    def __init__(self, config: HFRolloutConfig, actor: ActorSource) -> None:
        super().__init__(config, actor)
        self._setup_tokens()
        # Reshard for generation unless the user asked for transformers' generate.
        self.shards: GenerationShards | None = (
            actor.generation_shards(config) if config.decoder != "transformers" else None
        )
        if self.shards is not None:
            self.uses_hfsdk_decoder = True
            self.decoder_shape: DecoderShape | None = self.shards.shape
        else:
            self.uses_hfsdk_decoder = self._resolve_decoder(
                config.decoder, actor.hf_config.to_dict()
            )
            self.decoder_shape = (
                DecoderShape.from_hf_config(actor.hf_config) if self.uses_hfsdk_decoder else None
            )
        self._weights = ActorWeights(actor, config.weight_sync)
        self._server: RequestServer | None = None
        self._server_stack: contextlib.ExitStack | None = None
        # The actor's weights version the server was opened on, and whether a request opened
        # it (outside serving()): such a server reopens when the actor's weights move on.
        self._server_version: int | None = None
        self._server_lazy = False

    def _setup_tokens(self) -> None:
        """The tokenizer (it must have a pad token) and the ids that end a response."""
        self.tokenizer = self.actor.tokenizer
        if self.tokenizer.pad_token_id is None:
            raise HfsdkError(
                "the tokenizer has no pad token; set one (e.g. tokenizer.pad_token = "
                "tokenizer.eos_token) and save it with the model"
            )
        self.eos_ids = eos_token_ids(list(self.actor.generation_eos_ids), self.tokenizer)
        self.last_metrics: dict[str, float] = {}

    @staticmethod
    def _resolve_decoder(choice: str, model: dict[str, Any]) -> bool:
        """Whether ``rollout.decoder`` (auto/hfsdk/transformers) means the hfsdk decoder."""
        if choice == "transformers":
            return False
        problems = decoder_problems(model)
        if choice == "hfsdk" and problems:
            raise HfsdkError(problems[0])
        return not problems

    # -- weights -------------------------------------------------------------------------

    @contextlib.contextmanager
    def weights(self) -> Iterator[torch.nn.Module]:
        """A module with the actor's current full weights for one call (:class:`ActorWeights`).

        Sets :attr:`last_metrics` (the transition's cost on this rank).
        """
        with self._weights.module() as module:
            self.last_metrics = dict(self._weights.last_metrics)
            yield module

    def _agreed_metrics(self) -> dict[str, float]:
        """The last transition's metrics, maxed over the actor's data-parallel ranks.

        The logged numbers are then the worst rank's (the slowest transition,
        the most bytes), not the rows-weighted mean the worker would otherwise
        take when it collects the ranks' outputs.
        """
        metrics = dict(self.last_metrics)
        dp = self.actor.dp
        if not metrics or dp.size < 2:
            return metrics
        import torch.distributed as dist

        keys = sorted(metrics)
        values = torch.tensor([metrics[k] for k in keys], dtype=torch.float64)
        dist.all_reduce(values, op=dist.ReduceOp.MAX, group=dp.group)
        return dict(zip(keys, values.tolist(), strict=True))

    # -- generation ----------------------------------------------------------------------

    def generation_config(self, greedy: bool) -> GenerationConfig:
        """The sampling settings of one call.

        The model directory's defaults never apply: ``generate`` runs under
        :func:`without_model_defaults`, so the fields left unset here take transformers'
        neutral defaults (sampling always sets ``top_k``: the global default is 50).
        """
        from transformers import GenerationConfig

        common: dict[str, Any] = {
            "max_new_tokens": self.config.max_response_length,
            "eos_token_id": self.eos_ids,
            "pad_token_id": self.tokenizer.pad_token_id,
            "use_cache": True,
        }
        if greedy:
            return GenerationConfig(do_sample=False, **common)
        return GenerationConfig(
            do_sample=True,
            temperature=self.config.temperature,
            top_p=self.config.top_p,
            top_k=self.config.top_k,
            **common,
        )

    def generate_sequences(
        self, prompts: Batch, *, n: int | None = None, greedy: bool | None = None
    ) -> Batch:
        """Responses for ``prompts`` (see the batch contract for the output keys).

        Every output row is one response; the prompt's columns (``raw_prompt``,
        ``uid``, dataset columns) are repeated so the ``n`` responses of a prompt
        are consecutive. ``meta['temperature']`` records the sampling
        temperature (1 for greedy) for the log-prob computation. On the module
        paths a rank whose outputs are not collected (``actor.dp.collects``
        false) only takes its part in the weight gathers and returns ``prompts``.
        """
        require_keys(prompts, PROMPT_KEYS, "generate_sequences")
        n = int(n if n is not None else prompts.meta.get("n", self.config.n))
        # temperature 0 is greedy also when a caller asks to sample (validation with val_n > 1,
        # Algorithm.generate): sampling divided the logits by 0 (one token repeated) where
        # vLLM decoded greedily.
        asked = greedy if greedy is not None else prompts.meta.get("greedy", False)
        greedy = bool(asked) or self.config.temperature == 0
        if n < 1:
            raise HfsdkError(f"n={n}; expected at least one response per prompt")
        prompt_length = prompts["input_ids"].shape[1]
        if prompt_length > self.config.max_prompt_length:
            raise HfsdkError(
                f"prompts are {prompt_length} tokens wide but rollout.max_prompt_length is "
                f"{self.config.max_prompt_length}; drop or truncate longer prompts in the data "
                "loader, or raise the limit"
            )
        if self.shards is None and not self.actor.dp.collects:
            for _ in self.actor.hf_weights():  # collective: this rank's part of the gathers
                pass
            return prompts
        repeated = prompts.select(
            tensor_keys=list(PROMPT_KEYS), non_tensor_keys=list(prompts.non_tensor_keys)
        ).repeat(n, interleave=True)
        responses, extra = self._generate(repeated, greedy)
        return self._assemble(repeated, responses, greedy, extra)

    def _generate(
        self, prompts: Batch, greedy: bool
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Right-padded responses (B, R) plus extra per-token columns (none for HF)."""
        if self.shards is not None:
            return self._generate_sharded(self.shards, prompts, greedy), {}
        config = self.generation_config(greedy)
        width = self.config.max_response_length
        pad = self.tokenizer.pad_token_id
        step = (self.config.micro_batch_size or len(prompts)) if len(prompts) else 1
        device = self.actor.device
        parts = []
        with self.weights() as module:
            if self.uses_hfsdk_decoder:
                assert self.decoder_shape is not None
                weights = hf_llama_to_megatron(
                    {name: p.detach() for name, p in module.named_parameters()},
                    hf_llama_shape(module.config),
                )
                decoder = TPDecoder(weights, self.decoder_shape, tg=1, tp_rank=0)
                ids, mask = prompts["input_ids"], prompts["attention_mask"]
                return self._decode(decoder, ids, mask, greedy), {}
            for part in prompts.split(step):
                input_ids = part["input_ids"].to(device)
                with without_model_defaults(module):
                    out = module.generate(
                        input_ids=input_ids,
                        attention_mask=part["attention_mask"].to(device),
                        generation_config=config,
                    )
                generated = out[:, input_ids.shape[1] :].cpu()
                padded = torch.full((len(part), width), pad, dtype=generated.dtype)
                padded[:, : generated.shape[1]] = generated[:, :width]
                parts.append(padded)
        return (torch.cat(parts) if parts else torch.empty((0, width), dtype=torch.long)), {}

    def _generate_sharded(
        self, shards: GenerationShards, prompts: Batch, greedy: bool
    ) -> torch.Tensor:
        """This rank's responses, decoded by its generation replica on the actor's shards."""
        started = time.perf_counter()
        pad = self.tokenizer.pad_token_id
        ids, mask, _ = shards.prompt_rows(prompts["input_ids"], prompts["attention_mask"], pad)
        weights = shards.weights()
        try:
            decoder = TPDecoder(
                weights,
                shards.shape,
                tg=shards.tg,
                tp_rank=shards.tp_rank,
                tp_group=shards.tp_group,
                tp_ranks=shards.tp_ranks,
                stages=shards.stages,
            )
            responses = self._decode(decoder, ids.to(self.actor.device), mask, greedy)
        finally:
            del weights
            shards.release()  # the generation slices live only for this call
        (mine,) = shards.own_rows([responses])
        self.last_metrics = {
            **shards.metrics(),
            "timing/generate_s": time.perf_counter() - started,
        }
        return mine

    def _decode(
        self, decoder: TPDecoder, ids: torch.Tensor, mask: torch.Tensor, greedy: bool
    ) -> torch.Tensor:
        """Responses (B, max_response_length) of the hfsdk decoder, in micro-batches.

        Every rank of a tensor-parallel replica decodes the same rows, so they
        all run the same number of micro-batches.
        """
        width = self.config.max_response_length
        step = self.config.micro_batch_size or max(len(ids), 1)
        device = self.actor.device
        parts = [torch.empty((0, width), dtype=torch.long)]
        for start in range(0, len(ids), step):
            out = decoder.generate(
                ids[start : start + step].to(device),
                mask[start : start + step].to(device),
                max_new_tokens=width,
                eos_ids=self.eos_ids,
                pad_id=self.tokenizer.pad_token_id,
                greedy=greedy,
                sampling={
                    "temperature": self.config.temperature,
                    "top_k": self.config.top_k,
                    "top_p": self.config.top_p,
                },
            )
            parts.append(out.cpu())
        return torch.cat(parts)

    # -- request-level generation ----------------------------------------------------------

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        """Hold this rank's full weights and a request server for a run of requests.

        Collective: every rank of the actor enters it (the weights are gathered
        or resharded once); requests sent inside are batched continuously. Reentrant.
        """
        if self._server is not None or not self.uses_hfsdk_decoder:
            yield
            return
        self._open_server()
        try:
            yield
        finally:
            self._close_server()

    @property
    def serves_requests(self) -> bool:  # type: ignore[override]
        """Requests are batched continuously when the hfsdk decoder runs the model."""
        return self.uses_hfsdk_decoder

    async def generate_request(self, request: GenerationRequest) -> GenerationResult:
        """Serve ``request`` with the continuous-batching server (see :meth:`serving`).

        Outside :meth:`serving` the first request opens the server lazily and it
        stays until the weights change (:meth:`update_weights`, or the actor's
        ``weights_version`` moving on: the next request reopens it on the new
        weights, failing the requests still in flight) or :meth:`close`; that is
        possible only when the actor is one process. Inside :meth:`serving` a
        request after the actor's version moved on raises
        :class:`~hfsdk_backend_common.weight_check.WeightSyncMismatch`. A request
        longer than the model's positions is refused alone. A model the hfsdk
        decoder does not run is served by the contract's default (one process only).
        """
        if not self.uses_hfsdk_decoder:
            # The default calls generate_sequences per request, collective over the ranks.
            self._require_one_process()
            return await super().generate_request(request)
        current = self.actor.weights_version
        if self._server is not None and self._server_version != current:
            # The server's weights are partly views of the actor's tensors, partly fused
            # copies: after an update it would decode with half-old, half-new weights.
            if not self._server_lazy:  # serving() gathered them collectively: no reopening here
                assert self._server_version is not None
                require_loaded(self._server_version, current, "the hf rollout's request server")
            self._close_server()
        if self._server is None:
            self._require_one_process()
            self._open_server()
            self._server_lazy = True
        assert self._server is not None
        return await self._server.generate(request)

    @property
    def request_server(self) -> RequestServer | None:
        """The open request server (its ``stats``), or ``None``."""
        return self._server

    def update_weights(self, actor: ActorSource) -> None:
        """The weights changed: a server holding the old ones closes."""
        self._close_server()

    def close(self) -> None:
        """Close the request server, if one is open."""
        self._close_server()

    def _require_one_process(self) -> None:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            ranks = dist.get_world_size(self.actor.dp.actor_group)
            if ranks > 1:
                raise HfsdkError(
                    f"the actor has {ranks} ranks; enter rollout.serving() on every rank "
                    "before sending generate_request (it gathers the weights collectively)"
                )

    def _open_server(self) -> None:
        stack = contextlib.ExitStack()
        try:
            weights = stack.enter_context(self._request_weights())
            assert self.decoder_shape is not None
            decoder = TPDecoder(weights, self.decoder_shape, tg=1, tp_rank=0)
            self._server = RequestServer(
                decoder,
                eos_ids=self.eos_ids,
                device=self.actor.device,
                max_batch=self.config.micro_batch_size or 64,
                max_positions=getattr(self.actor.hf_config, "max_position_embeddings", None),
            )
        except BaseException:
            stack.close()
            raise
        self._server_stack = stack
        self._server_version, self._server_lazy = self.actor.weights_version, False

    def _close_server(self) -> None:
        server, stack = self._server, self._server_stack
        self._server, self._server_stack = None, None
        self._server_version, self._server_lazy = None, False
        if server is not None:
            server.close()
        if stack is not None:
            stack.close()

    @contextlib.contextmanager
    def _request_weights(self) -> Iterator[dict[str, torch.Tensor]]:
        """This rank's full megatron-format weights while the server runs (collective)."""
        shards = self.shards
        if shards is not None and shards.tg == 1 and shards.pg == 1:
            weights = shards.weights()
            try:
                yield dict(weights)
            finally:
                del weights
                shards.release()
            return
        # Tensor-parallel or pipelined generation layouts: every rank gathers a full copy,
        # since one rank serves its own requests without stepping in lockstep with others.
        grad = torch.is_grad_enabled()
        with self.weights() as module:
            converted = hf_llama_to_megatron(
                {name: p.detach() for name, p in module.named_parameters()},
                hf_llama_shape(module.config),
            )
            # The module's context holds no_grad, and a server lives across calls: the caller's
            # thread got its grad mode back only when the server closed (an update between two
            # requests trained nothing), or a wrong one where two servers closed out of order.
            with torch.set_grad_enabled(grad):
                yield converted

    def _assemble(
        self,
        prompts: Batch,
        responses: torch.Tensor,
        greedy: bool,
        extra: dict[str, torch.Tensor] | None = None,
    ) -> Batch:
        """The output batch; ``extra`` per-token (B, R) columns are zeroed where masked."""
        return assemble_rollout(
            prompts,
            responses,
            tokenizer=self.tokenizer,
            eos_ids=self.eos_ids,
            temperature=1.0 if greedy else self.config.temperature,
            greedy=greedy,
            metrics=self._agreed_metrics(),
            extra=extra,
        )
