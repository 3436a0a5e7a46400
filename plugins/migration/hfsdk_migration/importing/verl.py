"""verl's ``ppo_trainer`` config (nested keys, as in its YAML or its ``key=value`` overrides).

Keys with a counterpart are mapped; verl's own default is assumed for the few
keys whose verl default differs from hfsdk's (so a partial file keeps verl's
meaning), and those assumptions are listed in the output's header. Batch sizes:
verl counts ``ppo_mini_batch_size`` in prompts and hfsdk's ``mini_batch_size``
in responses, so it is multiplied by ``rollout.n``.

Strategies and engines map to hfsdk's backends: ``strategy: megatron`` to the
megatron backend with its ``tp``/``pp``, ``rollout.name: vllm`` to the vLLM
rollout, ``rollout.tensor_model_parallel_size`` to the actor's generation
layout; a vision-language config gets the ``hf_vision`` rollout instead
(:mod:`~hfsdk_migration.importing.verl_vision`). Every key left over is listed once with its reason
(:mod:`~hfsdk_migration.importing.verl_reasons`); a switch set to its off
value (``false``, ``{}``, ``[]``) has nothing to map and is not listed.
"""

from __future__ import annotations

from typing import Any

from hfsdk import LOGGERS, LOSS_AGG_MODES, ConfigError
from hfsdk_migration.importing.mapper import Mapper, as_int, as_number, as_strings
from hfsdk_migration.importing.verl_reasons import list_leftovers
from hfsdk_migration.importing.verl_roles import (
    backend_of,
    config_fields,
    map_engine,
    map_lora,
    map_model,
    map_rollout,
    map_strategy,
)
from hfsdk_migration.importing.verl_tools import map_multi_turn
from hfsdk_migration.importing.verl_vision import is_vision, map_freeze_vision, map_image_key

A = "actor_rollout_ref.actor."
R = "actor_rollout_ref.rollout."
F = "actor_rollout_ref.ref."
M = "actor_rollout_ref.model."
C = "critic."

ESTIMATOR_ALGO = {
    "gae": "ppo",
    "grpo": "grpo",
    "rloo": "grpo",
    "reinforce_plus_plus": "grpo",
    "reinforce_plus_plus_baseline": "grpo",
    "remax": "remax",
}
"""verl's ``algorithm.adv_estimator`` -> the hfsdk algorithm that runs it."""
KL_TYPES = {
    "kl": "k1",
    "k1": "k1",
    "abs": "abs",
    "mse": "k2",
    "k2": "k2",
    "low_var_kl": "low_var_kl",
    # verl's kl_penalty computes "k3" exactly as "low_var_kl" (log ratio clamped to
    # ±20, value to ±10), not hfsdk's unclamped k3.
    "k3": "low_var_kl",
}
"""verl's KL estimator names -> hfsdk's (``hfsdk list kl-estimators``)."""
HFSDK_KL_ESTIMATORS = ("abs", "k1", "k2", "k3", "k3_clamped", "low_var_kl")
"""hfsdk's own estimator names, as ``hfsdk list kl-estimators`` prints them."""
LOSS_MODES = {"vanilla": "ppo_clip", "gspo": "gspo"}
CRITIC_ALGOS = ("ppo", "safe_rlhf")


def _files(key: str, value: Any) -> list[str]:
    """verl's ``train_files``/``val_files``: one path or a list of paths."""
    return as_strings(
        key, value, "a file path or a list of them",
        "give the parquet/jsonl file(s) as a string or a list of strings",
    )  # fmt: skip


def _loggers(key: str, value: Any) -> list[str]:
    """verl's ``trainer.logger``: one logger name or a list of them."""
    expected = f"a logger name or a list of them (hfsdk loggers: {', '.join(LOGGERS)})"
    return as_strings(key, value, expected, "give e.g. ['console', 'wandb']")


def _unflatten(flat: dict[str, Any]) -> dict[str, Any]:
    """``{"a.b": 1}`` -> ``{"a": {"b": 1}}``: the mapping the source nested (the mapper
    keeps keys flat, one per leaf)."""
    tree: dict[str, Any] = {}
    for key, value in flat.items():
        node = tree
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree


