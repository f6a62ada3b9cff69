"""Placeholder until this family lands."""
SPEC = None
