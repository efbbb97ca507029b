"""The inventory store: SQLAlchemy models, Alembic migrations and repositories returning core objects."""
