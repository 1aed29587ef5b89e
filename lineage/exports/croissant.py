"""A corpus as a Croissant dataset (docs/exports.md, "Croissant").

Croissant (MLCommons, http://mlcommons.org/croissant/1.1) describes a dataset in JSON-LD:
its files (`distribution`) and the records in them (`recordSet`). The corpus's records are
its manifest, so the distribution is the store's own Parquet parts of the corpus's
`documents` table, each with the SHA-256 and size the catalog holds for it, and the
record set `documents` reads its columns from them. Nothing is read but the catalog: the
export costs the same for ten documents as for ten million, and the same store gives the
same bytes (no time stamps; the parts' paths are the store's).

What the store does not record (the dataset's URL, creator, publication date) is left
out rather than made up; the description says where the records come from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lineage.corpora.query import get_corpus
from lineage.exports.model_card import is_spdx_list_id
from lineage.store.base import BaseStore, part_path

if TYPE_CHECKING:
    from lineage.corpora.answers import Corpus

CROISSANT_SPEC = "http://mlcommons.org/croissant/1.1"
# The JSON-LD context of Croissant 1.1 as mlcroissant (the reference implementation)
# writes it; keys sorted, as in the published example datasets.
CONTEXT: dict[str, Any] = {
    "@language": "en",
    "@vocab": "https://schema.org/",
    "arrayShape": "cr:arrayShape",
    "citeAs": "cr:citeAs",
    "column": "cr:column",
    "conformsTo": "dct:conformsTo",
    "containedIn": "cr:containedIn",
    "cr": "http://mlcommons.org/croissant/",
    "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/",
    "equivalentProperty": "cr:equivalentProperty",
    "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract",
    "field": "cr:field",
    "fileObject": "cr:fileObject",
    "fileProperty": "cr:fileProperty",
    "fileSet": "cr:fileSet",
    "format": "cr:format",
    "includes": "cr:includes",
    "isArray": "cr:isArray",
    "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath",
    "key": "cr:key",
    "md5": "cr:md5",
    "parentField": "cr:parentField",
    "path": "cr:path",
    "rai": "http://mlcommons.org/croissant/RAI/",
    "recordSet": "cr:recordSet",
    "references": "cr:references",
    "regex": "cr:regex",
    "repeated": "cr:repeated",
    "replace": "cr:replace",
    "samplingRate": "cr:samplingRate",
    "sc": "https://schema.org/",
    "separator": "cr:separator",
    "source": "cr:source",
    "subField": "cr:subField",
    "transform": "cr:transform",
}
PARQUET = "application/x-parquet"
SPDX_URL = "https://spdx.org/licenses/{}.html"
# The manifest's fields (docs/manifest-spec.md) and `uri`, as columns of the parts.
DOCUMENT_FIELDS = (
    ("doc_id", "sc:Text", "Unique within the corpus; the record's key."),
    ("source", "sc:Text", "The sub-corpus the document belongs to."),
    ("uri", "sc:Text", "Where the document came from (file:// URI, URL), when recorded."),
    ("n_bytes", "sc:Integer", "Length of the document's exact bytes."),
    ("n_tokens", "sc:Integer", "Tokens under the corpus's tokenizer."),
    ("content_hash", "sc:Text", "BLAKE3-256 of the document's exact bytes, 64 hex digits."),
    ("license", "sc:Text", "SPDX identifier or LicenseRef-, when recorded."),
)
SOURCE_FIELDS = (
    ("source", "sc:Text", "The source's name."),
    ("documents", "sc:Integer", "Documents of the source."),
    ("tokens", "sc:Integer", "Tokens of the source."),
    ("bytes", "sc:Integer", "Bytes of the source."),
    ("licenses", "sc:Text", "The source's distinct licences, sorted (an array)."),
)


def croissant(store: BaseStore, corpus: str) -> dict[str, Any]:
    """The Croissant JSON-LD of `corpus` (UnknownObjectError when there is none)."""
    facts = get_corpus(store, corpus)
    parts = document_parts(store, corpus)
    licenses = [license_value(name) for name in facts.licenses]
    return {
        "@context": {key: dict(value) if isinstance(value, dict) else value
                     for key, value in CONTEXT.items()},  # the caller's to change
        "@type": "sc:Dataset",
        "conformsTo": CROISSANT_SPEC,
        "name": facts.name,
        "description": _description(facts, len(parts)),
        **({"license": licenses} if licenses else {}),  # none recorded: none stated
        "identifier": {"@type": "sc:PropertyValue", "propertyID": facts.manifest_spec,
                       "value": facts.manifest_hash},
        "keywords": ["lineage", facts.manifest_spec],
        "distribution": [_file_object(part) for part in parts],
        "recordSet": [*_documents_record_sets(parts), _sources_record_set(facts)],
    }


def document_parts(store: BaseStore, corpus: str) -> list[dict[str, Any]]:
    """The registered Parquet parts of the corpus's documents, in path order."""
    with store.reader(views=False) as con:
        rows = con.execute(
            "SELECT path, n_rows, n_bytes, sha256 FROM parquet_files "
            "WHERE table_name = 'documents' AND owner = ? ORDER BY path", [corpus]).fetchall()
    return [{"path": part_path(store.root, path), "name": path.rsplit("/", 1)[-1],
             "rows": n_rows, "bytes": n_bytes, "sha256": sha256}
            for path, n_rows, n_bytes, sha256 in rows]


