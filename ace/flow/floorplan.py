"""Block RAM floorplan of the engine on the ECP5 LFE5U-85F (``ace synth --floorplan rams``).

nextpnr's analytic placer spreads each block's block RAMs over the die: in the `small` engine
the SRAM's 64 ``DP16KD`` spanned the whole width of three RAM rows, the NIC's receive buffers
two rows, one 144-bit interconnect write buffer's four RAMs 40 columns, and the logic of every
block followed its RAMs (each of the SRAM, the NIC and the interconnect spanned 60 to 110 of
the die's 126 columns). This module pins every ``DP16KD`` of the engine to a site of its own
(the ``BEL`` attribute, which nextpnr honours as a fixed placement), block by block:

- the SRAM in RAM rows 22 and 46, slice-major: the ``k``-th ``DP16KD`` of every bank (bits
  ``18 k`` to ``18 k + 17`` of each bank's word, which the rotators and response FIFOs slice
  the same way) side by side, the first half of the banks in row 22 and the rest in row 46 at
  the same columns;
- the interconnect's write buffers at the right-hand end of rows 22 and 46 (one per row);
- in row 70, then row 82: the NIC's receive buffers, the interconnect's read buffers and the
  channels' instruction memories, each buffer's RAMs next to each other;
- any other ``DP16KD`` after those.

The placer then places the logic around its RAMs. Measured on the `small` engine (see
docs/synthesis.md), at two placer seeds: the placed wire length 20 to 29 % shorter and a fifth
to a quarter fewer end registers over 10 ns than with the RAMs placed by nextpnr.

Sites: the LFE5U-85F has 208 ``DP16KD`` in four rows (``Y`` 22, 46, 70 and 82) of 52 at the
same columns; nextpnr-ecp5 names them ``X<x>/Y<y>/EBR<k>`` with ``k`` the site's place in its
group of four (read from nextpnr-ecp5 0.11.1's placement of 208 chained ``DP16KD``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ace.errors import UserError

__all__ = ["FLOORPLANS", "FLOORPLAN_DEVICE", "EBR_ROWS", "EBR_COLUMNS", "ebr_site",
           "engine_ram_sites", "apply_floorplan"]

#: ``--floorplan`` values: ``rams`` (pin the engine's block RAMs, default) or ``none``.
FLOORPLANS = ("rams", "none")

#: The device the sites are of.
FLOORPLAN_DEVICE = "LFE5U-85F"

#: ``Y`` of the four block RAM rows.
EBR_ROWS = (22, 46, 70, 82)

#: ``X`` of the 52 block RAM sites of a row (the same in every row), in groups of four.
EBR_COLUMNS = (4, 6, 8, 10, 13, 15, 17, 19, 22, 24, 26, 28, 31, 33, 35, 37, 40, 42, 44, 46,
               49, 51, 53, 55, 58, 60, 62, 64, 69, 71, 73, 75, 78, 80, 82, 84, 87, 89, 91, 93,
               96, 98, 100, 102, 105, 107, 109, 111, 114, 116, 118, 120)

_SRAM = re.compile(r"sram\.bank(\d+)\.dp16kd(\d+)$")
_WRITE_BUFFER = re.compile(r"interconnect\.wq(\d+)\.")
#: Name patterns of the groups laid in row 70 (then 82), in order: the NIC's receive buffers,
#: the interconnect's read buffers, the channels' instruction memories.
_ROW_GROUPS = (r"nic\.", r"interconnect\.rq\d+\.", r"ch\d+\.imem\.")


def ebr_site(row: int, column: int) -> str:
    """nextpnr's name of the block RAM site at ``column`` (0 to 51) of RAM row ``row``."""
    return f"X{EBR_COLUMNS[column]}/Y{row}/EBR{column % 4}"


