"""Partial reorganization of a table's layout after a workload shift (MTO §5.1)."""
