"""The documented memory accounting of every step type in every mode, transcribed from
``docs/engine.md`` ("Placement: ACE mode and the two baselines"), independently of
:func:`ace.sw.program.step_memory_traffic`: the engine tests and the replay scoreboard check
the measured memory bytes against it, and ``tests/test_program.py`` checks that the model
implements it."""

from __future__ import annotations

__all__ = ["DOCUMENTED_TRAFFIC", "documented_bytes"]

#: mode -> step type -> (bytes read, bytes written) per byte of the step.
DOCUMENTED_TRAFFIC: dict[str, dict[str, tuple[int, int]]] = {
    "ace": {"load": (1, 0), "store": (0, 1)},
    "staged": {"s": (1, 0), "r": (0, 1), "rcs": (1, 1), "rrc": (2, 2), "rrcs": (3, 2),
               "rrs": (3, 2), "cpy": (1, 1), "re": (2, 1), "load": (1, 1), "store": (1, 1)},
    "p2p": {"s": (1, 0), "r": (0, 1), "rcs": (1, 1), "rrc": (2, 2), "rrcs": (2, 2),
            "rrs": (2, 1), "cpy": (1, 1), "re": (2, 1), "load": (1, 1), "store": (1, 1)},
}


def documented_bytes(mode: str, steps) -> tuple[int, int]:
    """``(read, written)`` bytes of ``steps``, each ``(type, bytes)``, in ``mode``."""
    table = DOCUMENTED_TRAFFIC[mode]
    read = sum(table.get(str(kind), (0, 0))[0] * nbytes for kind, nbytes in steps)
    written = sum(table.get(str(kind), (0, 0))[1] * nbytes for kind, nbytes in steps)
    return read, written
