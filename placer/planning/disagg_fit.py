"""Whether a disaggregated plan's replicas fit their fleets side by side, and the most requests/s
that replicas which fit serve (:mod:`placer.planning.disagg`'s rate search)."""

from __future__ import annotations

from placer.specs.fleet import Fleet

__all__ = ["fits", "groups", "fits_pair", "most_rate"]


def fits(fleet: Fleet, groups: list[tuple[str, int]]) -> bool:
    """Groups ``(device type, size)`` fit the fleet's racks side by side, each in a rack of its
    type (first fit, largest first: exact when every size divides the rack size, as device-group
    degrees do)."""
    free: dict[int, list] = {}
    for d in fleet.available:
        free.setdefault(d.rack, [d.type.name, 0])[1] += 1
    room = sorted(free.values(), key=lambda r: -r[1])
    for kind, g in sorted(groups, key=lambda x: -x[1]):
        for r in room:
            if r[0] == kind and r[1] >= g:
                r[1] -= g
                break
        else:
            return False
    return True


def groups(shape, replicas: int) -> list[tuple[str, int]]:
    inst = shape.solved.instance
    used = sorted(set(shape.solved.per_group.assignment))
    return [(inst.devices[d].type.name, len(inst.members(d))) for d in used] * replicas


def most_rate(pre, dec, pf: Fleet, df: Fleet, osl: int, ttft_us: float, transfer_us: float) -> float | None:
    """The most requests/s any ``x`` prefill and ``y`` decode replicas that fit the fleets serve
    under the targets: ``min(y x held / (OSL x TPOT), x x rho_max / s)`` (None: no pair)."""
    best = None
    for p in pre:
        slack = ttft_us - p.prefill_us - transfer_us
        if slack < 0:
            continue
        per_prefill = 2 * slack / (p.interval_us + 2 * slack) / p.interval_us * 1e6
        for d in dec:
            per_decode = d.held / (osl * d.tpot_us / 1e6)
            y = 0
            while fits_pair(pf, df, p, 1, d, y + 1):
                y += 1
            x = 1
            while y >= 1:               # the most decode replicas beside x prefill ones falls as x grows
                r = min(x * per_prefill, y * per_decode)
                if best is None or r > best * (1 + 1e-9):
                    best = r
                x += 1
                while y >= 1 and not fits_pair(pf, df, p, x, d, y):
                    y -= 1
    # a hair below the exact ceiling, so the replica counts found for it are the ones it came from
    return None if best is None else best * (1 - 1e-9)


def fits_pair(pf: Fleet, df: Fleet, p, x: int, d, y: int) -> bool:
    if pf is df:
        return fits(df, groups(p, x) + groups(d, y))
    return fits(pf, groups(p, x)) and fits(df, groups(d, y))
