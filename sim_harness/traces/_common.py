"""Shared parts of the trace readers: names and sizes, and JSON/YAML documents whose every value
knows its line (PyYAML nodes), so that messages read ``file:line: field: problem``."""

from __future__ import annotations

import datetime
import json
import math
import re
from pathlib import Path

import yaml
from yaml.constructor import SafeConstructor

from ace.vocab import Algorithm, Collective, VocabError, parse_algorithm, parse_collective

from ..trace import TraceError

#: Element types a trace may name, and their sizes in bytes.
DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "int32": 4}
#: Reduction operators (``sum`` for collectives that do not reduce).
OPS = ("sum", "max", "min")
REDUCING = tuple(c for c in Collective if c.reduces)
#: A trace's collectives: ours, and ``msccl`` (a program read from an MSCCL XML file).
MSCCL = "msccl"
TRACE_COLLECTIVES = tuple(Collective) + (MSCCL,)
ALGORITHMS = tuple(Algorithm)


def err(source: str, line, field: str | None, problem: str) -> TraceError:
    """``source:line: field: problem`` (line and field left out when unknown)."""
    where = f"{source}:{line}" if line is not None else f"{source}"
    return TraceError(f"{where}: {field}: {problem}" if field else f"{where}: {problem}")


def int_choices(low: int | None) -> str:
    return f"an integer >= {low}" if low is not None else "an integer"


