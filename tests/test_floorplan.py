"""The engine's block RAM floorplan (ace/flow/floorplan.py): every DP16KD of the `small`
engine on a site of its own, block by block, and the BEL attributes in yosys's netlist."""

import json
import re

import pytest

from ace.errors import UserError
from ace.flow.floorplan import (EBR_COLUMNS, EBR_ROWS, apply_floorplan, ebr_site,
                                engine_ram_sites)

# The DP16KD cells of the `small` engine, as yosys names them below the engine.
SMALL_ENGINE_RAMS = (
    [f"sram.bank{b}.dp16kd{k}" for b in range(8) for k in range(8)]
    + [f"nic.rx{l}.buffer{c}.ram.dp16kd{k}" for l in range(2) for c in range(2)
       for k in range(5)]
    + [f"interconnect.rq{j}.memory.storage.0.{k}" for j in range(4) for k in range(4)]
    + [f"interconnect.wq{j}.memory.storage.0.{k}" for j in range(2) for k in range(4)]
    + [f"ch{c}.imem.0.{k}" for c in range(2) for k in range(8)])


def _where(site):
    x, y, k = map(int, re.fullmatch(r"X(\d+)/Y(\d+)/EBR(\d)", site).groups())
    column = EBR_COLUMNS.index(x)
    assert k == column % 4
    return y, column


def test_every_ram_of_the_small_engine_has_a_site_of_its_own():
    sites = engine_ram_sites(SMALL_ENGINE_RAMS)
    assert set(sites) == set(SMALL_ENGINE_RAMS) and len(set(sites.values())) == 124
    every = {ebr_site(row, column) for row in EBR_ROWS for column in range(52)}
    assert len(every) == 208 and set(sites.values()) <= every
    assert engine_ram_sites(reversed(SMALL_ENGINE_RAMS)) == sites     # order-independent


def test_sram_slices_side_by_side_banks_in_two_rows():
    """The k-th DP16KD of every bank within one window of columns; bank b and b + 4 in the
    same column of rows 22 and 46; the slices in order across the row, not overlapping."""
    sites = {name: _where(site) for name, site in engine_ram_sites(SMALL_ENGINE_RAMS).items()}
    windows = []
    for k in range(8):
        where = [sites[f"sram.bank{b}.dp16kd{k}"] for b in range(8)]
        assert {row for row, _ in where[:4]} == {22} and {row for row, _ in where[4:]} == {46}
        assert [column for _, column in where[:4]] == [column for _, column in where[4:]]
        columns = sorted(column for _, column in where[:4])
        assert columns == list(range(columns[0], columns[0] + 4))
        windows.append(columns)
    assert all(a[-1] < b[0] for a, b in zip(windows, windows[1:]))


def test_each_buffer_in_adjacent_sites():
    sites = {name: _where(site) for name, site in engine_ram_sites(SMALL_ENGINE_RAMS).items()}
    groups = {}
    for name, where in sites.items():
        if not name.startswith("sram."):
            groups.setdefault(name.rsplit(".", 1)[0].replace(".ram", ""), []).append(where)
    assert len(groups) == 4 + 4 + 2 + 2
    for group, where in groups.items():
        (row,) = {row for row, _ in where}
        columns = sorted(column for _, column in where)
        assert columns == list(range(columns[0], columns[0] + len(where))), group
    assert {sites[f"nic.rx{l}.buffer{c}.ram.dp16kd0"][0] for l in range(2)
            for c in range(2)} == {70}


def test_rams_that_do_not_fit_are_a_clear_error():
    wide = [f"sram.bank{b}.dp16kd{k}" for b in range(16) for k in range(8)]  # 8 per row: 6 fit
    with pytest.raises(UserError, match="--floorplan rams: the SRAM's 16 banks of 8"):
        engine_ram_sites(wide)
    many = [f"other.ram{k}" for k in range(209)]
    with pytest.raises(UserError, match="209 block RAMs, more than the 208 sites"):
        engine_ram_sites(many)


