"""The history's stores: SQLite and PostgreSQL, their fleet tables, the spool and bulk import."""
