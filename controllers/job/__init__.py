"""The Job controller (upstream pkg/controller/job), split as upstream's files: job_controller.py
(the sync), backoff_utils.py, indexed_job_utils.py, pod_failure_policy.py (pure decisions)."""

from controllers.job.job_controller import JobController

__all__ = ["JobController"]
