"""`layout check`: random queries over the laid-out tables, run as written and
as rewritten by the router, whose answers must be identical.

- `random_queries`: a seeded generator of Spark SQL over a `Schema`, drawing
  literals from the tables' real values (`profile`);
- `engines`: DuckDB and Spark over exactly the active layouts' block folders;
- `run`: route, rewrite, run both, compare (`run_check`).
"""
