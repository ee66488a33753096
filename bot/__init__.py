"""triage-bot core: incidents, collectors, classifier, records and scheduled jobs. No Slack in here."""
