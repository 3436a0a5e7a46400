"""The SDK's protobuf messages: forward_backward requests in, fwd/bwd and sample results out.

The ``tinker`` SDK sends ``/forward_backward`` as a ``tinker_public.ForwardBackwardRequest``
and asks for ``ForwardBackwardOutput`` and ``SampleResponse`` results as protobuf
(``Accept: application/x-protobuf``). The messages come from the SDK itself
(``tinker.proto``), so both ends share one schema.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs
import numpy as np
from tinker.proto import tinker_public_pb2 as pb
from tinker.proto.response_conv import _tensor_data_from_proto

from hfsdk import HfsdkError

PROTO_CONTENT_TYPE = "application/x-protobuf"


@attrs.frozen(kw_only=True)
class DatumIn:
    """One training example: input token ids and its ``loss_fn_inputs`` as numpy arrays."""

    tokens: list[int]
    inputs: dict[str, np.ndarray]


@attrs.frozen(kw_only=True)
class FwdBwdIn:
    """A decoded ``/forward_backward`` request."""

    model_id: str
    seq_id: int
    loss_fn: str
    loss_fn_config: dict[str, float | str]
    forward_only: bool
    data: list[DatumIn]


def _chunk_tokens(chunk: pb.Chunk, index: int) -> list[int]:
    kind = chunk.WhichOneof("chunk")
    if kind != "encoded_text":
        raise HfsdkError(
            f"datum {index}: model_input has a {kind} chunk; hfsdk serve trains text models, "
            "send token ids only (ModelInput.from_ints)"
        )
    raw = chunk.encoded_text.tokens
    if len(raw) % 4:
        raise HfsdkError(
            f"datum {index}: model_input's token bytes ({len(raw)}) are not whole int32 ids"
        )
    return np.frombuffer(raw, dtype=np.int32).astype(np.int64).tolist()


def decode_forward_backward(body: bytes) -> FwdBwdIn:
    """The request in ``body`` (an :class:`HfsdkError` when it is not a valid message)."""
    msg = pb.ForwardBackwardRequest()
    try:
        msg.ParseFromString(body)
    except Exception as exc:  # protobuf's DecodeError and friends
        raise HfsdkError(
            f"the forward_backward body is not a ForwardBackwardRequest: {exc}"
        ) from None
    config: dict[str, float | str] = {k: float(v) for k, v in msg.loss_fn_config.items()}
    for key, value in msg.loss_fn_config_v2.items():
        config[key] = value.text if value.WhichOneof("value") == "text" else float(value.number)
    data = []
    for i, datum in enumerate(msg.data):
        tokens = [t for chunk in datum.model_input for t in _chunk_tokens(chunk, i)]
        inputs = {}
        for name, tensor in datum.loss_fn_inputs.items():
            try:  # a dtype left unset, a shape its bytes do not fill
                inputs[name] = np.asarray(_tensor_data_from_proto(tensor).to_numpy())
            except Exception as exc:
                raise HfsdkError(
                    f"datum {i}: loss_fn_inputs[{name!r}] is not a readable tensor ({exc})"
                ) from None
        data.append(DatumIn(tokens=tokens, inputs=inputs))
    return FwdBwdIn(
        model_id=msg.model_id,
        seq_id=int(msg.seq_id),
        loss_fn=msg.loss_fn,
        loss_fn_config=config,
        forward_only=bool(msg.forward_only),
        data=data,
    )


def _batched(arrays: Sequence[np.ndarray], dtype: int, np_dtype: type) -> pb.BatchedTensor:
    flat = [np.ascontiguousarray(a, dtype=np_dtype).reshape(-1) for a in arrays]
    offsets = np.zeros(len(flat) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([a.nbytes for a in flat])
    data = b"".join(a.tobytes() for a in flat)
    return pb.BatchedTensor(data=data, offsets=offsets.tobytes(), dtype=dtype)


def encode_forward_backward(
    outputs: Sequence[Mapping[str, np.ndarray]], metrics: Mapping[str, float]
) -> bytes:
    """A ``ForwardBackwardOutput``: per datum float32 arrays (e.g. ``logprobs``) and metrics."""
    record = pb.ArrayRecord(type_tag="ArrayRecord", num_datums=len(outputs))
    for name in outputs[0] if outputs else ():
        record.fields[name].CopyFrom(
            _batched([o[name] for o in outputs], pb.DTYPE_FLOAT32, np.float32)
        )
    msg = pb.ForwardBackwardOutput(loss_fn_output_type="ArrayRecord")
    msg.loss_fn_outputs.append(record)
    for key, value in metrics.items():
        msg.metrics[key] = float(value)
    return msg.SerializeToString()


@attrs.frozen(kw_only=True)
class SequenceOut:
    """One sampled continuation."""

    tokens: list[int]
    logprobs: list[float]
    stopped: bool


def encode_sample(
    sequences: Sequence[SequenceOut], prompt_logprobs: Sequence[float] | None
) -> bytes:
    """A ``SampleResponse`` (prompt log-probs NaN where none is defined: the first token)."""
    msg = pb.SampleResponse()
    for seq in sequences:
        msg.sequences.append(
            pb.SampledSequence(
                stop_reason=pb.STOP_REASON_STOP if seq.stopped else pb.STOP_REASON_LENGTH,
                tokens=np.asarray(seq.tokens, dtype=np.int32).tobytes(),
                logprobs=np.asarray(seq.logprobs, dtype=np.float32).tobytes(),
            )
        )
    if prompt_logprobs is not None:
        msg.prompt_logprobs = np.asarray(prompt_logprobs, dtype=np.float32).tobytes()
    return msg.SerializeToString()
