"""Experiment records that travel across rented machines (DOMAIN.md §1 and §3)."""
