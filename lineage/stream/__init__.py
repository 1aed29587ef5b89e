"""The canonical data stream (`lineage-stream/1`): build, query, and read it back."""
