"""`trainyard accept`: the acceptance suite on a stack's live cluster (docs/acceptance.md).

command (CLI, prerequisites, the run's namespace), runner (time limits, outcomes), training / queueing /
platform_checks (the checks), jobs and program (the acceptance TrainJobs and what they run), status (reading
them back as evidence), report (Markdown and JSON), kube (the kubernetes client calls).
"""
