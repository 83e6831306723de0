"""The overlap scheduler of the training experiment: one node's iteration as compute tasks run
in order on the compute cores and collectives run one at a time, first in first out, on the
collective engine (ACE, or the baseline's memory-staged kernels).

Rates change whenever the other side starts or stops: a collective's duration depends on
whether compute runs beside it (compute keeps part of the memory bandwidth), and compute's rate
on whether a collective runs (the baseline's kernels take part of the cores; memory contention).
Each side's progress is therefore tracked as a fraction done and advanced event by event:

* a task of ``w`` cycles progresses at ``rate`` (1 alone; what ``compute_rate(comm)`` says
  while ``comm`` runs);
* a collective progresses by ``dt / coll_time(comm, compute_busy)`` per ``dt`` cycles, so
  one that would take ``T1`` cycles beside compute and ``T0`` alone, and runs ``x`` cycles
  beside compute, ends ``(1 - x / T1) * T0`` cycles after compute stops.

A collective is issued when task ``after`` ends and blocks task ``before`` until it is done.
The iteration ends when every task and every collective is done. A collective needed only by
the next iteration (a weight gradient) is waited for at the end: with first-in-first-out order
the last one issued (the first layer's) finishes last, and it is the first one the next
forward pass needs, so this barrier costs what the next iteration would wait anyway.
"""

from __future__ import annotations

__all__ = ["simulate", "ScheduleError"]


class ScheduleError(RuntimeError):
    """The workload cannot finish (a task waits on a collective that is never issued)."""


def simulate(task_cycles, comms, coll_time, compute_rate) -> dict:
    """Run one iteration.

    task_cycles : cycles of each compute task, in order.
    comms : objects with ``after`` (task index, -1 = at the start) and ``before`` (task index
        or None), in issue order among those issued at the same moment.
    coll_time(comm, compute_busy) : the collective's duration if the state held throughout.
    compute_rate(comm) : compute progress per cycle while ``comm`` runs (``None``: alone).

    Returns ``{"cycles", "compute_spans": [(start, end, task)], "comm_spans": [(start, end,
    comm index)], "comm_overlap_cycles" (cycles with both busy), "compute_wait_cycles"
    (cycles compute sat blocked on a collective)}``.
    """
    n = len(task_cycles)
    queue = [k for k, c in enumerate(comms) if c.after == -1]
    done = [False] * len(comms)
    t, task = 0.0, 0
    left = float(task_cycles[0]) if n else 0.0
    task_start = None                    # when the current task started (None: not yet)
    current, frac, comm_start = None, 0.0, 0.0   # running collective, fraction still to do
    compute_spans, comm_spans = [], []
    overlap = wait = 0.0

    while True:
        if current is None and queue:
            current, frac, comm_start = queue.pop(0), 1.0, t
        if task >= n and current is None:
            break
        blocked = task < n and any(not done[k] for k, c in enumerate(comms)
                                   if c.before == task)
        busy = task < n and not blocked
        if not busy and current is None:
            raise ScheduleError(f"task {task} waits on a collective that is never issued")
        if busy and task_start is None:
            task_start = t
        rate = compute_rate(comms[current] if current is not None else None) if busy else 0.0
        if busy and rate <= 0:
            raise ScheduleError(f"compute rate {rate} while collective {current} runs")
        dt_task = left / rate if busy else float("inf")
        duration = coll_time(comms[current], busy) if current is not None else None
        dt_comm = frac * duration if current is not None else float("inf")
        dt = min(dt_task, dt_comm)
        if busy and current is not None:
            overlap += dt
        if blocked:
            wait += dt
        t += dt
        if busy:
            left -= rate * dt
        if current is not None:
            frac -= dt / duration
            if dt_comm <= dt_task:
                done[current] = True
                comm_spans.append((comm_start, t, current))
                current = None
        if busy and dt_task <= dt_comm:
            compute_spans.append((task_start, t, task))
            queue.extend(k for k, c in enumerate(comms) if c.after == task)
            task += 1
            left = float(task_cycles[task]) if task < n else 0.0
            task_start = None
    return {"cycles": t, "compute_spans": compute_spans, "comm_spans": comm_spans,
            "comm_overlap_cycles": overlap, "compute_wait_cycles": wait}