def _estimator_fields(name: str) -> set[str]:
    return config_fields("advantage_estimators", name)


def _data(m: Mapper) -> None:
    for key in ("train_files", "val_files"):
        if m.has(f"data.{key}"):
            m.put(f"data.{key}", _files(f"data.{key}", m.get(f"data.{key}")))
    if m.has("data.tokenizer"):
        m.put("actor.tokenizer_path", str(m.get("data.tokenizer")))
    if m.has("data.prompt_key"):
        m.put("data.prompt_key", str(m.get("data.prompt_key")))
    if m.has("data.train_batch_size"):
        m.put("data.batch_size", m.int("data.train_batch_size"))
    if m.has("data.max_prompt_length"):
        length = m.int("data.max_prompt_length")
        m.put("data.max_prompt_length", length)  # the rollout's follows from it
    if m.has("data.max_response_length"):
        length = m.int("data.max_response_length")
        m.put("rollout.max_response_length", length)
    if m.has("data.shuffle"):
        m.put("data.shuffle", bool(m.get("data.shuffle")))
    if m.has("data.seed"):
        m.put("trainer.seed", m.int("data.seed"))
    # hfsdk always drops prompts over data.max_prompt_length: verl's filter_overlong_prompts=True.
    if m.get("data.filter_overlong_prompts") is False and m.flat.get("data.truncation") not in (
        None,
        "error",
    ):
        m.reject(
            "data.filter_overlong_prompts",
            "hfsdk always drops prompts over data.max_prompt_length; it never truncates",
        )
    if m.get("data.truncation") not in (None, "error"):
        m.reject("data.truncation", "hfsdk drops prompts over the limit; it never truncates")
    for key in (R + "prompt_length", R + "response_length"):
        # Usually ${data.max_*_length}; mapped when it agrees with the data section.
        source = "data.max_prompt_length" if "prompt" in key else "data.max_response_length"
        if m.has(key) and m.flat.get(key) == m.flat.get(source):
            m.get(key)


def _optim(m: Mapper, prefix: str, role: str, lr_default: float, total: int | None) -> None:
    lr = m.get(prefix + "optim.lr", lr_default, source_default=True)
    m.put(f"{role}.optim.lr", as_number(prefix + "optim.lr", lr))
    # verl's AdamW decays by 0.01 unless told otherwise (hfsdk's default is 0).
    m.put(
        f"{role}.optim.weight_decay",
        m.num(prefix + "optim.weight_decay", 0.01, source_default=True),
    )
    if m.has(prefix + "optim.min_lr_ratio"):
        m.put(f"{role}.optim.min_lr_ratio", m.num(prefix + "optim.min_lr_ratio"))
    if m.has(prefix + "optim.betas"):
        m.put(f"{role}.optim.betas", m.numbers(prefix + "optim.betas", 2))
    for key in ("grad_clip", "optim.clip_grad"):
        if m.has(prefix + key):
            m.put(f"{role}.optim.grad_clip", m.num(prefix + key))
    if str(m.get(prefix + "optim.optimizer", "adamw")).lower() not in ("adamw", "adam"):
        m.reject(prefix + "optim.optimizer", "hfsdk trains with AdamW")
    if m.get(prefix + "optim.optimizer_impl") not in (None, "torch.optim"):
        m.reject(prefix + "optim.optimizer_impl", "hfsdk uses torch.optim.AdamW")
    steps = m.int(prefix + "optim.lr_warmup_steps", -1)
    ratio = m.num(prefix + "optim.lr_warmup_steps_ratio", 0.0)
    if steps > 0:
        m.put(f"{role}.optim.warmup_steps", steps)
    elif ratio > 0:
        if total is None:
            m.reject(
                prefix + "optim.lr_warmup_steps_ratio",
                "needs trainer.total_training_steps; set optim.warmup_steps",
            )
        else:
            m.put(f"{role}.optim.warmup_steps", int(ratio * total))
    # verl's OptimizerConfig takes the deprecated warmup_style over lr_scheduler_type when
    # set (verl's tree sets lr_scheduler_type: constant); megatron's optimizer reads
    # lr_decay_style, so it too comes before the tree's lr_scheduler_type.
    keys = [prefix + "optim." + k for k in ("warmup_style", "lr_decay_style", "lr_scheduler_type")]
    chosen = next((key for key in keys if m.has(key)), None)
    for key in keys:
        m.get(key)  # the first one set is verl's schedule; the others are ignored by verl too
    style = m.get(chosen) if chosen is not None else None
    if style in ("constant", "cosine"):
        m.put(f"{role}.optim.lr_schedule", style)
    elif chosen is not None:
        m.reject(chosen, "hfsdk schedules: constant, cosine")


