"""The durable-run engine: run records, RQ jobs and the worker, leases, inbox, approvals, limits, audit, the presenter interface."""
