"""Orchestration: the episode loop, the lifelong evaluation, reports, and the installation doctor.

This layer composes environments, policies and memories; it is the only one that knows all three.
"""
