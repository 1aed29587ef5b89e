-- Schema 4: closed chains, declared skip rules and checkpoint intervals, foreign chains
-- without a stream, and checkpoints compared by state and checked for risks.
ALTER TABLE runs ALTER COLUMN stream DROP NOT NULL;
ALTER TABLE runs ADD COLUMN end_record VARCHAR;
ALTER TABLE runs ADD COLUMN skip_rule VARCHAR;
ALTER TABLE runs ADD COLUMN checkpoint_every BIGINT;
ALTER TABLE checkpoints ADD COLUMN state_digest VARCHAR;
ALTER TABLE checkpoints ADD COLUMN chain_state_digest VARCHAR;
ALTER TABLE checkpoints ADD COLUMN matches_state BOOLEAN;
ALTER TABLE checkpoints ADD COLUMN risks VARCHAR;
