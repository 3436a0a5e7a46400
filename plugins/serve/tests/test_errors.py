"""Bad requests: the SDK raises its own exception with one clear line; the server keeps serving."""

from __future__ import annotations

import math
import subprocess
import sys
from typing import Any

import httpx
import pytest
import tinker
from tinker import types

from hfsdk import HfsdkError
from hfsdk_serve.command import check_listen, is_loopback

from .conftest import LOCAL_KEY, start


def _datum(tokens: list[int], **inputs: Any) -> types.Datum:
    return types.Datum(model_input=types.ModelInput.from_ints(tokens), loss_fn_inputs=inputs)


@pytest.fixture
def trainer(served: Any, service_client: Any) -> Any:
    return service_client.create_lora_training_client(
        base_model=str(served.model_dir), rank=4
    ).result()


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "Traceback" not in text
    return text


def test_unknown_base_model(service_client: Any) -> None:
    with pytest.raises(tinker.RequestFailedError) as err:
        service_client.create_lora_training_client(base_model="Qwen/Qwen3-8B", rank=4).result()
    assert "base model 'Qwen/Qwen3-8B' is not served here" in _one_line(err.value)


def test_bad_loss_name_and_unimplemented_loss(trainer: Any, served: Any) -> None:
    tokens = served.tokenizer.encode("3 + 5 = 8")
    datum = _datum(tokens[:-1], target_tokens=tokens[1:])
    with pytest.raises(
        tinker.RequestFailedError, match="loss_fn 'stable_reinforce' is not implemented"
    ):
        trainer.forward_backward([datum], "stable_reinforce").result()
    with pytest.raises(tinker.RequestFailedError, match="loss_fn 'nope' is unknown; use one of"):
        trainer.forward([datum], "nope").result()  # type: ignore[arg-type]


def test_shape_mismatch_and_missing_inputs(trainer: Any, served: Any) -> None:
    tokens = served.tokenizer.encode("3 + 5 = 8")
    short = _datum(tokens[:-1], target_tokens=tokens[2:])
    with pytest.raises(
        tinker.RequestFailedError, match=r"datum 0: loss_fn_inputs\['target_tokens'\] has shape"
    ):
        trainer.forward_backward([short], "cross_entropy").result()
    no_adv = _datum(tokens[:-1], target_tokens=tokens[1:], logprobs=[0.0] * (len(tokens) - 1))
    with pytest.raises(
        tinker.RequestFailedError, match=r"needs loss_fn_inputs.*lacks \['advantages'\]"
    ):
        trainer.forward_backward([no_adv], "importance_sampling").result()
    vocab = served.app.service.pool.vocab_size
    outside = _datum([1, vocab + 5], target_tokens=[2, 3])
    with pytest.raises(tinker.RequestFailedError, match="not token ids in the vocabulary"):
        trainer.forward([outside], "cross_entropy").result()
    # After all that the client still trains.
    good = _datum(tokens[:-1], target_tokens=tokens[1:])
    assert trainer.forward_backward([good], "cross_entropy").result().metrics["loss:sum"] > 0


def test_soft_targets_of_several_tokens_per_position_are_refused(trainer: Any, served: Any) -> None:
    """(N, K) ``target_tokens`` / ``weights`` (tinker_cookbook's distillation sends them) get
    one line saying such targets are not served, not a token-count mismatch."""
    import torch

    tokens = served.tokenizer.encode("3 + 5 = 8")
    n = len(tokens) - 1
    targets = torch.zeros(n, 2, dtype=torch.long)
    targets[:, 0], targets[:, 1] = torch.tensor(tokens[1:]), 5
    weights = torch.tensor([[0.7, 0.3]] * n)
    soft = _datum(
        tokens[:-1],
        target_tokens=tinker.TensorData.from_torch(targets),
        weights=tinker.TensorData.from_torch(weights),
    )
    with pytest.raises(tinker.RequestFailedError) as err:
        trainer.forward_backward([soft], "cross_entropy").result()
    message = _one_line(err.value)
    assert f"has shape [{n}, 2]: (N, K) targets" in message, message
    assert "not served" in message and "1-D, one value per input token" in message


