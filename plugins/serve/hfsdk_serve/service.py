"""The Tinker API's operations on one base model: sessions, training clients, samplers, state.

Transport-free: each method takes the SDK's request type and returns the SDK's
response type (or protobuf bytes where the SDK asks for protobuf). All of them
run on one thread, the model thread of :mod:`.futures`, in the order requests
arrived, so the model never sees two operations at once. The model itself lives
in the serve role's worker group (:mod:`.group`); this object keeps the
bookkeeping: which adapter serves which client and sampler, and their steps.
"""

from __future__ import annotations

import itertools
import secrets
from collections import OrderedDict
from pathlib import Path
from typing import Any

import attrs
from tinker import types

from hfsdk import HfsdkError
from hfsdk_serve import checkpoints, losses
from hfsdk_serve.adapters import AdapterSpec
from hfsdk_serve.group import Executor, ServeGroup
from hfsdk_serve.sampling import SampleSpec
from hfsdk_serve.stops import cut_at_stop, split_stop
from hfsdk_serve.wire import FwdBwdIn, encode_forward_backward, encode_sample

SNAPSHOTS_KEPT = 8
"""Sampler snapshots kept per training client, and of sampling clients made from a path
(older sampling clients then fail clearly)."""
FROM_PATHS = "<sampling clients from paths>"
"""The owner the snapshots of ``create_sampling_client(model_path=...)`` are counted under."""
DEFAULT_MAX_TOKENS = 16
"""Tokens a sample gets when ``SamplingParams.max_tokens`` is unset (the SDK sends None):
the OpenAI completions API's and vLLM ``SamplingParams``' default (docs/serve.md)."""


class UnknownIdError(HfsdkError):
    """A request names a training client or sampling session this server does not hold (the
    HTTP layer answers 404; other user errors are 400s)."""


@attrs.define
class Sampler:
    """A sampling session: the adapter it samples (``None``: the base model)."""

    adapter: str | None
    model_path: str | None
    owner: str | None
    session: str | None = None
    """The session that created it (its samplers are dropped when that session finishes)."""


def _check_optimizer(config: types.OptimizerConfig) -> None:
    """Refuse an optimizer other than AdamW (the only one the workers step)."""
    if config.type != "adamw":
        raise HfsdkError(f"optimizer {config.type!r} is not served; use the default AdamW")


