"""Experiment records that travel across rented machines (docs/experiments.md)."""