def test_unknown_client_and_sampler(served: Any) -> None:
    url = f"{served.url}/api/v1"
    headers = {"X-API-Key": LOCAL_KEY}
    response = httpx.post(f"{url}/get_info", json={"model_id": "tc404_x"}, headers=headers)
    assert response.status_code == 404 and "unknown model_id 'tc404_x'" in response.json()["error"]
    response = httpx.get(f"{url}/samplers/nobody", headers=headers)
    assert response.status_code == 404 and "unknown sampling session" in response.json()["error"]
    # A malformed body is a 400 with one line, not a crash.
    response = httpx.post(f"{url}/optim_step", content=b"{not json", headers=headers)
    assert response.status_code == 400 and "invalid request" in response.json()["error"]
    response = httpx.post(f"{url}/forward_backward", content=b"\xff\x00garbage", headers=headers)
    assert response.status_code == 400
    assert httpx.get(f"{url}/healthz").json() == {"status": "ok"}


def test_a_bad_request_naming_unknown_is_400_not_404(served: Any) -> None:
    # Before: 404 whenever the message held the word "unknown" (here the client's own name).
    url = f"{served.url}/api/v1"
    headers = {"X-API-Key": LOCAL_KEY}
    body = {"session_id": "s", "sampling_session_seq_id": 0, "base_model": "unknown-org/m"}
    response = httpx.post(f"{url}/create_sampling_session", json=body, headers=headers)
    assert response.status_code == 400 and "is not served here" in response.json()["error"]


def test_sampling_errors(service_client: Any, served: Any) -> None:
    sampler = service_client.create_sampling_client(base_model=str(served.model_dir)).result()
    prompt = types.ModelInput.from_ints(served.tokenizer.encode("3 + 5 ="))
    with pytest.raises(tinker.RequestFailedError, match="malformed; expected non-empty"):
        sampler.sample(prompt, 1, types.SamplingParams(max_tokens=2, stop=[""])).result()
    with pytest.raises(tinker.RequestFailedError, match="exceeds the model's context"):
        sampler.sample(prompt, 1, types.SamplingParams(max_tokens=10_000)).result()
    with pytest.raises(tinker.RequestFailedError, match="stop token ids") as refused:
        sampler.sample(prompt, 1, types.SamplingParams(max_tokens=2, stop=[10**6])).result()
    assert "internal error" not in str(refused.value)
    result = sampler.sample(prompt, 2, types.SamplingParams(max_tokens=2, temperature=0.0)).result()
    assert len(result.sequences) == 2 and result.sequences[0].tokens == result.sequences[1].tokens


def test_api_key_required_beyond_loopback(default_model_dir: Any, tmp_path: Any) -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0")
    with pytest.raises(HfsdkError, match="reachable from other machines: pass --api-key"):
        check_listen("0.0.0.0", None)
    with pytest.raises(HfsdkError, match="must start with 'tml-'"):
        check_listen("0.0.0.0", "secret")
    with pytest.raises(HfsdkError, match="must start with 'tml-' and be ASCII"):
        check_listen("0.0.0.0", "tml-s\u00e9cret")
    check_listen("0.0.0.0", "tml-secret")
    check_listen("127.0.0.1", None)

    keyed = start(default_model_dir, tmp_path, api_key="tml-right")
    try:
        wrong = tinker.ServiceClient(base_url=keyed.url, api_key="tml-wrong")
        with pytest.raises(tinker.AuthenticationError, match="missing or wrong API key"):
            wrong.create_lora_training_client(base_model=str(default_model_dir), rank=4).result()
        # A non-ASCII key is a wrong key (401), not a server error.
        sent = httpx.post(f"{keyed.url}/api/v1/create_session", json={},
                          headers={"X-API-Key": "tml-r\u00e9ght".encode()})  # fmt: skip
        assert sent.status_code == 401, sent.text
        right = tinker.ServiceClient(base_url=keyed.url, api_key="tml-right")
        trainer = right.create_lora_training_client(
            base_model=str(default_model_dir), rank=4
        ).result()
        assert trainer.get_info().lora_rank == 4
        right.close("success").result()
        wrong.close("success").result()
    finally:
        keyed.stop()


