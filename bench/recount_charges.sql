-- After a load with the triggers off (session_replication_role = replica), as both benchmark
-- generators load: count the charges as sql/migrations/013's trigger would have, on a schema that has it.
-- Included by bench/exporter/generate.sql and bench/money/generate.sql (\ir).
SELECT to_regprocedure('idem.recount_charged_objects()') IS NOT NULL AS has_recount \gset
\if :has_recount
SELECT idem.recount_charged_objects() AS charged_objects;
VACUUM ANALYZE idem.charged_objects;
\endif