class Service:
    """hfsdk serve's state: the adapter pool, the training clients and the samplers."""

    def __init__(
        self,
        model_dir: str | Path,
        state_dir: str | Path,
        *,
        model_name: str | None = None,
        devices: int = 1,
        executor: Executor = "auto",
        rollout: str = "hf",
    ) -> None:
        self.pool = ServeGroup(model_dir, devices=devices, executor=executor, rollout=rollout)
        self.state_dir = Path(state_dir)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.model_name = model_name or str(self.pool.model_dir)
        self.sessions: set[str] = set()
        self.models: dict[str, str] = {}
        """model id (``<session>:train:<n>``, as the SDK derives it) -> its adapter's name."""
        self.model_sessions: dict[str, str] = {}
        """model id -> the session that created it (freed when that session finishes)."""
        self.samplers: dict[str, Sampler] = {}
        self.adapters: dict[str, AdapterSpec] = {}
        """adapter name -> its spec (every adapter the workers hold)."""
        self.steps: dict[str, int] = {}
        """training adapter name -> optimizer steps taken."""
        self.snapshots: dict[str, OrderedDict[str, None]] = {}
        self._ids = itertools.count(1)
        # Ids differ between server runs, so a restarted server never reuses a saved model id.
        self._run = secrets.token_hex(3)

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids)}_{self._run}"

    # -- capabilities and sessions ---------------------------------------------------------

    def capabilities(self) -> types.GetServerCapabilitiesResponse:
        """The one base model this server trains and samples."""
        return types.GetServerCapabilitiesResponse(
            supported_models=[
                types.SupportedModel(
                    model_name=self.model_name,
                    max_context_length=self.pool.max_length or None,
                    trainable=True,
                    sampleable=True,
                )
            ]
        )

    def create_session(self) -> str:
        """A new session id."""
        session = f"session_{secrets.token_hex(8)}"
        self.sessions.add(session)
        return session

    def finish_session(self, session_id: str) -> None:
        """Free what session ``session_id`` holds in memory; its saved checkpoints stay on disk.

        Its training clients lose their adapter, optimizer state and snapshots, and its
        samplers (snapshots of those clients, loads of a path, the base model) are dropped;
        later requests naming them get the unknown-model / unknown-sampler error. Other
        sessions' clients are untouched. Finishing an unknown session does nothing (the SDK
        retries a finish whose answer it did not get).
        """
        self.sessions.discard(session_id)
        for model_id in [m for m, s in self.model_sessions.items() if s == session_id]:
            del self.model_sessions[model_id]
            adapter = self.models.pop(model_id)
            for snapshot in self.snapshots.pop(adapter, {}):
                self._remove(snapshot)
            self._remove(adapter)
        from_paths = self.snapshots.get(FROM_PATHS, OrderedDict())
        for sampler_id, sampler in list(self.samplers.items()):
            if sampler.session != session_id:
                continue
            del self.samplers[sampler_id]
            # A path load is this sampler's alone (a snapshot went with its client above).
            if sampler.adapter is not None and sampler.adapter in from_paths:
                del from_paths[sampler.adapter]
                self._remove(sampler.adapter)

    def check_base_model(self, base_model: str | None) -> None:
        """Refuse a base model this server does not serve (one line naming the served one)."""
        if base_model is None:
            return
        served = {self.model_name, str(self.pool.model_dir)}
        if base_model not in served and str(Path(base_model).resolve()) not in served:
            raise HfsdkError(
                f"base model {base_model!r} is not served here; this server serves "
                f"{self.model_name!r} (hfsdk serve --base-model)"
            )

    def check_model(self, model_id: str | None) -> str:
        """The adapter of training client ``model_id`` (an error naming it when there is none)."""
        if model_id is None or model_id not in self.models:
            raise UnknownIdError(
                f"unknown model_id {model_id!r}: no training client with that id on this server "
                "(created on another server run?); create one, or load a saved state"
            )
        return self.models[model_id]

    def _register(self, session_id: str | None, model_seq_id: int | None, spec: AdapterSpec) -> str:
        """A new training client's model id, with a fresh adapter of ``spec``."""
        if session_id is None or model_seq_id is None:
            raise HfsdkError("creating a training client needs a session_id and a model_seq_id")
        model_id = f"{session_id}:train:{model_seq_id}"
        if model_id in self.models:
            raise HfsdkError(f"model {model_id!r} exists already; use a new model_seq_id")
        adapter = self._new_id("tc")
        self._add(adapter, spec, trainable=True)
        self.models[model_id] = adapter
        self.model_sessions[model_id] = session_id
        return model_id

    def _add(self, name: str, spec: AdapterSpec, *, trainable: bool) -> None:
        spec.lora_config()  # a spec that trains nothing is refused here, before the workers
        self.pool.add(name, spec, trainable=trainable)
        self.adapters[name] = spec
        if trainable:
            self.steps[name] = 0

    def _remove(self, name: str) -> None:
        self.pool.remove(name)
        self.adapters.pop(name, None)
        self.steps.pop(name, None)

    def close(self) -> None:
        """Stop the worker group."""
        self.pool.close()

    # -- training clients ------------------------------------------------------------------

    def create_model(self, request: types.CreateModelRequest) -> types.CreateModelResponse:
        """A training client: a fresh LoRA adapter and optimizer on the base model."""
        self.check_base_model(request.base_model)
        if request.lora_config is None:
            raise HfsdkError(
                "full fine-tuning is not served: create a LoRA client (create_lora_training_client)"
            )
        _check_optimizer(request.optimizer_config)
        lora = request.lora_config
        spec = AdapterSpec(
            rank=lora.rank,
            seed=lora.seed if lora.seed is not None else 0,
            train_attn=lora.train_attn,
            train_mlp=lora.train_mlp,
            train_unembed=lora.train_unembed,
        )
        return types.CreateModelResponse(
            model_id=self._register(request.session_id, request.model_seq_id, spec)
        )

    def get_info(self, request: types.GetInfoRequest) -> types.GetInfoResponse:
        """The client's base model, tokenizer and LoRA rank."""
        spec = self.adapters[self.check_model(request.model_id)]
        return types.GetInfoResponse(
            model_id=request.model_id,
            model_data=types.ModelData(
                arch=self.pool.arch,
                model_name=self.model_name,
                tokenizer_id=str(self.pool.model_dir),
            ),
            is_lora=True,
            lora_rank=spec.rank,
            model_name=self.model_name,
        )

    def forward_backward(self, request: FwdBwdIn) -> bytes:
        """``forward`` / ``forward_backward``: per datum log-probs, ``loss:sum``; protobuf."""
        adapter = self.check_model(request.model_id)
        # Here, not on the workers: their check sees the datums, not the config.
        losses.check_config(request.loss_fn, request.loss_fn_config)
        outputs, metrics = self.pool.forward_backward(
            adapter,
            request.data,
            request.loss_fn,
            request.loss_fn_config,
            backward=not request.forward_only,
        )
        return encode_forward_backward(outputs, metrics)

    def optim_step(self, request: types.OptimStepRequest) -> types.OptimStepResponse:
        """One AdamW step with the request's ``AdamParams``."""
        adapter = self.check_model(request.model_id)
        params = request.optim_params
        if not isinstance(params, types.AdamParams):
            raise HfsdkError(
                f"optimizer params of type {params.type!r} are not served; send AdamParams"
            )
        metrics = self.pool.optim_step(adapter, params.model_dump())
        self.steps[adapter] += 1
        return types.OptimStepResponse(metrics=metrics)

    # -- state -----------------------------------------------------------------------------

    def _state(self, name: str, *, optimizer: bool) -> dict:
        held = self.pool.state(name, optimizer=optimizer)
        state = {
            "base_model": str(self.pool.model_dir),
            "spec": self.adapters[name].to_json(),
            "adapter": held["adapter"],
            "steps": self.steps.get(name, 0),
        }
        if optimizer:
            state["optimizer"] = held["optimizer"]
        return state

    def save_weights(self, request: types.SaveWeightsRequest) -> types.SaveWeightsResponse:
        """``save_state``: adapter and optimizer under ``tinker://<model_id>/weights/<name>``."""
        adapter = self.check_model(request.model_id)
        name = request.path or f"step-{self.steps[adapter]}"
        path = checkpoints.tinker_path(request.model_id, "weights", name)
        file = checkpoints.resolve(self.state_dir, path)
        checkpoints.write(file, self._state(adapter, optimizer=True), overwrite=request.overwrite)
        return types.SaveWeightsResponse(path=path, type="save_weights")

    def _check_trained_here(self, state: dict[str, Any], path: str) -> None:
        """Refuse a saved adapter trained on another base model than the one served."""
        if Path(state["base_model"]).resolve() != self.pool.model_dir:
            raise HfsdkError(
                f"{path} was trained on {state['base_model']}, but this server serves "
                f"{self.pool.model_dir}"
            )

    def load_weights(self, request: types.LoadWeightsRequest) -> types.LoadWeightsResponse:
        """``load_state`` onto a client, or a new client from a state (create-via-load)."""
        state = checkpoints.read(checkpoints.resolve(self.state_dir, request.path), request.path)
        if "optimizer" not in state and request.optimizer:
            raise HfsdkError(
                f"{request.path} holds sampler weights only (no optimizer state); load a "
                "save_state path, or load without the optimizer"
            )
        self.check_base_model(request.base_model)
        self._check_trained_here(state, request.path)
        # Before registering: create-via-load must not make a client it then fails to serve.
        if request.optimizer_config is not None:
            _check_optimizer(request.optimizer_config)
        if request.model_id is not None:
            model_id = request.model_id
            name = self.check_model(model_id)
        else:
            model_id = self._register(
                request.session_id, request.model_seq_id, AdapterSpec(**state["spec"])
            )
            name = self.models[model_id]
        spec = AdapterSpec(**state["spec"])
        held = self.adapters[name]
        # The seed only chose the initial weights, which the checkpoint replaces.
        differ = [
            f"{field.name}: checkpoint {getattr(spec, field.name)} vs client "
            f"{getattr(held, field.name)}"
            for field in attrs.fields(AdapterSpec)
            if field.name != "seed" and getattr(spec, field.name) != getattr(held, field.name)
        ]
        if differ:
            raise HfsdkError(
                f"the checkpoint's adapter does not fit model {model_id!r} ({'; '.join(differ)}); "
                "load it into a client created with the same rank and layers, or create one from "
                "the checkpoint"
            )
        self.pool.load_state(
            name, state["adapter"], state["optimizer"] if request.optimizer else None
        )
        if request.optimizer:
            self.steps[name] = int(state["steps"])
        return types.LoadWeightsResponse(path=request.path, model_id=model_id, type="load_weights")

    # -- samplers --------------------------------------------------------------------------

    def _snapshot(self, adapter: str) -> str:
        """A frozen copy of ``adapter`` (what a snapshot sampler samples)."""
        name = self._new_id("snap")
        self._add(name, self.adapters[adapter], trainable=False)
        self.pool.copy_into(adapter, name)
        self._keep(adapter, name)
        return name

    def _keep(self, owner: str, name: str) -> None:
        """Count snapshot ``name`` as ``owner``'s, dropping its oldest past the bound."""
        kept = self.snapshots.setdefault(owner, OrderedDict())
        kept[name] = None
        while len(kept) > SNAPSHOTS_KEPT:
            old, _ = kept.popitem(last=False)
            self._remove(old)

    def save_weights_for_sampler(
        self, request: types.SaveWeightsForSamplerRequest
    ) -> types.SaveWeightsForSamplerResponseInternal:
        """A named sampler checkpoint, or (no name) a snapshot sampling session."""
        adapter = self.check_model(request.model_id)
        if request.path is not None:
            path = checkpoints.tinker_path(request.model_id, "sampler_weights", request.path)
            file = checkpoints.resolve(self.state_dir, path)
            checkpoints.write(file, self._state(adapter, optimizer=False), overwrite=True)
            return types.SaveWeightsForSamplerResponseInternal(path=path)
        if request.kind != "snapshot":
            raise HfsdkError(f"sampling client kind {request.kind!r} is not served; use 'snapshot'")
        session = self._new_id("sampler")
        self.samplers[session] = Sampler(
            adapter=self._snapshot(adapter),
            model_path=None,
            owner=request.model_id,
            session=self.model_sessions.get(request.model_id),
        )
        return types.SaveWeightsForSamplerResponseInternal(sampling_session_id=session)

    def create_sampling_session(
        self, request: types.CreateSamplingSessionRequest
    ) -> types.CreateSamplingSessionResponse:
        """A sampler of a saved path, or of the base model."""
        session = self._new_id("sampler")
        if request.model_path is None:
            if request.base_model is None:
                raise HfsdkError("a sampling client needs a model_path or a base_model")
            self.check_base_model(request.base_model)
            self.samplers[session] = Sampler(
                adapter=None, model_path=None, owner=None, session=request.session_id
            )
            return types.CreateSamplingSessionResponse(sampling_session_id=session)
        path = request.model_path
        state = checkpoints.read(checkpoints.resolve(self.state_dir, path), path)
        self._check_trained_here(state, path)
        name = self._new_id("snap")
        self._add(name, AdapterSpec(**state["spec"]), trainable=False)
        self.pool.load_state(name, state["adapter"], None)
        self._keep(FROM_PATHS, name)  # bounded too: each such client loads an adapter
        self.samplers[session] = Sampler(
            adapter=name, model_path=path, owner=None, session=request.session_id
        )
        return types.CreateSamplingSessionResponse(sampling_session_id=session)

    def get_sampler(self, sampler_id: str) -> types.GetSamplerResponse:
        """The sampler's base model (the SDK asks for it when it has none)."""
        sampler = self._sampler(sampler_id)
        return types.GetSamplerResponse(
            sampler_id=sampler_id, base_model=self.model_name, model_path=sampler.model_path
        )

    def _sampler(self, sampler_id: str | None) -> Sampler:
        sampler = self.samplers.get(sampler_id or "")
        if sampler is None:
            raise UnknownIdError(
                f"unknown sampling session {sampler_id!r}; create a sampling client on this server"
            )
        if sampler.adapter is not None and sampler.adapter not in self.adapters:
            raise HfsdkError(
                f"sampling session {sampler_id!r} expired: its snapshot was dropped (only the "
                f"last {SNAPSHOTS_KEPT} per training client, and the last {SNAPSHOTS_KEPT} loaded "
                "from paths, are kept); create a new sampling client"
            )
        return sampler

    def sample(self, request: types.SampleRequest) -> bytes:
        """``sample`` / ``compute_logprobs``: sequences with log-probs; protobuf."""
        sampler = self._sampler(request.sampling_session_id)
        params = request.sampling_params
        unsupported = [
            name
            for name, asked in (
                ("topk_prompt_logprobs", request.topk_prompt_logprobs),
                ("topk_sample_logprobs", request.topk_sample_logprobs),
                ("target_prompt_logprobs", request.target_prompt_logprobs is not None),
                ("prompt_alt_tokens_k", request.prompt_alt_tokens_k),
                ("prompt_logprobs_last_n", request.prompt_logprobs_last_n is not None),
            )
            if asked
        ]
        if unsupported:
            raise HfsdkError(
                f"{', '.join(unsupported)} not served by hfsdk serve; leave them unset"
            )
        stop_ids, stop_strings = split_stop(params.stop)
        tokens = [t for chunk in request.prompt.chunks for t in getattr(chunk, "tokens", [None])]
        if any(t is None for t in tokens):
            raise HfsdkError("the prompt has a non-text chunk; hfsdk serve samples text only")
        spec = SampleSpec(
            prompt=[int(t) for t in tokens],
            num_samples=request.num_samples,
            max_tokens=params.max_tokens if params.max_tokens is not None else DEFAULT_MAX_TOKENS,
            temperature=float(params.temperature),
            top_p=float(params.top_p),
            top_k=int(params.top_k),
            seed=params.seed,
            stop_ids=stop_ids,
            prompt_logprobs=bool(request.prompt_logprobs),
        )
        sequences, prompt_logprobs = self.pool.sample(sampler.adapter, spec)
        if stop_strings:
            decode = self.pool.tokenizer.decode
            sequences = [cut_at_stop(seq, stop_strings, decode) for seq in sequences]
        return encode_sample(sequences, prompt_logprobs)