def test_cli_refuses_bad_input_with_one_line(tmp_path: Any, default_model_dir: Any) -> None:
    model = str(default_model_dir)
    for argv, expected in (
        (["serve", "--base-model", str(tmp_path)], "not a model directory (no config.json)"),
        (["serve", "--base-model", str(tmp_path), "--host", "0.0.0.0"], "pass --api-key"),
        # Port 0 would listen on a port no line printed (the banner said :0); options are
        # checked before the model directory.
        (["serve", "--base-model", str(tmp_path), "--port", "0"], "0 is not in the range 1<=x"),
        (
            ["serve", "--base-model", model, "--devices", "2", "--executor", "local"],
            "--executor local runs the model in the server's process on one device",
        ),
    ):
        proc = subprocess.run(
            [sys.executable, "-c", "from hfsdk.core.cli.main import main; main()", *argv],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 2, proc.stderr
        assert expected in proc.stderr and "Traceback" not in proc.stderr


def test_a_model_name_the_sdk_cannot_load_a_tokenizer_by_is_warned(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """``--model-name`` that is not a local directory: one warning at start that the sampling
    client's ``get_tokenizer`` (``AutoTokenizer.from_pretrained(name)``) may fail."""
    import logging

    from hfsdk_serve.command import warn_on_model_name

    with caplog.at_level(logging.WARNING, logger="hfsdk_serve.command"):
        warn_on_model_name(None)
        warn_on_model_name(str(tmp_path))  # a local directory: loadable as written
        warn_on_model_name("my-tiny-llama")
    assert len(caplog.records) == 1, caplog.records
    message = caplog.records[0].getMessage()
    assert "--model-name 'my-tiny-llama' is not a local directory" in message
    assert "SamplingClient.get_tokenizer()" in message and "TrainingClient" in message


def test_an_unknown_rollout_backend_is_refused_before_loading(
    tmp_path: Any, default_model_dir: Any
) -> None:
    """``--rollout`` names a registered rollout backend (the CLI prints this one line)."""
    from hfsdk import HfsdkError
    from hfsdk_serve.command import build_app

    with pytest.raises(HfsdkError, match=r"--rollout: unknown rollout backend 'vlm'.*'vllm'"):
        build_app(default_model_dir, tmp_path, rollout="vlm")


def _retrieve(url: str, request_id: str) -> Any:
    """The outcome of a submitted request (polled as the SDK does)."""
    headers = {"X-API-Key": LOCAL_KEY}
    for _ in range(100):
        out = httpx.post(f"{url}/retrieve_future", json={"request_id": request_id}, headers=headers)
        if out.json().get("type") != "try_again":
            return out.json()
    raise AssertionError(f"request {request_id} never finished")


def _forward_backward_body(served: Any, model_id: str, tokens: bytes, target: Any) -> bytes:
    """A raw ForwardBackwardRequest (what the SDK sends), with bytes the SDK would not write."""
    import numpy as np
    from tinker.proto import tinker_public_pb2 as pb

    msg = pb.ForwardBackwardRequest(model_id=model_id, seq_id=100, loss_fn="cross_entropy")
    datum = msg.data.add()
    datum.model_input.add().encoded_text.tokens = tokens
    array, dtype = target
    tensor = datum.loss_fn_inputs["target_tokens"]
    tensor.dense, tensor.dtype = np.asarray(array).tobytes(), dtype
    tensor.shape.extend(np.asarray(array).shape)
    return msg.SerializeToString()


def test_malformed_tensors_and_bodies_are_400s(trainer: Any, served: Any) -> None:
    import numpy as np
    from tinker.proto import tinker_public_pb2 as pb

    ids = served.tokenizer.encode("3 + 5 = 8")
    tokens, target = np.array(ids[:-1], np.int32).tobytes(), np.array(ids[1:], np.int64)
    url = f"{served.url}/api/v1/forward_backward"
    headers = {"X-API-Key": LOCAL_KEY, "content-type": "application/x-protobuf"}
    nan = np.full(len(target), np.nan, np.float32)
    cases = {
        "are not whole int32 ids": (tokens[:-1], (target, pb.DTYPE_INT64)),
        "is not a readable tensor": (tokens, (target, 0)),  # no dtype
        "not token ids in the vocabulary": (tokens, (nan, pb.DTYPE_FLOAT32)),
    }
    for needle, (ids_bytes, tensor) in cases.items():
        body = _forward_backward_body(served, trainer.model_id, ids_bytes, tensor)
        response = httpx.post(url, content=body, headers=headers)
        if response.status_code == 200:  # checked on the model thread: the future says it
            out = _retrieve(f"{served.url}/api/v1", response.json()["request_id"])
            assert out["category"] == "user", out
        else:
            assert response.status_code == 400
            out = response.json()
        assert needle in out["error"], out
    zstd = {**headers, "content-encoding": "zstd"}
    response = httpx.post(url, content=b"garbage", headers=zstd)
    assert response.status_code == 400 and "does not decompress" in response.json()["error"]


def test_a_step_that_would_write_nan_weights_is_refused_and_the_client_goes_on(
    trainer: Any, served: Any
) -> None:
    tokens = served.tokenizer.encode("3 + 5 = 8")
    good = _datum(tokens[:-1], target_tokens=tokens[1:])
    trainer.forward_backward([good], "cross_entropy").result()
    with pytest.raises(tinker.RequestFailedError, match=r"AdamParams.eps=0: expected a value > 0"):
        trainer.optim_step(types.AdamParams(learning_rate=1e-3, eps=0.0)).result()
    # A finite loss whose gradient is 0 * inf: the sampler's log-prob of a token is -1e30.
    n = len(tokens) - 1
    wild = _datum(
        tokens[:-1], target_tokens=tokens[1:], logprobs=[-1e30] + [-1.0] * (n - 1),
        advantages=[1.0] * n,
    )  # fmt: skip
    trainer.forward_backward([wild], "ppo").result()
    with pytest.raises(tinker.RequestFailedError, match="gradients are not finite"):
        trainer.optim_step(types.AdamParams(learning_rate=1e-3)).result()
    before = trainer.forward([good], "cross_entropy").result().metrics["loss:sum"]
    trainer.forward_backward([good], "cross_entropy").result()
    trainer.optim_step(types.AdamParams(learning_rate=1e-2)).result()
    after = trainer.forward([good], "cross_entropy").result().metrics["loss:sum"]
    assert math.isfinite(before) and after < before


def test_sampling_settings_that_cannot_run_are_refused(served: Any) -> None:
    import json

    from hfsdk_serve.sampling import MAX_SAMPLES

    url, headers = f"{served.url}/api/v1", {"X-API-Key": LOCAL_KEY}
    session = httpx.post(
        f"{url}/create_sampling_session",
        json={"session_id": "s", "sampling_session_seq_id": 0, "base_model": str(served.model_dir)},
        headers=headers,
    ).json()["sampling_session_id"]
    prompt = json.dumps(served.tokenizer.encode("3 + 5 ="))

    def sample(params: str, num: int = 1) -> Any:
        # Raw JSON: the SDK itself refuses to send NaN or Infinity, other clients do not.
        body = (
            f'{{"sampling_session_id": "{session}", "num_samples": {num}, "prompt": {{"chunks": '
            f'[{{"type": "encoded_text", "tokens": {prompt}}}]}}, "sampling_params": {params}}}'
        )
        response = httpx.post(f"{url}/asample", content=body, headers=headers)
        if response.status_code != 200:
            return response.json()
        return _retrieve(url, response.json()["request_id"])

    for temperature in ("NaN", "Infinity"):
        out = sample(f'{{"max_tokens": 2, "temperature": {temperature}}}')
        assert out["category"] == "user" and "expected a finite temperature" in out["error"]
    out = sample('{"max_tokens": 1}', num=MAX_SAMPLES + 1)
    assert f"expected 1 to {MAX_SAMPLES}" in out["error"]


def test_a_negative_or_non_finite_grad_clip_norm_is_refused(trainer: Any, served: Any) -> None:
    """``grad_clip_norm`` < 0 was silently "no clipping" (the SDK documents only 0.0 as off):
    refused with one line naming the field, while 0 (off) and a positive norm still step."""
    from hfsdk_serve.training import check_adam

    tokens = served.tokenizer.encode("3 + 5 = 8")
    good = _datum(tokens[:-1], target_tokens=tokens[1:])
    trainer.forward_backward([good], "cross_entropy").result()
    with pytest.raises(
        tinker.RequestFailedError,
        match=r"AdamParams.grad_clip_norm=-5.0: expected a finite value >= 0 \(0 turns",
    ) as err:
        trainer.optim_step(types.AdamParams(learning_rate=1e-3, grad_clip_norm=-5.0)).result()
    _one_line(err.value)
    for clip in (0.0, 1.0):  # the gradients of the refused step are still there
        trainer.optim_step(types.AdamParams(learning_rate=1e-3, grad_clip_norm=clip)).result()
    # The SDK refuses to send NaN; another client's JSON can.
    adam = types.AdamParams(learning_rate=1e-3).model_dump()
    with pytest.raises(HfsdkError, match=r"AdamParams.grad_clip_norm=nan"):
        check_adam({**adam, "grad_clip_norm": math.nan})


def _serve_in_process(argv: list[str]) -> int:
    """Run ``hfsdk <argv>`` in this process (so tests can monkeypatch); its exit status."""
    from hfsdk.core.cli.errors import run_reporting_errors
    from hfsdk.core.cli.main import _run_cli

    return run_reporting_errors(lambda: _run_cli(argv), argv)


def _fake_app() -> Any:
    """What ``serve`` reads of a built app, without loading a model."""
    from types import SimpleNamespace

    async def asgi(scope: Any, receive: Any, send: Any) -> None:  # never called: no bind
        raise AssertionError("the server should not have started")

    pool = SimpleNamespace(in_process=True, base_storage=lambda: [(1, 1)])
    service = SimpleNamespace(model_name="fake", pool=pool)
    return SimpleNamespace(service=service, asgi=asgi, close=lambda: None)


def test_a_port_in_use_is_refused_before_loading_the_model(
    tmp_path: Any, default_model_dir: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """A taken port: one hfsdk line (exit 2) before the model loads, not a banner, workers
    and then uvicorn's own bind error (exit 3)."""
    import socket

    import hfsdk_serve.command as command

    def no_build(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the app was built before the port was checked")

    monkeypatch.setattr(command, "build_app", no_build)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        argv = ["serve", "--base-model", str(default_model_dir), "--port", str(port),
                "--state-dir", str(tmp_path / "state")]  # fmt: skip
        code = _serve_in_process(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"port {port} on 127.0.0.1 is in use; pass --port N or stop the other server" in err
    assert "Traceback" not in err and "hfsdk serve:" not in err  # no banner


def test_a_port_taken_after_the_check_still_ends_with_one_hfsdk_line(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """Another server binding between the check and uvicorn's bind: uvicorn exits (3) after
    logging its error; the CLI adds one hfsdk line and exits 2, not uvicorn's line alone."""
    import socket

    import hfsdk_serve.command as command

    monkeypatch.setattr(command, "check_port_free", lambda host, port: None)  # lost the race
    monkeypatch.setattr(command, "build_app", lambda *args, **kwargs: _fake_app())
    (tmp_path / "config.json").write_text("{}")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = _serve_in_process(["serve", "--base-model", str(tmp_path), "--port", str(port)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"could not listen on http://127.0.0.1:{port}" in err and "Traceback" not in err


def test_the_port_check_accepts_a_free_port() -> None:
    """A free port passes (the check's socket is closed again, so uvicorn can bind it)."""
    import socket

    from hfsdk_serve.command import check_port_free

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    check_port_free("127.0.0.1", port)
    check_port_free("127.0.0.1", port)  # twice: the first check let it go
    # A port in TIME_WAIT after a server that set SO_REUSEADDR (as uvicorn does) passes, as
    # uvicorn's own bind would; a plain bind() without the option is refused there.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        listener.accept()[0].close()  # the server side closes first: TIME_WAIT
    client.close()
    check_port_free("127.0.0.1", port)
    with pytest.raises(HfsdkError, match=r"--host nohost\.invalid: cannot resolve it"):
        check_port_free("nohost.invalid", port)