def _natural(name: str):
    """Sort key: ``dp16kd10`` after ``dp16kd9``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def engine_ram_sites(names) -> dict[str, str]:
    """The site of each ``DP16KD`` of the engine, by its cell path below the engine
    (``sram.bank3.dp16kd5``, ``nic.rx0.buffer1.dp16kd2``, ...). Raises :class:`UserError` if
    the RAMs do not fit the plan's rows."""
    names = sorted(names, key=_natural)
    sites: dict[str, str] = {}
    sram = {name: (int(match[1]), int(match[2])) for name in names
            if (match := _SRAM.match(name))}
    used = {row: set() for row in EBR_ROWS}

    def take(name, row, column):
        if not 0 <= column < len(EBR_COLUMNS) or column in used[row]:
            raise UserError(f"--floorplan rams: the engine's block RAMs do not fit the plan "
                            f"({name}: row {row}, column {column}); use --floorplan none")
        used[row].add(column)
        sites[name] = ebr_site(row, column)

    if sram:
        banks = 1 + max(bank for bank, _ in sram.values())
        slices = 1 + max(k for _, k in sram.values())
        half = (banks + 1) // 2             # banks per row
        width = len(EBR_COLUMNS) // slices  # columns per slice
        if half > width:
            raise UserError(f"--floorplan rams: the SRAM's {banks} banks of {slices} block "
                            f"RAMs do not fit two rows of {len(EBR_COLUMNS)}; use --floorplan "
                            "none")
        for name, (bank, k) in sram.items():
            take(name, EBR_ROWS[bank // half], k * width + bank % half)
    buffers: dict[int, list[str]] = {}
    for name in names:
        match = _WRITE_BUFFER.match(name)
        if match:
            buffers.setdefault(int(match[1]), []).append(name)
    for j, members in sorted(buffers.items()):
        row = EBR_ROWS[j % 2]
        first = len(EBR_COLUMNS) - len(members) * (j // 2 + 1)
        for offset, name in enumerate(members):
            take(name, row, first + offset)

    rest = [name for name in names if name not in sites]
    ordered = [name for pattern in _ROW_GROUPS for name in rest if re.match(pattern, name)]
    ordered += [name for name in rest if name not in ordered]
    free = [(row, column) for row in (70, 82, 46, 22) for column in range(len(EBR_COLUMNS))
            if column not in used[row]]
    if len(ordered) > len(free):
        raise UserError(f"--floorplan rams: {len(sites) + len(ordered)} block RAMs, more than "
                        f"the {len(EBR_ROWS) * len(EBR_COLUMNS)} sites of the "
                        f"{FLOORPLAN_DEVICE}; use --floorplan none")
    for name, (row, column) in zip(ordered, free):
        take(name, row, column)
    return sites


def apply_floorplan(design: Path, out: Path, top: str) -> int:
    """Pin the ``DP16KD`` cells of yosys's JSON netlist ``design`` below module ``top``
    (the engine inside its shell: ``<name>.dut``) to the sites of :func:`engine_ram_sites`,
    writing ``out``; returns how many were pinned. Each of Amaranth's modules is instantiated
    once, so a cell of a module is one cell of the design; a module instantiated twice would
    put two cells on one site, and is an error."""
    netlist = json.loads(design.read_text())
    modules = netlist["modules"]
    uses: dict[str, int] = {}
    for module in modules.values():
        for cell in module.get("cells", {}).values():
            uses[cell["type"]] = uses.get(cell["type"], 0) + 1
    cells = {}
    for module_name, module in modules.items():
        if module_name != top and not module_name.startswith(top + "."):
            continue
        prefix = module_name[len(top) + 1:]
        for cell_name, cell in module.get("cells", {}).items():
            if cell["type"] == "DP16KD":
                if module_name != top and uses.get(module_name, 0) != 1:
                    raise UserError(f"--floorplan rams: module {module_name} is instantiated "
                                    f"{uses.get(module_name, 0)} times; use --floorplan none")
                cells[f"{prefix}.{cell_name}" if prefix else cell_name] = cell
    for name, site in engine_ram_sites(cells).items():
        cells[name]["attributes"]["BEL"] = site
    out.write_text(json.dumps(netlist))
    return len(cells)
