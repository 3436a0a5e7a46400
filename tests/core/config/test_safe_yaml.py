"""YAML within bounds: aliases used as meant still load; bombs, loops, depth and repeated keys
are refused."""

from __future__ import annotations

import time

import pytest

from hfsdk.core.config.safe_yaml import (
    MAX_EXPANDED_NODES,
    YamlBombError,
    load_yaml_text,
)


def test_ordinary_aliases_and_merge_keys_load_as_before() -> None:
    text = (
        "base: &base {lr: 1.0e-6, betas: [0.9, 0.999]}\n"
        "actor: {optim: *base}\n"
        "critic:\n  optim:\n    <<: *base\n    lr: 1.0e-5\n"
    )
    data = load_yaml_text(text)
    assert data["actor"]["optim"] == {"lr": 1e-6, "betas": [0.9, 0.999]}
    assert data["critic"]["optim"] == {"lr": 1e-5, "betas": [0.9, 0.999]}
    assert load_yaml_text("") is None


def test_expansion_is_counted_not_the_distinct_nodes() -> None:
    # 4 levels of 40 aliases: 40^4 = 2.56 M leaves from 200 distinct nodes.
    lines = ["a: &a [" + ", ".join(["x"] * 40) + "]"]
    for previous, name in zip("abc", "bcd", strict=True):
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{previous}"] * 40) + "]")
    started = time.perf_counter()
    with pytest.raises(YamlBombError, match=f"more than {MAX_EXPANDED_NODES:,} nodes"):
        load_yaml_text("\n".join(lines), source="x.yaml")
    assert time.perf_counter() - started < 1.0
    # One level fewer (64 k leaves) is a large but legitimate document.
    data = load_yaml_text("\n".join(lines[:3]))
    assert len(data["c"]) == 40 and data["c"][0][0] == ["x"] * 40


def test_recursive_aliases_and_deep_nesting_are_one_line_errors() -> None:
    for text in ("a: &a [1, *a]", "a: &a {b: *a}"):
        with pytest.raises(YamlBombError, match="refers to a node that contains it") as info:
            load_yaml_text(text, source="loop.yaml")
        assert "\n" not in str(info.value) and str(info.value).startswith("loop.yaml: ")
    with pytest.raises(YamlBombError, match="nested"):
        load_yaml_text("[" * 300 + "]" * 300)
    with pytest.raises(YamlBombError, match="nested"):
        load_yaml_text("[" * 5000 + "]" * 5000)  # past the parser's own recursion


def test_a_key_twice_in_one_mapping_is_refused_not_silently_the_last() -> None:
    from hfsdk.core.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        load_yaml_text("data:\n  batch_size: 4\n  batch_size: 8\n", source="run.yaml")
    assert str(info.value) == (
        "run.yaml: the key 'batch_size' appears twice in one mapping (line 3); keep one"
    )
    # the same name in two mappings, and keys of two types, are not the same key
    assert load_yaml_text("a: {x: 1}\nb: {x: 2}\n'1': s\n1: i\n") == {
        "a": {"x": 1}, "b": {"x": 2}, "1": "s", 1: "i"
    }  # fmt: skip
