"""Readers of model and checksum file formats. Read only: nothing here executes an artifact.

Layer 2. May import: lineage.userfiles, lineage.errors.
"""
