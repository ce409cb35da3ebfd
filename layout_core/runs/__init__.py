"""The run kernel: what every flow (nightly, change batches, reorganization) shares.

A flow is a tuple of steps (`flow.Step`); a step takes a `RunContext` and returns its
metrics. Steps hand each other typed artifacts (`artifacts`) in the run's staging folder
(`paths.RunPaths`), check what they wrote (`verify`) and make a new version serve
(`publish`). One dispatcher (`job.main`) runs a step as a spark-submit job; `run_steps`
runs a flow's steps in one process.
"""
