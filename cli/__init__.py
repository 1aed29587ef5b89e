"""The `lineage` command line, thin over the library. Installed as `lineage.cli`."""
