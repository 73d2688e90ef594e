"""Persistence: SQLAlchemy 2 models, Alembic migrations and queries."""