def _batches(m: Mapper, prefix: str, role: str, n: int, backend: str) -> None:
    if m.has(prefix + "ppo_mini_batch_size"):
        size = m.int(prefix + "ppo_mini_batch_size")
        m.put(f"{role}.mini_batch_size", size * n)
    dynamic = bool(m.get(prefix + "use_dynamic_bsz", False))
    budget = prefix + "ppo_max_token_len_per_gpu"
    if dynamic and "micro_batch_tokens" in config_fields("training_backends", backend):
        m.put(f"{role}.micro_batch_tokens", m.int(budget, 16384, source_default=True))
        if m.has(prefix + "ppo_micro_batch_size_per_gpu"):
            m.reject(
                prefix + "ppo_micro_batch_size_per_gpu",
                f"hfsdk decides this itself: {role}.micro_batch_tokens sizes the passes",
            )
        for key in m.keys(prefix + "forward_max_token_len_per_gpu"):
            m.get(key)  # one budget in hfsdk for training and inference passes
    elif dynamic:
        m.reject(prefix + "use_dynamic_bsz", f"the {backend} backend has no token budgets")
    else:
        m.get(budget)  # unused by verl too without use_dynamic_bsz
        for key in m.keys(prefix + "forward_max_token_len_per_gpu"):
            m.get(key)
        if m.has(prefix + "ppo_micro_batch_size_per_gpu"):
            size = m.int(prefix + "ppo_micro_batch_size_per_gpu")
            m.put(f"{role}.micro_batch_size", size)
    if m.has(prefix + "ppo_epochs"):
        m.put(f"{role}.ppo_epochs", m.int(prefix + "ppo_epochs"))
    if m.has(prefix + "shuffle"):
        m.put(f"{role}.shuffle", bool(m.get(prefix + "shuffle")))
    m.get(prefix + "rollout_n")  # verl's copy of rollout.n


def _clipping(m: Mapper) -> None:
    """The policy loss and its clip ratios (those of a loss hfsdk lacks are listed with it)."""
    loss_mode = m.get(A + "policy_loss.loss_mode", "vanilla")
    keys = [A + k for k in ("clip_ratio", "clip_ratio_low", "clip_ratio_high", "clip_ratio_c")]
    if loss_mode not in LOSS_MODES:
        m.reject(A + "policy_loss.loss_mode", "hfsdk policy losses: ppo_clip, gspo, reinforce")
        for key in keys:
            m.reject(key, f"a setting of verl's {loss_mode!r} loss, which hfsdk does not have")
        return
    loss = LOSS_MODES[loss_mode]
    if m.has(A + "policy_loss.loss_mode"):
        m.put("algorithm.policy_loss", loss)
    fields = config_fields("policy_losses", loss)
    if m.has(A + "clip_ratio"):
        ratio = m.num(A + "clip_ratio")
        m.put("policy_loss.clip_ratio_low", ratio)
        m.put("policy_loss.clip_ratio_high", ratio)
    for side in ("low", "high"):
        if m.has(f"{A}clip_ratio_{side}"):
            m.put(f"policy_loss.clip_ratio_{side}", m.num(f"{A}clip_ratio_{side}"))
    if m.has(A + "clip_ratio_c") and "clip_ratio_c" in fields:
        m.put("policy_loss.clip_ratio_c", m.num(A + "clip_ratio_c"))
    elif m.has(A + "clip_ratio_c"):
        m.reject(A + "clip_ratio_c", f"hfsdk's {loss} loss has no dual clip")


