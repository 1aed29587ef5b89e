"""Due diligence on model folders: inspect, verify and report. Files are read, never executed.

`verify` gives the verdicts (structure, risks, checksums, authenticity, load), `inspect` gathers
what a folder holds (architecture, weights, quantization, memory, licence, provenance,
risks, hashes), `render` writes the report as Markdown or HTML.
`api` is the Python face of the three commands (`inspect`, `verify`, `report`), with
typed answers in `answers`.

Layer 7. May import: lineage.runs, lineage.stream, lineage.corpora, lineage.formats,
lineage.store, lineage.userfiles, lineage.errors, lineage.version.
"""