def read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as error:
        raise TraceError(f"{path}: cannot read: {error.strerror}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise TraceError(f"{path}: not a text file (byte {error.start} is not UTF-8)") from None


def norm_collective(name) -> str | None:
    """Our collective (:class:`~ace.vocab.Collective`, or ``msccl``) for ``name`` or one of
    its aliases (:data:`~ace.vocab.COLLECTIVE_ALIASES`); None if unknown."""
    if str(name).lower() == MSCCL:
        return MSCCL
    try:
        return parse_collective(name).value
    except VocabError:
        return None


def norm_algorithm(name) -> str | None:
    """The :class:`~ace.vocab.Algorithm` for ``name`` or an alias; None if unknown."""
    try:
        return parse_algorithm(name).value
    except VocabError:
        return None


COLLECTIVE_CHOICES = ", ".join(TRACE_COLLECTIVES) + " (or an alias such as all_reduce)"
ALGORITHM_CHOICES = ", ".join(ALGORITHMS) + " (or an alias such as hd)"


def check_algorithms(collective: str, algs: tuple[str, ...]) -> str | None:
    """The compiler's rule for ``double_binary_tree`` (all-reduce, last dimension only): the
    problem, or None."""
    for k, alg in enumerate(algs):
        if alg == Algorithm.DOUBLE_BINARY_TREE and (collective != Collective.ALLREDUCE
                                                     or k != len(algs) - 1):
            return ("double_binary_tree is only for an all-reduce (on its last dimension); "
                    f"allowed here: {', '.join(a for a in ALGORITHMS if a != alg)}")
    return None


def infer_dtype(nbytes: int) -> str | None:
    """The dtype of a size given only in bytes: fp32 when it is a multiple of 4, else bf16 when
    it is a multiple of 2, else None."""
    if nbytes % 4 == 0:
        return "fp32"
    if nbytes % 2 == 0:
        return "bf16"
    return None


def topology_text(kinds: list[str], dims: list[int]) -> str | None:
    """``ring:8`` / ``torus:4x4`` / ``fully_connected:8`` / ``switch:4x2`` from per-dimension
    kinds (already ours: torus, fully_connected, switch); None when the kinds differ."""
    if not kinds or len(set(kinds)) != 1:
        return None
    kind = kinds[0]
    if kind == "torus" and len(dims) == 1:
        kind = "ring"
    return f"{kind}:{'x'.join(str(d) for d in dims)}"


# -- JSON / YAML documents with line numbers ------------------------------------------------------

JSON_NUMBER = re.compile(r"-?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?")
_constructor = SafeConstructor()


class Doc:
    """One value of a JSON/YAML document: its PyYAML node, its field path and its file."""

    __slots__ = ("node", "field", "source")

    def __init__(self, node, field: str, source: str):
        self.node, self.field, self.source = node, field, source

    @property
    def line(self) -> int:
        return self.node.start_mark.line + 1

    def err(self, problem: str) -> TraceError:
        return err(self.source, self.line, self.field or "(top level)", problem)

    def child_field(self, key) -> str:
        if isinstance(key, int):
            return f"{self.field}[{key}]"
        return f"{self.field}.{key}" if self.field else str(key)

    @property
    def kind(self) -> str:
        if isinstance(self.node, yaml.MappingNode):
            return "mapping"
        if isinstance(self.node, yaml.SequenceNode):
            return "list"
        return "scalar"

    def mapping(self, allowed: tuple[str, ...] | None = None) -> dict[str, "Doc"]:
        """The keys and values of a mapping; unknown (not in ``allowed``) and duplicate keys are
        errors."""
        if self.kind != "mapping":
            raise self.err(f"{self.describe()} is not allowed; allowed: a mapping")
        out: dict[str, Doc] = {}
        for key_node, value_node in self.node.value:
            key = Doc(key_node, self.field, self.source).scalar()
            if not isinstance(key, str):
                raise Doc(key_node, self.field, self.source).err(
                    f"key {key!r} is not allowed; allowed: string keys")
            if key in out:
                raise Doc(key_node, self.child_field(key), self.source).err(
                    f"duplicate key (first on line {out[key].node.start_mark.line + 1})")
            if allowed is not None and key not in allowed:
                raise Doc(key_node, self.child_field(key), self.source).err(
                    f"unknown key; allowed: {', '.join(allowed)}")
            out[key] = Doc(value_node, self.child_field(key), self.source)
        return out

    def items(self) -> list["Doc"]:
        if self.kind != "list":
            raise self.err(f"{self.describe()} is not allowed; allowed: a list")
        return [Doc(n, self.child_field(k), self.source) for k, n in enumerate(self.node.value)]

    def scalar(self):
        """The Python value of a scalar: JSON rules for plain numbers (``1e3`` is a number), YAML
        rules for the rest; quoted scalars are strings."""
        node = self.node
        if not isinstance(node, yaml.ScalarNode):
            return None
        if node.style in ("'", '"', "|", ">"):
            return node.value
        if JSON_NUMBER.fullmatch(node.value):
            return json.loads(node.value)
        value = _constructor.construct_object(node)
        if isinstance(value, (datetime.date, datetime.datetime)):
            return node.value
        return value

    def value(self):
        """The whole value as plain Python (dicts, lists, scalars)."""
        if self.kind == "mapping":
            return {k: v.value() for k, v in self.mapping().items()}
        if self.kind == "list":
            return [v.value() for v in self.items()]
        return self.scalar()

    def describe(self) -> str:
        if self.kind == "mapping":
            return "a mapping"
        if self.kind == "list":
            return "a list"
        return repr(self.scalar())

    # Typed scalars: each returns the value or raises naming what is allowed.
    def string(self, allowed: str = "a non-empty string") -> str:
        value = self.scalar()
        if not isinstance(value, str) or not value:
            raise self.err(f"{self.describe()} is not allowed; allowed: {allowed}")
        return value

    def whole(self):
        """The scalar, with an integral float (JSON ``1e3``) as an int."""
        value = self.scalar()
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value

    def integer(self, low: int | None = None, allowed: str | None = None) -> int:
        value = self.whole()
        ok = isinstance(value, int) and not isinstance(value, bool)
        if not ok or (low is not None and value < low):
            raise self.err(f"{self.describe()} is not allowed; allowed: "
                           f"{allowed or int_choices(low)}")
        return value

    def number(self, positive: bool = False) -> float:
        value = self.scalar()
        ok = (isinstance(value, (int, float)) and not isinstance(value, bool)
              and math.isfinite(value) and (value > 0 if positive else value >= 0))
        if not ok:
            raise self.err(f"{self.describe()} is not allowed; allowed: a "
                           f"{'positive' if positive else 'non-negative'} number")
        return value


def load_doc(text: str, source: str) -> Doc:
    """Parse JSON or YAML text into the root :class:`Doc`."""
    if text.lstrip().startswith(("{", "[")):
        try:
            json.loads(text, parse_constant=_no_constant)
        except json.JSONDecodeError as error:
            raise err(source, error.lineno, None, f"not valid JSON: {error.msg}") from None
        except ValueError as error:
            raise err(source, None, None, f"not valid JSON: {error}") from None
        # Tabs are only whitespace in valid JSON (a string may not hold a raw one), and PyYAML
        # refuses them between tokens.
        text = text.replace("\t", " ")
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark else None
        raise err(source, line, None, f"not valid YAML: {error.problem or error.context}") from None
    except yaml.YAMLError as error:
        raise err(source, None, None, f"not valid YAML: {error}") from None
    if node is None:
        raise err(source, 1, None, "empty document")
    return Doc(node, "", source)


def _no_constant(name):
    raise ValueError(f"{name} is not a JSON number")
