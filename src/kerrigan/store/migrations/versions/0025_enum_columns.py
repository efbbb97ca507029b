"""enum columns: a job's state and failure class, a session's priority, conclusion and strategy, a
reservation's state and end reason and a device's health checked by the database (stored by value)

The columns keep their VARCHAR and length: each gains a CHECK constraint naming the values its core enum
has, as ``sessions.state`` and ``devices.state`` have had since the first revision. A value outside them
(only a database edited by hand holds one: no release wrote another) is first set to the value nearest in
meaning, or, for a job's state, refused: guessing where a job stands could run it twice or lose it.

SQLite adds and drops a CHECK constraint by rebuilding the table, which deletes the rows that refer to it
unless foreign keys are off: with them on (``alembic`` run by hand rather than ``kerrigan db upgrade``) the
constraints are left as they are; the columns' types still refuse other values, and a later run adds them.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-05
"""

from __future__ import annotations

from typing import NamedTuple

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


class _Column(NamedTuple):
    table: str
    column: str
    constraint: str  # the enum's name; the naming convention makes it ck_<table>_<name>
    values: tuple[str, ...]  # the core enum's values as of this revision
    otherwise: str | None  # what a value outside ``values`` becomes (None: NULL); "" refuses it


JOB_STATES = (
    "waiting",
    "queued",
    "leased",
    "accepted",
    "running",
    "succeeded",
    "failed",
    "timed_out",
    "cancelled",
    "refused_before_start",
    "retried",
    "skipped",
)
REFUSE = ""

COLUMNS = (
    _Column("jobs", "state", "job_state", JOB_STATES, REFUSE),
    _Column(
        "jobs",
        "failure_class",
        "job_failure_class",
        ("test", "infrastructure", "timeout", "cancelled", "queue_wait_exceeded", "unfit"),
        None,  # unclassified, as a job that has not ended
    ),
    _Column("sessions", "priority", "session_priority", ("gate", "normal", "background"), "normal"),
    # A completed session whose conclusion cannot be read did not succeed.
    _Column(
        "sessions",
        "conclusion",
        "session_conclusion",
        ("success", "failure", "cancelled", "timed_out", "action_required", "neutral"),
        "failure",
    ),
    _Column("sessions", "strategy", "session_strategy", ("spread", "pack"), "spread"),
    _Column("reservations", "state", "reservation_state", ("waiting", "active", "ended"), "ended"),
    _Column(
        "reservations",
        "end_reason",
        "reservation_end_reason",
        ("released", "expired", "wait_expired"),
        "released",
    ),
    _Column("devices", "health", "device_health", ("good", "unknown", "bad"), "unknown"),
)


def _outside(column: _Column) -> sa.ColumnElement[bool]:
    value: sa.ColumnClause[str] = sa.column(column.column)
    return sa.and_(value.is_not(None), value.not_in(column.values))


def _check(column: _Column) -> str:
    listed = ", ".join(f"'{value}'" for value in column.values)
    return f"{column.column} IN ({listed})"


def upgrade() -> None:
    bind = op.get_bind()
    for column in COLUMNS:
        table = sa.table(column.table, sa.column(column.column))
        if column.otherwise == REFUSE:
            found = bind.execute(
                sa.select(table.c[column.column], sa.func.count())
                .where(_outside(column))
                .group_by(table.c[column.column])
            ).all()
            if found:
                listed = ", ".join(f"{value!r} ({count})" for value, count in found)
                raise RuntimeError(
                    f"{column.table}.{column.column} holds values Kerrigan does not know: {listed}; set each "
                    f"to one of {', '.join(column.values)} before upgrading to revision 0025"
                )
            continue
        op.execute(table.update().where(_outside(column)).values({column.column: column.otherwise}))
    if not _may_rebuild(bind):
        return  # the column types still refuse to write a value outside the enums
    for name, columns in _by_table().items():
        present = _constraints(bind, name)
        missing = [column for column in columns if _name(column) not in present]
        if missing:
            with op.batch_alter_table(name, schema=None) as batch_op:
                for column in missing:
                    batch_op.create_check_constraint(column.constraint, _check(column))


def downgrade() -> None:
    bind = op.get_bind()
    if not _may_rebuild(bind):
        return  # the constraints admit every value the previous revision writes: they may stay
    for name, columns in _by_table().items():
        present = _constraints(bind, name)
        found = [column for column in columns if _name(column) in present]
        if found:
            with op.batch_alter_table(name, schema=None) as batch_op:
                for column in found:
                    batch_op.drop_constraint(batch_op.f(_name(column)), type_="check")


def _by_table() -> dict[str, list[_Column]]:
    tables: dict[str, list[_Column]] = {}
    for column in COLUMNS:
        tables.setdefault(column.table, []).append(column)
    return tables


def _name(column: _Column) -> str:
    return f"ck_{column.table}_{column.constraint}"


def _constraints(bind: sa.Connection, table: str) -> set[str]:
    return {str(found["name"]) for found in sa.inspect(bind).get_check_constraints(table)}


def _may_rebuild(bind: sa.Connection) -> bool:
    """Whether a table may be rebuilt to change its constraints: always on PostgreSQL; on SQLite only with
    foreign keys off (``kerrigan db upgrade`` turns them off), since dropping the old table would then
    delete every row that refers to it (ON DELETE CASCADE: a session's jobs, their output)."""
    if bind.dialect.name != "sqlite":
        return True
    return not bind.exec_driver_sql("PRAGMA foreign_keys").scalar()
