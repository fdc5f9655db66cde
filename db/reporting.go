package db

// The SQL reporting interface that migrations 0014 and 0039 create: the
// report_ views over the journal and the role that may read them. The views
// themselves, and what each column means, are SQL and docs/reporting.md;
// Queries reads them typed (queries/reporting.sql).

// ReportingRole is the PostgreSQL role that may read the ReportingViews and
// nothing else. It cannot log in: an operator grants it to a login role.
const ReportingRole = "sluice_reporting"

// ReportingViews are the reporting views, the contract docs/reporting.md
// documents. Their columns only grow, at the end.
var ReportingViews = []string{
	"report_change_failure_rate",
	"report_deployments_daily",
	"report_drift_weekly",
	"report_lead_time",
	"report_runs",
	"report_runs_by_requester",
	"report_time_to_restore",
}
