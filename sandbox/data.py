"""What the sandbox's world holds: which companies, namespaces, connections and rights.

:func:`build_world` lays out the structure eagerly (companies, namespaces,
connections, reading rights), which is cheap even at the ``large`` scale, and hands it
to :class:`~sandbox.world.World`, which serves it. :data:`SCALES` are the sizes it
builds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from sandbox import generate as gen
from sandbox import vocab
from sandbox.hostile import make_hostile
from sandbox.world import Connection, Namespace, World

__all__ = ["SCALES", "Scale", "build_world"]


@dataclass(frozen=True)
class Scale:
    """Size of a world: namespaces, connections listed per namespace, and the
    size of the pool of companies that several namespaces may share."""

    namespaces: int
    connections_per_namespace: int
    shared_pool: int
    #: the namespaces listing one connection more than ``connections_per_namespace``
    #: (the first ones), so that a total of connections need not divide evenly
    one_more: int = 0

    @property
    def connections(self) -> int:
        """Connections listed by all the namespaces together."""
        return self.namespaces * self.connections_per_namespace + self.one_more

    def listed_by(self, index: int) -> int:
        """Connections listed by the namespace at `index` (0-based)."""
        return self.connections_per_namespace + (1 if index < self.one_more else 0)

    def with_connections(self, connections: int) -> Scale:
        """The same namespaces listing `connections` in all, split as evenly as they
        divide, with a shared pool in the same proportion to a namespace's connections
        (each namespace keeps at least two of its own: a ghost, and one without rights)."""
        if connections < 2 * self.namespaces:
            raise ValueError(f"--connections must be at least {2 * self.namespaces} "
                             f"(two per namespace) for {self.namespaces} namespaces")
        each, one_more = divmod(connections, self.namespaces)
        pool = min(round(each * self.shared_pool / self.connections_per_namespace), each - 2)
        return Scale(self.namespaces, each, pool, one_more)


SCALES: dict[str, Scale] = {
    "small": Scale(namespaces=2, connections_per_namespace=25, shared_pool=10),
    "medium": Scale(namespaces=3, connections_per_namespace=170, shared_pool=60),
    "large": Scale(namespaces=3, connections_per_namespace=2000, shared_pool=400),
}


_GRANTABLE = [t for t, _ in vocab.COMPANY_TYPES if t not in vocab.UNGRANTED_TYPES]


def _pick_types(r: Any, k: int) -> list[str]:
    """``k`` grantable company types, in catalogue order."""
    chosen = set(r.sample(_GRANTABLE, k))
    return [t for t in _GRANTABLE if t in chosen]


def build_world(scale: str = "small", seed: int = 7, drift: bool = False,
                today: date | None = None, hostile: bool = False,
                connections: int | None = None) -> World:
    """Build the deterministic world for ``scale`` (``small``, ``medium``,
    ``large``) and ``seed``; ``today`` (default: the current UTC date) anchors
    document dates. ``connections`` sets how many connections the scale's namespaces
    list in all (:meth:`Scale.with_connections`); the world is as deterministic.

    Per namespace: its connections are drawn from a shared pool (each pool
    company joins each namespace with probability 0.7) and topped up with
    companies of its own. One own connection is a ghost (listed, detail 404);
    another has no received rights. Received rights cover 1-3 company types; a
    shared company grants the same two types to most namespaces it is in.
    ``hostile`` adds the attacks of :mod:`sandbox.hostile`.
    """
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; choose one of {', '.join(SCALES)}")
    spec = SCALES[scale] if connections is None else SCALES[scale].with_connections(connections)
    today = today or datetime.now(UTC).date()
    r = gen.rng_for(seed, "world", scale)
    companies: dict[str, dict[str, Any]] = {}
    next_index = 0

    def new_company() -> str:
        nonlocal next_index
        company = gen.make_company(seed, next_index, drift)
        next_index += 1
        companies[company["id"]] = company
        return str(company["id"])

    ns_ids = [new_company() for _ in range(spec.namespaces)]
    shared = [new_company() for _ in range(spec.shared_pool)]
    shared_set = set(shared)
    # A shared company tends to share the same company types with everyone.
    shared_rights = {cid: _pick_types(gen.rng_for(seed, "shared-rights", cid), 2) for cid in shared}
    namespaces = []
    for index, ns_id in enumerate(ns_ids):
        members = [c for c in shared if r.random() < 0.7]
        own = [new_company() for _ in range(spec.listed_by(index) - len(members))]
        conns = []
        for cid in members + own:
            received = _pick_types(r, r.choices((1, 2, 3), weights=(35, 40, 25))[0])
            if cid in shared_set and r.random() < 0.6:
                received = list(shared_rights[cid])
            given = _pick_types(r, r.randint(1, 4))
            conns.append(Connection(cid, given, received))
        conns[len(members)].ghost = True
        conns[len(members)].received = []
        conns[len(members) + 1].received = []
        r.shuffle(conns)
        ns = Namespace(
            company_id=ns_id,
            internal_names=sorted(r.sample(vocab.INTERNAL_ROLE_NAMES, r.randint(1, 3))),
            internal_types=_pick_types(r, 2),
            external_names=sorted(r.sample(vocab.EXTERNAL_ROLE_NAMES, r.randint(1, 2))),
            external_types=_pick_types(r, r.randint(2, 4)),
            connections=conns,
        )
        ns.by_id = {c.company_id: c for c in conns}
        namespaces.append(ns)
    world = World(scale=scale, seed=seed, drift=drift, today=today,
                  companies=companies, namespaces=namespaces)
    world.connections = connections
    if hostile:
        make_hostile(world)
    return world
