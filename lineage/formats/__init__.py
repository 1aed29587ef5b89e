"""Readers of model, checksum and signature file formats (SSHSIG, minisign). Read only:
nothing here executes an artifact.

Layer 2. May import: lineage.userfiles, lineage.errors.
"""
