"""lonnymq benchmark harness: see bench/run.py (entry point) and bench/README.md."""
