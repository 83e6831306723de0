"""The shared vocabulary (ace.vocab): members equal their text, one alias table each, the mode
bit's three spellings, and the ISA's opcode and buffer tables derived from it."""

import json

import pytest

from ace.isa import BUF_NAMES, NAME_TO_BUF, NAME_TO_OPCODE, Buf, Opcode, decode, encode
from ace.sw import compiler
from ace.sw.program import BUFFERS, PLACEMENTS, STEP_TYPES, Step
from ace.vocab import (ALGORITHM_ALIASES, COLLECTIVE_ALIASES, MODE_ALIASES, PLACEMENT,
                       Algorithm, Buffer, Collective, Mode, StepType, VocabError,
                       parse_algorithm, parse_collective, parse_modes)
from sim_harness.traces._common import norm_algorithm, norm_collective


def test_members_are_their_text():
    assert Collective.ALLREDUCE == "allreduce" and "allreduce" in set(Collective)
    assert StepType.SEND == "s" and Buffer.SCRATCH == "s" and Buffer.SCRATCH is not StepType.SEND
    assert {StepType.RRC: 1}["rrc"] == 1
    assert json.dumps([Mode.STAGED, Algorithm.RING]) == '["staged", "ring"]'
    assert f"{Collective.ALLTOALL}" == "alltoall"


@pytest.mark.parametrize("table, enum_cls, parse", [
    (COLLECTIVE_ALIASES, Collective, parse_collective),
    (ALGORITHM_ALIASES, Algorithm, parse_algorithm)])
def test_alias_tables(table, enum_cls, parse):
    for alias, member in table.items():
        assert alias not in set(enum_cls), alias
        assert parse(alias) is member and parse(alias.upper()) is member
    for member in enum_cls:
        assert parse(member.value) is member
    with pytest.raises(VocabError, match="allowed: " + ", ".join(enum_cls)):
        parse("no_such_name")


def test_alias_error_type_is_the_callers():
    with pytest.raises(compiler.CompileError, match="collective: 'bogus'"):
        parse_collective("bogus", compiler.CompileError)


def test_trace_readers_use_the_same_tables():
    assert norm_collective("A2A") == "alltoall" and type(norm_collective("a2a")) is str
    assert norm_collective("msccl") == "msccl" and norm_collective("gather") is None
    assert norm_algorithm("dbt") == "double_binary_tree" and norm_algorithm("x") is None
    assert compiler._COLL_ALIASES is COLLECTIVE_ALIASES
    assert compiler._ALG_ALIASES is ALGORITHM_ALIASES


def test_mode_placement_bit():
    assert [(m.placement, m.placement_bit) for m in Mode] == [("sram", 0), ("memory", 1),
                                                                ("p2p", 2)]
    assert PLACEMENTS == ("sram", "memory", "p2p") and set(PLACEMENT) == set(Mode)
    for mode in Mode:
        assert Mode.parse(mode.value) is mode and Mode.parse(mode.placement) is mode
    assert [m.in_memory for m in Mode] == [False, True, True]
    with pytest.raises(VocabError, match="allowed: ace, staged, p2p"):
        Mode.parse("hbm")


def test_mode_aliases_and_sets():
    """``baseline`` (the staged baseline's old name) is accepted wherever a mode is typed."""
    assert MODE_ALIASES == {"baseline": Mode.STAGED}
    assert Mode("baseline") is Mode.STAGED and Mode.parse("Baseline") is Mode.STAGED
    assert parse_modes("all") == (Mode.ACE, Mode.STAGED, Mode.P2P)
    assert parse_modes("both") == (Mode.ACE, Mode.STAGED)
    assert parse_modes("p2p") == (Mode.P2P,)
    assert parse_modes(["baseline", "ace"]) == (Mode.STAGED, Mode.ACE)
    for bad in ("hbm", ["ace", "ace"], [], 3, ["staged", "baseline"]):
        with pytest.raises(VocabError, match="allowed: ace, staged, p2p .alias: baseline., "
                                             "all, both"):
            parse_modes(bad)


def test_step_types_and_operands():
    assert set(STEP_TYPES) == set(StepType) - {StepType.END}
    assert Step(type="rrcs").uses == {"src", "dst", "recv", "send"}
    assert StepType.LOAD.operands == {"dst", "mem"} and StepType.END.operands == set()
    # The step table (docs/programming_model.md): which steps send and which receive.
    assert {t for t in STEP_TYPES if "send" in t.operands} == {"s", "rrs", "rrcs", "rcs"}
    assert {t for t in STEP_TYPES if "recv" in t.operands} == {"r", "rrc", "rrs", "rrcs", "rcs"}


def test_isa_tables_follow_the_vocabulary():
    assert set(NAME_TO_OPCODE) == set(StepType)
    assert NAME_TO_OPCODE["s"] is Opcode.S and NAME_TO_OPCODE[StepType.RECV] is Opcode.R
    assert BUFFERS == (Buffer.INPUT, Buffer.OUTPUT, Buffer.SCRATCH)
    assert BUF_NAMES[Buf.SCRATCH] is Buffer.SCRATCH and NAME_TO_BUF["o"] is Buf.OUTPUT
    for step_type in StepType:
        assert decode(encode(opcode=step_type))["opcode"] is NAME_TO_OPCODE[step_type]
