"""JSON without ``re``: the same text and values as the json package, and no ``re`` import."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridgecli import wirejson

_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
_values = st.recursive(_scalars, lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner), max_leaves=20)
_containers = st.lists(_values) | st.dictionaries(st.text(), _values)


@given(_containers)
def test_same_text_and_values_as_json(value):
    assert wirejson.dumps_compact(value) == json.dumps(value, separators=(",", ":"))
    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False, indent=2)):
        assert wirejson.loads(text) == value
        assert wirejson.loads(text.encode() + b"\n") == value


@given(_containers)
def test_text_encoders_write_what_json_dumps_writes(value):
    for separators in ((",", ":"), (", ", ": ")):
        encode = wirejson.text_encoder(separators)
        assert encode(value) == json.dumps(value, ensure_ascii=False, separators=separators)
    as_text = wirejson.text_encoder((", ", ": "), default=str)
    assert as_text([value, b"raw"]) == json.dumps([value, b"raw"], ensure_ascii=False, default=str)


@pytest.mark.parametrize("bad", ["", "  ", "{", "[1,]", "{} x", "nul", '{"a" 1}', b"\xff"])
def test_bad_text_is_a_value_error(bad):
    with pytest.raises(ValueError):
        wirejson.loads(bad)


def test_constants_and_unserializable_values_as_json():
    assert math.isinf(wirejson.loads("[Infinity]")[0])
    with pytest.raises(TypeError):
        wirejson.dumps_compact({"a": object()})


def test_it_never_imports_re():
    code = (
        "import sys; from bridgecli import wirejson; wirejson.loads(wirejson.dumps_compact({'a': [1]}));"
        "print(sorted({'re', 'enum', 'json', 'typing'} & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr
