"""KV-cache decoding over a generation shard at tensor-parallel size tg (CPU or GPU).

The generation engine of the 3D-HybridEngine for megatron-format shards: it
runs the Llama decoder (RMSNorm, grouped-query attention with RoPE, SwiGLU)
directly on the tensors :class:`~hfsdk_backend_common.hybrid.reshard.HybridEngine`
assembled — no model object, no copy. Tensor parallelism is megatron's:
QKV and gate/up are column parallel, proj and down row parallel (one
all-reduce each per layer), the embedding and output layer vocabulary
parallel. Every rank of a generation tensor-parallel group decodes the same
prompts; the sampled token is taken from the group's first rank so the
ranks never diverge. With generation pipeline stages (pg > 1) each rank
runs only its stage's layers and the hidden states travel stage to stage
(:class:`~hfsdk_backend_common.hybrid.stages.StageLink`); the last stage picks
the token and every stage of the replica receives it. The arithmetic per layer
is the same at any (pg, tg), so the tokens are too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from hfsdk import HfsdkError
from hfsdk_backend_common.hybrid.packed_linear import DecodeLinears
from hfsdk_backend_common.hybrid.stages import StageLink

if TYPE_CHECKING:
    import torch


@attrs.frozen(kw_only=True)
class DecoderShape:
    """The decoder's shape and numerics (from the HF config)."""

    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0

    @classmethod
    def from_hf_config(cls, config: Any) -> DecoderShape:
        """Read a transformers Llama config."""
        rope = getattr(config, "rope_parameters", None) or {}
        theta = rope.get("rope_theta", getattr(config, "rope_theta", 10000.0))
        return cls(
            num_layers=config.num_hidden_layers,
            hidden_size=config.hidden_size,
            num_heads=config.num_attention_heads,
            num_kv_heads=config.num_key_value_heads,
            head_dim=getattr(config, "head_dim", None)
            or config.hidden_size // config.num_attention_heads,
            vocab_size=config.vocab_size,
            rms_norm_eps=config.rms_norm_eps,
            rope_theta=float(theta),
        )


