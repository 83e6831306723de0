"""Why a program hung: what every channel waits for at its current step, as a graph.

Given a program and each channel's ``STEPS_DONE`` when the engines stopped (the watchdog's
``TIMEOUT``), every unfinished channel is at one step and waits for one of:

* ``dep``: another channel of its node (the step is a ``nop`` with a dependency);
* ``recv``: a message that its peer's channel has not sent yet (the message's sending step
  is not done);
* ``room``: room in the receiver's buffer of that (link, channel) for its message: the
  messages sent before it and not yet taken leave less than its size (``rx_bytes``, the
  buffer of one link and channel);
* ``link``: nothing a message-level model sees: its input is there and the receiver has
  room, so its link is busy with another packet. The edge goes to each forwarding step
  (receive and send) of the node that sends on the same link and whose own input is missing:
  a packet that holds the link while its data is still on the way (issue 18).

:func:`wait_cycle` returns a cycle of that graph. Messages are matched per (sender, receiver,
channel) in program order, as the NIC delivers them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

__all__ = ["Wait", "waits", "wait_cycle"]


@dataclass(frozen=True)
class Wait:
    """Channel ``channel`` of node ``node`` at step ``step`` waits, for ``reason``, on the
    channel ``on`` = (node, channel)."""
    node: int
    channel: int
    step: int
    reason: str
    on: tuple[int, int]

    def __str__(self) -> str:
        return (f"n{self.node}.ch{self.channel} step {self.step} waits ({self.reason}) "
                f"for n{self.on[0]}.ch{self.on[1]}")


class _Messages:
    """Every message of ``program``: its sending and its receiving (node, channel, step)."""

    def __init__(self, program):
        self.send_key, self.recv_key = {}, {}
        self.sender, self.receiver = {}, {}
        sent, received = defaultdict(int), defaultdict(int)
        for n, node in enumerate(program.nodes):
            for k, channel in enumerate(node.channels):
                for i, step in enumerate(channel.steps):
                    if "send" in step.uses:
                        key = (n, step.send_peer, k)
                        self.send_key[n, k, i] = (key, sent[key])
                        self.sender[key, sent[key]] = (n, k, i)
                        sent[key] += 1
                    if "recv" in step.uses:
                        key = (step.recv_peer, n, k)
                        self.recv_key[n, k, i] = (key, received[key])
                        self.receiver[key, received[key]] = (n, k, i)
                        received[key] += 1


def waits(program, steps_done, rx_bytes: int) -> list[Wait]:
    """The waits of every unfinished channel (module docstring); ``steps_done[n][k]`` is
    channel k of node n's ``STEPS_DONE``."""
    msgs = _Messages(program)
    current = {(n, k): channel.steps[steps_done[n][k]]
               for n, node in enumerate(program.nodes) for k, channel in enumerate(node.channels)
               if steps_done[n][k] < len(channel.steps)}

    def missing_input(n, k):
        """The (node, channel) whose message the step at (n, k) still waits for, or None."""
        sn, sk, si = msgs.sender[msgs.recv_key[n, k, steps_done[n][k]]]
        return None if steps_done[sn][sk] > si else (sn, sk)

    def queued_bytes(n, k):
        """Bytes sent on the step's (link, channel) before its message and not yet taken."""
        key, index = msgs.send_key[n, k, steps_done[n][k]]
        queued = 0
        for q in range(index):
            rn, rk, ri = msgs.receiver[key, q]
            if steps_done[rn][rk] <= ri:
                queued += program.nodes[rn].channels[rk].steps[ri].nbytes
        return queued

    out = []
    for (n, k), step in current.items():
        i = steps_done[n][k]
        if step.dep is not None and step.type == "nop":
            out.append(Wait(n, k, i, "dep", (n, step.dep[0])))
            continue
        source = missing_input(n, k) if "recv" in step.uses else None
        if source is not None:
            out.append(Wait(n, k, i, "recv", source))
        elif "send" in step.uses and queued_bytes(n, k) + step.nbytes > rx_bytes:
            out.append(Wait(n, k, i, "room", (step.send_peer, k)))
        elif "send" in step.uses:
            out.extend(Wait(n, k, i, "link", (m, j)) for (m, j), other in current.items()
                       if m == n and j != k and {"send", "recv"} <= other.uses
                       and other.send_link == step.send_link and missing_input(m, j))
    return out


def wait_cycle(found: list[Wait]) -> list[Wait] | None:
    """A cycle of waits (each one's ``on`` is the next one's channel), or None."""
    edges = defaultdict(list)
    for wait in found:
        edges[wait.node, wait.channel].append(wait)
    state: dict[tuple[int, int], int] = {}        # 1: on the path, 2: explored
    path: list[Wait] = []

    def visit(u):
        state[u] = 1
        for wait in edges[u]:
            path.append(wait)
            if state.get(wait.on) == 1:
                start = next(k for k, w in enumerate(path) if (w.node, w.channel) == wait.on)
                return path[start:]
            if wait.on not in state:
                cycle = visit(wait.on)
                if cycle:
                    return cycle
            path.pop()
        state[u] = 2
        return None

    for u in list(edges):
        if u not in state:
            cycle = visit(u)
            if cycle:
                return cycle
    return None
