"""save_state / load_state round-trip bit for bit, within a server and across a restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest
import torch
from tinker import types

from hfsdk_serve import checkpoints

from .conftest import LOCAL_KEY, free_port

LR = types.AdamParams(learning_rate=2e-2)


def _batch(tokenizer: Any) -> list[types.Datum]:
    data = []
    for text in ("3 + 5 = 8", "2 + 7 = 9", "4 + 4 = 8"):
        tokens = tokenizer.encode(text)
        data.append(
            types.Datum(
                model_input=types.ModelInput.from_ints(tokens[:-1]),
                loss_fn_inputs={"target_tokens": tokens[1:], "weights": [1.0] * (len(tokens) - 1)},
            )
        )
    return data


def _step(client: Any, data: list[types.Datum]) -> float:
    fwd = client.forward_backward(data, "cross_entropy")
    opt = client.optim_step(LR)
    loss = fwd.result().metrics["loss:sum"]
    opt.result()
    return loss


def _logprobs(client: Any, data: list[types.Datum]) -> list[list[float]]:
    out = client.forward(data, "cross_entropy").result()
    return [o["logprobs"].tolist() for o in out.loss_fn_outputs]


def test_state_round_trips_bit_for_bit(served: Any, service_client: Any) -> None:
    """Adapter and AdamW state come back exactly; without the optimizer the next step differs.

    Catches a lossy save (dtype, a missing tensor), optimizer state not saved or not
    restored, and a load that lands on the wrong adapter.
    """
    data = _batch(served.tokenizer)
    base = str(served.model_dir)
    original = service_client.create_lora_training_client(base_model=base, rank=8, seed=3).result()
    for _ in range(3):
        _step(original, data)
    path = original.save_state("three").result().path
    assert path.startswith("tinker://")
    saved_logprobs = _logprobs(original, data)
    next_loss = _step(original, data)
    after_step = _logprobs(original, data)

    resumed = service_client.create_training_client_from_state_with_optimizer(path).result()
    assert _logprobs(resumed, data) == saved_logprobs
    assert _step(resumed, data) == next_loss
    assert _logprobs(resumed, data) == after_step  # Adam moments were restored exactly

    weights_only = service_client.create_training_client_from_state(path).result()
    assert _logprobs(weights_only, data) == saved_logprobs
    _step(weights_only, data)
    assert _logprobs(weights_only, data) != after_step  # a fresh optimizer steps differently

    # The files themselves: saved again after loading, every tensor is identical.
    again = service_client.create_training_client_from_state_with_optimizer(path).result()
    path_again = again.save_state("again").result().path
    state_dir = served.app.service.state_dir
    first = torch.load(checkpoints.resolve(state_dir, path), weights_only=False)
    second = torch.load(checkpoints.resolve(state_dir, path_again), weights_only=False)
    assert first["adapter"].keys() == second["adapter"].keys()
    assert all(torch.equal(first["adapter"][k], second["adapter"][k]) for k in first["adapter"])
    moments = [
        (a[key], b[key])
        for a, b in zip(
            first["optimizer"]["state"].values(), second["optimizer"]["state"].values(), strict=True
        )
        for key in ("exp_avg", "exp_avg_sq", "step")
    ]
    assert moments and all(torch.equal(a, b) for a, b in moments)

    # load_state onto an existing client of another shape is refused with one line.
    other = service_client.create_lora_training_client(base_model=base, rank=4).result()
    with pytest.raises(Exception, match=r"does not fit|shape"):
        other.load_state(path).result()


def _serve(
    model_dir: Any, state_dir: Any, port: int, *options: str, stderr: Any = subprocess.PIPE
) -> subprocess.Popen:
    env = {**os.environ, "TINKER_TELEMETRY": "0", "OMP_NUM_THREADS": "1"}
    # The console script's module has no __main__ guard; call main() the way the script does.
    cmd = [sys.executable, "-c", "from hfsdk.core.cli.main import main; main()"]
    cmd += [
        "serve",
        "--base-model",
        str(model_dir),
        "--state-dir",
        str(state_dir),
        "--port",
        str(port),
        *options,
    ]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=stderr)


def _wait_healthy(url: str, proc: subprocess.Popen, timeout_s: float = 120) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            text = proc.stderr.read().decode()[-2000:] if proc.stderr else ""
            raise RuntimeError(f"hfsdk serve exited ({proc.returncode}): {text}")
        try:
            if httpx.get(f"{url}/api/v1/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"hfsdk serve did not answer within {timeout_s:g} s")


@pytest.mark.heavy
def test_killed_server_resumes_from_last_saved_state(default_model_dir: Any, tmp_path: Any) -> None:
    """``hfsdk serve`` killed with SIGKILL, started again on its state dir, resumes exactly.

    Catches checkpoints kept only in memory, paths a new server run cannot resolve,
    and non-atomic writes (the kill comes right after a save).
    """
    import tinker

    from hfsdk import load_tokenizer

    data = _batch(load_tokenizer(default_model_dir))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    first = _serve(default_model_dir, tmp_path, port)
    try:
        _wait_healthy(url, first)
        client = tinker.ServiceClient(base_url=url, api_key=LOCAL_KEY)
        trainer = client.create_lora_training_client(
            base_model=str(default_model_dir), rank=8
        ).result()
        for _ in range(2):
            _step(trainer, data)
        path = trainer.save_state("two").result().path
        expected_loss = _step(trainer, data)
        expected = _logprobs(trainer, data)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    second = _serve(default_model_dir, tmp_path, port)
    try:
        _wait_healthy(url, second)
        client = tinker.ServiceClient(base_url=url, api_key=LOCAL_KEY)
        resumed = client.create_training_client_from_state_with_optimizer(path).result()
        assert _step(resumed, data) == expected_loss
        assert _logprobs(resumed, data) == expected
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(30)


def test_named_sampler_weights_sample_like_the_snapshot(served: Any, service_client: Any) -> None:
    """``save_weights_for_sampler(name)`` + ``create_sampling_client(model_path)`` = the snapshot.

    Catches sampler checkpoints that miss tensors or load onto the base model.
    """
    data = _batch(served.tokenizer)
    trainer = service_client.create_lora_training_client(
        base_model=str(served.model_dir), rank=8, seed=4
    ).result()
    _step(trainer, data)
    path = trainer.save_weights_for_sampler("sampler-one").result().path
    assert path.endswith("/sampler_weights/sampler-one")
    prompt = types.ModelInput.from_ints(served.tokenizer.encode("4 + 4 = 8"))
    snapshot = trainer.save_weights_and_get_sampling_client().result()
    loaded = service_client.create_sampling_client(model_path=path).result()
    base = service_client.create_sampling_client(base_model=str(served.model_dir)).result()
    expected = snapshot.compute_logprobs(prompt).result()
    assert loaded.compute_logprobs(prompt).result() == expected
    assert base.compute_logprobs(prompt).result() != expected
    with pytest.raises(Exception, match="holds sampler weights only"):
        service_client.create_training_client_from_state_with_optimizer(path).result()


def test_sampling_clients_from_paths_are_bounded_like_snapshots(
    served: Any, service_client: Any
) -> None:
    from hfsdk_serve.service import FROM_PATHS, SNAPSHOTS_KEPT

    trainer = service_client.create_lora_training_client(
        base_model=str(served.model_dir), rank=4
    ).result()
    path = trainer.save_weights_for_sampler("bounded").result().path
    service = served.app.service
    before = len(service.adapters)
    clients = [
        service_client.create_sampling_client(model_path=path).result()
        for _ in range(SNAPSHOTS_KEPT + 2)
    ]
    # not one more adapter per client (earlier tests' path clients count towards the bound)
    assert len(service.adapters) - before <= SNAPSHOTS_KEPT
    assert len(service.snapshots[FROM_PATHS]) == SNAPSHOTS_KEPT
    prompt = types.ModelInput.from_ints(served.tokenizer.encode("4 + 4 = 8"))
    assert clients[-1].compute_logprobs(prompt).result()
    with pytest.raises(Exception, match="expired: its snapshot was dropped"):
        clients[0].compute_logprobs(prompt).result()


def test_loading_refuses_another_optimizer_and_names_the_layers_that_differ(
    served: Any, service_client: Any
) -> None:
    """Create-via-load refuses a non-AdamW optimizer as create_lora_training_client does, and
    a checkpoint of other layers is refused naming those layers, not the (equal) rank.

    Catches ``optimizer=`` silently ignored on load (the client trained with AdamW), and
    "(rank 4 vs 4, or other layers)".
    """
    base = str(served.model_dir)
    trainer = service_client.create_lora_training_client(base_model=base, rank=4).result()
    path = trainer.save_state("layers").result().path
    with pytest.raises(Exception, match="optimizer 'dimuon' is not served; use the default AdamW"):
        service_client.create_training_client_from_state(
            path, optimizer=types.DimuonOptimizerConfig()
        ).result()
    attn_only = service_client.create_lora_training_client(
        base_model=base, rank=4, train_mlp=False
    ).result()
    with pytest.raises(Exception) as refused:
        attn_only.load_state(path).result()
    message = str(refused.value)
    assert "train_mlp: checkpoint True vs client False" in message, message
    assert "rank 4 vs 4" not in message, message


def test_states_of_another_model_or_damaged_files_are_refused(
    default_model_dir: Any, tmp_path: Any
) -> None:
    """A checkpoint saved over another base model, or a damaged file, is one clear error.

    Catches a sampler that applied an adapter to a base it was not trained on (only a
    training client's load checked it), and torch.load's error answered as a bare 500,
    which the SDK retried for about a minute.
    """
    import tinker

    from .conftest import start

    served = start(default_model_dir, tmp_path)
    try:
        client = tinker.ServiceClient(base_url=served.url, api_key=LOCAL_KEY)
        trainer = client.create_lora_training_client(
            base_model=str(default_model_dir), rank=4
        ).result()
        moved = trainer.save_state("moved").result().path
        damaged = trainer.save_weights_for_sampler("damaged").result().path
        file = checkpoints.resolve(tmp_path, moved)
        state = torch.load(file, weights_only=False)
        torch.save({**state, "base_model": str(tmp_path / "other-model")}, file)
        other = r"was trained on \S*other-model, but this server serves"
        with pytest.raises(Exception, match=other):
            client.create_sampling_client(model_path=moved).result()
        with pytest.raises(Exception, match=other):
            client.create_training_client_from_state(moved).result()
        file = checkpoints.resolve(tmp_path, damaged)
        file.write_bytes(file.read_bytes()[:1000])
        start_s = time.monotonic()
        with pytest.raises(Exception, match=r"cannot be read .* truncated or corrupted"):
            client.create_sampling_client(model_path=damaged).result()
        assert time.monotonic() - start_s < 20  # answered, not retried
        client.close("success").result()
    finally:
        served.stop()
