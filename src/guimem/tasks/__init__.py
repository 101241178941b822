"""Task suites: ordered (task, seed) lists with per-task step budgets, shipped or from a file."""

from guimem.tasks.suites import Suite, SuiteEntry, builtin_suites, load_suite

__all__ = ["Suite", "SuiteEntry", "builtin_suites", "load_suite"]
