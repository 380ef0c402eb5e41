"""OpenFst transducer minimisation with the original's rejection rules (REFERENCE §2.1 step 5)."""
from __future__ import annotations

from sip_core.fst import vocab as V
from sip_core.fst.machine import Machine


def minimize_or_keep(m: Machine) -> Machine:
    """Minimise `m` with pynini (allow_nondet=False); keep `m` itself if the result is unusable.

    Rejected when (a) an arc has input ε (pushing created multi-symbol outputs, FactorWeight split
    them), (b) a shorthand arc no longer reads and writes the same shorthand (pushing moved an output
    onto it), or (c) it has more states. Either way the machine is renumbered canonically (BFS).
    """
    try:
        import pynini  # noqa: F401
    except ImportError:  # GPU hosts: the pure-Python port, identical on every candidate tested
        from sip_core.fst import minimize_py

        return minimize_py.minimize_or_keep(m)
    fst = m.to_pynini()
    fst.minimize(allow_nondet=False)
    mini = Machine.from_pynini(fst, m.vocab, m.kind)
    if mini.n_states > m.n_states or not _usable(mini):
        return m.renumbered_bfs()
    return mini


def _usable(m: Machine) -> bool:
    shorthand = set(V.SHORTHANDS)
    for _, il, ol, _ in m.transitions:
        if il == V.EPS:
            return False
        if (il in shorthand or ol in shorthand) and il != ol:
            return False
    return True
