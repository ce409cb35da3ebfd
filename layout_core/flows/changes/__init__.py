"""Change batches (inserted rows, deleted keys) on laid-out tables, and the repair of
join-induced cuts they touch (MTO §5.2): `apply` has the steps, `repair` the cut repair."""
