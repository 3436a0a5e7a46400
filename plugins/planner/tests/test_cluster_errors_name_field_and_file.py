"""A cluster profile's bad field is one line naming the field and the file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hfsdk import HfsdkError
from hfsdk_planner.cluster import Cluster

FIGURES = "device_memory: 12e9\npeak_flops: 1e11\nmemory_bandwidth: 2e10\n"


@pytest.mark.parametrize("field", ["flops_by_dtype", "efficiency"])
@pytest.mark.parametrize("value", ["null", "[1, 2]", "{bfloat16: fast}"])
def test_a_table_that_is_not_names_to_numbers_names_field_and_file(
    tmp_path: Path, field: str, value: str
) -> None:
    profile = tmp_path / "prof.yaml"
    profile.write_text(f"{FIGURES}{field}: {value}\n")
    with pytest.raises(HfsdkError) as info:
        Cluster.load(profile)
    message = str(info.value)
    assert f"cluster field {field!r} must be a mapping of names to numbers" in message
    assert str(profile) in message and "\n" not in message


def test_a_bad_number_names_the_file_too(tmp_path: Path) -> None:
    profile = tmp_path / "prof.yaml"
    profile.write_text(FIGURES.replace("12e9", "12 GB"))
    expected = rf"{re.escape(str(profile))}.*'device_memory' must be a positive"
    with pytest.raises(HfsdkError, match=expected):
        Cluster.load(profile)


def test_a_table_given_in_code_still_names_the_field() -> None:
    with pytest.raises(HfsdkError, match="cluster field 'flops_by_dtype' must be a mapping"):
        Cluster(flops_by_dtype=None)  # type: ignore[arg-type]
    assert Cluster(flops_by_dtype={"float32": 1e11}).flops_by_dtype == (("float32", 1e11),)


@pytest.mark.parametrize("value", ["[a, b]", "{x: 1}", "7", "null"])
def test_a_name_that_is_not_a_string_names_field_and_file(tmp_path: Path, value: str) -> None:
    profile = tmp_path / "prof.yaml"
    profile.write_text(f"{FIGURES}name: {value}\n")
    with pytest.raises(HfsdkError) as info:
        Cluster.load(profile)
    message = str(info.value)
    assert "cluster field 'name' must be a string" in message
    assert str(profile) in message and "\n" not in message
