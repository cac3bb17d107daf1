"""The PostgreSQL backend's schema upkeep: migrations, pending migrations, and prune.

Migrations live in ``migrations/`` (``sql.py`` loads and checksums them); they run in one
transaction under an advisory lock, so concurrent migrators take turns.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trioqueue._backends.postgres.arguments import INT64
from trioqueue._backends.postgres.base import BackendBase
from trioqueue._backends.postgres.sql import MIGRATIONS, render
from trioqueue._backends.postgres.statements import fetch, fetchval
from trioqueue._backends.validation import check_age, check_int
from trioqueue._errors import BackendError


class MaintenanceCalls(BackendBase):
    """Migrations and pruning."""

    async def migrate(self) -> list[str]:
        """Create the schema or bring it up to date; safe to run any number of times.

        Migrations run in one transaction under an advisory lock, so concurrent migrators
        of one schema take turns and each migration is applied exactly once.

        Returns:
            The migrations this call applied, in order (``["0001_initial"]`` on a new
            schema); empty when the schema was already up to date.

        Raises:
            BackendError: the database failed, an applied migration's file was edited, or
                the schema was migrated by a newer trioqueue.
        """
        applied: list[str] = await self._driver.run("migrate", self._aio_migrate)
        return applied

    async def _aio_migrate(self, connection: Any) -> list[str]:
        done = []
        async with connection.transaction():
            await connection.execute(self._sql["migrate_lock"], f"trioqueue:{self._schema}")
            await connection.execute(self._sql["migrate_prepare"])
            applied = {
                row["version"]: row
                for row in await connection.fetch(self._sql["applied_migrations"])
            }
            self._refuse_newer(applied)
            for migration in MIGRATIONS:
                row = applied.get(migration.version)
                if row is None:
                    await connection.execute(render(migration.sql, self._schema))
                    await connection.execute(
                        self._sql["record_migration"],
                        migration.version,
                        migration.name,
                        migration.checksum,
                    )
                    done.append(f"{migration.version:04d}_{migration.name}")
                elif row["checksum"] != migration.checksum:
                    raise BackendError(
                        f"migration {migration.version:04d}_{migration.name} was changed after "
                        f"it was applied to schema {self._schema!r}"
                    )
        return done

    async def pending_migrations(self) -> list[str]:
        """The migrations this trioqueue knows that the schema lacks, in order
        (``["0004_flow_control"]``, say); empty when it is up to date. One read of the
        small ``schema_migrations`` table, nothing written: commands that run until
        stopped check it before they start (a schema missing a migration fails later,
        at the first statement that needs it).

        Raises:
            BackendError: the schema was never migrated (no ``schema_migrations`` table;
                its ``hint`` says to migrate), or it has migrations this trioqueue does
                not know: it was migrated by a newer trioqueue (``transient`` False).
        """
        rows = await self._driver.run(None, fetch, self._sql["applied_migrations"])
        applied = {row["version"]: row for row in rows}
        self._refuse_newer(applied)
        return [
            f"{migration.version:04d}_{migration.name}"
            for migration in MIGRATIONS
            if migration.version not in applied
        ]

    def _refuse_newer(self, applied: Mapping[int, object]) -> None:
        unknown = sorted(version for version in applied if version > len(MIGRATIONS))
        if unknown:
            raise BackendError(
                f"schema {self._schema!r} has migrations this trioqueue does not know "
                f"({unknown}): it was migrated by a newer version; upgrade trioqueue",
                transient=False,
            )

    async def prune(self, older_than: float, *, limit: int = 10_000) -> int:
        """Delete up to ``limit`` jobs that finished more than ``older_than`` seconds ago.

        Returns:
            How many rows were deleted. Call again while it returns ``limit``.
        """
        older_than = check_age("older_than", older_than)
        check_int("limit", limit, minimum=1)
        deleted: int = await self._driver.run(
            "prune", fetchval, self._sql["prune"], older_than, min(limit, INT64)
        )
        return deleted
