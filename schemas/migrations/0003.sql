-- Schema 3: text indexes (normalized-text hashes and fingerprints) per corpus.
-- Text indexes (docs/text-spec.md): one per corpus ingested with text.
CREATE TABLE text_indexes (
    corpus            VARCHAR PRIMARY KEY,
    text_spec         VARCHAR NOT NULL,  -- normalization, e.g. 'lineage-text/1'
    fingerprint_spec  VARCHAR NOT NULL,  -- e.g. 'lineage-fingerprint/1'
    k                 BIGINT  NOT NULL,  -- words per gram
    w                 BIGINT  NOT NULL,  -- grams per winnowing window
    documents         BIGINT  NOT NULL,  -- documents with a text identity
    not_text          BIGINT  NOT NULL,  -- documents without one (not UTF-8, or no words)
    words             BIGINT  NOT NULL,  -- normalized words over those documents
    fingerprints      BIGINT  NOT NULL,
    text_bytes        BIGINT  NOT NULL,  -- bytes of the indexed documents
    index_bytes       BIGINT  NOT NULL   -- bytes of the fingerprint parts
);
