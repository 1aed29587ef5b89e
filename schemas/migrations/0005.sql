-- Schema 5: each text index records the Unicode version of its normalization.
-- docs/text-spec.md: indexes built before keep NULL ("not recorded"), read as built under
-- the version of the Python that queries them.
ALTER TABLE text_indexes ADD COLUMN unicode_version VARCHAR;
