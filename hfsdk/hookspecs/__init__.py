"""Hook specifications of hfsdk.

Every hook is prefixed ``hfsdk_``. Registration hooks receive a ``register``
callback instead of returning values, so a plugin can register any number of
entries and the plugin manager knows which plugin owns each one:

    register(name: str, impl: object, *, config_cls: type | None = None, **extra)

Each hook is documented in ``docs/plugin_hooks.md`` (a contract test checks it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

hookspec = pluggy.HookspecMarker("hfsdk")

Register = Callable[..., None]
"""The ``register(name, impl, *, config_cls=None, **extra)`` callback type."""


@hookspec(historic=True)
def hfsdk_addhooks(pluginmanager: pluggy.PluginManager) -> None:
    """Add new hook specifications (bootstrap hook).

    Called once per plugin, including plugins registered later, so a plugin can
    call ``pluginmanager.add_hookspecs(module)`` with hooks of its own that
    other plugins may implement.
    """


@hookspec
def hfsdk_register_registry_kinds(register: Register) -> None:
    """Add registry kinds of a plugin's own: ``register(kind, hook_name)``.

    ``hook_name`` is a registration hook the plugin added with
    ``hfsdk_addhooks`` (it takes ``register``, as the core's do). The kind then
    behaves like a core one: ``hfsdk.get_registry(kind)`` holds every plugin's
    entries with their owners, a name registered twice is an error naming both
    plugins, and ``hfsdk list KIND`` lists it (``-`` or ``_`` in the name).
    A kind the core or another plugin already has is an error.
    """


@hookspec
def hfsdk_register_algorithms(register: Register) -> None:
    """Register RL algorithms.

    ``register(spec.name, spec)`` with an ``hfsdk.AlgorithmSpec``: the program
    (an ``hfsdk.Algorithm`` subclass), its config class, its roles with their
    kinds (``policy``, ``value``, ``frozen_policy``, ``scorer``), extra
    generation stages, the default-task preset and the actor's loss terms.
    The planner's stages are derived from it.
    """


@hookspec
def hfsdk_register_advantage_estimators(register: Register) -> None:
    """Register advantage estimators.

    ``register(name, fn, config_cls=EstimatorConfig)``. ``fn`` takes keyword
    arguments ``token_level_rewards`` (B, T), ``response_mask`` (B, T), and as
    needed ``values``, ``group_index``, ``reward_baselines``, plus ``config``;
    it returns an ``hfsdk.AdvantageResult`` (``advantages``, ``returns``, both
    (B, T) and zero where masked, and named ``extras``); see
    ``hfsdk.AdvantageEstimator``.
    """


@hookspec
def hfsdk_register_policy_losses(register: Register) -> None:
    """Register policy losses.

    ``register(name, fn, config_cls=LossConfig)``. ``fn`` is an
    ``hfsdk.PolicyLoss``: keyword tensors, ``config`` and one
    ``hfsdk.LossAggregation``; it returns ``(loss, metrics)`` where
    ``metrics`` is a dict of floats.
    """


@hookspec
def hfsdk_register_value_losses(register: Register) -> None:
    """Register value (critic) losses: ``hfsdk.ValueLoss`` callables, ``(loss, metrics)``."""


@hookspec
def hfsdk_register_kl_estimators(register: Register) -> None:
    """Register per-token KL estimators ``fn(log_prob, ref_log_prob) -> Tensor``."""


@hookspec(firstresult=True)
def hfsdk_behaviour_log_probs_needed(config: Any) -> bool | None:
    """Whether a run needs the sampling policy's ``rollout_log_probs`` on every row.

    The generation pipeline then computes them behind each generation when the rollout
    reports none (``hfsdk.behaviour_log_probs_needed``). Answer ``True`` when a feature
    of the resolved run ``config`` reads them (a rollout correction, a mismatch gate),
    else ``None`` so that another plugin may answer; nobody answering means no.
    """


@hookspec
def hfsdk_register_reward_functions(register: Register) -> None:
    """Register reward functions.

    ``register(name, fn, config_cls=None, columns=None)``. ``fn(prompts, responses,
    **columns)`` returns one float per sample, or one dict per sample with a ``score`` key
    (other keys are logged as metrics). ``fn`` may be ``async``. ``columns(config)``
    names the dataset columns it reads under that config (e.g. an answer column), so
    a run refuses a dataset without them before it starts, and ``hfsdk data inspect``
    says so.
    """


@hookspec
def hfsdk_register_rollout_backends(register: Register) -> None:
    """Register rollout (generation) backends: ``register(name, cls, config_cls=...)``.

    ``cls`` subclasses :class:`hfsdk.RolloutBackend`; ``config_cls`` is its
    ``rollout`` section (a :class:`hfsdk.RolloutConfig` subclass, checked). ``default=True``
    makes it the backend of a ``rollout`` section that names none.

    Every actor worker builds it once with ``hfsdk.build_rollout(config, actor)``
    (``cls.build``); ``actor`` is the training backend's :class:`hfsdk.ActorSource`
    (HF-named weights one at a time, optionally its own module or its
    3D-HybridEngine generation shards), never a backend-specific engine. The
    worker calls ``generate_sequences(prompts)`` (through ``hfsdk.generate_rollout``,
    which runs a plugin's generation strategy instead when one answers
    ``hfsdk_wrap_generation``, e.g. agent loops for ``rollout.multi_turn``) on every
    actor rank when ``collective`` is true (else on the collecting ranks only),
    ``update_weights(actor)`` after every update and checkpoint load, and
    ``close()`` at the end. See ``hfsdk/core/rollout_contract.py`` and
    docs/plugin_hooks.md (a worked example).
    """


@hookspec
def hfsdk_register_model_inputs(register: Register) -> None:
    """Register how a model family's extra per-row inputs reach its forward.

    ``register(name, inputs)`` with an :class:`hfsdk.ModelInputs` instance. A batch whose
    ``meta[hfsdk.MODEL_INPUTS]`` is ``name`` (set by the rollout that made it, e.g. one that
    generates from images) is run through ``inputs.forward_kwargs`` by the training
    backends; such rows are neither packed nor stripped of padding columns.
    """


@hookspec
def hfsdk_register_training_backends(register: Register) -> None:
    """Register training backends: ``register(name, impl, config_cls=..., default_for=(...))``.

    The config class (an :class:`hfsdk.RoleConfig` subclass, checked) is the per-role
    section (``actor``, ``critic``, ...) used when a role selects this backend. ``impl``
    is a ``hfsdk.Worker`` subclass or has ``worker_class(role_kind)``; ``default_for``
    names the role kinds whose sections get this backend when they name none.
    """


@hookspec
def hfsdk_register_transfer_protocols(register: Register) -> None:
    """Register transfer protocols: ``register(name, protocol)``.

    ``protocol`` is a (dispatch, collect) pair, see ``hfsdk.core.workers``.
    """


@hookspec
def hfsdk_register_commands(cli: Any) -> None:
    """Add subcommands to the ``hfsdk`` command: ``cli`` is the click group."""


@hookspec
def hfsdk_validate_config(config: Any) -> list[str] | None:
    """Check a resolved run config across sections.

    Return a list of error messages (empty or ``None`` when the config is fine).
    Every plugin's answer is collected; any message stops the run before it starts.
    """


# --- The runtime's seams: what features hang on to the trainer without the core importing them.


@hookspec
def hfsdk_register_config_sections(register: Register) -> None:
    """Register a top-level run-config section: ``register(name, config_cls)``.

    ``config_cls`` is a frozen attrs class whose defaults make a run that never
    mentions the section behave as before; every run config of every algorithm
    gets it as ``config.sections[name]`` (YAML key ``name:``, dotted overrides
    ``name.key=value``, shown by ``hfsdk config show``). The core registers
    ``trainer``, ``data`` and ``placement`` this way.
    """


@hookspec
def hfsdk_register_step_observers(register: Register) -> None:
    """Register something that watches every training step: ``register(name, factory)``.

    ``factory(config, run_dir)`` is called once per run (a :class:`hfsdk.RunConfig`
    and the run directory's :class:`~pathlib.Path`) and returns a
    :class:`hfsdk.StepObserver`, or ``None`` when the run does not need it (so a
    disabled feature costs nothing per step). The trainer calls each observer's
    ``on_step_start`` before a step draws its prompts' batch, ``on_step_trained`` right
    after the algorithm's step (the step's batch is ``view.algorithm.last_batch``),
    ``on_step_metrics`` before the metrics line is written (its returned mapping is
    added to the line) and ``on_step_logged`` after. Observers run in name order;
    one that raises stops the run like any step error.
    """


@hookspec
def hfsdk_register_trackers(register: Register) -> None:
    """Register a metric sink for ``trainer.loggers``: ``register(name, factory)``.

    ``factory(run_dir=, config=, start_step=)`` is called once per run that lists
    ``name`` (the run directory's :class:`~pathlib.Path`, the :class:`hfsdk.RunConfig`,
    the step the run resumes from, 0 for a new run) and returns an object with
    ``log(step, metrics)``, ``log_samples(step, samples)`` (validation generations:
    dicts with ``prompt``, ``response``, ``score``) and ``close()``. The core writes
    ``jsonl`` and ``console`` itself; a logger no plugin registers is refused when the
    config is loaded.
    """


@hookspec
def hfsdk_register_preflight_checks(register: Register) -> None:
    """Register a check run before a run starts any worker: ``register(name, check)``.

    ``check(config, spec, prepared)`` gets the :class:`hfsdk.RunConfig`, the
    algorithm's :class:`hfsdk.AlgorithmSpec` and the
    :class:`~hfsdk.core.trainer.preflight.PreparedRun` (assets, tokenizer, the
    loaded prompts, the signal configs and their reward scorers, the tools' schemas). It raises
    :class:`hfsdk.HfsdkError` (one line: what is wrong, what to do) to refuse the
    run, returns one line to log as a warning, or ``None`` when all is well.
    Checks run in name order after the core's own checks, before the run directory
    is created.
    """


# -- prompt datasets: loading a run's prompts ---------------------------------------------


@hookspec(firstresult=True)
def hfsdk_load_prompts(request: Any) -> Any | None:
    """Load, check and tokenise a run's prompts, or return ``None``.

    ``request`` is a :class:`hfsdk.PromptRequest` (the run config, the train and
    validation files, the tokenizer, the tools' schemas). Return a
    :class:`hfsdk.RunPrompts`: the training :class:`hfsdk.PromptStream` the trainer
    draws each step's batch from and checkpoints the position of, the validation
    :class:`hfsdk.PromptSet` (``None`` without validation files) and the columns of
    a training row. Called once per run, before any worker starts; the first answer
    wins. Raise :class:`hfsdk.HfsdkError` (one line) for data the run cannot use.
    See docs/plugin_hooks.md.
    """


# -- the reward contract: scoring a signal section's functions ------------------------------


@hookspec(firstresult=True)
def hfsdk_build_reward_scorer(section: str, config: Any) -> Any | None:
    """Build the scorer of a signal section that lists reward functions, or return ``None``.

    ``section`` names it (``reward``, ``cost``, ...), ``config`` is its signal config
    (``functions``: name, weight, kwargs, style; ``timeout_s``). Return an
    :class:`hfsdk.RewardScorer` (``score(prompts, responses, columns) -> (scores,
    metrics)``), resolving every function now so a bad entry fails before the run
    starts. Called once per run and section, before any worker starts; the first
    answer wins. A run whose config names functions and that no plugin answers stops
    with one line naming the distribution to install.
    """


# --- tasks_rewards: the task registry -----------------------------------------------------


@hookspec
def hfsdk_register_tasks(register: Register) -> None:
    """Register built-in tasks: ``register(name, task)``, ``task`` an :class:`hfsdk.Task`.

    A task is what a run trains on when its config names no data: its assets
    (model, tokenizer, train/val data, built on first use), the settings it puts
    under the user's config, and the reward/cost functions that score it.
    ``hfsdk run --task NAME`` selects one; ``default`` is the task of a run
    given nothing else, and its model is what a role without ``model_path``
    loads (``hfsdk.default_model_dir``). See docs/plugin_hooks.md.
    """


# --- agents: generation strategies and rollout sub-sections --------------------------------


@hookspec(firstresult=True)
def hfsdk_wrap_generation(rollout: Any) -> Any | None:
    """Generate for ``rollout`` in place of its ``generate_sequences``, or return ``None``.

    ``rollout`` is a built :class:`hfsdk.RolloutBackend` (its ``config`` is the
    ``rollout`` section, its ``actor`` the :class:`hfsdk.ActorSource`). Return an
    :class:`hfsdk.GenerationStrategy` (``generate(prompts) -> Batch``, the same
    output as ``generate_sequences``) when your plugin's settings ask for it,
    else ``None``. Called once per rollout, by ``hfsdk.build_rollout``; the
    first answer wins. Workers then call ``hfsdk.generate_rollout(rollout,
    prompts)``. See docs/plugin_hooks.md.
    """


@hookspec
def hfsdk_register_rollout_sections(register: Register) -> None:
    """Contribute a sub-section of the ``rollout`` config: ``register(name, cls)``.

    ``cls`` is a frozen attrs class whose fields all have defaults; YAML keys and
    overrides ``rollout.<name>.<key>`` fill it, ``hfsdk config show`` prints it
    under ``rollout``, and code reads it with ``rollout_config.section(cls)``
    (its defaults when the config has none). A class may define
    ``response_budget() -> (tokens, key) | None`` (:class:`hfsdk.RolloutSection`)
    to own the response width. See docs/plugin_hooks.md.
    """


@hookspec
def hfsdk_prompt_tool_schemas(config: Any) -> list[dict[str, Any]] | None:
    """OpenAI-style schemas of the tools a run's prompts announce (or ``None``).

    ``config`` is the resolved run config. Every answer is concatenated and the
    prompts are rendered with them (the tokenizer's chat template ``tools=``);
    called once, before the run starts, so a tool that fails to load stops it
    in one line. See docs/plugin_hooks.md.
    """


# -- planner: placement resolution ------------------------------------------------------


@hookspec(firstresult=True)
def hfsdk_resolve_placement(config: Any) -> dict[str, Any] | None:
    """Choose where a run's roles go when its config says ``placement.mode: auto``.

    Called once per run, before any worker starts, with the resolved run config;
    the first plugin to answer wins. Return the placement section to run with:
    ``{"pools": {name: {"devices": n, "nodes": k}}, "roles": {role: pool}}`` (a pool's
    keys are ``PoolConfig``'s) and optionally ``"rollout_tp": {role: tp}`` (a generation
    tp size the hybrid engine takes if it fits), or ``None`` to leave it to another plugin.
    The pools' devices must sum to at most the configured pools' devices.
    """


# -- run records: generations a previous run recorded ------------------------------------


@hookspec(firstresult=True)
def hfsdk_recorded_generations(config: Any) -> Any | None:
    """The generation source of a ``trainer.mode: train_only`` run (or ``None``).

    Called once per run attempt with the resolved run config (its
    ``trainer.rollouts_from`` names the run whose generations to train from); the
    first answer wins. Return a :class:`hfsdk.GenerationSource` (it stands where the
    generation pipeline does; ``generated(prompts)`` answers the recorded generation for
    those prompts). See docs/plugin_hooks.md.
    """


# -- generation pipelines: generation ahead of training --------------------------------


@hookspec(firstresult=True)
def hfsdk_build_generation_pipeline(
    algorithm: Any, loader: Any, config: Any, rollout: Any, restart_rollout: Any
) -> Any | None:
    """The generation pipeline of a run whose ``trainer.pipeline`` is not ``sync``, or that
    has a rollout pool of its own (``placement.pools.rollout``); first answer wins.

    Called once per run attempt with the algorithm program, the prompt stream
    (``loader``), the resolved run config, the session's rollout replica group (or
    ``None``) and ``restart_rollout(exc)``, which returns a fresh replica group (or
    ``None`` without a pool). Return a :class:`hfsdk.GenerationSource`: the trainer
    draws each step's prompts from it and calls ``step_done()`` after the update, the
    algorithm's ``generate`` takes the batch made ahead from ``generated(prompts)``,
    checkpoints keep ``state_dict()``. See docs/plugin_hooks.md and docs/async.md.
    """


# -- validation: the metrics of the held-out prompts ----------------------------------------


@hookspec(firstresult=True)
def hfsdk_validate(algorithm: Any, prompts: Any, scorer: Any, trainer_config: Any) -> Any | None:
    """Validate a policy on the validation prompts, or return ``None``.

    Called at every validation the trainer schedules (``trainer.val_every``) of a run
    with a policy: ``algorithm.generate(prompts, n=..., greedy=...)`` samples, ``prompts``
    is the whole validation :class:`hfsdk.Batch`, ``scorer(batch) -> (scores, metrics)``
    the run's reward, ``trainer_config`` its ``TrainerConfig``. Return an
    :class:`hfsdk.ValidationResult` (``val/`` metrics, a few samples for
    ``RUN_DIR/validation/step_N.jsonl``); the first answer wins. See docs/plugin_hooks.md.
    """


# -- fault injection: the named points a reliability test may break a run at ---------------


@hookspec(firstresult=True)
def hfsdk_fault_point(point: str, step: int) -> bool | None:
    """Inject a fault at a named point, or return ``None``.

    ``hfsdk.take_fault(point, step)`` asks, while ``HFSDK_FAULT_INJECT`` is set, where the
    core or a backend may break a run (``save_mid``, ``sync_drop``, ...; ``step`` is the
    step or weights version). Make the fault (end the process, raise ``OSError``, signal)
    or return ``True`` for the caller to make it (drop a tensor, skip a sync). The first
    answer wins. See docs/plugin_hooks.md.
    """
