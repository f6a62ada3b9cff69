"""Entry points and their options.

Importing the package, or any module of it, does nothing but define names: what a command's
process does first (its signals, Beam's log notices, a Python without Beam, the job's warm
workers) is done by the command's entry, ``pipelines.entry``.
"""
