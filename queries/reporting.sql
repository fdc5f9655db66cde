-- name: ReportDeploymentsDaily :many
SELECT * FROM report_deployments_daily
WHERE service = @service
ORDER BY day;

-- name: ReportChangeFailureRate :many
SELECT * FROM report_change_failure_rate
WHERE service = @service
ORDER BY week;

-- name: ReportTimeToRestore :many
SELECT * FROM report_time_to_restore
WHERE service = @service
ORDER BY failed_at;

-- name: ReportLeadTime :many
SELECT * FROM report_lead_time
WHERE service = @service
ORDER BY healthy_at;

-- name: ReportRunsByRequester :many
SELECT * FROM report_runs_by_requester
WHERE requested_by = @requested_by
ORDER BY day, action;

-- name: ReportDriftWeekly :many
SELECT * FROM report_drift_weekly
WHERE kind = @kind AND name = @name
ORDER BY week;

-- name: ReportRoleReadable :many
-- ReportRoleReadable lists the relations outside the system catalogs that
-- role may read a column of: the reporting role's should be the report_
-- views alone.
SELECT n.nspname::text AS schema_name, c.relname::text AS relation
FROM pg_catalog.pg_class AS c
JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'v', 'm', 'p', 'f')
  AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname NOT LIKE 'pg_toast%'
  AND has_any_column_privilege(@role::text, c.oid, 'SELECT')
ORDER BY 1, 2;
