# Thin shim: Beam's --setup_file (Dataflow workers) calls `python setup.py sdist`.
# Everything lives in pyproject.toml.
from setuptools import setup

setup()
