"""Model folder inspection and due-diligence reports: read files, never execute them."""