def license_value(name: str) -> Any:
    """A licence as Croissant asks for it: the SPDX page's URL for an id on the SPDX list,
    else (a LicenseRef-, NOASSERTION, an expression) a CreativeWork named by it."""
    if is_spdx_list_id(name):
        return SPDX_URL.format(name)
    return {"@type": "sc:CreativeWork", "name": name}


def _description(facts: Corpus, n_parts: int) -> str:
    return (f"The manifest of the corpus {facts.name!r} as a lineage store records it: "
            f"{facts.documents} documents, {facts.tokens} tokens (counted by "
            f"{facts.tokenizer}), {facts.bytes} bytes, in {len(facts.sources)} "
            f"sources. One record per document, read from the store's {n_parts} Parquet "
            f"part(s) of the corpus; its manifest hash ({facts.manifest_spec}) is "
            f"{facts.manifest_hash}. The documents' contents are at their uri.")


def _file_object(part: dict[str, Any]) -> dict[str, Any]:
    return {"@type": "cr:FileObject", "@id": part["name"], "name": part["name"],
            "description": f"{part['rows']} documents of the manifest.",
            "contentUrl": str(part["path"]), "contentSize": f"{part['bytes']} B",
            "encodingFormat": PARQUET, "sha256": part["sha256"]}


def _documents_record_sets(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record set per part: a Croissant field reads from one file, and mlcroissant
    reads a FileSet's Parquet files only from a git repository or the JSON's folder. A
    corpus of up to four million documents has one part, so one record set `documents`."""
    if len(parts) == 1:
        return [_documents_record_set("documents", parts[0], "")]
    return [_documents_record_set(f"documents-{i}", part, f" (part {i} of {len(parts)})")
            for i, part in enumerate(parts)]


def _documents_record_set(name: str, part: dict[str, Any], which: str) -> dict[str, Any]:
    return {"@type": "cr:RecordSet", "@id": name, "name": name,
            "description": f"One record per document of the corpus (its manifest){which}.",
            "key": {"@id": f"{name}/doc_id"},
            "field": [_field(name, column, data_type, text,
                             {"fileObject": {"@id": part["name"]},
                              "extract": {"column": column}})
                      for column, data_type, text in DOCUMENT_FIELDS]}


def _sources_record_set(facts: Corpus) -> dict[str, Any]:
    """The sources with their sizes and licences, embedded (one record per source)."""
    data = [{"sources/source": s.source, "sources/documents": s.documents,
             "sources/tokens": s.tokens, "sources/bytes": s.bytes,
             "sources/licenses": list(s.licenses)} for s in facts.sources]
    return {"@type": "cr:RecordSet", "@id": "sources", "name": "sources",
            "description": "The corpus's sources, with their sizes and licences.",
            "key": {"@id": "sources/source"},
            "field": [_field("sources", name, data_type, text, None)
                      | ({"isArray": True} if name == "licenses" else {})
                      for name, data_type, text in SOURCE_FIELDS],
            "data": data}


def _field(record_set: str, name: str, data_type: str, text: str,
           source: dict[str, Any] | None) -> dict[str, Any]:
    field: dict[str, Any] = {"@type": "cr:Field", "@id": f"{record_set}/{name}", "name": name,
                             "description": text, "dataType": data_type}
    if source is not None:
        field["source"] = source
    return field