def _netlist(instances_of_sram=1):
    ram = {"type": "DP16KD", "attributes": {"src": "x"}, "parameters": {}, "connections": {}}
    lut = {"type": "LUT4", "attributes": {}, "parameters": {}, "connections": {}}
    dut = {"cells": {f"sram{i}": {"type": "top.dut.sram", "attributes": {}, "parameters": {},
                                  "connections": {}} for i in range(instances_of_sram)}}
    dut["cells"]["ch0.imem.0.0"] = dict(ram, attributes={})
    return {"modules": {
        "top": {"cells": {"dut": {"type": "top.dut", "attributes": {}, "parameters": {},
                                  "connections": {}}}},
        "top.dut": dut,
        "top.dut.sram": {"cells": {"bank0.dp16kd0": dict(ram, attributes={}),
                                   "bank1.dp16kd0": dict(ram, attributes={}),
                                   "lut": lut}}}}


def test_apply_floorplan_sets_bel_attributes(tmp_path):
    design, out = tmp_path / "design.json", tmp_path / "floorplan.json"
    design.write_text(json.dumps(_netlist()))
    assert apply_floorplan(design, out, "top.dut") == 3
    modules = json.loads(out.read_text())["modules"]
    sram = modules["top.dut.sram"]["cells"]
    expected = engine_ram_sites(["sram.bank0.dp16kd0", "sram.bank1.dp16kd0", "ch0.imem.0.0"])
    assert sram["bank0.dp16kd0"]["attributes"]["BEL"] == expected["sram.bank0.dp16kd0"]
    assert sram["bank1.dp16kd0"]["attributes"]["BEL"] == expected["sram.bank1.dp16kd0"]
    assert modules["top.dut"]["cells"]["ch0.imem.0.0"]["attributes"]["BEL"] == (
        expected["ch0.imem.0.0"])
    assert "BEL" not in sram["lut"]["attributes"]
    assert "BEL" not in json.loads(design.read_text())["modules"]["top.dut.sram"]["cells"][
        "bank0.dp16kd0"]["attributes"]                  # the synthesized netlist is kept


def test_a_module_used_twice_is_not_pinned(tmp_path):
    design = tmp_path / "design.json"
    design.write_text(json.dumps(_netlist(instances_of_sram=2)))
    with pytest.raises(UserError, match="top.dut.sram is instantiated 2 times"):
        apply_floorplan(design, tmp_path / "floorplan.json", "top.dut")


def test_place_and_route_reads_the_pinned_netlist(tmp_path, monkeypatch):
    """``--floorplan rams``: nextpnr gets the pinned copy of the netlist (its hash keys the
    run's reuse); ``none``: yosys's own."""
    pytest.importorskip("amaranth_boards")
    from ace.flow import synth
    (tmp_path / "design.json").write_text(json.dumps(_netlist()))
    calls = []

    def step(work_dir, name, args, inputs, outputs, log, timeout=None):
        calls.append((args[args.index("--json") + 1], inputs))
        return "failed", 0.0, False

    monkeypatch.setattr(synth, "_step", step)
    monkeypatch.setattr(synth, "_tool", lambda name, package: name)
    monkeypatch.setattr(synth, "_last_error", lambda log: "stopped by the test")
    for floorplan in ("rams", "none"):
        row = {"seconds": {}, "reused": []}
        synth._place_and_route(synth.BOARDS["ulx3s-85f"], tmp_path, "top", 100.0, row,
                               lambda message: None, "place", None, None, None,
                               floorplan=floorplan)
        assert row["floorplan"] == floorplan
        assert row.get("pinned_rams") == (3 if floorplan == "rams" else None)
    assert calls == [("floorplan.json", ["floorplan.json"]), ("design.json", ["design.json"])]
    pinned = json.loads((tmp_path / "floorplan.json").read_text())
    assert pinned["modules"]["top.dut.sram"]["cells"]["bank0.dp16kd0"]["attributes"]["BEL"]
