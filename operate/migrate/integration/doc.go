// Package integration proves the migration from spiderpool the way an operator runs
// it: on a real API server whose CRDs are spiderpool's, with pods running in
// spiderpool's form, it runs the runbook's `kubectl nicpool` commands, starts ipamd and
// releases through the CNI plugin installed under the name spiderpool.
//
// It holds tests only.
package integration
