"""Operand beats and expected results for the reduction ALU array, shared by the Amaranth
unit tests and the cocotb testbench.

Beats are built per (op, dtype) batch with vectorised numpy (the golden model in
:mod:`ace.numerics`), then shuffled together so that op and dtype change from beat to beat as
they do when channels share the array.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ace.config import AceConfig
from ace.layouts import Dtype, ReduceOp
from ace.numerics import (
    directed_pairs, elements_per_beat, pack_beats, random_elements, reduce_elements, to_bits,
)

__all__ = ["ALL_COMBOS", "AluBeats", "operands", "make_beats", "describe_mismatch"]

#: Every (op, dtype) pair the array supports: 4 ops x 4 dtypes (``COPY`` included).
ALL_COMBOS = [(op, dtype) for op in ReduceOp for dtype in Dtype]


@dataclass
class AluBeats:
    """A sequence of operand beats with the expected result of each."""
    a: list[int] = field(default_factory=list)
    b: list[int] = field(default_factory=list)
    op: list[ReduceOp] = field(default_factory=list)
    dtype: list[Dtype] = field(default_factory=list)
    tag: list[int] = field(default_factory=list)
    last: list[int] = field(default_factory=list)
    expected: list[int] = field(default_factory=list)
    #: Element operations per (op name, dtype name).
    elements: dict[tuple[str, str], int] = field(default_factory=dict)

    def __len__(self):
        return len(self.a)


def operands(dtype: Dtype, count: int, rng: np.random.Generator, mode: str,
             directed_offset: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``count`` operand pairs as bit patterns.

    ``mode``: ``"bits"`` (random bit patterns), ``"scaled"`` (random well-scaled values),
    ``"mixed"`` (each operand of each element drawn from either), or ``"directed"`` (the
    directed pairs of :func:`ace.numerics.directed_pairs`, cycled from ``directed_offset``).
    """
    if mode == "directed":
        da, db = directed_pairs(dtype)
        index = (np.arange(count) + directed_offset) % da.size
        return da[index], db[index]
    if mode in ("bits", "scaled"):
        return (random_elements(dtype, count, rng, mode=mode),
                random_elements(dtype, count, rng, mode=mode))
    if mode != "mixed":
        raise ValueError(f"mode: {mode!r}; allowed: bits, scaled, mixed, directed")
    pick = []
    for _ in range(2):
        bits = random_elements(dtype, count, rng, mode="bits")
        scaled = random_elements(dtype, count, rng, mode="scaled")
        pick.append(np.where(rng.random(count) < 0.5, bits, scaled))
    return pick[0], pick[1]


def make_beats(config: AceConfig, rng: np.random.Generator,
               plan: list[tuple[ReduceOp, Dtype, str, int]], *,
               tag_bits: int | None = None, last_probability: float = 0.25) -> AluBeats:
    """Beats for a plan of ``(op, dtype, mode, beat count)`` batches, shuffled together.

    Tags are random; ``last`` is random with ``last_probability`` and always set on the final
    beat. A ``"directed"`` batch starts at a random directed pair and covers every one when it
    has enough beats.
    """
    tag_bits = config.alu_tag_bits if tag_bits is None else tag_bits
    rows = []        # (a, b, op, dtype, expected) per beat
    elements: dict[tuple[str, str], int] = {}
    for op, dtype, mode, beats in plan:
        per_beat = elements_per_beat(dtype, config.link_bytes)
        a, b = operands(dtype, beats * per_beat, rng, mode,
                        directed_offset=int(rng.integers(1 << 30)))
        expected = to_bits(dtype, reduce_elements(op, dtype, a, b))
        a_beats = pack_beats(dtype, a, config.link_bytes)
        b_beats = pack_beats(dtype, b, config.link_bytes)
        e_beats = pack_beats(dtype, expected, config.link_bytes)
        rows += [(x, y, op, dtype, e) for x, y, e in zip(a_beats, b_beats, e_beats)]
        key = (op.name, dtype.name)
        elements[key] = elements.get(key, 0) + beats * per_beat
    order = rng.permutation(len(rows))
    out = AluBeats(elements=elements)
    tags = rng.integers(0, 1 << tag_bits, len(rows))
    lasts = rng.random(len(rows)) < last_probability
    for k, index in enumerate(order):
        a, b, op, dtype, expected = rows[index]
        out.a.append(a)
        out.b.append(b)
        out.op.append(op)
        out.dtype.append(dtype)
        out.expected.append(expected)
        out.tag.append(int(tags[k]))
        out.last.append(int(lasts[k] or k == len(rows) - 1))
    return out


def describe_mismatch(config: AceConfig, beats: AluBeats, index: int, got: int) -> str:
    """One line per differing element of beat ``index``: operands, expected and received."""
    dtype, op = beats.dtype[index], beats.op[index]
    size = 8 * (4 if dtype in (Dtype.INT32, Dtype.FP32) else 2)
    mask = (1 << size) - 1
    lines = [f"beat {index}: op {op.name} dtype {dtype.name} tag {beats.tag[index]}"]
    for element in range(config.link_bytes * 8 // size):
        shift = element * size
        e, g = (beats.expected[index] >> shift) & mask, (got >> shift) & mask
        if e != g:
            x, y = (beats.a[index] >> shift) & mask, (beats.b[index] >> shift) & mask
            lines.append(f"  element {element}: a {x:#0{size // 4 + 2}x} b {y:#0{size // 4 + 2}x}"
                         f" expected {e:#0{size // 4 + 2}x} got {g:#0{size // 4 + 2}x}")
    return "\n".join(lines)
