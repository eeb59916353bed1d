// Package cniplugin is nicpool's CNI IPAM plugin: it turns each CNI verb (ADD, DEL,
// CHECK, GC, STATUS) into one call to ipamd on its unix socket and ipamd's answer into
// a CNI result or a CNI error.
//
// It knows no Kubernetes API and allocates nothing itself, so the binary that runs it
// stays small and starts fast; every decision about addresses is ipamd's.
package cniplugin
