"""TPC-DS query templates, q<N>.sql, read by layout_core.workload.tpcds."""
