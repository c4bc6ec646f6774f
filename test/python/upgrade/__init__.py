"""Helpers of test_upgrade.py: the 0.1.0 queue loaded in every state (scenario)
and the comparison of an upgraded extension with a fresh install (schema)."""
