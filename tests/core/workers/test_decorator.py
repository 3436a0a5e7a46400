"""@register and BuiltinProtocol: specs attached to methods, validation, inheritance."""

from __future__ import annotations

import pytest

import hfsdk
from hfsdk.core.errors import HfsdkError
from hfsdk.core.workers.decorator import (
    BuiltinProtocol,
    MethodSpec,
    register,
    registered_methods,
)
from hfsdk.core.workers.protocols import BUILTIN_PROTOCOLS


class Base(hfsdk.Worker):
    @register(protocol=BuiltinProtocol.DP_COMPUTE_PROTO)
    def compute(self, batch: object) -> object:
        return batch

    @register(BuiltinProtocol.MESH_PROTO, blocking=False, mesh="train")
    def generate(self, batch: object) -> object:
        return batch

    def plain(self) -> int:
        return 1


class Child(Base):
    @register(protocol="my_custom")
    def custom(self) -> int:
        return 2


def test_register_attaches_spec_and_keeps_method_callable() -> None:
    methods = registered_methods(Base)
    assert set(methods) == {"compute", "generate"}
    assert methods["compute"] == MethodSpec(
        protocol=BuiltinProtocol.DP_COMPUTE_PROTO, blocking=True
    )
    assert methods["generate"].blocking is False
    assert methods["generate"].options == {"mesh": "train"}
    # The decorated function still works as a plain method inside the worker.
    assert Base().compute(5) == 5


def test_registered_methods_include_inherited_and_string_protocols() -> None:
    methods = registered_methods(Child)
    assert set(methods) == {"compute", "generate", "custom"}
    assert methods["custom"].protocol == "my_custom"


def test_protocol_values_are_the_builtin_registry_names() -> None:
    assert {p.value for p in BuiltinProtocol} == set(BUILTIN_PROTOCOLS)
    assert BuiltinProtocol.DP_COMPUTE_PROTO == "dp_compute_proto"


def test_hfsdk_exports_runtime_names() -> None:
    from hfsdk.core.workers.resource_pool import ResourcePool
    from hfsdk.core.workers.worker_group import WorkerGroup

    assert hfsdk.register is register
    assert hfsdk.BuiltinProtocol is BuiltinProtocol
    assert hfsdk.WorkerGroup is WorkerGroup
    assert hfsdk.ResourcePool is ResourcePool


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"protocol": 3}, "expected a BuiltinProtocol member"),
        ({"protocol": ""}, "expected a BuiltinProtocol member or a name"),
        ({"protocol": BuiltinProtocol.ONE_TO_ALL, "blocking": "yes"}, "expected True or False"),
    ],
)
def test_register_rejects_bad_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(HfsdkError, match=message):
        register(**kwargs)


def test_register_rejects_non_callables() -> None:
    with pytest.raises(HfsdkError, match="must decorate a method"):
        register(BuiltinProtocol.ONE_TO_ALL)(42)  # type: ignore[arg-type]
