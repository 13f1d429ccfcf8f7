"""The node levels (DESIGN §1), in a module of their own: the CLI's ``read --level`` option needs the enum to build
its help, and :mod:`context_engine.schema.nodes` (which re-exports it) imports numpy and pydantic."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Level"]


class Level(StrEnum):
    """Levels of a node: L0 abstract, L1 overview, L2 content (DESIGN §1)."""

    L0 = "L0"
    L1 = "L1"
    L2 = "L2"

    @property
    def index_level(self) -> int:
        """The ``level`` field value used in the vector index (0, 1, 2)."""
        return int(self.value[1])