def sample_rows(probs: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """One index per row of ``probs`` (B, V), drawn with those probabilities.

    Inverse-CDF sampling: one uniform number per row against the running sum.
    It draws from the same distribution as ``torch.multinomial(probs, 1)``, whose
    CPU kernel spends milliseconds per call on exponential noise for every entry.
    """
    import torch

    cdf = probs.cumsum(-1)
    u = torch.rand((probs.shape[0], 1), generator=generator, device=probs.device, dtype=cdf.dtype)
    index = torch.searchsorted(cdf, u * cdf[:, -1:], right=True).squeeze(-1)
    return index.clamp_(max=probs.shape[-1] - 1)


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """``logits`` with everything below the ``k``-th largest set to -inf; ``k`` 0 or at least
    the vocabulary leaves them unchanged (no cut, as transformers and vLLM read it)."""
    if k <= 0 or k >= logits.shape[-1]:
        return logits
    kth = logits.topk(k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, float("-inf"))


def nucleus_filter(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """``logits`` with everything outside the top-``top_p`` probability mass set to -inf."""
    if top_p >= 1.0:
        return logits
    ordered, index = logits.sort(dim=-1, descending=True)
    probs = ordered.softmax(-1)
    drop = probs.cumsum(-1) - probs > top_p
    return logits.scatter(-1, index, ordered.masked_fill(drop, float("-inf")))


class KVCache:
    """Keys and values of every layer of one decode, preallocated for ``capacity`` positions.

    Each layer's buffers are (B, kv heads, capacity, head dim), allocated on
    first use; new positions are written in place, so a decode step copies only
    its own keys and values instead of growing every layer's cache.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.length = 0
        self._keys: dict[int, torch.Tensor] = {}
        self._values: dict[int, torch.Tensor] = {}

    def extend(
        self, layer: int, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Store ``layer``'s new keys/values (B, heads, T, hd); all of the layer's so far."""
        import torch

        end = self.length + k.shape[2]
        if end > self.capacity:
            raise HfsdkError(
                f"KV cache holds {self.capacity} positions but {end} were written; "
                "size it for prompt length + max new tokens"
            )
        if layer not in self._keys:
            shape = (k.shape[0], k.shape[1], self.capacity, k.shape[3])
            self._keys[layer] = torch.empty(shape, dtype=k.dtype, device=k.device)
            self._values[layer] = torch.empty(shape, dtype=v.dtype, device=v.device)
        keys, values = self._keys[layer], self._values[layer]
        keys[:, :, self.length : end] = k
        values[:, :, self.length : end] = v
        return keys[:, :, :end], values[:, :, :end]

    def advance(self, positions: int) -> None:
        """Count ``positions`` new positions as stored (after every layer wrote them)."""
        self.length += positions


_PRODUCTS = ("linear_qkv.weight", "linear_proj.weight", "linear_fc1.weight",
             "linear_fc2.weight", "output_layer.weight")  # fmt: skip
"""The weights the decoder multiplies by (the embedding is looked up, not multiplied)."""


class TPDecoder:
    """Greedy or sampled decoding with a KV cache over one rank's generation shard.

    ``shard`` maps the megatron names of :func:`.llama_format.llama_specs`
    to this rank's tensors at tensor-parallel size ``tg`` (rank ``tp_rank`` of
    ``tp_group``; ``None`` when tg = 1). ``stages`` places the rank in its
    generation pipeline (default: one stage); the shard then holds only that
    stage's weights (global layer numbers; the embedding on the first stage,
    the final norm and output layer on the last).
    """

    def __init__(
        self,
        shard: Mapping[str, torch.Tensor],
        shape: DecoderShape,
        *,
        tg: int,
        tp_rank: int,
        tp_group: Any = None,
        tp_ranks: tuple[int, ...] = (),
        stages: StageLink | None = None,
    ) -> None:
        self.w, self.shape, self.tg, self.tp_rank = shard, shape, tg, tp_rank
        self.tp_group, self.tp_src = tp_group, (tp_ranks[0] if tp_ranks else 0)
        self.stages = stages or StageLink.single()
        self.layers = self.stages.layers(shape.num_layers)
        self.local_heads = shape.num_heads // tg
        self.local_groups = shape.num_kv_heads // tg
        self._check_stage(shard)
        if self.stages.first:
            self.local_vocab = shard["embedding.word_embeddings.weight"].shape[0]
        # What the previous stage's hidden states are received as (the layers' dtype).
        self.dtype = shard[
            f"decoder.layers.{self.layers.start}.self_attention.linear_qkv.weight"
        ].dtype
        self.linear = DecodeLinears(shard, [n for n in shard if n.endswith(_PRODUCTS)])

    def _check_stage(self, shard: Mapping[str, torch.Tensor]) -> None:
        """A one-line error unless ``shard`` holds this stage's layers and ends."""
        needed = [
            f"decoder.layers.{i}.{w}"
            for i in self.layers
            for w in ("input_layernorm.weight", "self_attention.linear_qkv.weight")
        ]
        if self.stages.first:
            needed.append("embedding.word_embeddings.weight")
        if self.stages.last:
            needed += ["decoder.final_layernorm.weight", "output_layer.weight"]
        missing = [name for name in needed if name not in shard]
        if missing:
            raise HfsdkError(
                f"generation stage {self.stages.stage} of {self.stages.count} decodes layers "
                f"{self.layers.start}..{self.layers.stop - 1} but its shard lacks {missing[0]!r}; "
                "pass the shard HybridEngine.to_generation built for this rank"
            )

    # -- collectives ---------------------------------------------------------------------
    def _all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        if self.tg > 1:
            import torch.distributed as dist

            dist.all_reduce(x, group=self.tp_group)
        return x

    def _all_gather_last(self, x: torch.Tensor) -> torch.Tensor:
        if self.tg == 1:
            return x
        import torch
        import torch.distributed as dist

        parts = [torch.empty_like(x) for _ in range(self.tg)]
        dist.all_gather(parts, x.contiguous(), group=self.tp_group)
        return torch.cat(parts, dim=-1)

    # -- layers -----------------------------------------------------------------------------
    def _norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        import torch

        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.shape.rms_norm_eps)
        return weight * h.to(x.dtype)

    def _rope(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple:
        import torch

        hd = self.shape.head_dim
        inv = 1.0 / (
            self.shape.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd)
        )
        freqs = positions.float()[..., None] * inv.to(positions.device)  # B, T, hd/2
        emb = torch.cat([freqs, freqs], dim=-1)
        return emb.cos().to(dtype)[:, None], emb.sin().to(dtype)[:, None]

    @staticmethod
    def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        import torch

        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rotated * sin

    def check_prompt_ids(
        self, ids: torch.Tensor | Sequence[int], attention_mask: torch.Tensor | None = None
    ) -> None:
        """A one-line error unless every prompt id (where ``attention_mask`` is set) is in
        ``[0, vocab_size)``.

        The embedding masks ids outside this rank's vocabulary slice to zero (that is how
        vocabulary parallelism sums the slices), so an id outside the whole vocabulary
        would decode from a zero embedding without error where transformers raises
        ``IndexError``. Call it once per prompt batch (one min/max reduction); the sampled
        tokens stay inside the vocabulary, so the decode steps need no check.
        """
        import torch

        ids = torch.as_tensor(ids)
        if ids.numel() == 0:
            return
        if attention_mask is not None:  # padding is never embedded into a kept position
            ids = ids[attention_mask.bool()]
            if ids.numel() == 0:
                return
        low, high = torch.stack(torch.aminmax(ids)).tolist()  # one read back, also on GPU
        vocab = self.shape.vocab_size
        bad = low if low < 0 else high if high >= vocab else None
        if bad is not None:
            raise HfsdkError(
                f"token id {bad} in the prompt is outside the model's vocabulary of {vocab} ids "
                f"(0..{vocab - 1}); check that the tokenizer matches the model"
            )

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        weight = self.w["embedding.word_embeddings.weight"]
        start = self.tp_rank * self.local_vocab
        local = ids - start
        inside = (local >= 0) & (local < self.local_vocab)
        out = weight[local.clamp(0, self.local_vocab - 1)] * inside[..., None].to(weight.dtype)
        return self._all_reduce(out)

    def _attention(self, layer: int, x: torch.Tensor, rope: tuple, cache: KVCache, mask) -> Any:
        import torch.nn.functional as F

        pre = f"decoder.layers.{layer}.self_attention."
        b, t, _ = x.shape
        hd, groups = self.shape.head_dim, self.local_groups
        per = self.local_heads // groups
        qkv = self.linear(x, pre + "linear_qkv.weight").view(b, t, groups, per + 2, hd)
        q = qkv[:, :, :, :per].reshape(b, t, groups * per, hd).transpose(1, 2)
        k = qkv[:, :, :, per].transpose(1, 2)
        v = qkv[:, :, :, per + 1].transpose(1, 2)
        cos, sin = rope
        q, k = self._rotate(q, cos, sin), self._rotate(k, cos, sin)
        k, v = cache.extend(layer, k, v)
        # Grouped-query attention: each key/value head serves its `per` query heads.
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=per > 1)
        out = out.transpose(1, 2).reshape(b, t, groups * per * hd)
        return self._all_reduce(self.linear(out, pre + "linear_proj.weight"))

    def _mlp(self, layer: int, x: torch.Tensor) -> torch.Tensor:
        import torch.nn.functional as F

        pre = f"decoder.layers.{layer}.mlp."
        gate, up = self.linear(x, pre + "linear_fc1.weight").chunk(2, dim=-1)
        return self._all_reduce(self.linear(F.silu(gate) * up, pre + "linear_fc2.weight"))

    def forward(
        self, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor, cache: KVCache
    ) -> torch.Tensor | None:
        """Logits (B, T, vocab) of ``ids`` at ``positions``; ``mask`` is (B, 1, T, S) boolean.

        ``ids`` continue the sequences held in ``cache`` (S = its length + T).

        With pipeline stages only the last stage returns logits; the others
        pass their hidden states on and return ``None``.
        """
        if self.stages.first:
            x = self._embed(ids)
        else:
            x = self.stages.receive((*ids.shape, self.shape.hidden_size), self.dtype, ids.device)
        rope = self._rope(positions, x.dtype)
        for layer in self.layers:
            pre = f"decoder.layers.{layer}."
            h = self._norm(x, self.w[pre + "input_layernorm.weight"])
            x = x + self._attention(layer, h, rope, cache, mask)
            h = self._norm(x, self.w[pre + "pre_mlp_layernorm.weight"])
            x = x + self._mlp(layer, h)
        cache.advance(ids.shape[1])
        if not self.stages.last:
            self.stages.send(x)
            return None
        x = self._norm(x, self.w["decoder.final_layernorm.weight"])
        logits = self._all_gather_last(self.linear(x, "output_layer.weight"))
        return logits[..., : self.shape.vocab_size]

    # -- decoding -------------------------------------------------------------------------
    def _next_token(
        self,
        logits: torch.Tensor | None,
        greedy: bool,
        sampling: dict,
        generator: Any,
        like: torch.Tensor,
    ) -> torch.Tensor:
        """The token of every row: picked on the last stage, shared with every stage."""
        import torch

        if self.stages.last:
            token = self._pick(logits.float(), greedy, sampling, generator)
        else:  # filled by the last stage's broadcast
            token = torch.empty(like.shape[0], dtype=torch.long, device=like.device)
        return self.stages.share_token(token)

    def _pick(self, logits: torch.Tensor, greedy: bool, sampling: dict, generator) -> Any:

        if greedy:
            token = logits.argmax(dim=-1)
        else:
            logits = logits / sampling.get("temperature", 1.0)
            logits = top_k_filter(logits, sampling.get("top_k", 0))
            logits = nucleus_filter(logits, sampling.get("top_p", 1.0))
            token = sample_rows(logits.softmax(-1), generator)
        if self.tg > 1:
            import torch.distributed as dist

            dist.broadcast(token, src=self.tp_src, group=self.tp_group)
        return token

    def generate(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        *,
        max_new_tokens: int,
        eos_ids: list[int],
        pad_id: int,
        greedy: bool = True,
        sampling: dict | None = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Responses (B, max_new_tokens) for left-padded prompts; pad after each row's EOS."""
        import torch

        self.check_prompt_ids(input_ids, attention_mask)
        b, t = input_ids.shape
        dev = input_ids.device  # every helper tensor lives beside the inputs (CPU or GPU)
        keys = attention_mask.bool()
        positions = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
        causal = torch.ones(t, t, dtype=torch.bool, device=dev).tril()
        mask = causal[None, None] & keys[:, None, None, :]
        # A fully padded query row would attend nothing; let it see itself (output unused).
        mask = mask | torch.eye(t, dtype=torch.bool, device=dev)[None, None]
        cache = KVCache(capacity=t + max_new_tokens)
        eos = torch.tensor(eos_ids, device=dev)
        out = torch.full((b, max_new_tokens), pad_id, dtype=torch.long, device=dev)
        done = torch.zeros(b, dtype=torch.bool, device=dev)
        with torch.no_grad():
            logits = self._last_position(self.forward(input_ids, positions, mask, cache))
            last = positions[:, -1]
            for step in range(max_new_tokens):
                token = self._next_token(logits, greedy, sampling or {}, generator, input_ids)
                token = torch.where(done, torch.full_like(token, pad_id), token)
                out[:, step] = token
                done |= torch.isin(token, eos)
                if bool(done.all()) or step == max_new_tokens - 1:
                    break
                keys = torch.cat([keys, torch.ones(b, 1, dtype=torch.bool, device=dev)], dim=1)
                last = last + 1
                logits = self.forward(token[:, None], last[:, None], keys[:, None, None, :], cache)
                logits = self._last_position(logits)
        return out

    @staticmethod
    def _last_position(logits: torch.Tensor | None) -> torch.Tensor | None:
        return None if logits is None else logits[:, -1]