def _actor(m: Mapper, n: int, total: int | None) -> None:
    backend = map_strategy(m, A, "actor")
    map_model(m, M, "actor", backend)
    map_lora(m, M, "actor", backend)
    map_freeze_vision(m, backend, config_fields("training_backends", backend))
    map_engine(m, A, "actor", backend)
    ref_backend = backend_of(m.get(F + "strategy", m.flat.get(A + "strategy")))
    if ref_backend == "megatron":
        m.put("reference.backend", "megatron")
    map_engine(m, F, "reference", ref_backend)
    _optim(m, A, "actor", 1e-6, total)
    _batches(m, A, "actor", n, backend)
    _clipping(m)
    if m.has(A + "entropy_coeff"):
        m.put("algorithm.entropy_coef", m.num(A + "entropy_coeff"))
    mode = m.get(A + "loss_agg_mode")
    if mode in LOSS_AGG_MODES:
        m.put("algorithm.loss_agg_mode", mode)
    elif mode is not None:
        m.reject(A + "loss_agg_mode", f"hfsdk modes: {', '.join(LOSS_AGG_MODES)}")
    if m.has(R + "log_prob_micro_batch_size_per_gpu"):
        size = m.int(R + "log_prob_micro_batch_size_per_gpu")
        m.put("actor.forward_micro_batch_size", size)
    if m.has(F + "log_prob_micro_batch_size_per_gpu"):
        size = m.int(F + "log_prob_micro_batch_size_per_gpu")
        m.put("reference.forward_micro_batch_size", size)


def _kl(m: Mapper) -> None:
    in_reward = bool(m.get("algorithm.use_kl_in_reward", False, source_default=True))
    use_loss = bool(m.get(A + "use_kl_loss", False, source_default=True))
    m.put("algorithm.kl_in_reward", in_reward)
    coef = m.num(A + "kl_loss_coef", 0.001)
    m.put("algorithm.kl_loss_coef", coef if use_loss and not in_reward else 0.0)
    if use_loss and in_reward:  # verl adds both; hfsdk's KL is one or the other
        why = "hfsdk puts the KL in the reward or in the loss, not both (KL in the reward kept)"
        m.reject(A + "use_kl_loss", why)
    loss_type = m.get(A + "kl_loss_type", "low_var_kl")
    penalty = m.get("algorithm.kl_penalty", "kl")
    if in_reward:
        ctrl = m.get("algorithm.kl_ctrl.type", "fixed")
        if ctrl in ("fixed", "adaptive"):
            m.put("algorithm.kl_controller", ctrl)
        else:
            m.reject("algorithm.kl_ctrl.type", "hfsdk KL controllers: fixed, adaptive")
        kl_coef = m.get("algorithm.kl_ctrl.kl_coef", 0.001, source_default=True)
        m.put("algorithm.kl_coef", as_number("algorithm.kl_ctrl.kl_coef", kl_coef))
        if m.has("algorithm.kl_ctrl.target_kl"):
            m.put("algorithm.target_kl", m.num("algorithm.kl_ctrl.target_kl"))
        if m.has("algorithm.kl_ctrl.horizon"):
            m.put("algorithm.kl_horizon", m.int("algorithm.kl_ctrl.horizon"))
    else:
        m.put("algorithm.kl_coef", 0.0)
        # Without KL in the reward verl ignores its controller settings; so does hfsdk.
        for key in [k for k in m.flat if k.startswith("algorithm.kl_ctrl.")]:
            m.get(key)
    chosen = penalty if in_reward else loss_type if use_loss else None
    key = "algorithm.kl_penalty" if in_reward else A + "kl_loss_type"
    if chosen is not None:
        if chosen in KL_TYPES:
            m.put("algorithm.kl_estimator", KL_TYPES[chosen])
        else:
            m.reject(
                key,
                f"no hfsdk counterpart for {chosen!r}; hfsdk KL estimators: "
                f"{', '.join(HFSDK_KL_ESTIMATORS)} (verl's k3 is hfsdk's low_var_kl)",
            )
    if in_reward and use_loss and KL_TYPES.get(loss_type) != KL_TYPES.get(penalty):
        m.reject(A + "kl_loss_type", "hfsdk uses one KL estimator for reward and loss")


