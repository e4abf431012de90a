"""How pytest-xdist hands out the fast subset: each module's tests to one worker, together
(:class:`ModuleScheduling`, chosen by ``pytest_xdist_make_scheduler`` in tests/conftest.py)."""

from __future__ import annotations

from xdist.scheduler import LoadGroupScheduling


class ModuleScheduling(LoadGroupScheduling):
    """``--dist loadgroup`` with a module's tests as one unit of work (tests of an ``xdist_group`` stay one unit).

    Handed out test by test, a module's tests land on both workers, and both pay its module fixtures (a twin,
    three encodings) and its first imports (faiss, pyarrow, a loss's dependencies): about 4 of the fast subset's
    40 CPU-seconds. Only for runs without slow tests: a module of launches, kills or Ray runs as one unit would
    leave the other worker idle; xdist's order, most tests first, keeps the short units balanced.
    """

    def _split_scope(self, nodeid: str) -> str:
        group = super()._split_scope(nodeid)
        return group if group != nodeid else nodeid.split("::", 1)[0]
