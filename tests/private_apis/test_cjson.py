"""Pins ``bridgecli.private_apis.cjson`` to CPython's ``_json``: the functions it calls exist,
are the ones ``json`` itself runs, keep the signatures and the ``StopIteration`` contract it
relies on, and give ``json``'s results over a corpus of awkward values."""

from __future__ import annotations

import _json
import json
import json.encoder
import json.scanner
import math
import types

import pytest

from bridgecli import wirejson
from bridgecli.private_apis import cjson

CORPUS = [
    {},
    [],
    {"a": [1, 2, {"b": None}], "c": {"d": {"e": [[[]]]}}},
    ["é", "ü", "日本語", "emoji 😀", "\u2028\u2029", "\x00\x1f\x7f", 'quote " backslash \\ slash /'],
    {"tabs\tand\nnewlines\r": "\b\f", "ключ": "значение", "": ""},
    [0, -1, 2**63, -(2**70), 10**30],
    [0.0, -0.0, 0.1, 1.5e-10, 1e308, 2.5e-308, 123456789.123456789, -1e-7, 3.0],
    [math.inf, -math.inf],
    [True, False, None, "null", "true"],
    {"1": 1, "nested": [{"x": [1.5, "y", {"z": None}]}] * 3},
    [{"k": "v" * 1000}, list(range(50))],
]
#: JSON texts whose reading exercises escapes the encoder never writes
TEXTS = [
    '"\\ud83d\\ude00"',
    '"\\u00e9\\u65e5"',
    '{"a": "\\"\\\\\\/\\b\\f\\n\\r\\t"}',
    " \n\t[1 , 2.50 , -0.0 , 1E3 , 1e-3 , NaN , Infinity , -Infinity]\r\n",
    '{"dup": 1, "dup": 2}',
    "[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]",
]


def test_json_runs_the_same_c_functions():
    """The module's premise: these are the C code behind ``json``, not a lookalike."""
    assert json.scanner.c_make_scanner is _json.make_scanner
    assert json.encoder.c_make_encoder is _json.make_encoder
    assert json.encoder.c_encode_basestring is _json.encode_basestring
    assert json.encoder.c_encode_basestring_ascii is _json.encode_basestring_ascii


def test_the_scanner_reads_any_object_with_the_decoders_attributes():
    decoder = json.JSONDecoder()
    names = ("strict", "object_hook", "object_pairs_hook", "parse_float", "parse_int", "parse_constant")
    context = types.SimpleNamespace(**{name: getattr(decoder, name) for name in names})
    scan = _json.make_scanner(context)
    assert scan('  {"a": [1, 2.5]} x', 2) == ({"a": [1, 2.5]}, 17)


@pytest.mark.parametrize(("text", "index"), [("x", 0), ("[1]  ", 3), ("", 0)])
def test_the_scanner_raises_stop_iteration_with_the_index_where_no_value_starts(text, index):
    scan = _json.make_scanner(json.JSONDecoder())
    with pytest.raises(StopIteration) as stopped:
        scan(text, index)
    assert stopped.value.value == index


def test_make_encoder_takes_nine_arguments_in_jsons_order():
    # markers, default, encoder, indent, key_separator, item_separator, sort_keys, skipkeys, allow_nan
    sort = _json.make_encoder(None, str, _json.encode_basestring, None, "=", ";", True, False, False)
    assert "".join(sort({"b": [1, b"x"], "a": "é"}, 0)) == '{"a"="é";"b"=[1;"b\'x\'"]}'
    with pytest.raises(ValueError):
        "".join(sort([math.nan], 0))
    skip = _json.make_encoder(None, str, _json.encode_basestring_ascii, None, ":", ",", False, True, True)
    assert "".join(skip({"é": math.nan, (1,): 0}, 0)) == '{"\\u00e9":NaN}'


@pytest.mark.parametrize("value", CORPUS)
def test_writes_what_json_writes(value):
    assert cjson.dumps_compact(value) == json.dumps(value, separators=(",", ":"))
    for separators in ((",", ":"), (", ", ": ")):
        encode = cjson.text_encoder(separators)
        assert encode(value) == json.dumps(value, ensure_ascii=False, separators=separators)
    assert cjson.text_encoder((",", ":"), default=repr)([value, {1, 2}]) == json.dumps(
        [value, {1, 2}], ensure_ascii=False, separators=(",", ":"), default=repr
    )


@pytest.mark.parametrize("value", CORPUS)
def test_reads_what_json_reads(value):
    for text in (json.dumps(value), json.dumps(value, ensure_ascii=False, indent=2)):
        assert cjson.loads(text) == json.loads(text)
        assert cjson.loads(text.encode()) == json.loads(text.encode())


@pytest.mark.parametrize("text", TEXTS)
def test_reads_escapes_and_constants_as_json_does(text):
    read, expected = cjson.loads(text), json.loads(text)
    assert json.dumps(read) == json.dumps(expected)  # NaN != NaN: compare as text


@pytest.mark.parametrize("bad", ["[1,]", "{'a': 1}", '"\\x"', '"\x01"', "01", "[1] [2]", "[-]"])
def test_refuses_what_json_refuses(bad):
    with pytest.raises(json.JSONDecodeError):
        json.loads(bad)
    with pytest.raises(ValueError):
        cjson.loads(bad)


def test_wirejson_is_this_module_on_cpython():
    assert (wirejson.loads, wirejson.dumps_compact, wirejson.text_encoder) == (
        cjson.loads,
        cjson.dumps_compact,
        cjson.text_encoder,
    )