def _critic(m: Mapper, algo: str, n: int, total: int | None) -> None:
    if algo not in CRITIC_ALGOS:
        m.group(C, f"algorithm {algo!r} has no critic")
        return
    backend = map_strategy(m, C, "critic")
    map_model(m, C + "model.", "critic", backend)
    map_lora(m, C + "model.", "critic", backend)
    map_engine(m, C, "critic", backend)
    _optim(m, C, "critic", 1e-5, total)
    # verl's critic takes the actor's batch sizes unless it sets its own.
    for key in ("ppo_mini_batch_size", "ppo_micro_batch_size_per_gpu", "ppo_epochs"):
        if not m.has(C + key) and m.has(A + key):
            m.flat[C + key] = m.flat[A + key]
            m.used.add(C + key)
    _batches(m, C, "critic", n, backend)
    if m.has(C + "forward_micro_batch_size_per_gpu"):
        size = m.int(C + "forward_micro_batch_size_per_gpu")
        m.put("critic.forward_micro_batch_size", size)
    if m.has(C + "cliprange_value"):
        value = m.num(C + "cliprange_value")
        m.put("value_loss.clip_range_value", value)


def _advantage(m: Mapper, estimator: str) -> None:
    fields = _estimator_fields(estimator)
    defaults = {"gamma": 1.0, "lam": 1.0}
    for key in ("gamma", "lam"):
        if key in fields:
            value = m.get(f"algorithm.{key}", defaults[key], source_default=True)
            m.put(f"advantage.{key}", as_number(f"algorithm.{key}", value))
        elif m.has(f"algorithm.{key}") and as_number(key, m.flat[f"algorithm.{key}"]) != 1.0:
            m.reasons[f"algorithm.{key}"] = f"estimator {estimator!r} has no {key}"
        elif m.has(f"algorithm.{key}"):
            m.get(f"algorithm.{key}")  # 1.0: what an estimator without it computes
    if "norm_by_std" in fields and m.has("algorithm.norm_adv_by_std_in_grpo"):
        m.put("advantage.norm_by_std", bool(m.get("algorithm.norm_adv_by_std_in_grpo")))
    elif m.has("algorithm.norm_adv_by_std_in_grpo"):
        m.get("algorithm.norm_adv_by_std_in_grpo")  # verl reads it for GRPO only, as hfsdk


def _trainer(m: Mapper) -> int | None:
    total = None
    if m.has("trainer.total_training_steps"):
        total = m.int("trainer.total_training_steps")
        m.put("trainer.total_steps", total)
        m.get("trainer.total_epochs")  # verl too takes total_training_steps over epochs
    elif m.has("trainer.total_epochs"):
        total = _steps_from_epochs(m)
    save = m.get("trainer.save_freq")
    if save is not None:
        m.put("trainer.save_every", max(as_int("trainer.save_freq", save), 0))
    test = m.get("trainer.test_freq")
    if test is not None:
        m.put("trainer.val_every", max(as_int("trainer.test_freq", test), 0))
    # verl validates before training unless told not to (hfsdk's default is not to).
    m.put(
        "trainer.val_before_train",
        bool(m.get("trainer.val_before_train", True, source_default=True)),
    )
    loggers = m.get("trainer.logger")
    names = ["wandb"]  # unset: verl's default logs to wandb
    if loggers is not None:
        names = _loggers("trainer.logger", loggers)
        kept = [name for name in names if name in LOGGERS]
        m.put("trainer.loggers", list(dict.fromkeys([*kept, "jsonl"])))
        if len(kept) != len(names):
            m.reject("trainer.logger", f"hfsdk loggers: {', '.join(LOGGERS)}")
    # verl names its wandb (and tensorboard) run by these; hfsdk's run dir stays the run's name.
    # Without wandb among the loggers they name nothing hfsdk logs (a run would warn of them).
    for src, dest in (("project_name", "project"), ("experiment_name", "name")):
        if m.has(f"trainer.{src}"):
            value = str(m.get(f"trainer.{src}"))
            if "wandb" in names:
                m.put(f"wandb.{dest}", value)
    gpus = m.get("trainer.n_gpus_per_node")
    nodes = m.get("trainer.nnodes")
    if gpus is not None or nodes is not None:
        pool: dict[str, int] = {}
        # hfsdk's pool counts all its devices; verl counts per node.
        per_node = as_int("trainer.n_gpus_per_node", gpus) if gpus is not None else 1
        node_count = as_int("trainer.nnodes", nodes) if nodes is not None else 1
        pool["devices"] = per_node * node_count
        if nodes is not None:
            pool["nodes"] = node_count
        m.put("placement.pools", {"global": pool})
    return total


def _steps_from_epochs(m: Mapper) -> int | None:
    """verl's ``total_epochs`` as steps: epochs x (rows // train_batch_size), as verl counts."""
    epochs = m.int("trainer.total_epochs")
    files = m.flat.get("data.train_files")
    batch = m.flat.get("data.train_batch_size")
    rows = _count_rows(_files("data.train_files", files)) if files and batch else None
    if rows is None or as_int("data.train_batch_size", batch) > rows:
        m.reject(
            "trainer.total_epochs",
            "hfsdk counts steps: set trainer.total_steps = total_epochs x rows // "
            "data.train_batch_size (the train files are not here to count)",
        )
        return None
    total = epochs * (rows // as_int("data.train_batch_size", batch))
    m.put("trainer.total_steps", total)
    return total


def _count_rows(files: list[str]) -> int | None:
    """Rows in local parquet / jsonl files (``None`` when one is missing or unreadable)."""
    from pathlib import Path

    rows = 0
    for name in files:
        path = Path(name).expanduser()
        if not path.is_file():
            return None
        try:
            if path.suffix == ".parquet":
                import pyarrow
                import pyarrow.parquet as pq

                try:
                    rows += pq.ParquetFile(path).metadata.num_rows
                except pyarrow.ArrowException:  # not parquet (a git-lfs pointer, a bad copy)
                    return None
            elif path.suffix == ".jsonl":
                rows += sum(1 for line in path.read_text().splitlines() if line.strip())
            else:
                return None
        except (OSError, UnicodeDecodeError):  # unreadable here: the steps cannot be counted
            return None
    return rows


FILTER_METRICS = ("acc", "score", "seq_reward", "seq_final_reward")
"""verl filter_groups metrics that are the sample's reward (what dapo's dynamic sampling reads)."""
SHAPED_METRICS = ("seq_reward", "seq_final_reward")
"""verl filter_groups metrics summed after overlong shaping (and, the final one, the KL in the
reward): the score dapo filters on only while neither is on."""


OVERLONG_SECTIONS = ("reward_model.", "reward.")
"""Where verl's DAPO reward manager reads ``reward_kwargs.overlong_buffer_cfg`` (verl's DAPO
recipe scripts set it there; 0.9 moved the reward settings under ``reward.``)."""


def _overlong_prefix(m: Mapper) -> str | None:
    """The section that turns overlong shaping on, or ``None``; the others are consumed.

    Either the legacy ``reward_model.overlong_buffer`` or the DAPO reward manager's
    ``reward_kwargs.overlong_buffer_cfg``, which only that manager reads.
    """
    candidates = ["reward_model.overlong_buffer."]
    for section in OVERLONG_SECTIONS:
        manager = m.flat.get(
            section + "reward_manager.name", m.flat.get(section + "reward_manager")
        )
        if manager == "dapo":
            candidates.append(section + "reward_kwargs.overlong_buffer_cfg.")
    found = None
    for prefix in candidates:
        if found is None and m.get(prefix + "enable") is True:
            found = prefix
    for prefix in ("reward_model.overlong_buffer.", *candidates[1:]):
        if prefix != found:
            m.consume(prefix)
    return found


def _filter_groups(m: Mapper, chosen: str, explicit: bool) -> str:
    """DAPO's dynamic sampling and overlong shaping: the ``dapo`` algorithm; returns the algo.

    verl turns them on inside a GRPO run (``algorithm.filter_groups.enable``,
    ``reward_model.overlong_buffer.*`` or the DAPO reward manager's
    ``reward_kwargs.overlong_buffer_cfg.*``); in hfsdk they are the ``dapo``
    algorithm's, which trains without KL, so a run with KL keeps its algorithm
    and lists them.
    """
    enabled = m.get("algorithm.filter_groups.enable") is True
    source = _overlong_prefix(m)
    overlong = source is not None
    if not enabled:
        m.consume("algorithm.filter_groups.")
    if not (enabled or overlong):
        return chosen
    algorithm = m.out.get("algorithm", {})
    with_kl = bool(algorithm.get("kl_loss_coef")) or bool(algorithm.get("kl_in_reward"))
    why_not = None
    if explicit and chosen != "dapo":
        why_not = f"dynamic sampling and overlong shaping are the dapo algorithm's, not {chosen!r}"
    elif with_kl:
        why_not = "the dapo algorithm (dynamic sampling, overlong shaping) trains without KL"
    elif algorithm.get("advantage_estimator") != "grpo":
        why_not = "the dapo algorithm normalises rewards per group (adv_estimator=grpo)"
    if why_not is not None:
        for key in m.keys("algorithm.filter_groups.") + (m.keys(source) if source else []):
            if m.flat.get(key) is not None:
                m.reject(key, why_not)
        return chosen
    m.put("algo", "dapo")
    # verl's full tree configures a reference model; dapo (no KL) builds none.
    m.out.pop("reference", None)
    m.put("algorithm.dynamic_sampling", enabled)
    if enabled:
        metric = m.get("algorithm.filter_groups.metric", "acc")
        if metric not in FILTER_METRICS:
            m.reject(
                "algorithm.filter_groups.metric",
                f"dapo filters groups on the sample's reward ({', '.join(FILTER_METRICS)})",
            )
        elif metric in SHAPED_METRICS and source is not None:
            # A run with KL in the reward never gets here (with_kl above), so overlong
            # shaping is what would make verl's shaped sum differ from the score.
            m.reject(
                "algorithm.filter_groups.metric",
                "hfsdk's dynamic sampling keeps groups on the reward's score before the "
                f"overlong penalty and any KL in the reward; {metric!r} includes the penalty, "
                "so other groups would be kept and hfsdk has no filter on it: set "
                "filter_groups.metric=score (or acc) in verl to compare the runs",
            )
        rounds = m.int("algorithm.filter_groups.max_num_gen_batches", 10)
        if rounds == 0:  # verl: no limit
            m.reject(
                "algorithm.filter_groups.max_num_gen_batches",
                "0 (no limit) has no counterpart; algorithm.max_generation_rounds bounds it",
            )
            rounds = 10
        m.put("algorithm.max_generation_rounds", rounds)
    if source is not None:
        m.put("algorithm.overlong_buffer_len", m.int(source + "len", 0))
        m.put("algorithm.overlong_penalty_factor", m.num(source + "penalty_factor", 1.0))
        for section in OVERLONG_SECTIONS:  # the dapo manager's work is the dapo algorithm's
            if source.startswith(section + "reward_kwargs."):
                m.get(section + "reward_manager")
                m.get(section + "reward_manager.name")
    return "dapo"


def _reward(m: Mapper) -> None:
    # verl 0.9 moved the section under reward.; its legacy top-level copy is kept too.
    prefix = "custom_reward_function."
    if m.has("reward.custom_reward_function.path"):
        prefix = "reward.custom_reward_function."
    path = m.get(prefix + "path")
    if path is None:
        return
    name = m.get(prefix + "name", "compute_score")
    function: dict[str, Any] = {"name": f"{path}:{name}", "style": "verl"}
    # verl passes reward_kwargs as given: a nested mapping stays one (the mapper's keys are
    # flat, so the leaves under reward_kwargs are put back together).
    kwargs = _unflatten(
        {
            key.removeprefix(prefix + "reward_kwargs."): m.get(key)
            for key in list(m.flat)
            if key.startswith(prefix + "reward_kwargs.")
        }
    )
    if kwargs:
        function["kwargs"] = kwargs
    m.put("reward.functions", [function])


def _check_generation_tp(m: Mapper) -> None:
    """Refuse a rollout tensor-parallel size below 1 before the mappers divide by it."""
    key = R + "tensor_model_parallel_size"
    if m.has(key) and as_int(key, m.flat[key]) < 1:
        raise ConfigError(
            f"{key}={m.flat[key]!r}: expected a positive integer (the GPUs one generation "
            "engine spans); set it to 1 or more"
        )


def _sampling(m: Mapper) -> None:
    """``rollout.do_sample`` and ``rollout.val_kwargs``: greedy rollouts and validation samples.

    ``do_sample: false`` makes verl's rollouts greedy: hfsdk's ``rollout.temperature: 0``.
    Validation samples ``val_kwargs.n`` responses only with ``val_kwargs.do_sample: true``
    (verl's default is greedy, one response, as hfsdk's ``trainer.val_n: 1``); hfsdk samples
    them with the rollout's settings, so another temperature, top_p or top_k is listed.
    """
    if m.get(R + "do_sample") is False:
        m.put("rollout.temperature", 0.0)
    v = R + "val_kwargs."
    if m.get(v + "do_sample") is not True:
        for key in ("n", "temperature", "top_p", "top_k"):
            m.get(v + key)  # greedy: one response, sampling settings unused (so in hfsdk)
        return
    n = m.int(v + "n", 1)
    if n > 1:
        m.put("trainer.val_n", n)
    else:
        m.reject(
            v + "do_sample",
            "hfsdk validates one response per prompt greedily (trainer.val_n: 1); set "
            "trainer.val_n above 1 to sample",
        )
    rollout = m.out.get("rollout", {})
    current = {
        "temperature": float(rollout.get("temperature", 1.0)),
        "top_p": float(rollout.get("top_p", 1.0)),
        "top_k": max(int(rollout.get("top_k", 0)), 0),
    }
    for key, value in current.items():
        given = m.num(v + key)
        if given is None:
            continue
        if key == "top_k":
            given = max(given, 0.0)  # verl's -1 and hfsdk's 0 both mean "off"
        if given != value:
            m.reject(
                v + key,
                f"hfsdk samples validation with the rollout's settings (rollout.{key}: "
                f"{value}); there is no validation {key}",
            )


def _is_vision(m: Mapper) -> bool:
    """:func:`is_vision`, a train file here that is not readable parquet (a git-lfs pointer)
    saying nothing, as a file not here does (its other signs are checked before the files)."""
    import pyarrow

    try:
        return is_vision(m)
    except (pyarrow.ArrowException, OSError):
        return False


def import_verl(m: Mapper, algo: str | None) -> str:
    """Map verl keys from ``m`` into hfsdk keys; returns the hfsdk algorithm chosen."""
    estimator = m.get("algorithm.adv_estimator", "gae", source_default=True)
    if estimator not in ESTIMATOR_ALGO:
        m.reject(
            "algorithm.adv_estimator",
            f"hfsdk estimators for verl's names: {', '.join(ESTIMATOR_ALGO)}",
        )
        estimator = "grpo"
    chosen = algo or ESTIMATOR_ALGO[estimator]
    m.put("algo", chosen)
    m.put("algorithm.advantage_estimator", estimator)
    n = m.int(R + "n", 1)
    m.put("algorithm.n_samples_per_prompt", n)
    total = _trainer(m)
    _data(m)
    map_image_key(m)
    _actor(m, n, total)
    _check_generation_tp(m)
    map_rollout(m, vision=_is_vision(m))
    _sampling(m)
    map_multi_turn(m)
    _kl(m)
    _advantage(m, estimator)
    _critic(m, chosen, n, total)
    chosen = _filter_groups(m, chosen, explicit=algo is not None)
    _reward(m)
    list_leftovers(m)
    return chosen
